"""No ignored weights in the dual AR: perturbing any tensor of the tiny checkpoint changes the slow AR's logits on
a prompt that holds semantic tokens with codes, or the fast AR's logits on its frames (teacher-forced)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from vocalis.stages.models.fish_speech.weights import load_dual_ar, read_config

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech"


def test_every_dual_ar_tensor_matters():
    tiny = GOLDENS / "tiny"
    model = load_dual_ar(tiny, read_config(tiny))
    golden = load_file(str(GOLDENS / "dual_ar.safetensors"))
    tokens, codes = golden["tokens"], golden["codes"]
    semantic = tokens >= model.config.semantic_start_token_id

    def probe() -> torch.Tensor:
        hidden = model.slow_dense(model.embed(tokens, codes)[None])[0]
        _, fast = model.frame_codes(hidden[semantic], codes[semantic, 0], choose=None, forced=codes[semantic, 1:])
        return torch.cat([model.token_logits(hidden).flatten(), fast.flatten()])

    with torch.inference_mode():
        base = probe()
        dead = []
        for name, tensor in model.state_dict(keep_vars=True).items():
            saved = tensor.detach().clone()
            tensor.data.add_(0.2 * saved.std() + 0.05)
            if torch.equal(probe(), base):
                dead.append(name)
            tensor.data.copy_(saved)
    assert dead == []
