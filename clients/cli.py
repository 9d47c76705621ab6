"""Client-side commands of the `vocalis` CLI: speak text through a running server."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2

FORMATS = {
    "wav": audio_pb2.AUDIO_ENCODING_WAV,
    "pcm": audio_pb2.AUDIO_ENCODING_PCM,
    "flac": audio_pb2.AUDIO_ENCODING_FLAC,
    "mp3": audio_pb2.AUDIO_ENCODING_MP3,
    "opus": audio_pb2.AUDIO_ENCODING_OPUS,
    "aac": audio_pb2.AUDIO_ENCODING_AAC,
}


@click.command()
@click.argument("text")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="File to write ('-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None, help="Audio format (default: from the file extension, else wav).")
@click.option("--stream", is_flag=True, help="Write audio as it arrives instead of one complete file.")
@click.option("--server", default="localhost:50051", show_default=True, help="gRPC address of the Vocalis server.")
@click.option("--model", default="", help="Model name (default: the server's default).")
@click.option("--voice", default="", help="Voice name (default: the model's default).")
@click.option("--speed", type=float, default=None, help="Speaking speed, 0.25 to 4.0.")
@click.option("--sample-rate", type=int, default=None, help="Output sample rate in Hz.")
@click.option("--seed", type=int, default=None, help="Seed, for reproducible audio.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Deadline in seconds.")
def say(
    text: str,
    output: Path,
    fmt: str | None,
    stream: bool,
    server: str,
    model: str,
    voice: str,
    speed: float | None,
    sample_rate: int | None,
    seed: int | None,
    timeout: float,
) -> None:
    """Synthesize TEXT and write the audio to a file.

    Example: vocalis say "Hello, how are you?" -o hello.wav
    """
    fmt = fmt or (output.suffix.lstrip(".").lower() if output.suffix.lstrip(".").lower() in FORMATS else "wav")
    config = synthesizer_pb2.SessionConfig(
        model=model,
        voice=voice,
        encoding=FORMATS[fmt],
        delivery=synthesizer_pb2.AUDIO_DELIVERY_STREAM if stream else synthesizer_pb2.AUDIO_DELIVERY_FILE,
    )
    if speed is not None:
        config.speed = speed
    if sample_rate is not None:
        config.sample_rate = sample_rate
    if seed is not None:
        config.seed = seed
    sink = sys.stdout.buffer if str(output) == "-" else output.open("wb")
    try:
        with Client(server, timeout=timeout) as client:
            audio_seconds = 0.0
            rate = 0
            for response in client.stream(config, text):
                kind = response.WhichOneof("response")
                if kind == "audio":
                    sink.write(response.audio.audio)
                    sink.flush()
                elif kind == "session_started":
                    rate = response.session_started.sample_rate
                elif kind == "session_done":
                    audio_seconds = response.session_done.audio_seconds
    except VocalisError as error:
        raise click.ClickException(str(error)) from None
    finally:
        if sink is not sys.stdout.buffer:
            sink.close()
    if sink is not sys.stdout.buffer and sys.stderr.isatty():
        click.echo(f"wrote {output} ({audio_seconds:.2f} s of {fmt} at {rate} Hz)", err=True)
