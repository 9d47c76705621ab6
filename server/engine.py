"""Admission and dispatch: from a validated utterance to the audio its model's pipeline makes.

The engine owns the loaded models. It bounds how much work each model may hold
(RESOURCE_EXHAUSTED beyond it, never an unbounded queue), hands utterances to the
pipeline, and cancels them in the pipeline the moment their caller goes away.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import numpy as np

from vocalis.server.errors import StatusError
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.request import SynthesisRequest


@dataclass
class UtteranceStats:
    """Timing and size of one finished utterance, at the model's rate."""

    samples: int
    output_tokens: int
    time_to_first_audio_s: float
    synthesis_s: float


class UtteranceJob:
    """One utterance in flight: iterate it for float32 audio; abort() stops it at once."""

    def __init__(self, engine: Engine, model: LoadedModel, request: SynthesisRequest) -> None:
        self._engine = engine
        self._model = model
        self.request = request
        self.aborted = False
        """Set by abort(): the caller dropped this utterance (a Clear, a disconnect)."""
        self._released = False

    async def audio(self) -> AsyncIterator[np.ndarray]:
        try:
            async for samples in self.request.output:
                yield samples
        finally:
            self._release()
        if not self.aborted and self._engine.on_utterance is not None:
            self._engine.on_utterance(self._model, self.stats())

    def abort(self) -> None:
        """Drop the utterance: the pipeline frees it at its next step and the reader stops now."""
        self.aborted = True
        self.request.cancel()
        self.request.output.close()
        self._release()

    @property
    def released(self) -> bool:
        """Whether its admission slot has been given back (read to the end, or aborted)."""
        return self._released

    def stats(self) -> UtteranceStats:
        request = self.request
        end = request.finished_at or time.monotonic()
        first = request.first_audio_at or end
        return UtteranceStats(
            samples=request.samples_emitted,
            output_tokens=request.output_tokens,
            time_to_first_audio_s=first - request.created_at,
            synthesis_s=end - request.created_at,
        )

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self.request.cancel()  # no-op for a finished request; frees an abandoned one
            self._engine._outstanding[self._model.name] -= 1


class Engine:
    """The loaded models and the admission rule in front of their pipelines."""

    def __init__(self, models: list[LoadedModel], max_queued_requests: int, retry_after_s: int = 1) -> None:
        if not models:
            raise ValueError("the engine needs at least one model")
        self.models = {model.name: model for model in models}
        self.default_model = models[0].name
        self.max_queued_requests = max_queued_requests
        self.retry_after_s = retry_after_s
        self._outstanding = {model.name: 0 for model in models}
        self.on_utterance: Callable[[LoadedModel, UtteranceStats], None] | None = None
        """Called when an utterance has produced all of its audio (metrics)."""

    def model(self, name: str) -> LoadedModel:
        """The model called `name` ("" for the default); NOT_FOUND otherwise."""
        if not name:
            return self.models[self.default_model]
        for candidate in self.models.values():
            if name.lower() in (served.lower() for served in candidate.served_names):
                return candidate
        served = [served for model in self.models.values() for served in model.served_names]
        raise StatusError(
            grpc.StatusCode.NOT_FOUND,
            f"unknown model {name!r}; this server has: {', '.join(served)}",
            "UNKNOWN_MODEL",
            field="model",
        )

    def submit(
        self, model: LoadedModel, text: str, stage_input: object, request_id: str, word_times: bool = False,
        max_new_tokens: int | None = None,
    ) -> UtteranceJob:
        """Admit one utterance into `model`'s pipeline, or raise RESOURCE_EXHAUSTED. `word_times`: have the
        model's forced aligner time its words (a model that times its own is told so by its stage input);
        `max_new_tokens`: the caller's, when it set one (a stage that caps it says so)."""
        if self._outstanding[model.name] >= self.max_queued_requests:
            raise StatusError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"model {model.name} is busy ({self.max_queued_requests} requests queued); retry shortly",
                "QUEUE_FULL",
                metadata={"retry_after_s": str(self.retry_after_s)},
            )
        request = SynthesisRequest(text=text, stage_input=stage_input, output=AudioOutput(), request_id=request_id,
                                   max_new_tokens=max_new_tokens)
        if word_times and model.aligner is not None:
            model.aligner.attach(request)
        self._outstanding[model.name] += 1
        model.pipeline.submit(request)
        return UtteranceJob(self, model, request)

    def outstanding(self, model: LoadedModel) -> int:
        return self._outstanding[model.name]

    def close(self) -> None:
        for model in self.models.values():
            model.close()
