"""The delay pattern while generating: which codebooks are forced to the stream BOS or EOS at each step.

Codebook k of a frame trails codebook 0 by k frames. Generation starts with an all-BOS frame (in the prompt here);
at generated frame n (0-based after it) codebook k is still BOS while k > n. Once any codebook emits the stream EOS,
the others follow one step apart: m steps after the first EOS, codebooks 0..m-1 are forced to EOS, and the frame
that is EOS in every codebook ends the stream (it is not audio). This is transformers'
`HiggsAudioV2DelayPatternLogitsProcessor`, kept per sequence instead of per batch.

Repetition-aware sampling (RAS, the peer's default: window 7, at most 2 repeats): a code that already occurs
`max_repeat` times in its codebook's last `window` frames is drawn again from the plain softmax of the raw logits.

Everything that depends on drawn codes (the steps since the first EOS, the RAS window) lives on the model's device
and is updated there, so a step reads nothing back; the frame count, which does not, is kept on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from vocalis.stages.models.higgs_audio_v2.prompt import AudioPositions
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, redraw

PLAIN = SamplingParams()
"""How RAS draws again: the plain softmax (temperature 1, no top-k or top-p)."""


@dataclass
class DelayState:
    num_codebooks: int
    bos: int
    eos: int
    device: torch.device
    ras_window: int = 7
    ras_max_repeat: int = 2
    frames: int = 0
    """Frames generated so far."""
    audio: AudioPositions = AudioPositions()
    """The sequence's audio positions, from which `forward` routes its rows on the host."""
    since_eos: torch.Tensor = field(init=False)
    """0-d, on the device: frames generated since the first one with a stream EOS in any codebook, that one
    included (0: none yet)."""
    recent: torch.Tensor = field(init=False)
    """[ras_window, K] on the device, in no order: the last `ras_window` input frames (reference rows, the BOS frame,
    generated frames), -1 where there is none yet. Written in place, one row per frame."""
    pushed: int = 0
    """Frames written into `recent` so far (the next goes to row pushed % ras_window)."""

    def __post_init__(self) -> None:
        self.since_eos = torch.zeros((), dtype=torch.long, device=self.device)
        self.recent = torch.full((max(self.ras_window, 0), self.num_codebooks), -1, dtype=torch.long, device=self.device)

    def push(self, rows: torch.Tensor) -> None:
        """Record input frames [N, K] (context rows, or a generated frame: `DelayStep.advance` does that)."""
        window = self.recent.shape[0]
        for row in rows[-window:] if window else ():
            self.recent[self.pushed % window].copy_(row)
            self.pushed += 1


class DelayStep:
    """The delay pattern and RAS for one batched step, over the sequences' states in batch order."""

    def __init__(self, states: list[DelayState]) -> None:
        self.states = states
        first = states[0]
        self.num_codebooks, self.bos, self.eos = first.num_codebooks, first.bos, first.eos
        self.since_eos = torch.stack([s.since_eos for s in states])

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits [B, K, V] of the next frames with the forced codebooks reduced to their one allowed id."""
        device, books = logits.device, torch.arange(self.num_codebooks, device=logits.device)
        ids = torch.arange(logits.shape[-1], device=device)
        bos_from = [s.frames + 1 for s in self.states]
        if min(bos_from) < self.num_codebooks:  # known on the host: only the first K - 1 frames force BOS
            bos = books >= torch.tensor(bos_from, device=device)[:, None]
            logits = logits.masked_fill(bos[..., None] & (ids != self.bos), float("-inf"))
        eos = books < self.since_eos[:, None]  # EOS forcing depends on drawn codes: decided on the device
        return logits.masked_fill(eos[..., None] & (ids != self.eos), float("-inf"))

    def resample_repeats(self, raw: torch.Tensor, frames: torch.Tensor, samplers: list[SamplerState]) -> torch.Tensor:
        """frames [B, K] with their over-repeated codes drawn again from softmax(raw [B, K, V]) (BOS and EOS in the
        window never count). Every row under RAS draws again, repeat or not (see `redraw`); rows without keep theirs."""
        windows = [s.recent.shape[0] for s in self.states]
        width = max(windows)
        if width == 0:
            return frames
        ring = torch.stack([s.recent if w == width else F.pad(s.recent, (0, 0, 0, width - w), value=-1)
                            for s, w in zip(self.states, windows, strict=True)])
        hits = ((ring == frames[:, None]) & (ring != self.bos) & (ring != self.eos)).sum(dim=1)
        limits = [s.ras_max_repeat for s in self.states]  # a row without RAS is left out below
        limit = limits[0] if len(set(limits)) == 1 else torch.tensor(limits, device=frames.device)[:, None]
        again = hits >= limit
        rows = [i for i, w in enumerate(windows) if w]
        if len(rows) == len(windows):
            return redraw(raw, frames, again, samplers, PLAIN)
        index = torch.tensor(rows, device=frames.device)
        redrawn = redraw(raw[index], frames[index], again[index], [samplers[i] for i in rows], PLAIN)
        return frames.index_copy(0, index, redrawn)

    def advance(self, frames: torch.Tensor) -> None:
        """Record the step's frames [B, K] in each state, on the device."""
        started = (self.since_eos > 0) | (frames == self.eos).any(dim=-1)
        since_eos = torch.where(started, self.since_eos + 1, self.since_eos)
        for state, since, frame in zip(self.states, since_eos.unbind(0), frames.unbind(0), strict=True):
            state.since_eos = since
            state.frames += 1
            state.push(frame[None])
