"""The Qwen2 text tokenizer of `CosyVoice-BlankEN/` (vocab.json + merges.txt, or tokenizer.json), with the special
tokens CosyVoice3's frontend adds on top (`<|endofprompt|>` and the paralinguistic tags), in its order, after the
tokenizer's own vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
END_OF_PROMPT = "<|endofprompt|>"
ADDED_SPECIAL_TOKENS = (
    "<|im_start|>", "<|im_end|>", END_OF_PROMPT, "[breath]", "<strong>", "</strong>", "[noise]", "[laughter]", "[cough]",
    "[clucking]", "[accent]", "[quick_breath]", "<laughter>", "</laughter>", "[hissing]", "[sigh]", "[vocalized-noise]",
    "[lipsmack]", "[mn]", "<|endofsystem|>",
)
DEFAULT_INSTRUCTION = "You are a helpful assistant."


def prompt_text(ref_text: str) -> str:
    """The reference transcript as the LM reads it: prefixed with the default instruction and `<|endofprompt|>`
    unless it already holds that marker (the peer's convention)."""
    return ref_text if END_OF_PROMPT in ref_text else f"{DEFAULT_INSTRUCTION}{END_OF_PROMPT}{ref_text}"


class QwenTokenizer:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    @classmethod
    def from_dir(cls, path: Path) -> QwenTokenizer:
        if (path / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        else:
            vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
            merges = [tuple(line.split(" ")) for line in (path / "merges.txt").read_text(encoding="utf-8").splitlines()
                      if line and not line.startswith("#version")]
            tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
            tokenizer.normalizer = normalizers.NFC()
            tokenizer.decoder = decoders.ByteLevel()
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ])
            config = path / "tokenizer_config.json"
            added = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {}) if config.is_file() else {}
            for index, entry in sorted(added.items(), key=lambda item: int(item[0])):
                tokenizer.add_special_tokens([AddedToken(entry["content"], normalized=False, special=True)])
                if tokenizer.token_to_id(entry["content"]) != int(index):
                    raise ValueError(f"{path}: special token {entry['content']!r} should have id {index}")
        tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ADDED_SPECIAL_TOKENS])
        return cls(tokenizer)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def __len__(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)
