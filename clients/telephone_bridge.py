"""Speak into a phone call: Vocalis's WebSocket bridged to a Twilio Media Streams socket.

Twilio (and gateways that copy its Media Streams protocol) opens a WebSocket to your service for each call and
plays what you send back as `media` events: base64 G.711 mu-law at 8 kHz, mono, in 20 ms frames (160 bytes).
This bridge is that service: on a call's `start` event it opens a Vocalis session (`response_format: "ulaw"`,
`stream_audio`, so Vocalis itself encodes the telephone audio), sends the text, and forwards the audio as it is
made, cut into 20 ms `media` frames, then a `mark` event named `vocalis-done` once the text has been spoken.

    python -m vocalis.clients.telephone_bridge --vocalis ws://localhost:8091/v1/audio/speech/stream \\
        --port 8765 --text "Thank you for calling. How can I help?"

and point the call's `<Stream url="wss://.../">` at it. An agent would send its LLM's text as it comes instead of
one fixed text; the framing is the same.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

FRAME_BYTES = 160
"""20 ms of G.711 at 8 kHz, one byte a sample: the frame Twilio plays."""
ULAW_SILENCE = b"\xff"
"""Mu-law's zero, to pad the last frame."""
DONE_MARK = "vocalis-done"


def media_frames(audio: bytes, stream_sid: str) -> list[dict[str, Any]]:
    """`media` events of whole 20 ms frames of `audio` (its length a multiple of FRAME_BYTES)."""
    return [
        {"event": "media", "streamSid": stream_sid, "media": {"payload": base64.b64encode(audio[i : i + FRAME_BYTES]).decode()}}
        for i in range(0, len(audio), FRAME_BYTES)
    ]


async def speak(vocalis_url: str, text: str, stream_sid: str, send: Callable[[str], Awaitable[None]], voice: str | None = None) -> int:
    """Synthesize `text` on Vocalis's socket as mu-law and `send` it as Twilio `media` events, then the done mark;
    returns the number of media frames sent."""
    config: dict[str, Any] = {"type": "session.config", "response_format": "ulaw", "sample_rate": 8000, "stream_audio": True}
    if voice:
        config["voice"] = voice
    pending = b""
    frames = 0
    async with connect(vocalis_url) as vocalis:
        await vocalis.send(json.dumps(config))
        await vocalis.send(json.dumps({"type": "input.text", "text": text}))
        await vocalis.send(json.dumps({"type": "input.done"}))
        async for message in vocalis:
            if isinstance(message, bytes):
                pending += message
                whole = len(pending) - len(pending) % FRAME_BYTES
                for event in media_frames(pending[:whole], stream_sid):
                    await send(json.dumps(event))
                    frames += 1
                pending = pending[whole:]
                continue
            event = json.loads(message)
            if event["type"] == "error":
                raise RuntimeError(f"Vocalis refused the text: {event['message']}")
            if event["type"] == "session.done":
                break
    if pending:
        for event in media_frames(pending.ljust(FRAME_BYTES, ULAW_SILENCE), stream_sid):
            await send(json.dumps(event))
            frames += 1
    await send(json.dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": DONE_MARK}}))
    return frames


def call_handler(vocalis_url: str, text: str, voice: str | None = None) -> Callable[[ServerConnection], Awaitable[None]]:
    """A handler for one call's socket: waits for Twilio's `start`, speaks `text` into the call, then reads the
    call's own events until it ends."""

    async def handle(call: ServerConnection) -> None:
        async for message in call:
            event = json.loads(message)
            if event.get("event") == "start":
                await speak(vocalis_url, text, event["start"]["streamSid"], call.send, voice)
            elif event.get("event") == "stop":
                return

    return handle


async def run(vocalis_url: str, host: str, port: int, text: str, voice: str | None) -> None:
    async with serve(call_handler(vocalis_url, text, voice), host, port):
        await asyncio.Future()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocalis", default="ws://localhost:8091/v1/audio/speech/stream", help="Vocalis's WebSocket URL.")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--text", required=True, help="What to say when a call starts.")
    parser.add_argument("--voice", default=None)
    args = parser.parse_args()
    asyncio.run(run(args.vocalis, args.host, args.port, args.text, args.voice))


if __name__ == "__main__":
    main()
