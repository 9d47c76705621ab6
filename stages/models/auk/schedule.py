"""The flow solver's schedule: time grid, guidance, and how AuK-Flash locks them.

The base model integrates the velocity field with Euler over `nfe` steps on a sway-warped uniform grid
(t + sway (cos(pi t / 2) - 1 + t)) or an explicit `t_grid`, with classifier-free guidance
v_cond + cfg (v_cond - v_uncond). AuK-Flash is distilled for one schedule: 4 steps on its `flash_t_grid`, no
guidance; asked for anything else, it says so and keeps its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vocalis.stages.models.auk.config import AuKConfig


@dataclass(frozen=True)
class Schedule:
    grid: tuple[float, ...]
    cfg: float

    @property
    def steps(self) -> int:
        return len(self.grid) - 1


def time_grid(steps: int, sway: float | None = None, t_grid: Sequence[float] | None = None) -> tuple[float, ...]:
    """Float32-exact time points, as torch computes them (linspace, then the sway warp in float32)."""
    import torch

    if t_grid is not None:
        return tuple(torch.tensor(list(t_grid), dtype=torch.float32).tolist())
    t = torch.linspace(0, 1, steps + 1, dtype=torch.float32)
    if sway is not None:
        t = t + sway * (torch.cos(torch.pi / 2 * t) - 1 + t)
    return tuple(t.tolist())


def resolve(config: AuKConfig, nfe: int | None, cfg: float | None, sway: float | None, t_grid: Sequence[float] | None) -> tuple[Schedule, list[str]]:
    """The schedule of a request, and what the caller should hear about settings the checkpoint overrides."""
    if config.flash:
        asked = [name for name, value in (("num_inference_steps", nfe), ("guidance_scale", cfg), ("sway", sway), ("t_grid", t_grid))
                 if value is not None]
        notes = [f"AuK-Flash runs its distilled schedule ({len(config.flash_t_grid) - 1} steps on flash_t_grid, no guidance); "
                 f"extra_params {', '.join(asked)} not used"] if asked else []
        return Schedule(time_grid(0, None, config.flash_t_grid), 0.0), notes
    defaults = config.defaults
    steps = defaults.nfe if nfe is None else nfe
    grid = time_grid(steps, defaults.sway if sway is None else sway, t_grid)
    return Schedule(grid, defaults.cfg if cfg is None else cfg), []


def valid_t_grid(value: object) -> str | None:
    """Why `value` is no time grid (at least 2 finite, strictly increasing numbers), or None."""
    if not isinstance(value, list) or len(value) < 2:
        return "must be a list of at least 2 numbers"
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return "must hold finite numbers only"
    if any(b <= a for a, b in zip(value, value[1:], strict=False)):
        return "must be strictly increasing"
    return None
