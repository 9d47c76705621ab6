"""The delay pattern while generating: which codebooks are forced to the stream BOS or EOS at each step.

Codebook k of a frame trails codebook 0 by k frames. Generation starts with an all-BOS frame (in the prompt here);
at generated frame n (0-based after it) codebook k is still BOS while k > n. Once any codebook emits the stream EOS,
the others follow one step apart: m steps after the first EOS, codebooks 0..m-1 are forced to EOS, and the frame
that is EOS in every codebook ends the stream (it is not audio). This is transformers'
`HiggsAudioV2DelayPatternLogitsProcessor`, kept per sequence instead of per batch.

Repetition-aware sampling (RAS, the peer's default: window 7, at most 2 repeats): a code that already occurs
`max_repeat` times in its codebook's last `window` frames is drawn again from the plain softmax of the raw logits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from vocalis.stages.sampling import SamplerState


@dataclass
class DelayState:
    num_codebooks: int
    bos: int
    eos: int
    frames: int = 0
    """Frames generated so far."""
    first_eos: int | None = None
    """Index of the first generated frame with a stream EOS in any codebook."""
    ras_window: int = 7
    ras_max_repeat: int = 2
    recent: list[torch.Tensor] = field(default_factory=list)
    """The last `ras_window` input frames (reference rows, the BOS frame, generated frames), for RAS."""

    def forced(self) -> tuple[int, int]:
        """(b, e): codebooks >= b are forced to BOS, codebooks < e to EOS at the next frame."""
        steps_since_eos = 0 if self.first_eos is None else self.frames - self.first_eos
        return self.frames + 1, min(steps_since_eos, self.num_codebooks)

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits [K, V] of the next frame with the forced codebooks reduced to their one allowed id."""
        bos_from, eos_until = self.forced()
        if bos_from >= self.num_codebooks and eos_until == 0:
            return logits
        logits = logits.clone()
        for k in range(min(bos_from, self.num_codebooks), self.num_codebooks):
            only(logits[k], self.bos)
        for k in range(eos_until):
            only(logits[k], self.eos)
        return logits

    def repeat_mask(self, frame: torch.Tensor) -> torch.Tensor:
        """[K] bool: codebooks whose code in `frame` [K] repeats too often in the window (BOS/EOS never count)."""
        if self.ras_window <= 0 or not self.recent:
            return torch.zeros_like(frame, dtype=torch.bool)
        window = torch.stack(self.recent[-self.ras_window:])
        hits = (window == frame) & (window != self.bos) & (window != self.eos)
        return hits.sum(dim=0) >= self.ras_max_repeat

    def push(self, frame: torch.Tensor) -> None:
        """Record an input frame [K] (a context row, or a generated frame: then call `advance` too)."""
        if self.ras_window > 0:
            self.recent.append(frame)
            del self.recent[: -self.ras_window]

    def advance(self, frame: torch.Tensor) -> None:
        if self.first_eos is None and bool((frame == self.eos).any()):
            self.first_eos = self.frames
        self.frames += 1
        self.push(frame)


def only(row: torch.Tensor, allowed: int) -> None:
    keep = row[allowed].clone()
    row.fill_(float("-inf"))
    row[allowed] = keep


def resample_repeats(raw: torch.Tensor, frame: torch.Tensor, state: DelayState, sampler: SamplerState) -> torch.Tensor:
    """`frame` [K] with its over-repeated codes drawn again from softmax(raw [K, V])."""
    again = state.repeat_mask(frame)
    if not bool(again.any()):
        return frame
    frame = frame.clone()
    probs = torch.softmax(raw[again].float(), dim=-1)
    frame[again] = torch.multinomial(probs, 1, generator=sampler.generator_for(probs.device))[:, 0]
    return frame
