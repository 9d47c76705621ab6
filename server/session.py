"""One open Synthesize call, from SessionStarted to SessionDone: the plan, its reader and its writer.

A session has two halves that run concurrently. The reader takes the client's
messages as they come (text, flush, clear, half-close). Text goes through the
session's SentenceSplitter, and every unit it completes joins the session's plan
at once and is submitted to the engine while the units before it are still being
spoken (up to Limits.max_units_in_flight per session), so there is no gap between
sentences and text for sentence N+1 is accepted while sentence N is synthesized.
The writer walks the plan in order: each unit's audio as it comes, then its
UtteranceDone; flush and clear marks become FlushDone and Cleared at their place
in the audio. Because the reader never waits for the writer, a Clear interrupts
the unit being spoken at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from vocalis.server import session_config
from vocalis.server.audio_encoding import media_type
from vocalis.server.config import Limits
from vocalis.server.engine import Engine, UtteranceJob
from vocalis.server.errors import StatusError, from_request_error, invalid_argument
from vocalis.server.untimed_words import untimed_warning
from vocalis.stages.api.errors import RequestError
from vocalis.stages.runtime.output import WordTimes
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.text.sentence_splitter import SentenceSplitter, TextUnit
from vocalis.stages.text.word_times import UntimedWord, WordTime
from vocalis.tts.v1 import synthesizer_pb2 as pb

log = logging.getLogger(__name__)

FILE_CHUNK_BYTES = 1024 * 1024
DRAIN_QUIET_S = 0.3
"""A refused session ends once the client has sent nothing for this long (see Session._drain)."""
DRAIN_MAX_S = 2.0
"""... or after this long at most, whatever the client still sends."""


@dataclass
class Utterance:
    """One unit of the session's text on its way through the engine."""

    unit: TextUnit
    flush_id: str = ""
    """Id of the flush that completed the unit, if one did."""
    job: UtteranceJob | None = None
    """Set once the engine admitted the unit."""
    refused: StatusError | None = None
    """Why the engine refused it when the session had nothing else in flight."""
    model_text: str = ""
    """The unit as the model is given it: its text, rewritten by the family's text carry if it has one."""
    context_after: str = ""
    """The family's text-carry context after this unit (see stages/text/text_carry.py)."""
    tentative: bool = False
    """A guess: the text so far ends with what looks like a sentence end, and only the next text can
    confirm it ("Hello." followed by " Next" or by "com"). It is synthesized meanwhile, and spoken
    only once confirmed; a contradicted guess is aborted."""

    @property
    def text(self) -> str:
        return self.unit.text


@dataclass
class _FlushMark:
    """Where a Flush's FlushDone goes: after the audio of every unit before it."""

    flush_id: str


class _ClearMark:
    """Where a Clear happened."""


class _EndMark:
    """After the last unit."""


_CLEARED = _ClearMark()
_END = _EndMark()
PlanEntry = Utterance | _FlushMark | _ClearMark | _EndMark | StatusError


class Session:
    """State of one open Synthesize call: the splitter, the plan of units and marks, and the audio written so far."""

    def __init__(
        self,
        engine: Engine,
        limits: Limits,
        resolved: session_config.ResolvedSession,
        splitter: SentenceSplitter,
        request_id: str,
        delivery: pb.AudioDelivery = pb.AUDIO_DELIVERY_STREAM,
    ) -> None:
        self.engine = engine
        self.limits = limits
        self.resolved = resolved
        self.request_id = request_id
        self.encoder = resolved.settings.new_encoder()
        self.file_per_utterance = delivery == pb.AUDIO_DELIVERY_FILE_PER_UTTERANCE
        """Each utterance is encoded as a file of its own, not fed to the session's encoder."""
        self.samples_written = 0
        self.stage_warnings: set[tuple[str, str]] = set()
        """(code, field) of the stages' warnings already sent: one of each per session."""
        self.splitter = splitter
        self.plan: deque[PlanEntry] = deque()
        """What the writer has still to do, in order; units at its head are in the engine."""
        self.guess: Utterance | None = None
        """The tentative unit at the end of the plan, if any."""
        self.carry = resolved.model.text_carry
        self.carried = ""
        """The text-carry context after the last committed unit."""
        self._plan_changed = asyncio.Event()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._jobs: list[UtteranceJob] = []
        """Every admitted job not yet known to be released: given back at the end whatever happened."""
        self.input_chars = 0
        self.has_text = False
        self.utterance_index = 0
        self.session_samples = 0
        self.seconds_fed = 0.0
        """Audio of the session so far, in seconds at the output's speed: where the next utterance starts in its
        timeline (counted on the model's samples, so the resampler's delay does not shift word times)."""
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
            media_type=media_type(resolved.encoding, stream=self.encoder.stream and not self.file_per_utterance),
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
            self._stop_idle_timer()
            self._abort_units()
            for job in self._jobs:  # also those already taken off the plan but never read to the end
                if not job.released:
                    job.abort()

    # -- the reader half -------------------------------------------------------------

    async def _read(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> None:
        try:
            async for request in self._until_idle(requests):
                kind = request.WhichOneof("request")
                if kind == "text":
                    self._append(request.text.text)
                elif kind == "flush":
                    self._flush(request.flush.flush_id)
                elif kind == "clear":
                    self._clear()
                else:
                    raise StatusError(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        "config may be sent only once, as the first message" if kind == "config" else "empty message",
                        "UNEXPECTED_MESSAGE",
                    )
            if not self.has_text:
                self._instructions_only()
            self._flush(None)
            self._end_carry()
            self._push(_END)
        except StatusError as error:
            self._abort_units()
            self.plan.clear()
            await self._drain(requests)
            self._fail(error)
        except Exception:  # noqa: BLE001 - the writer must learn of it, or it would wait forever
            log.exception("reading session %s failed", self.request_id)
            self._fail(StatusError(grpc.StatusCode.INTERNAL, f"internal error in session {self.request_id}", "INTERNAL"))
        finally:
            self._stop_idle_timer()

    async def _drain(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> None:
        """Read and drop what the client is still sending, until it stops (DRAIN_QUIET_S without a message) or
        DRAIN_MAX_S have passed, before the call is ended: a client whose write races the end of its call gets
        gRPC's own INTERNAL "Internal error from Core" instead of the status that says what was wrong (grpc.aio
        replaces the call's status with it), as server/auth.py's finish_reading avoids for a refused config."""
        deadline = time.monotonic() + DRAIN_MAX_S
        messages = aiter(requests)
        with contextlib.suppress(Exception):
            while (left := deadline - time.monotonic()) > 0:
                await asyncio.wait_for(anext(messages), min(DRAIN_QUIET_S, left))

    async def _until_idle(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> AsyncIterator[pb.SynthesizeRequest]:
        """`requests`; DEADLINE_EXCEEDED if no text comes within session_idle_timeout_s of the config."""
        timeout = self.limits.session_idle_timeout_s
        deadline = time.monotonic() + timeout
        messages = aiter(requests)
        while True:
            try:
                if self.input_chars:
                    request = await anext(messages)
                else:
                    request = await asyncio.wait_for(anext(messages), max(deadline - time.monotonic(), 0.0))
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise StatusError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, f"no text within {timeout:g} s of the config", "IDLE_TIMEOUT"
                ) from None
            yield request

    def _append(self, text: str) -> None:
        self.input_chars += len(text)
        if self.input_chars > self.limits.max_input_chars:
            raise invalid_argument(
                "text",
                "INPUT_TOO_LONG",
                f"input is longer than {self.limits.max_input_chars} characters; split it over several sessions",
            )
        if self._buffered_chars() + len(text) > self.limits.max_buffered_chars:
            raise invalid_argument(
                "text",
                "BUFFER_FULL",
                f"more than {self.limits.max_buffered_chars} characters buffered; send a flush to synthesize them",
            )
        self.has_text = self.has_text or bool(text.strip())
        self._take_units(self.splitter.feed(text, time.monotonic()), "")
        self._arm_idle_timer()

    def _instructions_only(self) -> None:
        """A session without text: one empty unit where the model's instructions carry the content (AuK), else
        EMPTY_INPUT."""
        model = self.resolved.model
        if not model.capabilities.instructions_carry_text:
            raise invalid_argument("text", "EMPTY_INPUT", "input text is empty: send some text to synthesize")
        if not str(self.resolved.settings.params.get("instructions") or "").strip():
            raise invalid_argument(
                "text", "EMPTY_INPUT", f"input text and instructions are both empty: {model.name} takes its content from either"
            )
        self.splitter.clear()  # whitespace the caller sent is no unit
        self._take_units([TextUnit("", 0, 0)], "", final=True)

    def _buffered_chars(self) -> int:
        """Text received and not yet in the engine: the splitter's buffer and the units waiting their turn."""
        waiting = sum(len(e.text) for e in self.plan if isinstance(e, Utterance) and e.job is None and not e.tentative)
        return len(self.splitter.buffered) + waiting

    def _flush(self, flush_id: str | None) -> None:
        """Plan all buffered text now; with a flush id (a Flush message), answer it with FlushDone after its audio."""
        if flush_id is not None:
            if len(flush_id) > self.limits.max_flush_id_chars:
                raise invalid_argument(
                    "flush.flush_id", "FLUSH_ID_TOO_LONG", f"flush_id is longer than {self.limits.max_flush_id_chars} characters"
                )
            self._check_marks("flush")
        self._stop_idle_timer()
        self._take_units(self.splitter.flush(), flush_id or "", final=True)
        if flush_id is not None:
            self._push(_FlushMark(flush_id))

    def _clear(self) -> None:
        """Drop buffered text and every unit not yet spoken; keep the marks, so every Flush still gets its FlushDone."""
        self._check_marks("clear")
        self._stop_idle_timer()
        self.splitter.clear()
        marks = [entry for entry in self.plan if not isinstance(entry, Utterance)]
        self._abort_units()
        self.plan.clear()
        self.plan.extend(marks)
        self.guess = None
        self.carried = ""
        self._push(_CLEARED)

    def _check_marks(self, field: str) -> None:
        """Refuse one more Flush or Clear while too many wait to be answered: the client is not reading."""
        marks = sum(1 for entry in self.plan if isinstance(entry, _FlushMark | _ClearMark))
        if marks >= self.limits.max_pending_marks:
            raise invalid_argument(
                field,
                "TOO_MANY_PENDING",
                f"{marks} flushes and clears are still unanswered; read the responses before sending more",
            )

    def _check_plan(self) -> None:
        if len(self.plan) >= self.limits.max_plan_entries:
            raise invalid_argument(
                "text", "PLAN_FULL", f"{len(self.plan)} units and marks wait to be spoken; read the responses before sending more"
            )

    def _fail(self, error: StatusError) -> None:
        self._abort_units()
        self.plan.clear()
        self.guess = None
        self._push(error)

    def _take_units(self, units: list[TextUnit], flush_id: str, final: bool = False) -> None:
        """Plan the units the splitter completed, settling the guess first; then guess the next one (unless final)."""
        guess = self.guess
        if guess is not None:
            if units and units[0] == guess.unit:
                guess.tentative, guess.flush_id, guess.refused = False, flush_id, None  # right: it goes on as it is
                self.carried = guess.context_after
                units = units[1:]
                self.guess = None
            elif units or final or self.splitter.tentative() != guess.unit:
                self._drop_guess()
        for unit in units:
            self._check_plan()
            self.plan.append(self._carried(Utterance(unit, flush_id)))
            self.carried = self.plan[-1].context_after
        if self.guess is None and not final and (unit := self.splitter.tentative()) is not None:
            self.guess = self._carried(Utterance(unit, tentative=True))  # from the committed context; advances it once confirmed
            self.plan.append(self.guess)
        self._submit_ahead()
        self._plan_changed.set()

    def _carried(self, utterance: Utterance) -> Utterance:
        """`utterance` with its model text and the context after it, from the committed context."""
        if self.carry is None:
            utterance.model_text = utterance.text
        else:
            carried = self.carry.unit(self.carried, utterance.text)
            utterance.model_text, utterance.context_after = carried.text, carried.context
        return utterance

    def _end_carry(self) -> None:
        """The input is complete: refuse it if it left a tag open that must be closed (an unclosed <whisper>)."""
        if self.carry is not None:
            try:
                self.carry.end(self.carried)
            except RequestError as error:
                raise from_request_error(error) from error

    def _drop_guess(self) -> None:
        guess, self.guess = self.guess, None
        if guess is not None:
            if guess.job is not None:
                guess.job.abort()
            self.plan.remove(guess)

    def _push(self, entry: PlanEntry) -> None:
        self.plan.append(entry)
        self._plan_changed.set()

    def _submit_ahead(self) -> None:
        """Admit planned units into the engine, in order, while the session has fewer than max_units_in_flight there."""
        in_flight = sum(1 for e in self.plan if isinstance(e, Utterance) and e.job is not None)
        for entry in self.plan:
            if not isinstance(entry, Utterance) or entry.job is not None:
                continue
            if entry.refused is not None or in_flight >= self.limits.max_units_in_flight:
                return
            try:
                settings = self.resolved.settings
                entry.job = self.engine.submit(
                    self.resolved.model, entry.model_text, self.resolved.stage_input, self.request_id, settings.aligned_words,
                    settings.params.get("max_new_tokens"),
                )
                self._jobs = [job for job in self._jobs if not job.released] + [entry.job]
            except StatusError as error:
                if in_flight == 0:
                    entry.refused = error  # nothing of ours to wait for: the engine is full of other work
                return  # otherwise try again when one of ours is done
            in_flight += 1

    def _abort_units(self) -> None:
        for entry in self.plan:
            if isinstance(entry, Utterance) and entry.job is not None:
                entry.job.abort()

    def _arm_idle_timer(self) -> None:
        self._stop_idle_timer()
        deadline = self.splitter.idle_deadline()
        if deadline is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(max(0.0, deadline - time.monotonic()), self._idle_flush)

    def _stop_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_flush(self) -> None:
        self._idle_timer = None
        units = self.splitter.poll(time.monotonic())
        if units:
            try:
                self._take_units(units, "", final=True)
            except StatusError as error:
                self._fail(error)
        else:
            self._arm_idle_timer()  # woken a little early, or new text moved the deadline

    # -- the writer half -------------------------------------------------------------

    async def _write(self) -> AsyncIterator[pb.SynthesizeResponse]:
        while True:
            entry = await self._head()
            if isinstance(entry, StatusError):
                raise entry
            if entry is _END:
                break
            if isinstance(entry, _FlushMark):
                self._pop(entry)
                yield pb.SynthesizeResponse(flush_done=pb.FlushDone(flush_id=entry.flush_id))
                continue
            if entry is _CLEARED:
                self._pop(entry)
                yield pb.SynthesizeResponse(cleared=pb.Cleared())
                continue
            assert isinstance(entry, Utterance)
            if entry.tentative:
                self._plan_changed.clear()
                await self._plan_changed.wait()  # until the next text confirms or drops it
                continue
            if entry.job is None:
                self._submit_ahead()  # at the head, nothing of ours is in flight: admitted now, or refused
            if entry.refused is not None:
                raise entry.refused
            assert entry.job is not None
            async for response in self._speak(entry, entry.job):
                yield response
            self._pop(entry)
            self._submit_ahead()
        if not self.file_per_utterance:
            data, samples = self.encoder.finish()
            if self.encoder.streams_incrementally:
                offset = self.encoder.samples_out - samples  # the resampler's tail
            else:
                offset, samples = 0, self.encoder.samples_out  # the whole file
            for response in self._audio_messages(data, offset, samples, max(self.utterance_index - 1, 0), 0, ""):
                yield response
            self.samples_written = self.encoder.samples_out
        yield pb.SynthesizeResponse(
            session_done=pb.SessionDone(
                utterance_count=self.utterance_index,
                num_samples=self.samples_written,
                audio_seconds=self.samples_written / self.encoder.rate,
                usage=self.usage,
            )
        )

    async def _head(self) -> PlanEntry:
        while not self.plan:
            self._plan_changed.clear()
            await self._plan_changed.wait()
        return self.plan[0]

    def _pop(self, entry: PlanEntry) -> None:
        """Done with `entry`, unless a Clear or a failure has already removed it."""
        if self.plan and self.plan[0] is entry:
            self.plan.popleft()

    async def _speak(self, utterance: Utterance, job: UtteranceJob) -> AsyncIterator[pb.SynthesizeResponse]:
        index: int | None = None
        chunk_index = 0
        first_offset = self.encoder.samples_out
        own_file = self.resolved.settings.new_encoder(stream=False) if self.file_per_utterance else None
        held = bytearray()
        """The utterance's own file so far (PCM gives bytes at once; other encodings at finish)."""
        words = _HeldWords(self, utterance)
        async with contextlib.aclosing(job.audio()) as audio:
            async for samples in audio:
                if job.aborted:
                    break  # cleared: not one more chunk of it
                if isinstance(samples, WordTimes):
                    words.hold(samples)
                    continue
                for warning in self._stage_warnings(job.request):
                    yield warning
                if index is None:
                    index = self._next_index()
                words.index = index
                self.seconds_fed += len(samples) / self.resolved.model.capabilities.sample_rate / self.resolved.settings.speed
                self._check_audio_cap()
                words.received += len(samples)
                if own_file is not None:
                    held += own_file.feed(samples)[0]
                else:
                    data, count = self.encoder.feed(samples)
                    offset = self.encoder.samples_out - count
                    for response in self._audio_messages(data, offset, count, index, chunk_index, utterance.flush_id, utterance):
                        chunk_index += 1
                        yield response
                if own_file is None and (timings := words.spoken()) is not None:
                    yield timings  # (an utterance's own file goes whole at its end: its words after it)
        if job.aborted:
            return  # cleared: no UtteranceDone for audio nobody will hear
        if job.request.error is not None:
            raise job.request.error
        for warning in self._stage_warnings(job.request):  # an utterance with no audio at all
            yield warning
        if index is None:
            index = self._next_index()
        if own_file is None:
            data, count = self.encoder.end_utterance()  # the time-stretch's tail of this utterance
            if data or count:
                offset = self.encoder.samples_out - count
                for response in self._audio_messages(data, offset, count, index, chunk_index, utterance.flush_id, utterance):
                    chunk_index += 1
                    yield response
        num_samples = self.encoder.samples_out - first_offset
        if own_file is not None:
            held += own_file.finish()[0]
            num_samples = own_file.samples_out
            data = bytes(held)
            for response in self._audio_messages(data, self.samples_written, num_samples, index, 0, utterance.flush_id, utterance):
                yield response
            self.samples_written += num_samples
        words.index = index
        if (timings := words.spoken(everything=True)) is not None:
            yield timings
        if (untimed := words.untimed(utterance.model_text)) is not None:
            yield untimed
        stats = job.stats()
        audio_seconds = stats.samples / self.resolved.model.capabilities.sample_rate
        self.usage.output_tokens += stats.output_tokens
        self.usage.input_tokens += len(utterance.text)
        yield pb.SynthesizeResponse(
            utterance_done=pb.UtteranceDone(
                utterance_index=index,
                num_samples=num_samples,
                audio_seconds=audio_seconds,
                time_to_first_audio_seconds=stats.time_to_first_audio_s,
                real_time_factor=stats.synthesis_s / audio_seconds if audio_seconds else 0.0,
                usage=pb.Usage(input_tokens=len(utterance.text), output_tokens=stats.output_tokens),
                text_span=_span(utterance),
                flush_id=utterance.flush_id,
            )
        )

    def _check_audio_cap(self) -> None:
        cap = self.limits.max_audio_seconds
        if cap and self.seconds_fed > cap:
            raise StatusError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the session made more than {cap:g} s of audio, the most one session may (--max-audio-seconds): "
                "send less text, or split it over several requests",
                "AUDIO_TOO_LONG",
            )

    def _stage_warnings(self, request: SynthesisRequest) -> list[pb.SynthesizeResponse]:
        """The request's stage warnings not yet sent, once per code and field in the session (the first says what
        happened)."""
        responses = []
        sent = {(w.code, w.field) for w in self.resolved.warnings}
        for name, code, message in request.warnings:
            if (code, name) in sent or (code, name) in self.stage_warnings:
                continue
            self.stage_warnings.add((code, name))
            responses.append(pb.SynthesizeResponse(warning=pb.Warning(code=code, message=message, field=name)))
        return responses

    def _next_index(self) -> int:
        index = self.utterance_index
        self.utterance_index += 1
        return index

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


class _HeldWords:
    """Word times of the utterance being spoken, each held until its audio has been sent (a model may know them
    before: Piper does), then sent as WordTimings in the session's timeline and offsets into the session's text."""

    def __init__(self, session: Session, utterance: Utterance) -> None:
        self.start_s = session.seconds_fed
        self.seconds_per_sample = 1.0 / session.resolved.model.capabilities.sample_rate / session.resolved.settings.speed
        self.text_start = utterance.unit.start
        self.index = 0
        self.received = 0
        """Samples of the utterance sent so far, at the model's rate."""
        self.waiting: list[WordTime] = []
        self.asked = session.resolved.settings.word_timestamps
        self.timed: set[tuple[int, int]] = set()
        """(start, end) offsets into the utterance's text of every word timed."""
        self.not_timed: list[UntimedWord] = []
        """The words a stage said it could not time, with the reason."""

    def hold(self, times: WordTimes) -> None:
        self.waiting.extend(times.words)
        self.timed.update((w.char_start, w.char_end) for w in times.words)
        self.not_timed.extend(times.untimed)

    def untimed(self, text: str) -> pb.SynthesizeResponse | None:
        """A WORD_NOT_TIMED warning naming the words of the utterance's `text` (as the model was given it) that got
        no time, and why; None when word times were not asked for or every word has one."""
        if not self.asked:
            return None
        warning = untimed_warning(text, self.text_start, self.timed, self.not_timed)
        return None if warning is None else pb.SynthesizeResponse(warning=warning)

    def spoken(self, everything: bool = False) -> pb.SynthesizeResponse | None:
        """WordTimings of the waiting words whose audio has been sent (all of them at the utterance's end), or None."""
        ready = [w for w in self.waiting if everything or w.end_sample <= self.received]
        if not ready:
            return None
        self.waiting = [w for w in self.waiting if w not in ready]
        return pb.SynthesizeResponse(
            word_timings=pb.WordTimings(
                utterance_index=self.index,
                words=[
                    pb.WordTiming(
                        word=w.word,
                        start_ms=round((self.start_s + w.start_sample * self.seconds_per_sample) * 1000),
                        end_ms=round((self.start_s + w.end_sample * self.seconds_per_sample) * 1000),
                        text_span=pb.TextSpan(start=self.text_start + w.char_start, end=self.text_start + w.char_end),
                    )
                    for w in ready
                ],
            )
        )


def _span(utterance: Utterance) -> pb.TextSpan:
    return pb.TextSpan(start=utterance.unit.start, end=utterance.unit.end)
