"""Teacher forcing through the shared sampler, for any family whose codes are drawn by
`vocalis.stages.runtime.sampling.sample_rows` (directly, or through sample_states / redraw).

A float32 run records every call's logits and picks (`SamplerTape.record`); a run in another precision then replays
them (`SamplerTape.force`): each call returns the recorded picks, so the codes are the float32 run's and one flipped
code cannot cascade, and its own logits are compared with the recorded ones (the largest error over the largest
logit, and the share of rows whose argmax agrees). Families whose codes are picked elsewhere (an argmax of their own:
Voxtral, Gepard, OmniVoice) make no calls, and the tape says so (calls == 0).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from vocalis.stages.runtime import sampling

ORIGINAL = sampling.sample_rows


@dataclass
class SamplerTape:
    calls: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    agree: list[torch.Tensor] = field(default_factory=list)
    mismatched: int = 0
    """Replayed calls whose logits' shape differs from the recorded call's (the forcing lost step)."""

    @contextmanager
    def record(self) -> Iterator[None]:
        def recording(logits, params, generators, seen=None):
            picks = ORIGINAL(logits, params, generators, seen)
            self.calls.append((logits.detach().float().clone(), picks.detach().clone()))
            return picks

        with _patched(recording):
            yield

    @contextmanager
    def force(self) -> Iterator[SamplerTape]:
        """Replay into a new tape holding the comparison."""
        replay = SamplerTape()
        position = iter(self.calls)

        def forcing(logits, params, generators, seen=None):
            recorded = next(position, None)
            if recorded is None or recorded[0].shape != logits.shape:
                replay.mismatched += 1
                return ORIGINAL(logits, params, generators, seen)
            reference, picks = recorded
            ours = logits.detach().float().cpu()  # the recorded run may have been on another device
            finite = torch.isfinite(reference) & torch.isfinite(ours)
            scale = reference[finite].abs().max().clamp(min=1e-12)
            replay.errors.append(float((ours - reference)[finite].abs().max() / scale))
            replay.agree.append((ours.argmax(-1) == reference.argmax(-1)).flatten())
            replay.calls.append((reference, picks))
            return picks.to(logits.device)

        with _patched(forcing):
            yield replay

    def summary(self) -> dict:
        agree = torch.cat(self.agree) if self.agree else torch.zeros(0, dtype=torch.bool)
        return {"calls": len(self.calls), "max_rel_logit_error": max(self.errors) if self.errors else None,
                "argmax_agreement": float(agree.float().mean()) if len(agree) else None, "picks": len(agree),
                "mismatched_calls": self.mismatched, "per_call": list(self.errors)}


@contextmanager
def _patched(replacement) -> Iterator[None]:
    """`sample_rows` replaced in the sampling module and wherever a family imported it by name."""
    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("vocalis.stages") and getattr(m, "sample_rows", None) is ORIGINAL]
    for module in holders:
        module.sample_rows = replacement
    try:
        yield
    finally:
        for module in holders:
            module.sample_rows = ORIGINAL
