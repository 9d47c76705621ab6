"""AllowedRowsHead: the whole-vocabulary head masked to the tokens a sampler may pick, computed from those rows
alone; exact in float64, within the dtype's rounding of the sum once its rows are packed; what it refuses."""

from __future__ import annotations

import pytest
import torch

from tests.tolerance import rounding_bound
from vocalis.stages.layers.allowed_rows_head import AllowedRowsHead
from vocalis.stages.layers.packed_linear import PackedLinear
from vocalis.stages.layers.quantized_linear import replace_linears


def masked_full_head(hidden: torch.Tensor, weight: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """What the families computed before: every row, then the disallowed ones masked."""
    return (hidden @ weight.T).float().masked_fill(~allowed, float("-inf"))


def mask(vocab: int) -> torch.Tensor:
    allowed = torch.zeros(vocab, dtype=torch.bool)
    allowed[100:164] = True  # a speech range
    allowed[[7, 250]] = True  # stops on either side of it
    return allowed


@pytest.mark.parametrize("rows", [1, 4])
def test_the_kept_rows_logits_are_the_whole_heads_and_the_rest_are_minus_inf(rows):
    torch.manual_seed(rows)
    weight, hidden, allowed = torch.randn(300, 32, dtype=torch.float64), torch.randn(rows, 32, dtype=torch.float64), mask(300)
    head = AllowedRowsHead(weight, allowed)
    assert head.rows.weight.shape == (66, 32) and head.ids.tolist() == allowed.nonzero().flatten().tolist()
    with torch.inference_mode():
        got = head(hidden)
    assert got.dtype == torch.float32 and got.shape == (rows, 300)
    assert torch.equal(got, masked_full_head(hidden, weight, allowed))
    assert torch.isinf(got[:, ~allowed]).all() and torch.isfinite(got[:, allowed]).all()


def test_packed_the_head_is_within_the_rounding_of_its_sums():
    torch.manual_seed(3)
    weight, hidden, allowed = torch.randn(300, 512), torch.randn(4, 512), mask(300)
    head = AllowedRowsHead(weight, allowed)
    assert replace_linears(head, kind=PackedLinear) and isinstance(head.rows, PackedLinear)
    with torch.inference_mode():
        got = head(hidden)
    want = masked_full_head(hidden.double(), weight.double(), allowed)
    magnitude = float((hidden.double().abs() @ weight.double().abs().T).max())
    kept = allowed.nonzero().flatten()
    torch.testing.assert_close(got[:, kept].double(), want[:, kept].double(), rtol=0, atol=rounding_bound(torch.float32, magnitude, 512))
    assert torch.equal(got[:, ~allowed], want[:, ~allowed])


def test_a_mask_of_another_size_or_with_nothing_allowed_is_refused():
    weight = torch.randn(10, 4)
    with pytest.raises(ValueError, match="bool mask over the head's 10 rows"):
        AllowedRowsHead(weight, torch.ones(9, dtype=torch.bool))
    with pytest.raises(ValueError, match="no allowed token"):
        AllowedRowsHead(weight, torch.zeros(10, dtype=torch.bool))
