"""The text tokenizer (the checkpoint's tokenizer.json, Llama 3 with audio specials) and the special ids it names.

The audio specials are looked up by their published spellings; where config.json names an id too, the two must agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config

AUDIO_OUT = "<|AUDIO_OUT|>"
AUDIO_OUT_BOS = "<|audio_out_bos|>"
AUDIO_EOS = "<|audio_eos|>"
CHAT_TOKENS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")


@dataclass(frozen=True)
class SpecialIds:
    audio_out: int
    """`<|AUDIO_OUT|>`: a generated or reference audio frame's position."""
    audio_out_bos: int
    """`<|audio_out_bos|>`: where audio output starts (the prompt ends with it)."""
    audio_eos: int
    """`<|audio_eos|>`: after a reference clip's frames."""


class TextTokenizer:
    def __init__(self, path: Path, config: HiggsAudioV2Config) -> None:
        from tokenizers import Tokenizer

        file = path / "tokenizer.json"
        self.tokenizer = Tokenizer.from_file(str(file))
        ids = {}
        for token in (AUDIO_OUT, AUDIO_OUT_BOS, AUDIO_EOS, *CHAT_TOKENS):
            ids[token] = self.tokenizer.token_to_id(token)
            if ids[token] is None:
                raise ValueError(f"{file} has no {token} token: not a higgs-audio tokenizer")
        for token, configured, name in ((AUDIO_OUT, config.audio_token_id, "audio token"),
                                        (AUDIO_OUT_BOS, config.audio_bos_token_id, "audio BOS token")):
            if configured is not None and configured != ids[token]:
                raise ValueError(f"{path}: config.json's {name} id {configured} is not the tokenizer's {token} ({ids[token]})")
        self.special = SpecialIds(ids[AUDIO_OUT], ids[AUDIO_OUT_BOS], ids[AUDIO_EOS])

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, whose special tokens (written out) become their ids; nothing is added around it."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids
