"""Loading a Piper voice (an ONNX VITS model and its .onnx.json) into a ready object."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import onnxruntime
from piper import PiperVoice
from piper.config import PiperConfig

log = logging.getLogger(__name__)


@dataclass
class LoadedPiperVoice:
    """A Piper voice with its sessions, ready to synthesize."""

    name: str
    """Voice name, from the model file name (e.g. "en_US-joe-medium")."""
    voice: PiperVoice
    """Piper's own voice object: phonemizer, id map and the stock ONNX session."""
    model_path: Path
    sample_rate: int
    language: str
    """Language code from the voice config (e.g. "en_US")."""
    seeded: object | None
    """A session whose noise comes from seeds (SeededNoiseSession), or None without the onnx package."""

    @property
    def config(self) -> PiperConfig:
        return self.voice.config


def session_options(intra_op_threads: int) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    if intra_op_threads > 0:
        options.intra_op_num_threads = intra_op_threads
    options.log_severity_level = 3
    return options


def load(model_path: Path, config_path: Path | None = None, intra_op_threads: int = 0) -> LoadedPiperVoice:
    """Load the voice at `model_path` (config beside it as `<model>.json` unless given)."""
    config_path = config_path or model_path.with_name(model_path.name + ".json")
    config_dict = json.loads(config_path.read_text(encoding="utf-8"))
    options = session_options(intra_op_threads)
    session = onnxruntime.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
    voice = PiperVoice(session=session, config=PiperConfig.from_dict(config_dict))
    language = config_dict.get("language", {}).get("code") or voice.config.espeak_voice
    return LoadedPiperVoice(
        name=model_path.name.removesuffix(".onnx"),
        voice=voice,
        model_path=model_path,
        sample_rate=voice.config.sample_rate,
        language=language,
        seeded=_load_seeded(model_path, intra_op_threads),
    )


def _load_seeded(model_path: Path, intra_op_threads: int) -> object | None:
    try:
        from vocalis.stages.models.piper.seeded_noise import SeededNoiseSession
    except ImportError:
        log.warning("the onnx package is missing: Piper requests with a seed will be refused")
        return None
    return SeededNoiseSession.load(model_path, session_options(intra_op_threads))
