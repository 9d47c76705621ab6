"""Every token family's prompt meets the same rule, the runtime's: one too long for the KV cache is refused as
InvalidField PROMPT_TOO_LONG (a 400 naming the text), never a family's own bare exception (a 500).

Each family's tiny checkpoint (tests/tiny_checkpoints.py) is loaded as the server loads it (`load_model`, its
autoregressive stage given a small max_len), asked for one long sentence through its adapter and pipeline, and the
request's error is read."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests import tiny_checkpoints as tiny
from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.registry import load_model
from vocalis.stages.runtime.prompt_room import PROMPT_TOO_LONG
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest

TESTS = Path(__file__).resolve().parents[2]
MAX_LEN = 48
LONG = " ".join("abcdefghij"[i % 10] for i in range(140))
"""One unit (under the splitter's 300 characters, no sentence mark) of 140 words: past 48 positions in any tokenizer."""


@dataclass(frozen=True)
class Family:
    checkpoint: Callable[[Path], Path]
    stage: str
    """Its autoregressive stage, as its deploy file names it."""
    clones: bool = False
    """It speaks only a cloned voice: the request carries a reference clip and its transcript."""
    fields: dict = field(default_factory=dict)


FAMILIES = {
    "qwen3_tts": Family(tiny.qwen3_tts, "talker"),
    "qwen3_tts-streaming": Family(tiny.qwen3_tts, "talker", fields={"extra_params": {"non_streaming_mode": False}}),
    "voxtral": Family(tiny.voxtral, "frame_generator"),
    "fish_speech": Family(tiny.fish_speech, "slow_ar"),
    "drama3": Family(tiny.drama3, "talker"),
    "gepard": Family(tiny.gepard, "gepard"),
    "higgs_audio_v2": Family(tiny.higgs_audio_v2, "talker"),
    "voxcpm2": Family(tiny.voxcpm2, "latent_generator"),
    "cosyvoice3": Family(tiny.cosyvoice3, "llm", clones=True),
    "glm_tts": Family(tiny.glm_tts, "llm", clones=True),
}


def reference() -> ReferenceAudio:
    rate = 16000
    t = np.arange(int(2.0 * rate)) / rate
    samples = (0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t)).astype(np.float32)
    return ReferenceAudio(samples, rate, text="a short prompt.")


class Closed:
    """The request's output: set when the pipeline ends it (with audio or an error)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def put_audio(self, samples) -> None: ...

    def put_words(self, words) -> None: ...

    def close(self, error=None) -> None:
        self.event.set()


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_prompt_past_the_cache_is_prompt_too_long_from_the_runtime(name, tmp_path):
    family = FAMILIES[name]
    overrides = json.dumps({family.stage: {"max_len": MAX_LEN, "kv_cache_bytes": 0}})
    model = load_model(str(family.checkpoint(tmp_path)), stage_overrides=overrides)
    try:
        fields = {"seed": 1, **family.fields}
        capabilities = model.capabilities
        preset = capabilities.default_voice or capabilities.voices[0]  # Voxtral has presets but no default
        params = RequestParams(model=model.name, voice="" if family.clones else preset, fields=fields,
                               reference=reference() if family.clones else None)
        output = Closed()
        request = SynthesisRequest(text=LONG, stage_input=model.adapter.stage_input(params), output=output)
        model.pipeline.submit(request)
        assert output.event.wait(120), "the request never ended"
    finally:
        model.close()
    error = request.error
    assert isinstance(error, InvalidField), f"{type(error).__name__}: {error}"
    assert (error.field, error.reason) == ("text", PROMPT_TOO_LONG) and f"cache holds {MAX_LEN}" in error.message, error.message


def test_the_table_covers_every_token_family():
    """Every family with an autoregressive stage (a `max_len` in its deploy file) is in the table above."""
    families = TESTS.parent / "stages" / "models"
    token = {path.parent.name for path in families.glob("*/deploy.yaml") if "max_len" in path.read_text() and not path.parent.name.startswith("_")}
    assert token == {name.split("-")[0] for name in FAMILIES}
