"""Warm a freshly loaded model up with one short utterance before the server reports SERVING.

Every family warms up, decided here once: the warm-up request is the model's defaults, plus what the model says it
needs (`Capabilities.warmup_fields`, a description for a model whose `instructions` are required, its first preset
when it has no default voice), and, for a model that only speaks a cloned voice, a synthetic reference clip. A token
model's warm-up is capped at WARMUP_MAX_NEW_TOKENS.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from vocalis.server.engine import Engine
from vocalis.stages.api.errors import RequestError
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

log = logging.getLogger(__name__)
WARMUP_TEXT = "Hello."
WARMUP_INSTRUCTIONS = "A calm, clear voice."
WARMUP_MAX_NEW_TOKENS = 64
"""A token model's warm-up ends here at the latest: enough frames for every stage's first chunks, and a model that
does not stop on its own (random weights, a broken checkpoint) cannot hold the start-up for its whole cache."""
REFERENCE_RATE = 16000
REFERENCE_SECONDS = 3.0


def warmup_reference() -> ReferenceAudio:
    """A voice-like clip to clone from (a harmonic tone with a syllable rhythm): it exercises the reference encoders."""
    t = np.arange(int(REFERENCE_RATE * REFERENCE_SECONDS)) / REFERENCE_RATE
    pitch = 140 + 20 * np.sin(2 * np.pi * 0.5 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / REFERENCE_RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 4 * t))  # four "syllables" a second
    samples = (0.2 * voiced * envelope / np.abs(voiced).max()).astype(np.float32)
    return ReferenceAudio(samples=samples, sample_rate=REFERENCE_RATE, text="Hello there, this is a test.")


def warmup_params(model: LoadedModel) -> list[RequestParams]:
    """The warm-up requests to try, in order: without a reference, then (for a cloning model) with one."""
    capabilities = model.capabilities
    voice = model.adapter.resolve_voice("") or (capabilities.voices[0] if capabilities.voices else "")
    fields = dict(capabilities.warmup_fields)
    if "max_new_tokens" in capabilities.accepted_fields:
        fields.setdefault("max_new_tokens", WARMUP_MAX_NEW_TOKENS)
    if "instructions" in capabilities.required_fields:
        fields.setdefault("instructions", WARMUP_INSTRUCTIONS)
    tries = [RequestParams(model=model.name, voice=voice, fields=dict(fields))]
    if capabilities.voice_cloning:
        tries.append(RequestParams(model=model.name, voice=voice, fields=dict(fields), reference=warmup_reference()))
    return tries


async def warm_up(engine: Engine) -> None:
    """Run WARMUP_TEXT through every model (see the module docstring); a model that refuses every warm-up request is
    skipped, with the reason logged."""
    for model in engine.models.values():
        stage_input, refusal = None, None
        try:
            tries = warmup_params(model)
        except RequestError as error:  # no voice to speak with by default
            tries, refusal = [], error
        for params in tries:
            try:
                stage_input = model.adapter.stage_input(params)
                break
            except RequestError as error:
                refusal = error
        if stage_input is None:
            log.info("no warm-up for %s: %s", model.name, refusal)
            continue
        started = time.monotonic()
        job = engine.submit(model, WARMUP_TEXT, stage_input, "warm-up")
        try:
            async for _ in job.audio():
                pass
        except Exception as error:  # noqa: BLE001 - a warm-up failure is logged, not fatal
            log.warning("warm-up of %s failed: %s", model.name, error)
            continue
        log.info("warmed up %s in %.2f s", model.name, time.monotonic() - started)
