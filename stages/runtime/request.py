"""The state of one synthesis as it passes the stages of a pipeline."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.text.word_times import UntimedWord, WordTime


@dataclass(frozen=True)
class ReferenceAudio:
    """A voice to clone, already resolved by the server: decoded audio, its transcript, artifacts.

    It comes from a request's `ref_audio` (+ `ref_text`) or from a stored voice (uploaded or
    precomputed); adapters never fetch or decode anything themselves.
    """

    samples: Any
    """Mono float32 numpy array (may be empty when only artifacts are known)."""
    sample_rate: int
    text: str | None = None
    """Transcript of the clip, when known."""
    name: str | None = None
    """Name of the stored voice it came from; None for an inline reference."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    """Precomputed per-model artifacts (e.g. a speaker embedding, reference codes), by key."""


@dataclass
class RequestParams:
    """A validated, transport-free view of what the caller asked for.

    Only the fields the caller set are present in `fields`; a model adapter decides
    which of them it honours and turns them into stage-0 input.
    """

    model: str
    voice: str
    """The resolved preset voice name, or "" when the voice is a reference to clone."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Set request fields by proto field name (speed, seed, language, ref_text, extra_params, ...);
    `ref_audio` is not among them: the server resolves it into `reference`."""
    reference: ReferenceAudio | None = None
    """The voice to clone, from `ref_audio` or a stored voice."""
    more_references: list[ReferenceAudio] = field(default_factory=list)
    """Further voices to clone after `reference` (`more_references`), for a model whose prompt takes several."""
    warnings: list[tuple[str, str, str]] = field(default_factory=list)
    """(field, code, message) an adapter reports about a request it serves all the same (a reference clip outside
    the model's recommended length, an input taken in another role, a setting the checkpoint overrides); the server
    passes them on as the session's warnings."""
    streamed: bool = True
    """Whether the caller hears the audio as it is made (False: it gets a complete file per request or
    utterance, so a family may treat an utterance's audio as a whole, as OmniVoice levels its loudness)."""


InputT = TypeVar("InputT")
"""A family's stage-0 input type (what its adapter makes of a request)."""


@dataclass
class SynthesisRequest(Generic[InputT]):
    """One utterance's journey through a pipeline: input, output stream, timing, cancellation."""

    text: str
    stage_input: InputT
    """What the model's adapter made of the request for stage 0."""
    output: AudioOutput
    """Where audio goes; safe to call from any stage thread."""
    max_new_tokens: int | None = None
    """The caller's own max_new_tokens, None when it set none: an autoregressive stage whose cache ends generation
    sooner says so (MAX_NEW_TOKENS_CAPPED), while a model's default is capped silently."""
    prepared: Any = None
    """What a PrepareStage computed from `stage_input` on its own thread (an encoded reference clip), for
    the stages after it; None when the pipeline has no PrepareStage or the request needed nothing."""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    """When the first stage took it off its inbox."""
    first_audio_at: float | None = None
    finished_at: float | None = None
    samples_emitted: int = 0
    output_tokens: int = 0
    """Tokens or frames the model generated (usage)."""
    stage_first_output_at: dict[str, float] = field(default_factory=dict)
    """When each stage first produced something for this request (for metrics and tests)."""
    error: BaseException | None = None
    warnings: list[tuple[str, str, str]] = field(default_factory=list)
    """(field, code, message) of what stages did to the request that the caller should know (see `warn`)."""
    kept_audio: list[Any] | None = None
    """The audio emitted so far, kept for a stage that runs after the last one (the forced aligner); None: not kept."""
    on_audio: Callable[[SynthesisRequest], None] | None = None
    """Called after each piece of audio is kept (the forced aligner starts on it at once)."""
    after_audio: Callable[[SynthesisRequest], None] | None = None
    """Called (once) instead of ending the output when the last stage finishes the request; it ends it itself later."""
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _on_cancel: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def cancel(self) -> None:
        """Ask every stage to drop this request at its next step, and wake the stages that wait for more input (an
        idle stage would otherwise hold a cancelled request until other work arrives)."""
        first = not self._cancelled.is_set()
        self._cancelled.set()
        if first:
            for callback in self._on_cancel:
                callback()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from the cancelling thread, cheaply) when the request is cancelled."""
        self._on_cancel.append(callback)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def closed(self) -> bool:
        """Cancelled or failed: stages should drop it."""
        return self._cancelled.is_set() or self.error is not None

    def mark_stage_output(self, stage: str) -> None:
        self.stage_first_output_at.setdefault(stage, time.monotonic())

    def emit(self, samples: Any) -> None:
        """Send float32 samples at the model's rate to the caller."""
        if self.cancelled or len(samples) == 0:
            return
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        self.samples_emitted += len(samples)
        if self.kept_audio is not None:
            self.kept_audio.append(np.asarray(samples, dtype=np.float32))
            if self.on_audio is not None:
                self.on_audio(self)
        self.output.put_audio(samples)

    def emit_words(self, words: list[WordTime], untimed: list[UntimedWord] | None = None) -> None:
        """Send the times of some words of this utterance to the caller (any thread), and the words that could not
        be timed with the reason. They may come before the audio they describe: the server holds each until its
        audio has been sent."""
        if self.cancelled or not (words or untimed):
            return
        self.output.put_words(words, untimed)

    def warn(self, field: str, code: str, message: str) -> None:
        """Tell the caller about something a stage did to this request (any thread): the server sends it before the
        next audio of the request it reads (a stage warns before it hands on the frames that audio comes from)."""
        self.warnings.append((field, code, message))

    def finish(self) -> None:
        if self.after_audio is not None:
            hand_over, self.after_audio = self.after_audio, None
            hand_over(self)
            return
        self.finished_at = time.monotonic()
        self.output.close()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.finished_at = time.monotonic()
        self.output.close(error)
