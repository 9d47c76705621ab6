"""WS /v1/audio/speech/stream: one WebSocket mapped onto one gRPC Synthesize call (protocol: stream_protocol.py).

The socket keeps reading while audio is made: one task receives frames, one maps them onto
the gRPC session, one maps its responses back onto frames. Nothing about speech is decided here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from vocalis.clients.aio import AsyncClient, AsyncTextSession
from vocalis.clients.errors import VocalisError
from vocalis.gateway.config import StreamLimits
from vocalis.gateway.dependencies import Config, upstream
from vocalis.gateway.errors import ws_field
from vocalis.gateway.inbox import Inbox, Oversize, frame_size
from vocalis.gateway.stream_protocol import (
    INVALID_PAYLOAD,
    NORMAL,
    PATH,
    POLICY,
    TOO_BIG,
    UNSUPPORTED_DATA,
    ConfigError,
    StreamConfig,
    close_code,
    error_frame,
    parse_config,
    upstream_error_frame,
    valid_unicode,
)
from vocalis.gateway.word_timestamps import word_dicts
from vocalis.tts.v1 import synthesizer_pb2 as pb

router = APIRouter(tags=["speech"])


@router.websocket(PATH)
async def speech_stream(websocket: WebSocket, config: Config) -> None:
    try:
        client = upstream(websocket)
    except VocalisError as error:  # credentials gRPC cannot carry
        await websocket.accept()
        await websocket.send_text(json.dumps(upstream_error_frame(error)))
        await websocket.close(close_code(error), error.reason)
        return
    await StreamSession(websocket, client, config.stream).run()


class _Stop:
    """Put on the inbox when the session is over on the server's side."""


_STOP = _Stop()


@dataclass
class _Unit:
    """The unit of text whose audio is being sent."""

    index: int
    """Its utterance index in the gRPC session."""
    bytes_sent: int = 0
    held: bytearray = field(default_factory=bytearray)
    """Its file so far, without stream_audio (sent whole at the end)."""
    start_ms: float = 0.0
    """Where it starts in the session's audio."""
    samples: int = 0
    """Samples sent so far."""
    chunks: int = 0
    """audio.chunk frames sent so far (word_timestamps in the peer's format)."""
    words: list[dict] = field(default_factory=list)
    """Its word times, for the trailing frame of the peer's format."""
    word_frames: list[dict] = field(default_factory=list)
    """audio.timestamps frames held until its file has been sent (without stream_audio)."""


class StreamSession:
    """One WebSocket and the gRPC session behind it."""

    def __init__(self, websocket: WebSocket, upstream: AsyncClient, limits: StreamLimits) -> None:
        self.ws = websocket
        self.upstream = upstream
        self.limits = limits
        self.inbox = Inbox(limits.max_inbox_bytes)
        """Frames read and not yet handled (dicts, Oversize notes, _STOP)."""
        self.last_activity = time.monotonic()
        self._send_lock = asyncio.Lock()
        self.closed = False
        self.closing = False
        """session.close received: what was sent is being finished."""
        # The gRPC session and what the reader has sent on it.
        self.call: AsyncTextSession | None = None
        self.pump: asyncio.Task | None = None
        self.config: StreamConfig | None = None
        self.started: pb.SessionStarted | None = None
        self.text = ""
        """Everything sent on the call: the server's text spans point into it."""
        self.open_text = False
        """Text sent since the last input.done."""
        self.pending: deque[tuple[str, str, str]] = deque()
        """Flushes sent and not yet answered: (gRPC flush id, "flush" or "done", the client's flush id)."""
        self.flushes = 0
        self.commits = 0
        """input.commit messages answered so far (the next input.committed's segment_index)."""
        self.clearing = 0
        """Clears sent and not yet answered: audio arriving meanwhile is dropped."""
        # What the pump has sent back.
        self.utterance_index = 0
        self.sentence_index = 0
        self.unit: _Unit | None = None
        self.last_finished = -1

    async def run(self) -> None:
        await self.ws.accept()
        receiver = asyncio.create_task(self._receive())
        try:
            await self._serve()
        except WebSocketDisconnect:
            pass  # the client went away while we were sending
        finally:
            receiver.cancel()
            await self._drop_call()

    async def _receive(self) -> None:
        """Read frames into the inbox as they come, whatever the other tasks are doing."""
        try:
            while True:
                message = await self.ws.receive()
                size = frame_size(message)
                if size > self.limits.max_config_chars:  # no message may be this large: keep only its size
                    await self.inbox.put(Oversize(size))
                    continue
                await self.inbox.put(message, size)  # waits while the inbox is full: the socket is not read
                if message["type"] == "websocket.disconnect":
                    return
        except (WebSocketDisconnect, RuntimeError):
            self.inbox.put_nowait({"type": "websocket.disconnect"})

    # -- client to server --------------------------------------------------------------

    async def _serve(self) -> None:
        config_deadline = time.monotonic() + self.limits.first_config_timeout_s
        while True:
            if self.call is None:
                timeout = config_deadline - time.monotonic()
            else:
                timeout = self.last_activity + self.limits.idle_timeout_s - time.monotonic()
            try:
                item = await asyncio.wait_for(self.inbox.get(), max(timeout, 0.0))
            except TimeoutError:
                if self.call is None:
                    wait = self.limits.first_config_timeout_s
                    await self._fail(error_frame(f"no session.config within {wait:g} s", 408, "CONFIG_TIMEOUT"), POLICY)
                    return
                if time.monotonic() - self.last_activity >= self.limits.idle_timeout_s:
                    wait = self.limits.idle_timeout_s
                    await self._fail(error_frame(f"idle timeout: no message for {wait:g} s", 408, "IDLE_TIMEOUT"), POLICY)
                    return
                continue  # audio went out meanwhile
            if isinstance(item, _Stop) or (isinstance(item, dict) and item["type"] == "websocket.disconnect"):
                return
            self.last_activity = time.monotonic()
            if self.closing:
                continue  # session.close was the last word
            if not await self._handle(item):
                return

    async def _handle(self, frame: dict[str, Any] | Oversize) -> bool:
        """Act on one frame; False when the socket was closed."""
        if isinstance(frame, Oversize):
            return await self._refuse(
                f"message too large: over {self.limits.max_config_chars} characters", "MESSAGE_TOO_LARGE", TOO_BIG, 413
            )
        if frame.get("bytes") is not None:
            return await self._refuse("binary frames are not accepted: send JSON text messages", "BINARY_FRAME", UNSUPPORTED_DATA)
        text = frame.get("text") or ""
        if len(text) > self.limits.max_config_chars:
            return await self._refuse(
                f"message too large: over {self.limits.max_config_chars} characters", "MESSAGE_TOO_LARGE", TOO_BIG, 413
            )
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            return await self._refuse("invalid JSON message", "INVALID_JSON", INVALID_PAYLOAD)
        if not isinstance(message, dict):
            return await self._refuse("messages must be JSON objects", "INVALID_MESSAGE", INVALID_PAYLOAD)
        kind = message.get("type")
        if kind != "session.config" and len(text) > self.limits.max_message_chars:
            return await self._refuse(
                f"{kind} message too large: over {self.limits.max_message_chars} characters", "MESSAGE_TOO_LARGE", TOO_BIG, 413
            )
        if self.call is None and kind != "session.config":
            return await self._refuse(f"expected session.config first, got {kind!r}", "CONFIG_REQUIRED", POLICY)
        handler = {
            "session.config": self._on_config,
            "input.text": self._on_text,
            "input.flush": self._on_flush,
            "input.commit": self._on_commit,
            "input.clear": self._on_clear,
            "input.done": self._on_done,
            "session.close": self._on_close,
        }.get(kind)
        if handler is None:
            return await self._refuse(f"unknown message type {kind!r}", "UNKNOWN_MESSAGE_TYPE", POLICY)
        return await handler(message)

    async def _refuse(self, message: str, reason: str, close: int, code: int = 400, param: str | None = None) -> bool:
        """A protocol error: reported; fatal only before a session is configured."""
        if self.call is None:
            await self._fail(error_frame(message, code, reason, param), close)
            return False
        await self._send_json(error_frame(message, code, reason, param))
        return True

    async def _on_config(self, message: dict[str, Any]) -> bool:
        if self.open_text or self.pending or self.clearing:
            return await self._refuse(
                "session.config cannot be applied while an utterance is in progress; send input.done first",
                "CONFIG_IN_UTTERANCE",
                POLICY,
            )
        try:
            config = parse_config(message)
        except ConfigError as error:
            return await self._refuse(f"invalid session.config: {error.message}", "INVALID_CONFIG", POLICY, param=error.param)
        call = None
        try:
            call = await self.upstream.session(config.session)
            responses = aiter(call)
            started = (await anext(responses)).session_started
        except VocalisError as error:
            if call is not None:
                call.cancel()
            if self.call is None:
                await self._fail(upstream_error_frame(error), close_code(error))
                return False
            await self._send_json(upstream_error_frame(error))
            return True  # the previous config stays
        await self._drop_call()
        self.call, self.config, self.started = call, config, started
        self.text, self.unit, self.last_finished, self.sentence_index = "", None, -1, 0
        await self._send_json(
            {
                "type": "session.configured",
                "session_id": started.request_id,
                "model": started.model,
                "response_format": config.response_format,
                "sample_rate": started.sample_rate,
            }
        )
        self.pump = asyncio.create_task(self._pump(responses))
        return True

    async def _on_text(self, message: dict[str, Any]) -> bool:
        text = message.get("text", "")
        if not isinstance(text, str) or not valid_unicode(text):
            return await self._refuse("input.text requires a string of valid Unicode text", "INVALID_FIELD", POLICY, param="text")
        if not text:
            return True
        limit = self.started.limits.max_buffered_chars if self.started else 0
        if limit and len(text) > limit:
            return await self._refuse(
                f"input.text is longer than the {limit} characters a session may buffer", "TEXT_TOO_LONG", POLICY, param="text"
            )
        self.text += text
        self.open_text = True
        await self._write(self.call.send(text))
        return True

    async def _on_flush(self, message: dict[str, Any]) -> bool:
        flush_id = message.get("flush_id", "")
        if not isinstance(flush_id, str) or not valid_unicode(flush_id):
            return await self._refuse("flush_id must be a string of valid Unicode text", "INVALID_FIELD", POLICY, param="flush_id")
        await self._flush("flush", flush_id)
        return True

    async def _on_commit(self, message: dict[str, Any]) -> bool:
        """SGLang-Omni's flush: synthesize what is buffered; `input.committed` once its audio has been sent."""
        flush_id = message.get("flush_id", "")
        if not isinstance(flush_id, str):
            return await self._refuse("flush_id must be a string", "INVALID_FIELD", POLICY, param="flush_id")
        await self._flush("commit", flush_id)
        return True

    async def _on_done(self, message: dict[str, Any]) -> bool:
        self.open_text = False
        await self._flush("done", "")
        return True

    async def _on_clear(self, message: dict[str, Any]) -> bool:
        self.clearing += 1
        self.open_text = False
        await self._write(self.call.clear())
        return True

    async def _on_close(self, message: dict[str, Any]) -> bool:
        self.closing = True
        if self.text.strip():
            await self._write(self.call.end())  # the pump closes the socket after SessionDone
            return True
        await self._close(NORMAL)
        return False

    async def _flush(self, kind: str, client_id: str) -> None:
        self.flushes += 1
        flush_id = f"ws-{self.flushes}"
        self.pending.append((flush_id, kind, client_id))
        await self._write(self.call.flush(flush_id))

    async def _write(self, sending: Any) -> None:
        try:
            await sending
        except VocalisError:
            pass  # the call has ended: the pump reports its status

    async def _drop_call(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump
            self.pump = None
        if self.call is not None:
            self.call.cancel()
            self.call = None

    # -- server to client --------------------------------------------------------------

    async def _pump(self, responses: AsyncIterator[pb.SynthesizeResponse]) -> None:
        try:
            async for response in responses:
                kind = response.WhichOneof("response")
                if kind == "audio":
                    await self._on_audio(response.audio)
                elif kind == "word_timings":
                    await self._on_words(response.word_timings)
                elif kind == "utterance_done":
                    await self._on_utterance_done(response.utterance_done)
                elif kind == "flush_done":
                    await self._on_flush_done(response.flush_done.flush_id)
                elif kind == "cleared":
                    await self._on_cleared()
                elif kind == "warning":
                    warning = response.warning
                    await self._send_json({"type": "warning", "code": warning.code, "message": warning.message, "param": ws_field(warning.field)})
                elif kind == "session_done":
                    await self._close(NORMAL)
                    break
        except VocalisError as error:
            await self._upstream_failed(error)
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client is gone; the reader sees the disconnect
        self.inbox.put_nowait(_STOP)

    async def _on_audio(self, chunk: pb.AudioChunk) -> None:
        if self.clearing or not chunk.audio:
            return
        if chunk.utterance_index <= self.last_finished:  # the resampler's tail at the very end
            if self.config.stream_audio:
                await self._send_bytes(chunk.audio)
            return
        if self.unit is None:
            await self._start_unit(chunk.utterance_index, chunk.text_span)
            self.unit.start_ms = chunk.sample_offset * 1000 / self.started.sample_rate
        if self.config.word_timestamps == "peer":
            await self._send_chunk_frame(chunk)
        elif self.config.stream_audio:
            await self._send_bytes(chunk.audio)
            self.unit.bytes_sent += len(chunk.audio)
        else:
            self.unit.held += chunk.audio

    async def _send_chunk_frame(self, chunk: pb.AudioChunk) -> None:
        """One PCM chunk as vLLM-Omni frames it when word timestamps are on (times from the sentence's start)."""
        unit, rate = self.unit, self.started.sample_rate
        await self._send_json(
            {
                "type": "audio.chunk",
                "utterance_index": self.utterance_index,
                "sentence_index": self.sentence_index,
                "chunk_id": unit.chunks,
                "chunk_start_ms": round(unit.samples * 1000 / rate),
                "chunk_end_ms": round((unit.samples + chunk.num_samples) * 1000 / rate),
                "sample_rate": rate,
                "audio_b64": base64.b64encode(chunk.audio).decode(),
                "timestamps": None,
            }
        )
        unit.chunks += 1
        unit.samples += chunk.num_samples
        unit.bytes_sent += len(chunk.audio)

    async def _on_words(self, timings: pb.WordTimings) -> None:
        if self.clearing or self.unit is None:
            return
        if self.config.word_timestamps == "peer":
            self.unit.words += word_dicts(timings, shift_ms=round(self.unit.start_ms))
            return
        frame = {
            "type": "audio.timestamps",
            "utterance_index": self.utterance_index,
            "sentence_index": self.sentence_index,
            "words": word_dicts(timings),
        }
        if self.config.stream_audio:
            await self._send_json(frame)
        else:
            self.unit.word_frames.append(frame)  # after the sentence's file

    async def _start_unit(self, index: int, span: pb.TextSpan) -> None:
        self.unit = _Unit(index)
        await self._send_json(
            {
                "type": "audio.start",
                "utterance_index": self.utterance_index,
                "sentence_index": self.sentence_index,
                "sentence_text": self.text[span.start : span.end],
                "format": self.config.response_format,
                "sample_rate": self.started.sample_rate,
                "channels": self.started.channels,
                **({"word_timestamps": True} if self.config.word_timestamps else {}),
            }
        )

    async def _on_utterance_done(self, done: pb.UtteranceDone) -> None:
        if self.clearing:
            return  # its audio was dropped; the Clear closes it
        if self.unit is None:
            await self._start_unit(done.utterance_index, done.text_span)  # a unit with no audio at all
        unit = self.unit
        if self.config.word_timestamps == "peer":  # the trailing frame with the sentence's words
            await self._send_json(
                {
                    "type": "audio.chunk",
                    "utterance_index": self.utterance_index,
                    "sentence_index": self.sentence_index,
                    "chunk_id": unit.chunks,
                    "chunk_start_ms": 0,
                    "chunk_end_ms": round(unit.samples * 1000 / self.started.sample_rate),
                    "sample_rate": self.started.sample_rate,
                    "audio_b64": "",
                    "timestamps": unit.words or None,
                }
            )
        if unit.held:
            await self._send_bytes(bytes(unit.held))
            unit.bytes_sent = len(unit.held)
        for frame in unit.word_frames:
            await self._send_json(frame)
        await self._send_json(
            self._audio_done(
                audio_seconds=round(done.audio_seconds, 4),
                time_to_first_audio_s=round(done.time_to_first_audio_seconds, 4),
                real_time_factor=round(done.real_time_factor, 4),
            )
        )
        self._end_unit()

    async def _on_flush_done(self, flush_id: str) -> None:
        await self._close_cleared_unit()
        while self.pending:
            sent_id, kind, client_id = self.pending.popleft()
            if sent_id != flush_id:
                continue  # cannot happen: the server answers every flush in order
            if kind == "flush":
                await self._send_json({"type": "flush.done", "flush_id": client_id})
            elif kind == "commit":
                await self._send_json(
                    {"type": "input.committed", "flush_id": client_id, "segment_index": self.commits, "total_sentences": self.sentence_index}
                )
                self.commits += 1
            else:
                await self._send_json(
                    {"type": "session.done", "utterance_index": self.utterance_index, "total_sentences": self.sentence_index}
                )
                self.utterance_index += 1
                self.sentence_index = 0
            return

    async def _on_cleared(self) -> None:
        await self._close_cleared_unit()
        self.clearing = max(self.clearing - 1, 0)
        await self._send_json({"type": "input.cleared"})

    async def _close_cleared_unit(self) -> None:
        if self.clearing and self.unit is not None:
            await self._send_json(self._audio_done(cleared=True))
            self._end_unit()

    async def _upstream_failed(self, error: VocalisError) -> None:
        frame = upstream_error_frame(error)
        if self.unit is not None and self.unit.bytes_sent:
            frame.update(partial_audio=True, action="discard")
        await self._send_json(frame)
        if self.unit is not None:
            await self._send_json(self._audio_done(error=True))
            self._end_unit()
        await self._close(close_code(error))

    def _audio_done(self, error: bool = False, **extra: Any) -> dict[str, Any]:
        return {
            "type": "audio.done",
            "utterance_index": self.utterance_index,
            "sentence_index": self.sentence_index,
            "total_bytes": self.unit.bytes_sent if self.unit else 0,
            "error": error,
            **extra,
        }

    def _end_unit(self) -> None:
        if self.unit is not None:
            self.last_finished = self.unit.index
        self.unit = None
        self.sentence_index += 1

    # -- the socket ------------------------------------------------------------------

    async def _send_json(self, message: dict[str, Any]) -> None:
        await self._send(text=json.dumps(message, ensure_ascii=False))

    async def _send_bytes(self, data: bytes) -> None:
        await self._send(data=data)

    async def _send(self, text: str | None = None, data: bytes | None = None) -> None:
        if self.closed:
            return
        async with self._send_lock:
            if text is not None:
                await self.ws.send_text(text)
            else:
                await self.ws.send_bytes(data)
        self.last_activity = time.monotonic()

    async def _fail(self, frame: dict[str, Any], close: int) -> None:
        await self._send_json(frame)
        await self._close(close, frame["reason"])

    async def _close(self, code: int, reason: str = "") -> None:
        if self.closed:
            return
        self.closed = True
        async with self._send_lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await self.ws.close(code, reason)
