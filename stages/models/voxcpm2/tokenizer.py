"""The text tokenizer of a VoxCPM2 checkpoint: its Llama-style BPE (tokenizer.json), built with `tokenizers`.

Two behaviours of the reference are reproduced:
  - It loads the tokenizer as transformers' LlamaTokenizerFast, which (transformers 5) keeps the BPE
    vocabulary and merges of tokenizer.json but replaces its normalizer and pre-tokenizer by a
    Metaspace ("▁", prepended by `add_prefix_space`/`legacy` of tokenizer_config.json, no split).
  - Multi-character CJK tokens are split into their single characters (the model reads Chinese
    character by character).
No BOS or EOS is added: the prompt appends its own audio-start marker.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, pre_tokenizers

LLAMA_CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast")


def _is_cjk(text: str) -> bool:
    return all("\u4e00" <= c <= "\u9fff" for c in text)


class TextTokenizer:
    def __init__(self, path: Path) -> None:
        path = Path(path)
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        config_path = path / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        if config.get("tokenizer_class", "LlamaTokenizerFast") in LLAMA_CLASSES:
            add_prefix_space = config.get("add_prefix_space")
            add_prefix_space = True if add_prefix_space is None else bool(add_prefix_space)
            scheme = ("always" if config.get("legacy", False) else "first") if add_prefix_space else "never"
            self.tokenizer.normalizer = None
            self.tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)
        unk = config.get("unk_token", "<unk>")
        unk = unk.get("content", "<unk>") if isinstance(unk, dict) else unk
        self.unk_id = self.tokenizer.token_to_id(unk) or 0
        self._vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        self._multichar = {token for token in self._vocab if len(token) >= 2 and _is_cjk(token)}

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        ids: list[int] = []
        for token, token_id in zip(encoding.tokens, encoding.ids, strict=True):
            clean = token.replace("▁", "")
            if clean in self._multichar:  # "▁你好" too: the word marker is dropped, as the reference drops it
                ids.extend(self._vocab.get(c, self.unk_id) for c in clean)
            else:
                ids.append(token_id)
        return ids
