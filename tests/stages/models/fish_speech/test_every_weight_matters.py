"""No ignored weights in the dual AR: the slow AR's logits on a prompt that holds semantic tokens with codes, and the
fast AR's logits on its frames (teacher-forced), depend on every tensor of the tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from vocalis.stages.models.fish_speech.config import FishSpeechConfig
from vocalis.stages.models.fish_speech.weights import load_dual_ar

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech"


def test_every_dual_ar_tensor_matters():
    tiny = GOLDENS / "tiny"
    model = load_dual_ar(tiny, FishSpeechConfig.from_dir(tiny))
    golden = load_file(str(GOLDENS / "dual_ar.safetensors"))
    tokens, codes = golden["tokens"], golden["codes"]
    semantic = tokens >= model.config.semantic_start_token_id

    def probe() -> torch.Tensor:
        hidden = model.slow_dense(model.embed(tokens, codes)[None])[0]
        _, fast = model.frame_codes(hidden[semantic], codes[semantic, 0], choose=None, forced=codes[semantic, 1:])
        return torch.cat([model.token_logits(hidden).flatten(), fast.flatten()])

    # One backward pass of a random projection of the outputs: a tensor they depend on gets a nonzero gradient.
    generator = torch.Generator().manual_seed(0)
    out = probe()
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    dead = [name for name, p in model.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    assert dead == []
    assert len(list(model.named_parameters())) == len(model.state_dict())  # no buffer loaded beside them
