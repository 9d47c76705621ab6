"""Strict loading of the talker's tensors from either published vocabulary.

transformers-native names are the module's own. Boson's original names map onto them: `embed_tokens`, `layers.N.*`
and `norm` gain the `model.` prefix, `audio_codebook_embeddings` is `model.embed_audio_tokens.embed_audio_tokens`,
`audio_decoder_proj.audio_lm_head` is `audio_lm_head`. Tensors unused by design: the text head (`text_lm_head`; the
talker only speaks), Boson's audio-understanding input path (`audio_tower`, `audio_encoder_proj`: a Whisper encoder
for audio *inputs*, which text-to-speech does not take), training-only codebook loss weights and saved RoPE buffers.
Boson's partially frozen tables (`*.embedding_frozen` + `*.embedding_trainable`, `*.linear_frozen` +
`*.linear_trainable`) are joined as transformers' conversion script joins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from vocalis.stages.layers.weights import DerivedWeights, Recipe, SafetensorsReader, load_strict, renamed, shape_of
from vocalis.stages.models.higgs_audio_v2.family import BOSON_MODEL_TYPE
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker

NATIVE_UNUSED = (r"text_lm_head\.weight", r"audio_decoder_proj\.(audio|text)_lm_head\.weight")
"""The text head, and the copies of both heads under their Boson names that transformers' conversion may keep."""
BOSON_UNUSED = (
    r"audio_decoder_proj\.text_lm_head\.weight",
    r"audio_tower\..*",
    r"audio_encoder_proj\..*",
    r"(.*\.)?audio_codebook_weights",  # codebook loss weights: training only
    r"(.*\.)?rotary_emb\.(original_)?inv_freq",  # recomputed from the config
)
PARTIALLY_FROZEN = (
    ("embed_tokens.embedding_frozen.weight", "embed_tokens.embedding_trainable.weight", "embed_tokens.weight"),
    ("audio_decoder_proj.audio_lm_head.linear_frozen.weight", "audio_decoder_proj.audio_lm_head.linear_trainable.weight",
     "audio_decoder_proj.audio_lm_head.weight"),
    ("audio_decoder_proj.text_lm_head.linear_frozen.weight", "audio_decoder_proj.text_lm_head.linear_trainable.weight",
     "audio_decoder_proj.text_lm_head.weight"),
)
"""Boson's training split some tables into a frozen and a trainable part (rows), saved apart: joined in that order."""
BOSON_RENAMES = (
    ("audio_codebook_embeddings.", "model.embed_audio_tokens.embed_audio_tokens."),
    ("audio_decoder_proj.audio_lm_head.", "audio_lm_head."),
    ("embed_tokens.", "model.embed_tokens."),
    ("layers.", "model.layers."),
    ("norm.", "model.norm."),
)


def boson_to_native(name: str) -> str:
    for old, new in BOSON_RENAMES:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def join_partially_frozen(weights: Mapping[str, torch.Tensor]) -> DerivedWeights:
    """`weights` with each frozen + trainable pair joined into the whole table (read and joined when asked for)."""
    recipes: dict[str, Recipe] = {name: (shape_of(weights, name), lambda name=name: weights[name]) for name in weights}
    for frozen, trainable, whole in PARTIALLY_FROZEN:
        if frozen in recipes and trainable in recipes:
            (rows, *rest), (more, *_) = recipes.pop(frozen)[0], recipes.pop(trainable)[0]
            recipes[whole] = ((rows + more, *rest), lambda frozen=frozen, trainable=trainable: torch.cat([weights[frozen], weights[trainable]], dim=0))
    return DerivedWeights(recipes)


def load_talker(talker: HiggsAudioV2Talker, path: Path) -> HiggsAudioV2Talker:
    """`path`'s safetensors (one file or shards) into `talker`, one tensor at a time; raises naming any missing or
    unexpected tensor."""
    weights: Mapping[str, torch.Tensor] = SafetensorsReader(path)
    if talker.config.layout == BOSON_MODEL_TYPE:
        weights = renamed(join_partially_frozen(weights), boson_to_native)
        unused = BOSON_UNUSED
    else:
        unused = NATIVE_UNUSED
    return load_strict(talker, weights, path, unused=unused)
