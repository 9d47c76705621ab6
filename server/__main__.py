"""`python -m vocalis.server`: the same as the `vocalis` command."""

from vocalis.server.cli import main

main()
