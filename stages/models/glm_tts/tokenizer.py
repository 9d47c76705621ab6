"""GLM-TTS's text tokenizer (`vq32k-phoneme-tokenizer/`): GLM-4's tiktoken BPE (`tokenizer.model`, one base64 token and
its rank per line, with GLM-4's split pattern) plus the added tokens of `tokenizer_config.json`, which hold the speech
tokens `<|audio_0|>`...`<|audio_N|>` and the specials. Added tokens in the text are matched whole, as transformers'
slow tokenizer splits them out before BPE; the published code's `trust_remote_code` class is not needed."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import tiktoken

GLM4_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
AUDIO_TOKEN = re.compile(r"<\|audio_(\d+)\|>")
BEGIN_OF_AUDIO = "<|begin_of_audio|>"
STOP_TOKENS = ("👂", "<|user|>")
"""What ends a GLM-TTS utterance: the "👂" token vLLM-Omni stops on, and `<|user|>`, the published code's end of audio.
Both are looked up in the tokenizer; a speech stream holds neither."""


class GLMTokenizer:
    def __init__(self, ranks: dict[bytes, int], added: dict[str, int]) -> None:
        self.added = added
        self._encoding = tiktoken.Encoding(name="glm4", pat_str=GLM4_PATTERN, mergeable_ranks=ranks, special_tokens=added)
        audio = sorted((int(m.group(1)), i) for t, i in added.items() if (m := AUDIO_TOKEN.fullmatch(t)))
        if not audio:
            raise ValueError("the tokenizer has no <|audio_N|> tokens: is it GLM-TTS's vq32k-phoneme-tokenizer?")
        first = audio[0][1]
        if [n for n, _ in audio] != list(range(len(audio))) or [i for _, i in audio] != list(range(first, first + len(audio))):
            raise ValueError("the tokenizer's <|audio_N|> tokens are not numbered 0.. with consecutive ids")
        self.audio_start = first
        """Id of <|audio_0|>: speech token k is id audio_start + k."""
        self.speech_tokens = len(audio)

    @classmethod
    def from_dir(cls, path: Path) -> GLMTokenizer:
        ranks = {}
        for line in (path / "tokenizer.model").read_text(encoding="utf-8").splitlines():
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        config = path / "tokenizer_config.json"
        entries = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {}) if config.is_file() else {}
        added = {entry["content"]: int(index) for index, entry in entries.items()}
        return cls(ranks, added)

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special="all")

    def single_id(self, token: str) -> int | None:
        """The id of `token` when it encodes to exactly one id, else None."""
        ids = self.encode(token)
        return ids[0] if len(ids) == 1 else None

    def stop_ids(self) -> list[int]:
        found = [i for t in STOP_TOKENS if (i := self.single_id(t)) is not None]
        if not found:
            raise ValueError(f"the tokenizer has none of GLM-TTS's stop tokens {STOP_TOKENS} as a single token")
        return found

    def begin_of_audio(self) -> int:
        found = self.single_id(BEGIN_OF_AUDIO)
        if found is None:
            raise ValueError(f"the tokenizer has no {BEGIN_OF_AUDIO} token")
        return found
