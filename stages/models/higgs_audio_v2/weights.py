"""Strict loading of the talker's tensors from either published vocabulary.

transformers-native names are the module's own. Boson's original names map onto them: `embed_tokens`, `layers.N.*`
and `norm` gain the `model.` prefix, `audio_codebook_embeddings` is `model.embed_audio_tokens.embed_audio_tokens`,
`audio_decoder_proj.audio_lm_head` is `audio_lm_head`. Tensors unused by design: the text head (`text_lm_head`; the
talker only speaks) and Boson's audio-understanding input path (`audio_tower`, `audio_encoder_proj`: a Whisper
encoder for audio *inputs*, which text-to-speech does not take).
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.models.higgs_audio_v2.family import BOSON_MODEL_TYPE
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker
from vocalis.stages.weights import Weights, load_strict, read_safetensors

NATIVE_UNUSED = (r"text_lm_head\.weight",)
BOSON_UNUSED = (r"audio_decoder_proj\.text_lm_head\.weight", r"audio_tower\..*", r"audio_encoder_proj\..*")
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


def load_talker(talker: HiggsAudioV2Talker, path: Path) -> HiggsAudioV2Talker:
    """`path`'s safetensors (one file or shards) into `talker`; raises naming any missing or unexpected tensor."""
    weights: Weights = read_safetensors(path)
    if talker.config.layout == BOSON_MODEL_TYPE:
        weights = {boson_to_native(k): v for k, v in weights.items()}
        unused = BOSON_UNUSED
    else:
        unused = NATIVE_UNUSED
    return load_strict(talker, weights, path, unused=unused)
