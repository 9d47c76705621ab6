"""Iterative masked decoding: which audio tokens to commit at each step, and to what.

Every unit starts as `frames x codebooks` mask tokens. A step runs the model on the
conditional prompt and on the unconditional one (the target frames alone), mixes their log
probabilities with classifier-free guidance, predicts a token everywhere, and commits the
`schedule[step]` most confident still-masked positions, coarse codebooks favoured by a
per-codebook penalty and the choice randomised by Gumbel noise at `position_temperature`.
The schedule follows a shifted time grid, so few tokens are committed first and many last.

Randomness comes only through a NoiseSource (uniform draws), so a golden file can replay the
reference's draws and a seeded request gets the same audio in any batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from vocalis.stages.models.omnivoice.config import GenerationConfig

CLASS_TOP_RATIO = 0.1
"""With class_temperature > 0, tokens are drawn among the top tenth of the vocabulary."""


class NoiseSource(Protocol):
    def uniform(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Uniform [0, 1) draws of `shape` (float32, CPU)."""
        ...


class SeededNoise:
    """Draws from a per-request generator: the same seed gives the same draws whatever the batch."""

    def __init__(self, seed: int | None) -> None:
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    def uniform(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator, device="cpu")


def time_steps(num_step: int, t_shift: float) -> list[float]:
    t = torch.linspace(0.0, 1.0, num_step + 1)
    return (t_shift * t / (1 + (t_shift - 1) * t)).tolist()


def unmask_schedule(frames: int, codebooks: int, num_step: int, t_shift: float) -> list[int]:
    """How many tokens each step commits; they add up to frames * codebooks."""
    total = frames * codebooks
    t = time_steps(num_step, t_shift)
    left = total
    schedule = []
    for step in range(num_step):
        count = left if step == num_step - 1 else min(math.ceil(total * (t[step + 1] - t[step])), left)
        schedule.append(int(count))
        left -= int(count)
    return schedule


def gumbel(logits: torch.Tensor, temperature: float, noise: NoiseSource) -> torch.Tensor:
    u = noise.uniform(tuple(logits.shape)).to(logits.device, logits.dtype)
    return logits / temperature - torch.log(-torch.log(u + 1e-10) + 1e-10)


def predict(
    cond: torch.Tensor, uncond: torch.Tensor, config: GenerationConfig, mask_id: int, noise: NoiseSource
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and their confidence (guided log probability) [C, T] from logits [C, T, V] of both branches."""
    if config.guidance_scale != 0:
        c = F.log_softmax(cond, dim=-1)
        u = F.log_softmax(uncond, dim=-1)
        log_probs = torch.log_softmax(c + config.guidance_scale * (c - u), dim=-1)
    else:
        log_probs = F.log_softmax(cond, dim=-1)
    log_probs[..., mask_id] = -float("inf")
    if config.class_temperature > 0:
        k = math.ceil(CLASS_TOP_RATIO * log_probs.shape[-1])
        values, indices = log_probs.topk(k, dim=-1)
        kept = torch.full_like(log_probs, -float("inf")).scatter_(-1, indices, values)
        tokens = gumbel(kept[None], config.class_temperature, noise)[0].argmax(dim=-1)
    else:
        tokens = log_probs.argmax(dim=-1)
    return tokens, log_probs.max(dim=-1)[0]


def commit(
    tokens: torch.Tensor, predicted: torch.Tensor, scores: torch.Tensor, count: int, config: GenerationConfig, mask_id: int,
    noise: NoiseSource,
) -> torch.Tensor:
    """Commit `count` of the still-masked positions of tokens [C, T] (in place); returns their flat indices."""
    codebooks = tokens.shape[0]
    penalty = torch.arange(codebooks, device=scores.device).view(-1, 1) * config.layer_penalty_factor
    scores = scores - penalty
    if config.position_temperature > 0:
        scores = gumbel(scores[None], config.position_temperature, noise)[0]
    scores = scores.masked_fill(tokens != mask_id, -float("inf"))
    chosen = torch.topk(scores.flatten(), count).indices
    flat = tokens.flatten()
    flat[chosen] = predicted.flatten()[chosen]
    tokens.copy_(flat.view_as(tokens))
    return chosen


@dataclass
class UnitDecoding:
    """The state of one unit being decoded: its prompt, the tokens so far, and the step it is at."""

    ids: torch.Tensor
    """Conditional prompt ids [C, L]; its last `frames` columns are the target."""
    audio_mask: torch.Tensor
    frames: int
    schedule: list[int]
    config: GenerationConfig
    noise: NoiseSource
    mask_id: int
    step: int = 0

    @property
    def done(self) -> bool:
        return self.step >= len(self.schedule)

    @property
    def tokens(self) -> torch.Tensor:
        """The target tokens [C, frames] (a view into the prompt)."""
        return self.ids[:, self.ids.shape[1] - self.frames :]

    def rows(self) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """(ids, audio_mask) of the conditional and the unconditional row."""
        return (self.ids, self.audio_mask), (self.tokens, self.audio_mask[-self.frames :])

    def advance(self, cond_logits: torch.Tensor, uncond_logits: torch.Tensor) -> None:
        """One step from the target's logits [C, frames, V] of both rows."""
        count = self.schedule[self.step]
        self.step += 1
        if count <= 0:
            return
        predicted, scores = predict(cond_logits.float(), uncond_logits.float(), self.config, self.mask_id, self.noise)
        commit(self.tokens, predicted, scores, count, self.config, self.mask_id, self.noise)
