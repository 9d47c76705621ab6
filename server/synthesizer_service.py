"""The Synthesizer service: one bidirectional session from config to SessionDone.

A session has two halves that run concurrently. The reader takes the client's
messages as they come (text, flush, clear, half-close) and turns them into a
queue of utterances; the writer synthesizes the queued utterances in order and
streams their audio back. Because the reader never waits for the writer, a Clear
interrupts the utterance being spoken and text keeps arriving during synthesis.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from vocalis.server import session_config
from vocalis.server.audio_encoding import MEDIA_TYPES
from vocalis.server.config import Limits
from vocalis.server.engine import Engine, UtteranceJob
from vocalis.server.errors import StatusError, abort, invalid_argument
from vocalis.stages.errors import SynthesisFailed
from vocalis.tts.v1 import synthesizer_pb2 as pb
from vocalis.tts.v1 import synthesizer_pb2_grpc

log = logging.getLogger(__name__)

FILE_CHUNK_BYTES = 1024 * 1024


@dataclass
class Utterance:
    text: str
    start: int
    """Offset of the text in the session's input, in characters."""
    flush_id: str = ""


class _ClearMarker:
    """Placed in the utterance queue where a Clear happened."""


class _EndMarker:
    """Placed in the utterance queue after the last utterance."""


_CLEARED = _ClearMarker()
_END = _EndMarker()


class SynthesizerService(synthesizer_pb2_grpc.SynthesizerServicer):
    def __init__(self, engine: Engine, limits: Limits) -> None:
        self.engine = engine
        self.limits = limits

    async def Synthesize(
        self, request_iterator: AsyncIterator[pb.SynthesizeRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SynthesizeResponse]:
        try:
            session = await self._open(request_iterator)
        except StatusError as error:
            await abort(context, error)
            return
        except Exception:  # noqa: BLE001
            log.exception("opening a session failed")
            await abort(context, StatusError(grpc.StatusCode.INTERNAL, "internal error opening the session", "INTERNAL"))
            return
        yield pb.SynthesizeResponse(session_started=session.started())
        try:
            async for response in session.run(request_iterator):
                yield response
        except StatusError as error:
            await abort(context, error)
        except SynthesisFailed as error:
            await abort(context, StatusError(grpc.StatusCode.INTERNAL, str(error), "SYNTHESIS_FAILED"))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:  # noqa: BLE001 - a bug fails this session only, with a status the caller can read
            log.exception("session %s failed", session.request_id)
            await abort(
                context,
                StatusError(grpc.StatusCode.INTERNAL, f"internal error in session {session.request_id}", "INTERNAL"),
            )

    async def _open(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> Session:
        try:
            first = await asyncio.wait_for(anext(requests), self.limits.first_message_timeout_s)
        except StopAsyncIteration:
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION, "the stream ended before its config message", "CONFIG_REQUIRED"
            ) from None
        except TimeoutError:
            raise StatusError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no config message within {self.limits.first_message_timeout_s:g} s",
                "CONFIG_TIMEOUT",
            ) from None
        if first.WhichOneof("request") != "config":
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the first message must be config, got {first.WhichOneof('request') or 'an empty message'}",
                "CONFIG_REQUIRED",
            )
        config = first.config
        model = self.engine.model(config.model)
        resolved = session_config.resolve(config, model, self.limits)
        return Session(self.engine, self.limits, resolved, config.request_id or f"tts-{uuid.uuid4().hex}")


class Session:
    """State of one open Synthesize call."""

    def __init__(self, engine: Engine, limits: Limits, resolved: session_config.ResolvedSession, request_id: str) -> None:
        self.engine = engine
        self.limits = limits
        self.resolved = resolved
        self.request_id = request_id
        self.encoder = resolved.encoder
        self.buffer = ""
        self.buffer_start = 0
        self.input_chars = 0
        self.has_text = False
        self.queue: asyncio.Queue[Utterance | _ClearMarker | _EndMarker | StatusError] = asyncio.Queue()
        self.current: UtteranceJob | None = None
        self.utterance_index = 0
        self.session_samples = 0
        self.usage = pb.Usage()

    def started(self) -> pb.SessionStarted:
        resolved = self.resolved
        return pb.SessionStarted(
            request_id=self.request_id,
            model=resolved.model.name,
            voice=resolved.voice,
            encoding=session_config.PROTO_ENCODINGS[resolved.encoding],
            sample_rate=self.encoder.rate,
            channels=1,
            media_type=MEDIA_TYPES[resolved.encoding],
            limits=pb.SessionLimits(
                max_buffered_chars=self.limits.max_buffered_chars, max_input_chars=self.limits.max_input_chars
            ),
        )

    async def run(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> AsyncIterator[pb.SynthesizeResponse]:
        reader = asyncio.create_task(self._read(requests))
        try:
            async for response in self._write():
                yield response
        finally:
            reader.cancel()
            if self.current is not None:
                self.current.abort()

    # -- the reader half -------------------------------------------------------------

    async def _read(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> None:
        try:
            async for request in requests:
                kind = request.WhichOneof("request")
                if kind == "text":
                    self._append(request.text.text)
                elif kind == "flush":
                    self._enqueue_buffer(request.flush.flush_id)
                elif kind == "clear":
                    self._clear()
                else:
                    raise StatusError(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        "config may be sent only once, as the first message" if kind == "config" else "empty message",
                        "UNEXPECTED_MESSAGE",
                    )
            if not self.has_text:
                raise invalid_argument("text", "EMPTY_INPUT", "input text is empty: send some text to synthesize")
            self._enqueue_buffer("")
            self.queue.put_nowait(_END)
        except StatusError as error:
            self._drop_pending()
            self.queue.put_nowait(error)

    def _append(self, text: str) -> None:
        self.input_chars += len(text)
        if self.input_chars > self.limits.max_input_chars:
            raise invalid_argument(
                "text",
                "INPUT_TOO_LONG",
                f"input is longer than {self.limits.max_input_chars} characters; split it over several sessions",
            )
        if len(self.buffer) + len(text) > self.limits.max_buffered_chars:
            raise invalid_argument(
                "text",
                "BUFFER_FULL",
                f"more than {self.limits.max_buffered_chars} characters buffered; send a flush to synthesize them",
            )
        self.buffer += text
        self.has_text = self.has_text or bool(text.strip())

    def _enqueue_buffer(self, flush_id: str) -> None:
        if self.buffer.strip() or flush_id:
            self.queue.put_nowait(Utterance(self.buffer, self.buffer_start, flush_id))
        self.buffer_start += len(self.buffer)
        self.buffer = ""

    def _clear(self) -> None:
        self.buffer_start += len(self.buffer)
        self.buffer = ""
        self._drop_pending()
        self.queue.put_nowait(_CLEARED)

    def _drop_pending(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        if self.current is not None:
            self.current.abort()

    # -- the writer half -------------------------------------------------------------

    async def _write(self) -> AsyncIterator[pb.SynthesizeResponse]:
        while True:
            item = await self.queue.get()
            if isinstance(item, StatusError):
                raise item
            if item is _CLEARED:
                yield pb.SynthesizeResponse(cleared=pb.Cleared())
                continue
            if item is _END:
                break
            assert isinstance(item, Utterance)
            async for response in self._speak(item):
                yield response
        data, samples = self.encoder.finish()
        if self.encoder.streams_incrementally:
            offset = self.encoder.samples_out - samples  # the resampler's tail
        else:
            offset, samples = 0, self.encoder.samples_out  # the whole file
        for response in self._audio_messages(data, offset, samples, max(self.utterance_index - 1, 0), 0, ""):
            yield response
        yield pb.SynthesizeResponse(
            session_done=pb.SessionDone(
                utterance_count=self.utterance_index,
                num_samples=self.encoder.samples_out,
                audio_seconds=self.encoder.samples_out / self.encoder.rate,
                usage=self.usage,
            )
        )

    async def _speak(self, utterance: Utterance) -> AsyncIterator[pb.SynthesizeResponse]:
        if utterance.text.strip():
            index = self.utterance_index
            self.utterance_index += 1
            job = self.engine.submit(self.resolved.model, utterance.text, self.resolved.stage_input, self.request_id)
            self.current = job
            chunk_index = 0
            first_offset = self.encoder.samples_out
            try:
                async for samples in job.audio():
                    data, count = self.encoder.feed(samples)
                    offset = self.encoder.samples_out - count
                    for response in self._audio_messages(data, offset, count, index, chunk_index, utterance.flush_id, utterance):
                        chunk_index += 1
                        yield response
            finally:
                self.current = None
            if job.request.error is not None:
                raise job.request.error
            if job.aborted:
                return  # cleared: no UtteranceDone for audio nobody will hear
            stats = job.stats()
            audio_seconds = stats.samples / self.resolved.model.capabilities.sample_rate
            self.usage.output_tokens += stats.output_tokens
            self.usage.input_tokens += len(utterance.text)
            yield pb.SynthesizeResponse(
                utterance_done=pb.UtteranceDone(
                    utterance_index=index,
                    num_samples=self.encoder.samples_out - first_offset,
                    audio_seconds=audio_seconds,
                    time_to_first_audio_seconds=stats.time_to_first_audio_s,
                    real_time_factor=stats.synthesis_s / audio_seconds if audio_seconds else 0.0,
                    usage=pb.Usage(input_tokens=len(utterance.text), output_tokens=stats.output_tokens),
                    text_span=_span(utterance),
                    flush_id=utterance.flush_id,
                )
            )
        if utterance.flush_id:
            yield pb.SynthesizeResponse(flush_done=pb.FlushDone(flush_id=utterance.flush_id))

    def _audio_messages(
        self,
        data: bytes,
        offset: int,
        samples: int,
        utterance_index: int,
        chunk_index: int,
        flush_id: str,
        utterance: Utterance | None = None,
    ) -> list[pb.SynthesizeResponse]:
        """AudioChunk messages for `data`, split to stay under the message size limit."""
        pieces = [data[i : i + FILE_CHUNK_BYTES] for i in range(0, len(data), FILE_CHUNK_BYTES)]
        return [
            pb.SynthesizeResponse(
                audio=pb.AudioChunk(
                    audio=piece,
                    utterance_index=utterance_index,
                    chunk_index=chunk_index + i,
                    sample_offset=offset if i == 0 else offset + samples,
                    num_samples=samples if i == 0 else 0,
                    flush_id=flush_id,
                    text_span=_span(utterance) if utterance else None,
                )
            )
            for i, piece in enumerate(pieces)
        ]


def _span(utterance: Utterance) -> pb.TextSpan:
    return pb.TextSpan(start=utterance.start, end=utterance.start + len(utterance.text))
