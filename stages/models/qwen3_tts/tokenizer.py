"""The Qwen2 byte-level BPE text tokenizer of a Qwen3-TTS checkpoint, built with `tokenizers`.

It reads tokenizer.json when the checkpoint has one, else vocab.json + merges.txt, and takes the
special tokens from tokenizer_config.json's `added_tokens_decoder`.

One quirk is reproduced on purpose. The reference package loads its tokenizer with transformers'
`fix_mistral_regex=True`; transformers 4.57.3 then swaps the pre-tokenizer's split pattern for the
Mistral one whenever the checkpoint's config.json has no `transformers_version` or one in
[4.57.3, 5.0). Token ids differ between the two patterns (CamelCase words, contractions), so we pick
the pattern by the same rule.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
MISTRAL_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def split_pattern(transformers_version: str | None) -> str:
    """The pattern the reference ends up with for a checkpoint written by `transformers_version`."""
    if transformers_version is None:
        return MISTRAL_PATTERN
    parts = tuple(int(p) if p.isdigit() else 0 for p in transformers_version.split(".")[:3])
    if parts <= (4, 57, 2) or parts >= (5, 0, 0):
        return QWEN2_PATTERN
    return MISTRAL_PATTERN


class TextTokenizer:
    """Text to token ids, as the reference processor produces them (no padding, no added BOS/EOS)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    @classmethod
    def from_dir(cls, path: Path, transformers_version: str | None) -> TextTokenizer:
        if (path / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        else:
            vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
            merges = []
            for line in (path / "merges.txt").read_text(encoding="utf-8").splitlines():
                if line and not line.startswith("#version"):
                    left, right = line.split(" ")
                    merges.append((left, right))
            tokenizer = Tokenizer(
                models.BPE(vocab=vocab, merges=merges, unk_token=None, continuing_subword_prefix="",
                           end_of_word_suffix="", fuse_unk=False, byte_fallback=False)
            )
            tokenizer.normalizer = normalizers.NFC()
            tokenizer.decoder = decoders.ByteLevel()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_pattern(transformers_version)), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        config_path = path / "tokenizer_config.json"
        added = json.loads(config_path.read_text(encoding="utf-8")).get("added_tokens_decoder", {}) if config_path.is_file() else {}
        tokens = []
        for index, entry in sorted(added.items(), key=lambda item: int(item[0])):
            token = AddedToken(entry["content"], single_word=entry.get("single_word", False), lstrip=entry.get("lstrip", False),
                               rstrip=entry.get("rstrip", False), normalized=entry.get("normalized", False),
                               special=entry.get("special", True))
            tokens.append((int(index), token))
        tokenizer.add_special_tokens([token for _, token in tokens])
        for index, token in tokens:
            if tokenizer.token_to_id(token.content) != index:
                raise ValueError(f"{path}: special token {token.content!r} should have id {index}")
        return cls(tokenizer)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def __len__(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)


def assistant_text(text: str) -> str:
    """The prompt around the text to speak; its first 3 and last 5 tokens are the chat markup."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def reference_text(text: str) -> str:
    """The transcript of a cloned voice's clip; its first 3 and last 2 tokens are markup."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(instructions: str) -> str:
    return f"<|im_start|>user\n{instructions}<|im_end|>\n"
