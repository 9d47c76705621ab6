"""The sizes of a CosyVoice3 checkpoint, read as data from its own files: `cosyvoice3.yaml` (HyperPyYAML, parsed
without importing anything it names) for the LM head, flow decoder and vocoder, `CosyVoice-BlankEN/config.json` for
the Qwen2 LM. Detection: a `config.json` with `model_type: cosyvoice3` (vLLM-Omni's), or the published file set."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.api.hyperpyyaml import CLASS_KEY, load_hyperpyyaml
from vocalis.stages.models.cosyvoice_common.ras_params import RASParams

MODEL_TYPE = "cosyvoice3"
YAML = "cosyvoice3.yaml"
QWEN_DIR = "CosyVoice-BlankEN"
FILE_SET = (YAML, "llm.pt", "flow.pt", "hift.pt", "campplus.onnx", "speech_tokenizer_v3.onnx", QWEN_DIR)
"""What a published CosyVoice3 directory holds; a directory with all of it is CosyVoice3 even without config.json."""


@dataclass(frozen=True)
class Qwen2Config(DecoderSizes):
    """CosyVoice-BlankEN/config.json (the LM's transformer; head_dim implied by `DecoderSizes.read`)."""

    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool


@dataclass(frozen=True)
class LMConfig:
    """`llm` of the yaml: speech tokens and the sampler (`sampling`, the published `ras_sampling` arguments)."""

    speech_token_size: int
    llm_input_size: int
    llm_output_size: int
    sampling: RASParams
    stop_tokens: int = 200
    """Ids speech_token_size .. speech_token_size + stop_tokens - 1 are sos, eos, task id, fill and other stops."""
    min_token_text_ratio: float = 2.0
    max_token_text_ratio: float = 20.0

    @property
    def sos(self) -> int:
        return self.speech_token_size

    @property
    def task_id(self) -> int:
        return self.speech_token_size + 2


@dataclass(frozen=True)
class CosyVoice3Config:
    qwen: Qwen2Config
    lm: LMConfig
    flow: dict[str, Any]
    """`flow` of the yaml, nested dicts with their `__class__`."""
    hift: dict[str, Any]
    sample_rate: int = 24000
    token_frame_rate: int = 25
    token_mel_ratio: int = 2
    n_timesteps: int = 10
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mel(self) -> dict[str, Any]:
        """The prompt mel's STFT settings (the yaml's `feat_extractor`), at the published defaults when absent."""
        defaults = {"n_fft": 1920, "num_mels": 80, "hop_size": 480, "win_size": 1920, "fmin": 0, "fmax": None, "center": False}
        found = self.extra.get("feat_extractor") or {}
        return defaults | {k: v for k, v in found.items() if k in defaults}

    @property
    def samples_per_token(self) -> int:
        return self.sample_rate // self.token_frame_rate

    @classmethod
    def from_dir(cls, path: Path) -> CosyVoice3Config:
        """cosyvoice3.yaml and CosyVoice-BlankEN/config.json of a checkpoint directory."""
        yaml_path = path / YAML
        if not yaml_path.is_file():
            raise ValueError(f"{path} has no {YAML}: is it a CosyVoice3 checkpoint?")
        data = load_hyperpyyaml(yaml_path)
        for key in ("llm", "flow", "hift"):
            if not isinstance(data.get(key), dict):
                raise ValueError(f"{yaml_path}: no `{key}` section")
        llm = data["llm"]
        sampling = from_json(RASParams, _without_class(llm.get("sampling") or {}), where="llm.sampling")
        lm = from_json(LMConfig, _without_class(llm), where="llm", sampling=sampling)
        qwen_config = path / QWEN_DIR / "config.json"
        if not qwen_config.is_file():
            raise ValueError(f"{path} has no {QWEN_DIR}/config.json: the LM's sizes are read from it")
        qwen = Qwen2Config.read(json.loads(qwen_config.read_text()), f"{QWEN_DIR}/config.json")
        flow = data["flow"]
        return cls(
            qwen=qwen, lm=lm, flow=flow, hift=data["hift"], sample_rate=int(data.get("sample_rate", 24000)),
            token_frame_rate=int(data.get("token_frame_rate", flow.get("input_frame_rate", 25))),
            token_mel_ratio=int(flow.get("token_mel_ratio", 2)), extra=data,
        )


def is_cosyvoice3_dir(path: Path) -> bool:
    config = path / "config.json"
    if config.is_file():
        return json.loads(config.read_text()).get("model_type") == MODEL_TYPE
    return all((path / name).exists() for name in FILE_SET)


def _without_class(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != CLASS_KEY}
