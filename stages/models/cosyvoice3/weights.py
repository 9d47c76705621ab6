"""CosyVoice3's modules built from its config and loaded strictly from `llm.pt`, `flow.pt` and `hift.pt` (pickled
state dicts, read with weights_only=True; hift's weight-normed convolutions folded). The LM's and the flow's files
are read one tensor at a time as they are copied (a load holds the modules and one tensor, not a whole file beside
them); hift's, small and folded first, whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vocalis.stages.api.hyperpyyaml import CLASS_KEY
from vocalis.stages.components.flow_dit import DiT
from vocalis.stages.components.flow_matching import CausalConditionalCFM, CausalMaskedDiffWithDiT, PreLookaheadLayer
from vocalis.stages.components.hift import CausalConvRNNF0Predictor, CausalHiFTGenerator
from vocalis.stages.layers.weights import build_empty, fold_weight_norm, load_strict, read_state_dict, state_dict_reader
from vocalis.stages.models.cosyvoice3.config import QWEN_DIR, CosyVoice3Config
from vocalis.stages.models.cosyvoice3.lm import UNUSED_KEYS, CosyVoice3LM
from vocalis.stages.models.cosyvoice3.tokenizer import QwenTokenizer
from vocalis.stages.models.cosyvoice_common.loaded_modules import LoadedModules

CosyVoice3Modules = LoadedModules[CosyVoice3Config, CosyVoice3LM, CausalMaskedDiffWithDiT, CausalHiFTGenerator, QwenTokenizer]


def _args(section: dict[str, Any]) -> dict[str, Any]:
    """A yaml section's plain arguments: nested modules (dicts with a class) and the class name left out."""
    return {k: v for k, v in section.items() if k != CLASS_KEY and not (isinstance(v, dict) and CLASS_KEY in v)}


def build_flow(config: CosyVoice3Config) -> CausalMaskedDiffWithDiT:
    flow = config.flow
    decoder = flow["decoder"]
    estimator = DiT(**_args(decoder["estimator"]))
    cfm_params = decoder.get("cfm_params", {})
    cfm_params = cfm_params.get("content", cfm_params)
    cfm = CausalConditionalCFM(estimator, inference_cfg_rate=float(cfm_params.get("inference_cfg_rate", 0.7)),
                               t_scheduler=str(cfm_params.get("t_scheduler", "cosine")), mel_dim=int(flow["output_size"]))
    lookahead = flow["pre_lookahead_layer"]
    return CausalMaskedDiffWithDiT(
        vocab_size=int(flow["vocab_size"]), input_size=int(flow["input_size"]), output_size=int(flow["output_size"]),
        spk_embed_dim=int(flow["spk_embed_dim"]), token_mel_ratio=int(flow.get("token_mel_ratio", 2)),
        pre_lookahead_layer=PreLookaheadLayer(int(lookahead["in_channels"]), int(lookahead["channels"]), int(lookahead.get("pre_lookahead_len", 1))),
        decoder=cfm,
    )


def build_hift(config: CosyVoice3Config) -> CausalHiFTGenerator:
    predictor = config.hift["f0_predictor"]
    return CausalHiFTGenerator(**_args(config.hift), f0_predictor=CausalConvRNNF0Predictor(**_args(predictor)))


def hift_weights(path: Path) -> dict[str, torch.Tensor]:
    weights = read_state_dict(path)
    weights = {k.removeprefix("generator."): v for k, v in weights.items()}
    return fold_weight_norm(weights)


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", flow_device: str | None = None,
                 flow_dtype: torch.dtype = torch.float32) -> CosyVoice3Modules:
    path = Path(path)
    config = CosyVoice3Config.from_dir(path)
    llm_weights = state_dict_reader(path / "llm.pt")  # read one tensor at a time as load_strict copies it
    bias = "llm_decoder.bias" in llm_weights
    lm = build_empty(lambda: CosyVoice3LM(config.qwen, config.lm, decoder_bias=bias), dtype)  # in its dtype from the start
    load_strict(lm, llm_weights, path / "llm.pt", unused=UNUSED_KEYS)
    flow = load_strict(build_flow(config), state_dict_reader(path / "flow.pt"), path / "flow.pt")
    hift = load_strict(build_hift(config), hift_weights(path / "hift.pt"), path / "hift.pt")
    return CosyVoice3Modules.placed(
        config, lm, flow, hift, QwenTokenizer.from_dir(path / QWEN_DIR), dtype=dtype, device=device, flow_device=flow_device,
        flow_dtype=flow_dtype,
    )
