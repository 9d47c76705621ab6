"""The warm-up before SERVING (server/warmup.py): a model whose defaults do not make a request is warmed up with the
fields it declares (`Capabilities.warmup_fields`: AuK, which must be told a duration), not skipped; a token model's
warm-up is capped (WARMUP_MAX_NEW_TOKENS), whether or not the model stops on its own."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from vocalis.server.engine import Engine
from vocalis.server.warmup import WARMUP_MAX_NEW_TOKENS, warm_up
from vocalis.stages.models.registry import load_model

GOLDENS = Path(__file__).resolve().parents[1] / "goldens"
AUK = GOLDENS / "auk" / "tiny"
QWEN3 = GOLDENS / "qwen3_tts" / "cv-0b6"
QWEN3_SAMPLES_PER_FRAME = 1920  # 24 kHz at 12.5 frames a second


def warmed_up(model, caplog) -> tuple[list, list[int]]:
    """The stage inputs the warm-up submitted and the lengths of the audio chunks it got back."""
    engine = Engine([model], max_queued_requests=4)
    submitted, samples = [], []
    submit = engine.submit

    def recording_submit(model, text, stage_input, *args, **kwargs):
        submitted.append(stage_input)
        job = submit(model, text, stage_input, *args, **kwargs)
        audio = job.audio

        async def counted():
            async for chunk in audio():
                samples.append(len(chunk))
                yield chunk

        job.audio = counted
        return job

    engine.submit = recording_submit
    try:
        with caplog.at_level(logging.INFO, logger="vocalis.server.warmup"):
            asyncio.run(warm_up(engine))
    finally:
        engine.close()
    assert f"warmed up {model.name}" in caplog.text and "no warm-up" not in caplog.text, caplog.text
    return submitted, samples


def test_auk_is_warmed_up_with_its_declared_duration(caplog):
    model = load_model(str(AUK))
    submitted, samples = warmed_up(model, caplog)
    assert model.family == "auk" and f"warmed up {model.name}" in caplog.text and "no warm-up" not in caplog.text, caplog.text
    assert [s.duration_seconds for s in submitted] == [1.0]
    assert sum(samples) == model.capabilities.sample_rate  # one second of audio went through every stage


def test_a_token_models_warm_up_is_capped(caplog):
    """The tiny Qwen3-TTS never says stop: without the cap its warm-up would fill the deployed 4096-position cache."""
    model = load_model(str(QWEN3))
    _, samples = warmed_up(model, caplog)
    assert 0 < sum(samples) <= WARMUP_MAX_NEW_TOKENS * QWEN3_SAMPLES_PER_FRAME, sum(samples)
