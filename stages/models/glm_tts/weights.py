"""GLM-TTS's modules built from its config and loaded strictly: `llm/` (safetensors, HF Llama names), `flow/flow.pt`
and `hift/hift.pt` (pickled state dicts read with weights_only=True; flow.pt may nest them under "model", as the
published loader accepts; hift's weight-normed convolutions folded). HiFT's widths come from its tensors' shapes."""

from __future__ import annotations

from pathlib import Path

import torch

from vocalis.stages.components.hift import ConvRNNF0Predictor, HiFTGenerator
from vocalis.stages.layers.weights import SafetensorsReader, Weights, build_empty, fold_weight_norm, load_strict
from vocalis.stages.models.cosyvoice_common.glm_dit import GLMDiT, GLMFlow
from vocalis.stages.models.cosyvoice_common.loaded_modules import LoadedModules
from vocalis.stages.models.glm_tts.config import HIFT_FILE, LLM_DIR, TOKENIZER_DIR, VOCOS_FILE, GLMTTSConfig
from vocalis.stages.models.glm_tts.lm import TIED_HEAD_KEYS, GLMSpeechLM
from vocalis.stages.models.glm_tts.tokenizer import GLMTokenizer

ROTARY_KEY = "estimator.rotary_embed.inv_freq"


GLMTTSModules = LoadedModules[GLMTTSConfig, GLMSpeechLM, GLMFlow, HiFTGenerator, GLMTokenizer]


def read_pt(path: Path) -> Weights:
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return dict(state)


def build_flow(config: GLMTTSConfig) -> GLMFlow:
    f = config.flow
    return GLMFlow(GLMDiT(**f.dit), mel_dim=f.mel_dim, spk_embed_dim=f.spk_embed_dim, token_mel_ratio=config.token_mel_ratio,
                   speaker_concat=not f.remove_spkr_concat_condition, speech_token_cfg=f.speech_token_cfg,
                   inference_cfg_rate=f.inference_cfg_rate, t_scheduler=f.t_scheduler)


def build_hift(config: GLMTTSConfig, base_channels: int | None = None, f0_channels: int | None = None) -> HiFTGenerator:
    sizes = dict(config.hift)
    if base_channels:
        sizes["base_channels"] = base_channels
    f0 = ConvRNNF0Predictor(1, sizes["in_channels"], f0_channels or sizes["base_channels"])
    return HiFTGenerator(**sizes, f0_predictor=f0)


def hift_weights(path: Path) -> Weights:
    return fold_weight_norm({k.removeprefix("generator."): v for k, v in read_pt(path).items()})


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", flow_device: str | None = None,
                 flow_dtype: torch.dtype = torch.float32) -> GLMTTSModules:
    path = Path(path)
    config = GLMTTSConfig.from_dir(path)
    lm = load_strict(build_empty(lambda: GLMSpeechLM(config.llama), dtype), SafetensorsReader(path / LLM_DIR), path / LLM_DIR,
                     unused=TIED_HEAD_KEYS if config.llama.tie_word_embeddings else ())
    flow = build_flow(config)
    flow_state = read_pt(path / "flow" / "flow.pt")
    # x-transformers keeps the rotary table as a buffer, so the file may carry it; it is a fixed table either way
    flow_state.setdefault(ROTARY_KEY, flow.estimator.rotary_embed.inv_freq.clone())
    load_strict(flow, flow_state, path / "flow" / "flow.pt")
    if not (path / HIFT_FILE).is_file():
        vocos = " (it has vocos2d/generator_jit.ckpt, GLM-TTS's 32 kHz Vocos2D vocoder: a TorchScript program, which is not " \
                "loaded as data)" if (path / VOCOS_FILE).is_file() else ""
        raise ValueError(f"{path} has no {HIFT_FILE}{vocos}; GLM-TTS is served with its HiFT vocoder (24 kHz)")
    hift_state = hift_weights(path / HIFT_FILE)
    if "conv_pre.weight" not in hift_state or "f0_predictor.condnet.0.weight" not in hift_state:
        raise ValueError(f"{path / 'hift' / 'hift.pt'}: no conv_pre / f0_predictor weights: is it a HiFT state dict?")
    hift = build_hift(config, hift_state["conv_pre.weight"].shape[0], hift_state["f0_predictor.condnet.0.weight"].shape[0])
    load_strict(hift, hift_state, path / "hift" / "hift.pt")
    return GLMTTSModules.placed(
        config, lm, flow, hift, GLMTokenizer.from_dir(path / TOKENIZER_DIR), dtype=dtype, device=device, flow_device=flow_device,
        flow_dtype=flow_dtype,
    )
