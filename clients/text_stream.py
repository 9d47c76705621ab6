"""`vocalis stream`: feed text to a server the way an LLM does, token by token, and measure what a listener hears.

Voice agents speak an LLM's answer while it is being written. This tool plays the
LLM: it cuts a text into token-sized pieces, sends them at a steady rate over one
Synthesize session, and reports

- the time from the first text sent to the first audio, and from the moment the first
  sentence was complete (its last character sent) to its first audio;
- the gaps between audio chunks, and the underruns they would cause if the audio were
  played in real time from its first chunk on (a gap the player cannot bridge);
- the time from the last text sent to the last audio.

    vocalis stream "Sure! Here is what I found. The store opens at nine." --rate 20
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import wave
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from vocalis.clients.aio import AsyncClient
from vocalis.clients.cli import server_option
from vocalis.clients.errors import VocalisError
from vocalis.clients.messages import GRANULARITIES
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2

SAMPLE_ANSWER = (
    "Sure, I can help with that. The museum opens at nine in the morning and closes at six, "
    "except on Mondays, when it stays closed all day. Tickets cost twelve euros for adults; "
    "children under ten get in for free. If you want to avoid the crowds, go early on a weekday. "
    "Would you like me to find a good place for lunch nearby?"
)
_TOKENS = re.compile(r"\s*\w+|\s*[^\w\s]+|\s+")


def llm_tokens(text: str, max_chars: int = 6) -> list[str]:
    """Token-sized pieces of `text`, as a BPE tokenizer streams them: a word with the space before it,
    punctuation on its own, long words in pieces of at most `max_chars`. Joined, they give `text` back."""
    tokens = []
    for match in _TOKENS.finditer(text):
        piece = match.group()
        while len(piece) > max_chars and piece.strip():
            lead = len(piece) - len(piece.lstrip())
            cut = lead + max(max_chars - lead, 3)
            tokens.append(piece[:cut])
            piece = piece[cut:]
        tokens.append(piece)
    return tokens


@dataclass
class Underruns:
    """What playing the chunks in real time from the first one on would sound like."""

    count: int
    """Times the player ran dry before the next chunk arrived."""
    total_s: float
    max_s: float


def playback_underruns(chunks: list[tuple[float, float]]) -> Underruns:
    """Underruns of real-time playback of chunks given as (arrival time, duration), in arrival order."""
    count, total, longest = 0, 0.0, 0.0
    play_end: float | None = None
    for arrival, duration in chunks:
        if play_end is None or arrival <= play_end:
            start = arrival if play_end is None else play_end
        else:
            gap = arrival - play_end
            count, total, longest = count + 1, total + gap, max(longest, gap)
            start = arrival
        play_end = start + duration
    return Underruns(count, total, longest)


@dataclass
class StreamReport:
    """What one LLM-like stream measured; times in seconds."""

    tokens: int
    tokens_per_s: float
    sample_rate: int
    audio_seconds: float
    utterances: int
    chunks: int
    first_text_to_first_audio_s: float
    first_unit_text: str
    first_unit_complete_to_first_audio_s: float
    """From sending the first unit's last character to its first audio (the splitter waits for the next token to see the sentence end)."""
    last_text_to_last_audio_s: float
    max_chunk_gap_s: float
    """Longest wait between two audio chunks."""
    underruns: int
    underrun_s: float
    max_underrun_s: float
    first_unit_alone_s: float | None = None
    """Time to first audio when the first unit is sent alone as one complete text (the baseline), if measured."""

    @property
    def first_audio_ratio(self) -> float | None:
        """first_unit_complete_to_first_audio_s over first_unit_alone_s."""
        if not self.first_unit_alone_s:
            return None
        return self.first_unit_complete_to_first_audio_s / self.first_unit_alone_s

    def as_dict(self) -> dict:
        return {**asdict(self), "first_audio_ratio": self.first_audio_ratio}

    def describe(self) -> str:
        lines = [
            f"{self.tokens} tokens at {self.tokens_per_s:g}/s -> {self.audio_seconds:.2f} s of audio at {self.sample_rate} Hz "
            f"in {self.utterances} utterances, {self.chunks} chunks",
            f"first text -> first audio          {self.first_text_to_first_audio_s * 1000:8.0f} ms",
            f"first unit complete -> first audio {self.first_unit_complete_to_first_audio_s * 1000:8.0f} ms  ({self.first_unit_text!r})",
        ]
        if self.first_unit_alone_s is not None:
            lines.append(
                f"first unit alone -> first audio    {self.first_unit_alone_s * 1000:8.0f} ms  (ratio {self.first_audio_ratio:.2f})"
            )
        lines += [
            f"last text -> last audio            {self.last_text_to_last_audio_s * 1000:8.0f} ms",
            f"longest gap between chunks         {self.max_chunk_gap_s * 1000:8.0f} ms",
            f"underruns in real-time playback    {self.underruns:8d}     ({self.underrun_s * 1000:.0f} ms in all, longest {self.max_underrun_s * 1000:.0f} ms)",
        ]
        return "\n".join(lines)


async def stream_text(
    client: AsyncClient, config: synthesizer_pb2.SessionConfig, tokens: list[str], tokens_per_s: float
) -> tuple[StreamReport, bytes]:
    """Send `tokens` at `tokens_per_s` over one session (then half-close); the report and the audio (PCM16 when asked for PCM)."""
    session = await client.session(config)
    arrivals: list[tuple[float, synthesizer_pb2.SynthesizeResponse]] = []

    async def read() -> None:
        async for response in session:
            arrivals.append((time.monotonic(), response))

    reader = asyncio.create_task(read())
    sent: list[tuple[int, float]] = []
    """(characters sent so far, when), per token."""
    chars = 0
    async with session:
        start = time.monotonic()
        try:
            for i, token in enumerate(tokens):
                delay = start + i / tokens_per_s - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await session.send(token)
                chars += len(token)
                sent.append((chars, time.monotonic()))
            await session.end()
        except VocalisError:
            pass  # the call has ended: the reader raises its status
        await reader
    return _report(tokens, tokens_per_s, sent, arrivals)


def _report(
    tokens: list[str],
    tokens_per_s: float,
    sent: list[tuple[int, float]],
    arrivals: list[tuple[float, synthesizer_pb2.SynthesizeResponse]],
) -> tuple[StreamReport, bytes]:
    started = next(r.session_started for _, r in arrivals if r.WhichOneof("response") == "session_started")
    rate = started.sample_rate
    chunks = [(t, r.audio) for t, r in arrivals if r.WhichOneof("response") == "audio" and r.audio.num_samples]
    if not chunks:
        raise click.ClickException("the server sent no audio")
    text = "".join(tokens)
    first_time, first_chunk = chunks[0]
    unit_end = first_chunk.text_span.end
    complete_at = next(t for count, t in sent if count >= unit_end)
    times = [t for t, _ in chunks]
    underruns = playback_underruns([(t, chunk.num_samples / rate) for t, chunk in chunks])
    done = next(r.session_done for _, r in arrivals if r.WhichOneof("response") == "session_done")
    report = StreamReport(
        tokens=len(tokens),
        tokens_per_s=tokens_per_s,
        sample_rate=rate,
        audio_seconds=done.audio_seconds,
        utterances=done.utterance_count,
        chunks=len(chunks),
        first_text_to_first_audio_s=first_time - sent[0][1],
        first_unit_text=text[first_chunk.text_span.start : unit_end],
        first_unit_complete_to_first_audio_s=first_time - complete_at,
        last_text_to_last_audio_s=times[-1] - sent[-1][1],
        max_chunk_gap_s=max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0),
        underruns=underruns.count,
        underrun_s=underruns.total_s,
        max_underrun_s=underruns.max_s,
    )
    audio = b"".join(r.audio.audio for _, r in arrivals if r.WhichOneof("response") == "audio")
    return report, audio


async def first_audio_alone(client: AsyncClient, config: synthesizer_pb2.SessionConfig, text: str) -> float:
    """Seconds from sending `text` whole (and half-closing) to its first audio: the time it takes to synthesize alone."""
    session = await client.session(config)
    async with session:
        start = time.monotonic()
        await session.send(text)
        await session.end()
        async for response in session:
            if response.WhichOneof("response") == "audio" and response.audio.num_samples:
                return time.monotonic() - start
    raise click.ClickException("the server sent no audio")


def write_wav(path: Path, pcm: bytes, rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm)


async def _run(
    server: str, config: synthesizer_pb2.SessionConfig, tokens: list[str], rate: float, baseline: bool, timeout: float
) -> tuple[StreamReport, bytes]:
    async with AsyncClient(server, timeout=timeout) as client:
        report, audio = await stream_text(client, config, tokens, rate)
        if baseline:
            report.first_unit_alone_s = await first_audio_alone(client, config, report.first_unit_text)
    return report, audio


@click.command(name="stream")
@click.argument("text", required=False)
@click.option("--file", "text_file", type=click.File("r"), default=None, help="Read the text from a file ('-' for stdin).")
@click.option("--rate", type=float, default=20.0, show_default=True, help="Tokens per second.")
@click.option("--granularity", type=click.Choice(sorted(GRANULARITIES)), default="auto", show_default=True, help="Where the server cuts units.")
@click.option("--baseline", is_flag=True, help="Also time the first unit sent alone, and report the ratio.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the audio to this WAV file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@server_option
@click.option("--model", default="", help="Model name (default: the server's default).")
@click.option("--voice", default="", help="Voice name (default: the model's default).")
@click.option("--speed", type=float, default=None, help="Speaking speed, 0.25 to 4.0.")
@click.option("--seed", type=int, default=None, help="Seed, for reproducible audio.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Deadline of the session in seconds.")
def stream(
    text: str | None,
    text_file,
    rate: float,
    granularity: str,
    baseline: bool,
    output: Path | None,
    as_json: bool,
    server: str,
    model: str,
    voice: str,
    speed: float | None,
    seed: int | None,
    timeout: float,
) -> None:
    """Stream TEXT to the server token by token, as an LLM would, and report latency and underruns.

    Without TEXT or --file, a sample assistant answer is streamed.

    Example: vocalis stream --rate 20 --baseline -o answer.wav
    """
    if rate <= 0:
        raise click.BadParameter("must be above 0", param_hint="--rate")
    source = text_file.read() if text_file is not None else text if text is not None else SAMPLE_ANSWER
    tokens = llm_tokens(source)
    if not "".join(tokens).strip():
        raise click.ClickException("no text to stream")
    config = synthesizer_pb2.SessionConfig(model=model, voice=voice, encoding=audio_pb2.AUDIO_ENCODING_PCM)
    config.text_splitting.granularity = GRANULARITIES[granularity]
    if speed is not None:
        config.speed = speed
    if seed is not None:
        config.seed = seed
    try:
        report, audio = asyncio.run(_run(server, config, tokens, rate, baseline, timeout))
    except VocalisError as error:
        raise click.ClickException(str(error)) from None
    if output is not None:
        write_wav(output, audio, report.sample_rate)
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else report.describe())
    if output is not None and not as_json:
        click.echo(f"wrote {output}", err=True)
