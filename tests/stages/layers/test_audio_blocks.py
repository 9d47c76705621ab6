"""Shared codec blocks: causality, lengths, the Snake formulas, residual units and residual quantisation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.tolerance import rounding_bound
from vocalis.stages.layers.audio_blocks import (
    WEIGHT_BOUND,
    CausalConv1d,
    CausalConvTranspose1d,
    ResidualUnit,
    Snake,
    SnakeBeta,
    conv_transpose1d,
    nearest_code,
    residual_encode,
    snake_residual_units,
    summed_lookup,
)


def test_snake_and_snake_beta_formulas():
    x = torch.linspace(-3, 3, 12).view(1, 2, 6)
    snake = Snake(2)
    with torch.no_grad():
        snake.alpha.copy_(torch.tensor([0.5, 2.0]).view(1, 2, 1))
    alpha = torch.tensor([0.5, 2.0]).view(1, 2, 1)
    torch.testing.assert_close(snake(x), x + torch.sin(alpha * x) ** 2 / alpha)
    beta = SnakeBeta(2)
    with torch.no_grad():
        beta.alpha.copy_(torch.tensor([0.5, 2.0]).log())
        beta.beta.copy_(torch.tensor([4.0, 1.0]).log())
    torch.testing.assert_close(beta(x), x + torch.sin(alpha * x) ** 2 / torch.tensor([4.0, 1.0]).view(1, 2, 1))


def test_causal_conv_never_sees_the_future():
    torch.manual_seed(0)
    conv = CausalConv1d(2, 3, kernel_size=5, dilation=2)
    x = torch.randn(1, 2, 40)
    changed = x.clone()
    changed[..., 25:] += 1.0
    out, out_changed = conv(x), conv(changed)
    assert out.shape[-1] == 40
    assert torch.equal(out[..., :25], out_changed[..., :25]) and not torch.equal(out[..., 25:], out_changed[..., 25:])


def test_strided_causal_conv_with_whole_strides_gives_ceil_frames():
    conv = CausalConv1d(1, 1, kernel_size=8, stride=4, whole_strides=True, pad_mode="replicate")
    assert [conv(torch.randn(1, 1, n)).shape[-1] for n in (16, 17, 19, 20)] == [4, 5, 5, 5]
    assert CausalConv1d(1, 1, kernel_size=8, stride=4)(torch.randn(1, 1, 17)).shape[-1] == 4


def test_causal_transposed_conv_upsamples_exactly_and_causally():
    torch.manual_seed(0)
    up = CausalConvTranspose1d(2, 2, kernel_size=6, stride=3)
    x = torch.randn(1, 2, 10)
    changed = x.clone()
    changed[..., 7:] += 1.0
    out, out_changed = up(x), up(changed)
    assert out.shape[-1] == 30
    assert torch.equal(out[..., :21], out_changed[..., :21])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("inputs", "outputs", "kernel", "stride", "batch", "length", "product"), [
    (96, 48, 16, 8, 1, 3, True),  # weight-bound: the matrix product
    (64, 64, 2, 2, 2, 4, True),  # kernel = stride: taps never overlap
    (64, 32, 7, 3, 2, 5, True),  # kernel not a multiple of the stride
    (8, 4, 6, 3, 2, 40, False),  # the output outweighs the weight: torch's kernel
])
def test_transposed_conv_is_torchs_within_rounding(dtype, inputs, outputs, kernel, stride, batch, length, product,
                                                   monkeypatch):
    torch.manual_seed(0)
    x, weight = torch.randn(batch, inputs, length, dtype=dtype), torch.randn(inputs, outputs, kernel, dtype=dtype)
    expected = F.conv_transpose1d(x, weight, None, stride)
    exact = F.conv_transpose1d(x.double(), weight.double(), None, stride)
    magnitude = F.conv_transpose1d(x.double().abs(), weight.double().abs(), None, stride).max().item()
    bound = rounding_bound(dtype, magnitude, inputs * -(-kernel // stride) + 1)
    assert (weight.numel() >= WEIGHT_BOUND * expected.numel()) == product
    if product:  # the product, not torch's kernel, must have run
        monkeypatch.setattr(F, "conv_transpose1d", lambda *args, **kwargs: pytest.fail("torch's kernel ran"))
    got = conv_transpose1d(x, weight, stride)
    assert got.shape == expected.shape and got.dtype == dtype
    assert (got.double() - exact).abs().max().item() <= bound
    assert (expected.double() - exact).abs().max().item() <= bound  # the bound is one torch's own kernel meets


def test_a_causal_transposed_conv_adds_its_bias_after_the_product():
    torch.manual_seed(0)
    up = CausalConvTranspose1d(96, 48, kernel_size=16, stride=8)
    x = torch.randn(1, 96, 2)
    with torch.no_grad():
        up.bias.normal_()
        assert up.weight.numel() >= WEIGHT_BOUND * 48 * 24  # weight-bound over two frames: the product runs
        expected = F.conv_transpose1d(x, up.weight, up.bias, 8)[..., :16]
        magnitude = (F.conv_transpose1d(x.abs(), up.weight.abs(), None, 8) + up.bias.abs()[:, None]).max().item()
        torch.testing.assert_close(up(x), expected, rtol=0, atol=rounding_bound(torch.float32, magnitude, 2 * 96 + 1))


def test_residual_units_keep_the_checkpoint_spellings():
    named = snake_residual_units(4, lambda i, o, k, d: CausalConv1d(i, o, k, dilation=d), act=SnakeBeta,
                                 names=("act1", "conv1", "act2", "conv2"))
    assert [u.conv1.dilation[0] for u in named] == [1, 3, 9]
    assert set(named[0].state_dict()) == {"act1.alpha", "act1.beta", "act2.alpha", "act2.beta",
                                          "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"}
    sequential = snake_residual_units(4, lambda i, o, k, d: CausalConv1d(i, o, k, dilation=d))
    assert set(sequential[0].state_dict()) == {"block.0.alpha", "block.1.weight", "block.1.bias", "block.2.alpha",
                                               "block.3.weight", "block.3.bias"}


def test_residual_unit_adds_its_branch_and_centre_trims_unpadded_convs():
    x = torch.randn(1, 2, 10)
    zero = nn.Conv1d(2, 2, 3)  # unpadded: 2 samples shorter
    nn.init.zeros_(zero.weight)
    nn.init.zeros_(zero.bias)
    unit = ResidualUnit(nn.Identity(), zero, nn.Identity(), nn.Conv1d(2, 2, 1), ("snake1", "conv1", "snake2", "conv2"))
    out = unit(x)
    assert out.shape[-1] == 8
    torch.testing.assert_close(out, x[..., 1:-1] + unit.conv2.bias.view(1, 2, 1).expand(1, 2, 8))


def test_nearest_code_agrees_in_both_distance_forms():
    torch.manual_seed(0)
    codebook, x = torch.randn(32, 6), torch.randn(50, 6)
    brute = ((x[:, None] - codebook[None]) ** 2).sum(-1).argmin(-1)
    assert torch.equal(nearest_code(x, codebook), brute)
    assert torch.equal(nearest_code(x, codebook, exact_distance=False), brute)


def test_residual_encode_recovers_codes_of_an_exact_sum():
    torch.manual_seed(0)
    tables = [torch.randn(16, 4) * scale for scale in (10.0, 1.0, 0.1)]
    codes = torch.tensor([[3, 7, 1], [0, 15, 9]])
    x = summed_lookup(codes, tables)
    class Table:
        def __init__(self, table: torch.Tensor) -> None:
            self.table = table

        def encode(self, x: torch.Tensor) -> torch.Tensor:
            return nearest_code(x, self.table)

        def decode(self, codes: torch.Tensor) -> torch.Tensor:
            return self.table[codes]

    stages = [Table(t) for t in tables]
    assert torch.equal(torch.stack(residual_encode(x, stages), dim=-1), codes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_snakes_give_their_formulas_values_bit_for_bit(dtype):
    torch.manual_seed(4)
    x = torch.randn(2, 6, 50, dtype=dtype) * 3
    snake, beta = Snake(6), SnakeBeta(6)
    with torch.no_grad():
        snake.alpha.uniform_(0.2, 2.0)
        beta.alpha.normal_(), beta.beta.normal_()
    snake, beta = snake.to(dtype), beta.to(dtype)
    with torch.inference_mode():
        alpha = snake.alpha.view(1, -1, 1)
        assert torch.equal(snake(x), x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2))
        a, b = beta.alpha.exp()[None, :, None], beta.beta.exp()[None, :, None]
        assert torch.equal(beta(x), x + torch.sin(x * a).pow(2) / (b + 1e-9))
