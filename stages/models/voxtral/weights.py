"""A Voxtral TTS checkpoint directory, unchanged from its publisher, into ready torch modules.

The layout: params.json, consolidated.safetensors, tekken.json, voice_embedding/<name>.pt. Checkpoint names are
Mistral's: `layers.N.attention.wq` ... for the decoder, `mm_audio_embeddings.*`, `acoustic_transformer.*` and
`audio_tokenizer.*` (weight-normalised convs as parametrizations.weight.original0/1). The decoder's and the flow's
layers are the floor's Llama layers, so their names are mapped here, and the decoder's wq/wk are permuted from
Mistral's interleaved RoPE layout to the rotate-half one (as transformers' conversion script and vLLM's Mistral
loader do). Loading is strict: a missing or unknown tensor fails at start-up by name. The audio tokenizer's encoder
(`audio_tokenizer.input_proj.*`, `audio_tokenizer.encoder_blocks.*`) is absent from the open release; when a
checkpoint has it (all of it), it is loaded too, and `ref_audio` clones.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from vocalis.stages.layers.weights import (
    DerivedWeights,
    SafetensorsReader,
    build_empty,
    fold_weight_norm,
    load_strict,
    read_state_dict,
    renamed,
)
from vocalis.stages.models.voxtral.codec import AudioTokenizerDecoder, AudioTokenizerEncoder
from vocalis.stages.models.voxtral.config import TEKKEN_FILE, VOICE_DIR, WEIGHTS_FILE, VoxtralConfig
from vocalis.stages.models.voxtral.decoder import VoxtralLM
from vocalis.stages.models.voxtral.tekken import AUDIO, BEGIN_AUDIO, BOS, Tekken

log = logging.getLogger(__name__)

LAYER_NAMES = {
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
}
RENAMED = {
    "norm.weight": "decoder.norm.weight",
    "mm_audio_embeddings.tok_embeddings.weight": "decoder.embed_tokens.weight",
    "mm_audio_embeddings.audio_codebook_embeddings.embeddings.weight": "audio_embeddings.embeddings.weight",
}
CODEC_PREFIX = "audio_tokenizer."
ENCODER_PREFIXES = ("audio_tokenizer.input_proj.", "audio_tokenizer.encoder_blocks.")
_LAYER = re.compile(r"(acoustic_transformer\.)?layers\.(\d+)\.(.+)")


def module_key(key: str) -> str:
    """The VoxtralLM parameter a stage-0 checkpoint tensor loads into."""
    if key in RENAMED:
        return RENAMED[key]
    match = _LAYER.fullmatch(key)
    if match and match[3] in LAYER_NAMES:
        return f"{'flow' if match[1] else 'decoder'}.layers.{match[2]}.{LAYER_NAMES[match[3]]}"
    if key.startswith("acoustic_transformer."):
        return "flow." + key[len("acoustic_transformer."):]
    return key


def checkpoint_key(name: str) -> str:
    """The inverse of module_key."""
    inverse = {v: k for k, v in RENAMED.items()}
    if name in inverse:
        return inverse[name]
    match = re.fullmatch(r"(decoder|flow)\.layers\.(\d+)\.(.+)", name)
    if match:
        layer = {v: k for k, v in LAYER_NAMES.items()}[match[3]]
        return f"{'acoustic_transformer.' if match[1] == 'flow' else ''}layers.{match[2]}.{layer}"
    if name.startswith("flow."):
        return "acoustic_transformer." + name[len("flow."):]
    return name


def rope_to_rotate_half(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Rows of wq/wk from Mistral's interleaved (pairs) RoPE order to the rotate-half (halves) order."""
    out, dim = weight.shape
    return weight.view(heads, out // heads // 2, 2, dim).transpose(1, 2).reshape(out, dim)


def lm_weights(weights: SafetensorsReader, config: VoxtralConfig) -> DerivedWeights:
    """Stage-0 tensors of a checkpoint under VoxtralLM's names, q/k rows in rotate-half order, each read when loaded."""
    d = config.decoder

    def in_rotate_half_order(name: str, tensor: torch.Tensor) -> torch.Tensor:
        if name.startswith("decoder.layers.") and name.endswith("self_attn.q_proj.weight"):
            return rope_to_rotate_half(tensor, d.n_heads)
        if name.startswith("decoder.layers.") and name.endswith("self_attn.k_proj.weight"):
            return rope_to_rotate_half(tensor, d.n_kv_heads)
        return tensor

    return renamed(weights, lambda key: None if key.startswith(CODEC_PREFIX) else module_key(key), in_rotate_half_order)


def checkpoint_shapes(config: VoxtralConfig, encoder: bool = False) -> dict[str, tuple[int, ...]]:
    """The tensors a checkpoint of `config` holds, by checkpoint name: the open release's, or with `encoder` also the
    audio tokenizer's encoder."""
    with torch.device("meta"):
        lm, codec = VoxtralLM(config), AudioTokenizerDecoder(config.codec)
        parts = [codec, AudioTokenizerEncoder(config.codec)] if encoder else [codec]
    shapes = {checkpoint_key(name): tuple(t.shape) for name, t in lm.state_dict().items()}
    for part in parts:
        for name, tensor in part.state_dict().items():
            if name.endswith("conv.weight"):
                prefix = CODEC_PREFIX + name[: -len("weight")] + "parametrizations.weight."
                shapes[prefix + "original0"] = (tensor.shape[0], 1, 1)
                shapes[prefix + "original1"] = tuple(tensor.shape)
            else:
                shapes[CODEC_PREFIX + name] = tuple(tensor.shape)
    return shapes


def check_special_ids(tekken: Tekken, config: VoxtralConfig, path: Path) -> None:
    """params.json names the ids the model was trained with; tekken.json must give those tokens the same ids."""
    pairs = {BOS: config.bos_id, AUDIO: config.audio_token_id, BEGIN_AUDIO: config.begin_audio_token_id}
    wrong = {token: (tekken.specials[token], wanted) for token, wanted in pairs.items() if tekken.specials[token] != wanted}
    if wrong:
        raise ValueError(f"{path}: tekken.json and params.json disagree on special ids (tekken, params): {wrong}")


def check_key_set(weights: SafetensorsReader, config: VoxtralConfig, where: object) -> None:
    """Fail naming, in the checkpoint's own spelling, every tensor missing, unexpected or misshapen for `config` (with
    the encoder's tensors expected in full once any of them is present)."""
    expected = checkpoint_shapes(config, encoder=any(k.startswith(ENCODER_PREFIXES) for k in weights))
    missing, unexpected = sorted(expected.keys() - weights.keys()), sorted(weights.keys() - expected.keys())
    misshapen = sorted(f"{k} {weights.shape(k)} (params.json says {expected[k]})" for k in weights.keys() & expected.keys()
                       if weights.shape(k) != expected[k])
    if missing or unexpected or misshapen:
        raise ValueError(f"{where}: does not match params.json: missing {missing[:8]}, unexpected {unexpected[:8]}, misshapen {misshapen[:8]}")


@dataclass
class VoxtralModules:
    path: Path
    config: VoxtralConfig
    tekken: Tekken
    lm: VoxtralLM
    codec: AudioTokenizerDecoder
    """Always float32 (the peer decodes in the stage's dtype; float32 keeps chunked == whole decodes exact)."""
    voices: dict[str, torch.Tensor] = field(default_factory=dict)
    """Preset (lower-cased) -> its prompt embedding rows [N, dim]."""
    encoder: AudioTokenizerEncoder | None = None
    """The audio tokenizer's encoder (float32, on the generator's device), when the checkpoint has it: ref_audio clones."""

    @property
    def encoder_weights(self) -> bool:
        return self.encoder is not None


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", codec_device: str | None = None) -> VoxtralModules:
    path = Path(path)
    config = VoxtralConfig.from_dir(path)
    tekken = Tekken(path / TEKKEN_FILE)
    if tekken.vocab_size > config.decoder.vocab_size:
        raise ValueError(f"{path / TEKKEN_FILE}: {tekken.vocab_size} tokens; the decoder embeds {config.decoder.vocab_size}")
    check_special_ids(tekken, config, path)
    # the LM built in its dtype and read one tensor at a time: its load never holds a float32 LM or the file beside it
    weights = SafetensorsReader(path / WEIGHTS_FILE)
    check_key_set(weights, config, path / WEIGHTS_FILE)
    lm = load_strict(build_empty(lambda: VoxtralLM(config), dtype), lm_weights(weights, config), path / WEIGHTS_FILE)
    # the codec is small and float32; its weight-normed convs are folded from its tensors read whole
    codec_weights = fold_weight_norm(dict(weights.take(CODEC_PREFIX)))
    encoder_names = tuple(prefix[len(CODEC_PREFIX):] for prefix in ENCODER_PREFIXES)
    encoder = None
    if any(k.startswith(encoder_names) for k in codec_weights):
        log.info("%s: the audio tokenizer's encoder is present: ref_audio clones", path)
        encoder = load_strict(AudioTokenizerEncoder(config.codec), {k: v for k, v in codec_weights.items() if k.startswith(encoder_names)},
                              path / WEIGHTS_FILE)
        encoder = encoder.to(device=device, dtype=torch.float32).eval().requires_grad_(False)
    codec = load_strict(AudioTokenizerDecoder(config.codec), {k: v for k, v in codec_weights.items() if not k.startswith(encoder_names)},
                        path / WEIGHTS_FILE)
    del codec_weights
    lm = lm.to(device=device, dtype=dtype).eval().requires_grad_(False)
    codec = codec.to(device=codec_device or device, dtype=torch.float32).eval().requires_grad_(False)
    return VoxtralModules(path, config, tekken, lm, codec, load_voices(path, config, tekken), encoder=encoder)


def load_voices(path: Path, config: VoxtralConfig, tekken: Tekken) -> dict[str, torch.Tensor]:
    """The presets params.json names whose voice_embedding/<name>.pt exists, each checked against tekken.json."""
    voices = {}
    for name, published in config.voice_files.items():
        file = path / VOICE_DIR / f"{published}.pt"
        if not file.is_file():
            log.warning("%s: preset %r has no %s; it is not offered", path, published, file.name)
            continue
        embedding = torch.load(str(file), map_location="cpu", weights_only=True)
        if isinstance(embedding, dict):
            embedding = next(iter(read_state_dict(file).values()))
        rows = tekken.voice_tokens.get(name)
        if embedding.dim() != 2 or embedding.shape[1] != config.decoder.dim or rows != embedding.shape[0]:
            raise ValueError(f"{file}: embedding {tuple(embedding.shape)}; tekken.json gives {rows} rows of {config.decoder.dim}")
        voices[name] = embedding
    return voices
