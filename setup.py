"""Which packages the wheel holds: found, not listed, so that a new folder (a model family under
stages/models/) needs no edit here or in pyproject.toml. Everything else is in pyproject.toml.

The folders are mapped onto the `vocalis` namespace by `package-dir` in pyproject.toml; setuptools'
own `packages.find` cannot apply that mapping, so the search runs here, per mapped folder.
"""

from setuptools import find_packages, setup

MAPPED = {"vocalis.server": "server", "vocalis.stages": "stages", "vocalis.gateway": "gateway", "vocalis.clients": "clients"}
"""Package -> folder, as in pyproject.toml's package-dir."""


def packages() -> list[str]:
    found = ["vocalis", "vocalis.tts", "vocalis.tts.v1"]
    for package, folder in MAPPED.items():
        found += [package, *(f"{package}.{sub}" for sub in find_packages(folder, include=["*"]))]
    return found


setup(packages=packages())
