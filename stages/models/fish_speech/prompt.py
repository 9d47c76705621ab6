"""S2 Pro's prompts, as vLLM-Omni describes the upstream layout (ChatML with Fish's control tokens):

  text only: <|im_start|>system\\nconvert the provided text to speech<|im_end|>\\n
             <|im_start|>user\\n{text}<|im_end|>\\n<|im_start|>assistant\\n<|voice|>
  cloning:   <|im_start|>system\\nconvert the provided text to speech reference to the following:\\n\\nText:\\n
             {ref_text}\\n\\nSpeech:\\n<|audio_start|>{one semantic token per reference frame}<|audio_end|><|im_end|>\\n
             <|im_start|>user\\n{text}<|im_end|>\\n<|im_start|>assistant\\n<|voice|>

The reference transcript gets a `<|speaker:0|>` tag unless it has one; caller text may hold speaker tags
(`<speaker:N>` is rewritten to `<|speaker:N|>`) but no other control token. Each reference frame's full codes ride
on its semantic token through the codebook embeddings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

TEXT_ONLY_SYSTEM = "convert the provided text to speech"
CLONE_SYSTEM_PREFIX = "convert the provided text to speech reference to the following:\n\nText:\n"
CLONE_SYSTEM_SUFFIX = "\n\nSpeech:\n"
CONTROL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|voice|>", "<|audio_start|>", "<|audio_end|>")

_LEGACY_SPEAKER = re.compile(r"<speaker:(\d+)>")
_SPEAKER = re.compile(r"<\|speaker:\d+\|>")
_CONTROL = re.compile(r"<\|[^>]+\|>")


class ControlTokenInText(ValueError):
    def __init__(self, tokens: list[str]) -> None:
        super().__init__(f"the text contains control token(s) {', '.join(sorted(set(tokens)))}; only speaker tags "
                         "such as <|speaker:0|> are allowed")


def normalize_text(text: str, default_speaker: bool = False) -> str:
    text = _LEGACY_SPEAKER.sub(r"<|speaker:\1|>", text)
    bad = [t for t in _CONTROL.findall(text) if not _SPEAKER.fullmatch(t)]
    if bad:
        raise ControlTokenInText(bad)
    if default_speaker and not _SPEAKER.search(text):
        text = "<|speaker:0|>" + text
    return text


class FishTokenizer:
    """The checkpoint's Qwen3 tokenizer.json; the control tokens' ids are looked up in it, never assumed."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.control = {}
        for token in CONTROL_TOKENS:
            index = tokenizer.token_to_id(token)
            if index is None:
                raise ValueError(f"tokenizer.json has no {token} token (S2 Pro's prompt needs it)")
            self.control[token] = index

    @classmethod
    def from_file(cls, path: str) -> FishTokenizer:
        return cls(Tokenizer.from_file(path))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    @property
    def im_end(self) -> int:
        return self.control["<|im_end|>"]

    def _turn(self, role: str) -> list[int]:
        return [self.control["<|im_start|>"], *self.encode(f"{role}\n")]

    def _close(self) -> list[int]:
        return [self.control["<|im_end|>"], *self.encode("\n")]

    def _tail(self, text: str) -> list[int]:
        return [*self._turn("user"), *self.encode(text), *self._close(), *self._turn("assistant"), self.control["<|voice|>"]]


@dataclass(frozen=True)
class Prompt:
    ids: torch.Tensor
    """[P] token ids."""
    codes: torch.Tensor
    """[P, K] each position's frame codes (zeros outside the reference's semantic tokens)."""


def text_only_prompt(tokenizer: FishTokenizer, text: str, num_codebooks: int) -> Prompt:
    ids = [*tokenizer._turn("system"), *tokenizer.encode(TEXT_ONLY_SYSTEM), *tokenizer._close(),
           *tokenizer._tail(normalize_text(text))]
    return Prompt(torch.tensor(ids), torch.zeros(len(ids), num_codebooks, dtype=torch.long))


def clone_prompt(tokenizer: FishTokenizer, text: str, ref_text: str, ref_codes: torch.Tensor, semantic_start: int) -> Prompt:
    """`ref_codes` [F, K]: the reference clip's frames from the codec encoder."""
    head = [*tokenizer._turn("system"),
            *tokenizer.encode(CLONE_SYSTEM_PREFIX + normalize_text(ref_text, default_speaker=True) + CLONE_SYSTEM_SUFFIX),
            tokenizer.control["<|audio_start|>"]]
    tail = [tokenizer.control["<|audio_end|>"], *tokenizer._close(), *tokenizer._tail(normalize_text(text))]
    frames = ref_codes.long()
    ids = torch.tensor([*head, *(frames[:, 0] + semantic_start).tolist(), *tail])
    codes = torch.zeros(len(ids), frames.shape[1], dtype=torch.long)
    codes[len(head):len(head) + len(frames)] = frames
    return Prompt(ids, codes)
