"""A Qwen3-TTS checkpoint directory, unchanged from its publisher, into ready torch modules.

Loading is strict: every tensor of the file must land in a module and every module tensor must come
from the file, so a renamed or forgotten key fails at start-up, not as silently wrong audio.
Weight-normalised convolutions are accepted in both spellings (`weight_g`/`weight_v`, and
`parametrizations.weight.original0/1`) and folded into a plain `weight`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder, SpeechEncoder
from vocalis.stages.models.qwen3_tts.config import Qwen3TTSConfig
from vocalis.stages.models.qwen3_tts.speaker import SpeakerEncoder
from vocalis.stages.models.qwen3_tts.talker import Talker
from vocalis.stages.models.qwen3_tts.tokenizer import TextTokenizer

_WEIGHT_NORM = (("weight_g", "weight_v"), ("parametrizations.weight.original0", "parametrizations.weight.original1"))


@dataclass
class Qwen3TTSModules:
    """Everything a Qwen3-TTS checkpoint holds, loaded."""

    path: Path
    config: Qwen3TTSConfig
    tokenizer: TextTokenizer
    talker: Talker
    decoder: SpeechDecoder
    encoder: SpeechEncoder | None
    """Mimi encoder of the speech tokenizer: reference codes for ICL cloning (Base checkpoints)."""
    speaker_encoder: SpeakerEncoder | None
    """x-vectors for cloning (Base checkpoints)."""


def fold_weight_norm(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each (g, v) weight-norm pair by weight = g * v / |v| (norm over all but the first dim)."""
    out = dict(weights)
    for g_name, v_name in _WEIGHT_NORM:
        for key in [k for k in weights if k.endswith("." + g_name)]:
            prefix = key[: -len(g_name)]
            g, v = out.pop(key), out.pop(prefix + v_name)
            norm = v.float().flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
            out[prefix + "weight"] = (g.float() * v.float() / norm).to(v.dtype)
    return out


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no safetensors under {path}")
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        weights |= load_file(str(file))
    return fold_weight_norm(weights)


def take(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def load_into(module: nn.Module, weights: dict[str, torch.Tensor], where: str) -> nn.Module:
    expected = set(module.state_dict())
    missing, unexpected = sorted(expected - set(weights)), sorted(set(weights) - expected)
    if missing or unexpected:
        raise ValueError(f"{where}: weights do not match the configuration: missing {missing[:8]}, unexpected {unexpected[:8]}")
    for name, tensor in module.state_dict().items():
        if tensor.shape != weights[name].shape:
            raise ValueError(f"{where}: {name} has shape {tuple(weights[name].shape)}, the configuration says {tuple(tensor.shape)}")
    module.load_state_dict({k: v.to(module.state_dict()[k].dtype) for k, v in weights.items()}, strict=True)
    return module


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", codec_dtype: torch.dtype | None = None) -> Qwen3TTSModules:
    """Load the checkpoint at `path` (config.json, model.safetensors, tokenizer files, speech_tokenizer/)."""
    config = Qwen3TTSConfig.from_dir(path)
    tokenizer = TextTokenizer.from_dir(path, config.transformers_version)
    weights = read_weights(path / "model.safetensors" if (path / "model.safetensors").is_file() else path)
    unknown = sorted({k.split(".")[0] for k in weights} - {"talker", "speaker_encoder"})
    if unknown:
        raise ValueError(f"{path}: unexpected weights {unknown}")
    talker = load_into(Talker(config.talker), take(weights, "talker."), f"{path}: talker")
    speaker = None
    if config.speaker_encoder is not None:
        speaker = load_into(SpeakerEncoder(config.speaker_encoder), take(weights, "speaker_encoder."), f"{path}: speaker_encoder")
    elif any(k.startswith("speaker_encoder.") for k in weights):
        raise ValueError(f"{path}: speaker_encoder weights in a {config.tts_model_type} checkpoint")
    codec_weights = read_weights(path / "speech_tokenizer")
    st = config.speech_tokenizer
    decoder = load_into(SpeechDecoder(st.decoder), take(codec_weights, "decoder."), f"{path}/speech_tokenizer: decoder")
    encoder = None
    if st.encoder is not None and any(k.startswith("encoder.") for k in codec_weights):
        encoder = load_into(SpeechEncoder(st.encoder, st.encoder_valid_num_quantizers, st.encode_downsample_rate),
                            take(codec_weights, "encoder."), f"{path}/speech_tokenizer: encoder")
    codec_dtype = codec_dtype or dtype
    return Qwen3TTSModules(
        path=path, config=config, tokenizer=tokenizer,
        talker=talker.to(device=device, dtype=dtype).eval(),
        decoder=decoder.to(device=device, dtype=codec_dtype).eval(),
        # The encoder and speaker encoder run once per cloned voice: float32 keeps their codes and x-vectors exact.
        encoder=encoder.to(device=device).eval() if encoder is not None else None,
        speaker_encoder=speaker.to(device=device).eval() if speaker is not None else None,
    )
