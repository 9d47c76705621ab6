"""Every tensor loaded from the checkpoint changes some output when perturbed: none is loaded and then ignored.
Nothing in the published checkpoint is unused by design. Checked on the layout with the audio tokenizer's encoder,
so its tensors are covered too."""

from __future__ import annotations

import torch

from tests.goldens.voxtral.build_tiny import build
from tests.stages.models.voxtral.test_generation import random_frames
from vocalis.stages.models.voxtral.weights import load_modules


def outputs(lm, codec, encoder, embeds: torch.Tensor, frames: torch.Tensor) -> list[torch.Tensor]:
    with torch.inference_mode():
        ids = torch.arange(40)  # the prompt's text rows and special rows, whatever the prompt
        hidden = lm.decoder.dense((embeds + lm.decoder.embed_tokens(ids[: len(embeds)]))[None])[0]
        noise = torch.randn(3, 36, generator=torch.Generator().manual_seed(0))
        flow = lm.flow
        return [hidden, flow.semantic(hidden[-3:]), flow.sample(hidden[-3:], noise, torch.tensor([1.2, 0.5, 2.0]), 3),
                lm.audio_embeddings(frames), codec(frames[None]), encoder(torch.sin(torch.arange(4 * 1920) / 7.0)[None])]


def test_every_tensor_matters(tmp_path):
    modules = load_modules(build(tmp_path / "full", encoder=True))
    lm, codec, encoder = modules.lm, modules.codec, modules.encoder
    embeds = torch.randn(24, lm.config.decoder.dim, generator=torch.Generator().manual_seed(1))
    frames = random_frames(12)
    base = outputs(lm, codec, encoder, embeds, frames)
    inert = []
    for module, prefix in ((lm, "lm"), (codec, "codec"), (encoder, "encoder")):
        for name, tensor in module.state_dict(keep_vars=True).items():
            saved = tensor.data.clone()
            tensor.data.add_(0.5 * torch.randn(tensor.shape, generator=torch.Generator().manual_seed(2)) * (saved.abs().mean() + 0.1))
            changed = any(not torch.equal(a, b) for a, b in zip(base, outputs(lm, codec, encoder, embeds, frames), strict=True))
            tensor.data.copy_(saved)
            if not changed:
                inert.append(f"{prefix}.{name}")
    assert inert == []
    assert len(lm.state_dict()) + len(codec.state_dict()) + len(encoder.state_dict()) > 60
