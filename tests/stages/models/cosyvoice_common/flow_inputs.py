"""The CosyVoice line's tiny flows and one decode's inputs, for the flow tests of this folder (its dtype, its packed
linears): each family's checkpoint builder and module loader, the Euler steps, and seeded tokens, prompt and speaker."""

from __future__ import annotations

import torch

from tests import tiny_checkpoints as tiny
from vocalis.stages.models.cosyvoice3.weights import load_modules as load_cosyvoice3
from vocalis.stages.models.glm_tts.weights import load_modules as load_glm_tts

STEPS = 10
FAMILIES = {"cosyvoice3": (tiny.cosyvoice3, load_cosyvoice3), "glm_tts": (tiny.glm_tts, load_glm_tts)}


def inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 50, (1, 24), generator=generator)
    prompt_tokens = torch.randint(0, 50, (1, 20), generator=generator)
    prompt_mel = torch.randn(1, 40, 80, generator=generator) * 2 - 5  # log-mel-like values
    embedding = torch.randn(1, 192, generator=generator)
    return tokens, prompt_tokens, prompt_mel, embedding
