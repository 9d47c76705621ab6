"""The prompt of one utterance: the Llama 3 chat layout higgs-audio v2 was trained on, with audio where it speaks.

Plain text: a system turn ("Generate audio following instruction."), the user turn with the text, and the assistant
header followed by `<|audio_out_bos|>`. Voice cloning puts a first exchange before it: the reference transcript as
a user turn and the reference clip's codes as the assistant's answer (`<|audio_out_bos|>`, its frames in the delay
pattern, `<|audio_eos|>`). This is the chat template transformers' conversion script gives the native checkpoint
(and vLLM-Omni renders), with the system message vLLM-Omni sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from vocalis.stages.models.higgs_audio_v2.tokenizer import AUDIO_EOS, AUDIO_OUT_BOS, TextTokenizer

SYSTEM = "Generate audio following instruction."
SPEAKER_TAG = re.compile(r"\[SPEAKER\d+\]", re.IGNORECASE)
"""Multi-speaker dialogue tags, which this family (as its peer) does not take."""


def turn(role: str, content: str) -> str:
    """One chat turn; its text trimmed, as the chat template trims it."""
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{content.strip()}<|eot_id|>"


def assistant_header() -> str:
    return "<|start_header_id|>assistant<|end_header_id|>\n\n"


@dataclass(frozen=True)
class Prompt:
    before: list[int]
    """Text ids up to the reference audio (all of them when there is none)."""
    audio: torch.Tensor | None = None
    """[N, K] the reference clip's codes in the delay pattern, stream BOS and EOS included, or None."""
    after: tuple[int, ...] = ()
    """Text ids after the reference audio."""

    def __len__(self) -> int:
        return len(self.before) + (0 if self.audio is None else len(self.audio)) + len(self.after)


@dataclass(frozen=True)
class AudioPositions:
    """Which positions of a sequence are audio (where the talker's layers run their audio expert), known on the host:
    the reference clip's rows of the prompt, and every position from the opening BOS frame on (it, then each
    generated frame)."""

    clip: tuple[int, int] = (0, 0)
    """[start, end) of the reference clip's rows."""
    frames_from: int = 0

    @classmethod
    def of(cls, prompt: Prompt) -> AudioPositions:
        """The positions of `prompt` followed by its BOS frame (at len(prompt)) and the generated frames."""
        start = len(prompt.before)
        return cls((start, start + len(prompt.audio)) if prompt.audio is not None else (0, 0), len(prompt))

    def flags(self, start: int, count: int) -> list[bool]:
        """Whether each of positions start .. start + count - 1 is audio."""
        low, high = self.clip
        return [low <= p < high or p >= self.frames_from for p in range(start, start + count)]


def delay_pattern(codes: torch.Tensor, bos: int, eos: int) -> torch.Tensor:
    """[T + 2 + K - 1, K] rows of codes [T, K] framed by a stream BOS and EOS, codebook k delayed by k rows
    (BOS before, EOS after)."""
    frames, books = codes.shape
    framed = torch.cat([codes.new_full((1, books), bos), codes, codes.new_full((1, books), eos)])
    rows = framed.new_full((frames + 2 + books - 1, books), eos)
    for k in range(books):
        rows[:k, k] = bos
        rows[k : k + frames + 2, k] = framed[:, k]
    return rows


def undo_delay(rows: torch.Tensor) -> torch.Tensor:
    """Frames [R - K + 1, K] of delayed rows [R, K]: frame j's codebook k is row j + k's."""
    count, books = rows.shape[-2], rows.shape[-1]
    frames = max(0, count - books + 1)
    return torch.stack([rows[..., k : k + frames, k] for k in range(books)], dim=-1)


def build_prompt(tokenizer: TextTokenizer, text: str, reference: tuple[str, torch.Tensor] | None,
                 stream_bos: int, stream_eos: int) -> Prompt:
    """`reference`: the clip's transcript and its codes [T, K]."""
    head = "<|begin_of_text|>" + turn("system", SYSTEM)
    tail = turn("user", text) + assistant_header() + AUDIO_OUT_BOS
    if reference is None:
        return Prompt(tokenizer.encode(head + tail))
    ref_text, codes = reference
    before = tokenizer.encode(head + turn("user", ref_text) + assistant_header() + AUDIO_OUT_BOS)
    after = tokenizer.encode(AUDIO_EOS + "<|eot_id|>" + tail)
    return Prompt(before, delay_pattern(codes, stream_bos, stream_eos), tuple(after))
