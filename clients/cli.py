"""Client-side commands of the `vocalis` CLI: speak text through a running server.

The options every client command shares (--server, --api-key, --timeout) live
here, so that `vocalis say`, `vocalis voices` and `vocalis bench` read alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vocalis.clients.errors import VocalisError
from vocalis.clients.messages import FORMATS, format_for_path, session_config
from vocalis.clients.sync import Client

server_option = click.option(
    "--server",
    default="localhost:50051",
    show_default=True,
    envvar="VOCALIS_SERVER",
    show_envvar=True,
    help="gRPC address (HOST:PORT) of the Vocalis server.",
)
api_key_option = click.option(
    "--api-key",
    default=None,
    envvar="VOCALIS_API_KEY",
    show_envvar=True,
    help="API key, sent as 'authorization: Bearer KEY'.",
)


def timeout_option(default: float):
    return click.option("--timeout", type=float, default=default, show_default=True, help="Deadline of each call, in seconds.")


def fail(error: VocalisError) -> click.ClickException:
    """The error to raise for a failed call: status, message, reason and fields, on stderr, exit code 1."""
    return click.ClickException(error.describe())


@click.command()
@click.argument("text")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="File to write ('-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None, help="Audio format (default: from the file extension, else wav).")
@click.option("--stream", is_flag=True, help="Write audio as it arrives instead of one complete file.")
@server_option
@api_key_option
@click.option("--model", default="", help="Model name (default: the server's default).")
@click.option("--voice", default="", help="Voice name (default: the model's default); see `vocalis voices list`.")
@click.option("--speed", type=float, default=None, help="Speaking speed, 0.25 to 4.0.")
@click.option("--sample-rate", type=int, default=None, help="Output sample rate in Hz.")
@click.option("--seed", type=int, default=None, help="Seed, for reproducible audio.")
@timeout_option(120.0)
def say(
    text: str,
    output: Path,
    fmt: str | None,
    stream: bool,
    server: str,
    api_key: str | None,
    model: str,
    voice: str,
    speed: float | None,
    sample_rate: int | None,
    seed: int | None,
    timeout: float,
) -> None:
    """Synthesize TEXT and write the audio to a file (TEXT '-' reads it from stdin).

    \b
    Examples:
      vocalis say "Hello, how are you?" -o hello.wav
      vocalis say "Streamed as it is made." -o - --format pcm | aplay -r 22050 -f S16_LE
      cat story.txt | vocalis say - -o story.mp3
    """
    if text == "-":
        text = sys.stdin.read()
    fmt = fmt or format_for_path(str(output))
    config = session_config(model=model, voice=voice, format=fmt, stream=stream, sample_rate=sample_rate, speed=speed, seed=seed)
    sink = sys.stdout.buffer if str(output) == "-" else output.open("wb")
    progress = _progress(len(text)) if sys.stderr.isatty() else None
    try:
        with Client(server, timeout=timeout, api_key=api_key) as client:
            audio_seconds = 0.0
            rate = 0
            for response in client.stream(config, text):
                kind = response.WhichOneof("response")
                if kind == "audio":
                    sink.write(response.audio.audio)
                    sink.flush()
                elif kind == "session_started":
                    rate = response.session_started.sample_rate
                elif kind == "utterance_done" and progress is not None:
                    progress.update(0, completed=response.utterance_done.text_span.end)
                elif kind == "session_done":
                    audio_seconds = response.session_done.audio_seconds
    except VocalisError as error:
        raise fail(error) from None
    finally:
        if progress is not None:
            progress.stop()
        if sink is not sys.stdout.buffer:
            sink.close()
    if sink is not sys.stdout.buffer and sys.stderr.isatty():
        click.echo(f"wrote {output} ({audio_seconds:.2f} s of {fmt} at {rate} Hz)", err=True)


def _progress(total_chars: int):
    """A progress bar on stderr over the characters of the text spoken so far (terminals only)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("speaking"), BarColumn(), TextColumn("{task.completed}/{task.total} chars"), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    progress.add_task("speak", total=max(total_chars, 1))
    progress.start()
    return progress
