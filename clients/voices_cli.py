"""`vocalis voices list|show|create|delete`: the voices a server can speak with."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from google.protobuf import json_format

from vocalis.clients.cli import api_key_option, fail, server_option, timeout_option
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import voices_pb2

KINDS = {
    voices_pb2.VOICE_KIND_PRESET: "preset",
    voices_pb2.VOICE_KIND_PRECOMPUTED: "precomputed",
    voices_pb2.VOICE_KIND_UPLOADED: "uploaded",
}
COLUMNS = ("name", "kind", "models", "language", "ref_text", "created", "description")


def _row(voice: voices_pb2.Voice) -> tuple[str, ...]:
    created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(voice.created_at)) if voice.created_at else "-"
    return (
        voice.name,
        KINDS.get(voice.kind, "-"),
        ",".join(voice.models) or "-",
        voice.language or "-",
        "yes" if voice.has_ref_text else "no",
        created,
        voice.description or "-",
    )


def _as_dict(voice: voices_pb2.Voice) -> dict:
    return json_format.MessageToDict(voice, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def _print_voices(voices: list[voices_pb2.Voice], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([_as_dict(v) for v in voices], indent=2))
    elif sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(box=None, header_style="bold")
        for column in COLUMNS:
            table.add_column(column, no_wrap=column in ("name", "models"))
        for voice in voices:
            table.add_row(*_row(voice))
        Console().print(table)
    else:  # piped: tab-separated, a header line first, for cut/awk
        click.echo("\t".join(COLUMNS))
        for voice in voices:
            click.echo("\t".join(_row(voice)))


@click.group()
def voices() -> None:
    """List, inspect, upload and delete the voices of a Vocalis server.

    \b
    Examples:
      vocalis voices list
      vocalis voices create alice alice.wav --ref-text "What she says in the clip." --consent rec-2026-01
      vocalis voices delete alice
    """


@voices.command("list")
@click.option("--model", default="", help="Only voices usable with this model.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@server_option
@api_key_option
@timeout_option(30.0)
def list_voices(model: str, as_json: bool, server: str, api_key: str | None, timeout: float) -> None:
    """List every voice: presets of the loaded models, precomputed and uploaded voices."""
    try:
        with Client(server, timeout=timeout, api_key=api_key) as client:
            found = client.list_voices(model)
    except VocalisError as error:
        raise fail(error) from None
    _print_voices(found, as_json)


@voices.command("show")
@click.argument("name")
@server_option
@api_key_option
@timeout_option(30.0)
def show_voice(name: str, server: str, api_key: str | None, timeout: float) -> None:
    """Print one voice as JSON."""
    try:
        with Client(server, timeout=timeout, api_key=api_key) as client:
            voice = client.get_voice(name)
    except VocalisError as error:
        raise fail(error) from None
    click.echo(json.dumps(_as_dict(voice), indent=2))


@voices.command("create")
@click.argument("name")
@click.argument("audio", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ref-text", default="", help="Transcript of the clip (models that clone from text need it).")
@click.option("--consent", default="", help="Identifier of the speaker's recorded consent.")
@click.option("--description", default="", help="Description of the speaker.")
@click.option("--mime-type", default="", help="MIME type of AUDIO (default: guessed from its extension).")
@server_option
@api_key_option
@timeout_option(120.0)
def create_voice(
    name: str,
    audio: Path,
    ref_text: str,
    consent: str,
    description: str,
    mime_type: str,
    server: str,
    api_key: str | None,
    timeout: float,
) -> None:
    """Upload a voice NAME from the reference clip AUDIO (wav, flac, ogg, mp3, ...)."""
    try:
        with Client(server, timeout=timeout, api_key=api_key) as client:
            voice = client.create_voice(
                name, audio, ref_text=ref_text, consent=consent, description=description, mime_type=mime_type
            )
    except VocalisError as error:
        raise fail(error) from None
    click.echo(json.dumps(_as_dict(voice), indent=2))


@voices.command("delete")
@click.argument("name")
@server_option
@api_key_option
@timeout_option(30.0)
def delete_voice(name: str, server: str, api_key: str | None, timeout: float) -> None:
    """Delete the uploaded voice NAME (presets and precomputed voices cannot be deleted)."""
    try:
        with Client(server, timeout=timeout, api_key=api_key) as client:
            deleted = client.delete_voice(name)
    except VocalisError as error:
        raise fail(error) from None
    click.echo(f"deleted {deleted}")
