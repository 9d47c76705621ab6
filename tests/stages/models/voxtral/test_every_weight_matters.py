"""Every tensor loaded from the checkpoint changes some output when perturbed: none is loaded and then ignored.
Nothing in the published checkpoint is unused by design (the encoder, when present, is declared and not loaded)."""

from __future__ import annotations

import copy

import torch

from tests.stages.models.voxtral.test_generation import random_frames


def outputs(lm, codec, embeds: torch.Tensor, frames: torch.Tensor) -> list[torch.Tensor]:
    with torch.inference_mode():
        ids = torch.arange(40)  # the prompt's text rows and special rows, whatever the prompt
        hidden = lm.decoder.dense((embeds + lm.decoder.embed_tokens(ids[: len(embeds)]))[None])[0]
        noise = torch.randn(3, 36, generator=torch.Generator().manual_seed(0))
        flow = lm.flow
        return [hidden, flow.semantic(hidden[-3:]), flow.sample(hidden[-3:], noise, torch.tensor([1.2, 0.5, 2.0]), 3),
                lm.audio_embeddings(frames), codec(frames[None])]


def test_every_tensor_matters(tiny):
    lm, codec = copy.deepcopy(tiny.modules.lm), copy.deepcopy(tiny.modules.codec)
    embeds = torch.randn(24, lm.config.decoder.dim, generator=torch.Generator().manual_seed(1))
    frames = random_frames(12)
    base = outputs(lm, codec, embeds, frames)
    inert = []
    for module, prefix in ((lm, "lm"), (codec, "codec")):
        for name, tensor in module.state_dict(keep_vars=True).items():
            saved = tensor.data.clone()
            tensor.data.add_(0.5 * torch.randn(tensor.shape, generator=torch.Generator().manual_seed(2)) * (saved.abs().mean() + 0.1))
            changed = any(not torch.equal(a, b) for a, b in zip(base, outputs(lm, codec, embeds, frames), strict=True))
            tensor.data.copy_(saved)
            if not changed:
                inert.append(f"{prefix}.{name}")
    assert inert == []
    assert len(lm.state_dict()) + len(codec.state_dict()) > 60
