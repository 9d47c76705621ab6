"""A test family whose sentences are pure tones and whose last sentence waits for the test.

Serve a directory holding config.json `{"model_type": "gated_tts"}` with `--family-module
tests.gated_tts.family`. Each sentence becomes TONE_SECONDS of a sine (its frequency from
config.json, 220 Hz by default). A sentence that contains GATE_WORD is synthesized only once
the file `gate` exists in the checkpoint directory, so a test can prove that audio left the
server before the last sentence was made: it opens the gate only after the first bytes
arrived. Past GATE_TIMEOUT_S the sentence goes ahead anyway and leaves `gate-timed-out`
behind, so a server that holds the audio back fails the test instead of hanging it.
No torch: the family runs on the Piper-only install too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from vocalis.stages.api.errors import UnknownVoice
from vocalis.stages.api.family import ModelFamily
from vocalis.stages.api.model import Capabilities, LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest
from vocalis.stages.runtime.utterance import UtteranceStage

MODEL_TYPE = "gated_tts"
VOICE = "tone"
RATE = 24000
TONE_SECONDS = 0.5
GATE_WORD = "Last"
GATE_TIMEOUT_S = 20.0


def write_checkpoint(directory: Path, frequency: float = 220.0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"model_type": MODEL_TYPE, "frequency": frequency}))
    return directory


class GatedTones:
    def __init__(self, directory: Path, frequency: float) -> None:
        self.gate = directory / "gate"
        self.timed_out = directory / "gate-timed-out"
        self.frequency = frequency

    def synthesize(self, request: SynthesisRequest, payload: None) -> Iterator[np.ndarray]:
        if GATE_WORD in request.text:
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not self.gate.exists() and not request.cancelled:
                if time.monotonic() > deadline:
                    self.timed_out.touch()
                    break
                time.sleep(0.01)
        t = np.arange(int(RATE * TONE_SECONDS)) / RATE
        yield (0.4 * np.sin(2 * np.pi * self.frequency * t)).astype(np.float32)


class ToneAdapter:
    capabilities = Capabilities(sample_rate=RATE, voices=(VOICE,), default_voice=VOICE, accepted_fields=frozenset())

    def resolve_voice(self, voice: str) -> str:
        if voice not in ("", VOICE):
            raise UnknownVoice(voice, [VOICE])
        return VOICE

    def stage_input(self, params: RequestParams) -> None:
        return None


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    frequency = float(json.loads((path / "config.json").read_text()).get("frequency", 220.0))
    stage = UtteranceStage("tones", GatedTones(path, frequency))
    adapter = ToneAdapter()
    return LoadedModel(name=path.name, family=MODEL_TYPE, capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline([stage]))


FAMILY = ModelFamily(name=MODEL_TYPE, model_types=(MODEL_TYPE,), deploy_defaults=Path(__file__).with_name("deploy.yaml"), load=load)
