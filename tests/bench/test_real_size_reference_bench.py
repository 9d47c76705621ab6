"""bench/real_size_reference.py's helpers that run in our venv too: a folded codec state dict spelled back as the
reference's weight norm (both of torch's spellings) gives the same weights."""

from __future__ import annotations

import torch
from torch import nn

from tests.bench.bench_script import load_bench


def test_folded_weights_spelled_as_weight_norm_give_the_same_weights():
    bench = load_bench("real_size_reference")
    torch.manual_seed(0)
    new_style = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 5, 4))
    old_style = nn.utils.weight_norm(nn.Linear(6, 2))  # the quantiser's projections keep the old spelling
    reference = nn.ModuleDict({"conv": new_style, "proj": old_style})
    folded = {"conv.weight": torch.randn(5, 3, 4), "conv.bias": torch.randn(5), "proj.weight": torch.randn(2, 6),
              "proj.bias": torch.randn(2)}
    state = bench.weight_normed(folded, reference.state_dict())
    assert set(state) == set(reference.state_dict())
    reference.load_state_dict(state)
    torch.testing.assert_close(reference["conv"].weight, folded["conv.weight"])  # float32 rounding of g * v / |v|
    torch.testing.assert_close(old_style.weight_g * old_style.weight_v / old_style.weight_v.norm(dim=1, keepdim=True),
                               folded["proj.weight"])
    assert torch.equal(reference["conv"].bias, folded["conv.bias"])
