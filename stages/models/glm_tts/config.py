"""The sizes of a GLM-TTS checkpoint, read as data from its own files: `llm/config.json` (a transformers Llama config),
`flow/config.yaml` (HyperPyYAML, parsed without importing what it names) and the fixed vocoder of the published code
(HiFT at 24 kHz, CosyVoice2's sizes; the checkpoint carries no config for it). Detection: the published file set,
since the directory has no top-level config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.api.hyperpyyaml import CLASS_KEY, load_hyperpyyaml

LLM_DIR = "llm"
TOKENIZER_DIR = "vq32k-phoneme-tokenizer"
SPEECH_TOKENIZER_DIR = "speech_tokenizer"
FILE_SET = (f"{LLM_DIR}/config.json", "flow/flow.pt", "flow/config.yaml", f"{SPEECH_TOKENIZER_DIR}/config.json",
            "frontend/campplus.onnx", f"{TOKENIZER_DIR}/tokenizer.model")
"""What a published GLM-TTS directory holds; a directory with all of it is GLM-TTS. The vocoder (hift/ or vocos2d/)
is left out of detection so that a Vocos2D-only directory is recognised, and refused at load with the reason."""
HIFT_FILE = "hift/hift.pt"
VOCOS_FILE = "vocos2d/generator_jit.ckpt"
SAMPLE_RATE = 24000


@dataclass(frozen=True)
class LlamaConfig(DecoderSizes):
    """llm/config.json."""

    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LlamaConfig:
        return cls.read(data, f"{LLM_DIR}/config.json")


@dataclass(frozen=True)
class FlowConfig:
    """`flow` of flow/config.yaml (the published `Flow`'s arguments, at its defaults when absent)."""

    speech_token_dim: int = 512
    vocab_size: int = 100000
    input_frame_rate: float = 12.5
    spk_embed_dim: int = 80
    mel_dim: int = 80
    big_model: bool = False
    spkr_emb_adaLN: bool = False
    speech_token_cfg: bool = True
    use_wavlm_emb: bool = False
    remove_spkr_concat_condition: bool = False
    t_scheduler: str = "cosine"
    mel_framerate: int = 86
    # The DiT's sizes: fixed by `big_model` in the published code; a tiny checkpoint's yaml may override them.
    trans_dim: int | None = None
    depth: int | None = None
    heads: int | None = None
    dim_head: int = 64
    ff_mult: float = 2
    conv_layers: int = 4
    inference_cfg_rate: float = 0.7

    @property
    def dit(self) -> dict[str, Any]:
        return {
            "trans_dim": self.trans_dim or (1024 if self.big_model else 768), "depth": self.depth or (22 if self.big_model else 18),
            "heads": self.heads or (16 if self.big_model else 12), "dim_head": self.dim_head, "ff_mult": self.ff_mult,
            "text_emb_dim": self.speech_token_dim, "conv_layers": self.conv_layers, "mel_dim": self.mel_dim,
            "text_vocab_size": self.vocab_size,
            "condition_dim": self.mel_dim if self.remove_spkr_concat_condition else self.mel_dim + self.spk_embed_dim,
            "spkr_dim": (192 + (256 if self.use_wavlm_emb else 0)) if self.spkr_emb_adaLN else 0,
        }


HIFT = {
    "in_channels": 80, "base_channels": 512, "nb_harmonics": 8, "sampling_rate": SAMPLE_RATE, "nsf_alpha": 0.1, "nsf_sigma": 0.003,
    "nsf_voiced_threshold": 10, "upsample_rates": [8, 5, 3], "upsample_kernel_sizes": [16, 11, 7],
    "istft_params": {"n_fft": 16, "hop_len": 4}, "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "source_resblock_kernel_sizes": [7, 7, 11],
    "source_resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "lrelu_slope": 0.1, "audio_limit": 0.99,
}
"""The published HiFT (CosyVoice2's HiFTGenerator at 24 kHz), built in code upstream. Its widths (`base_channels`, the
F0 predictor's channels) are read from hift.pt's tensor shapes at load, so a shrunk checkpoint needs no extra file."""


@dataclass(frozen=True)
class GLMTTSConfig:
    llama: LlamaConfig
    flow: FlowConfig
    hift: dict[str, Any]
    sample_rate: int = SAMPLE_RATE
    min_token_text_ratio: float = 2.0
    max_token_text_ratio: float = 20.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def token_mel_ratio(self) -> int:
        ratio = self.flow.mel_framerate / self.flow.input_frame_rate
        if ratio != int(ratio):
            raise ValueError(f"flow/config.yaml: mel_framerate {self.flow.mel_framerate} is not a whole multiple of "
                             f"input_frame_rate {self.flow.input_frame_rate}; streaming needs whole mel frames per token")
        return int(ratio)

    @property
    def samples_per_token(self) -> int:
        return int(self.sample_rate / self.flow.input_frame_rate)

    @classmethod
    def from_dir(cls, path: Path) -> GLMTTSConfig:
        """llm/config.json and flow/config.yaml of a checkpoint directory."""
        path = Path(path)
        flow_yaml = path / "flow" / "config.yaml"
        if not flow_yaml.is_file():
            raise ValueError(f"{path} has no flow/config.yaml: is it a GLM-TTS checkpoint?")
        flow = load_hyperpyyaml(flow_yaml).get("flow")
        if not isinstance(flow, dict):
            raise ValueError(f"{flow_yaml}: no `flow` section")
        llm_config = path / LLM_DIR / "config.json"
        data = json.loads(llm_config.read_text())
        if data.get("model_type", "llama") != "llama":
            raise ValueError(f"{llm_config}: model_type {data.get('model_type')!r}; GLM-TTS's LM is a Llama")
        scaling = data.get("rope_scaling")
        if scaling and (scaling.get("rope_type") or scaling.get("type")) not in ("default", None):
            raise ValueError(f"{llm_config}: rope_scaling {scaling} is not supported (the published GLM-TTS has none)")
        return cls(
            llama=LlamaConfig.from_dict(data), flow=from_json(FlowConfig, {k: v for k, v in flow.items() if k != CLASS_KEY}),
            hift=dict(HIFT),
        )


def is_glm_tts_dir(path: Path) -> bool:
    return all((path / name).exists() for name in FILE_SET)
