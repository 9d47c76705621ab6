"""The shared transformer layers: each variant's parameter does what it says, and the two attention backends agree."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from tests.tolerance import rounding_bound, traced
from vocalis.stages.layers.attention import QKVAttention
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import (
    LongRoPE,
    StepTable,
    apply_rotary,
    interleaved_rope,
    inverse_frequencies,
    llama3_inverse_frequencies,
    mrope,
    rope,
)
from vocalis.stages.layers.transformer import PreNormDecoderLayer
from vocalis.stages.runtime.kv_cache import CacheShape, PagedKVCache


def test_rmsnorm_normalises_and_scales():
    torch.manual_seed(0)
    norm = RMSNorm(8, eps=0.0)
    with torch.no_grad():
        norm.weight.copy_(torch.arange(1.0, 9.0))
    x = torch.randn(3, 8)
    expected = x / x.pow(2).mean(-1, keepdim=True).sqrt() * torch.arange(1.0, 9.0)
    torch.testing.assert_close(norm(x), expected)


def test_rmsnorm_upcast_is_float32_math_in_bfloat16():
    torch.manual_seed(0)
    x = (torch.randn(4, 64) * 30).bfloat16()
    up, plain = RMSNorm(64, upcast=True).bfloat16(), RMSNorm(64, upcast=False).bfloat16()
    reference = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16()
    assert up(x).dtype == torch.bfloat16 and torch.equal(up(x), reference)
    assert not torch.equal(plain(x), reference)  # bf16 accumulation differs


@pytest.mark.parametrize("shape", [(1, 1, 1024), (3, 5, 16, 128), (7, 96), (2, 33)])
def test_rmsnorm_in_float32_is_the_formula_bit_for_bit(shape):
    """The float32 path runs torch's rms_norm, which must give exactly the ops it stands for (the golden tests'
    float32 parity rests on it)."""
    torch.manual_seed(0)
    x = torch.randn(*shape) * 40
    norm = RMSNorm(shape[-1], eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    expected = norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    assert torch.equal(norm(x), expected)
    strided = x.transpose(0, -2)  # not contiguous where there are three dimensions or more
    assert torch.equal(norm(strided), norm.weight * (strided * torch.rsqrt(strided.pow(2).mean(-1, keepdim=True) + 1e-6)))


@pytest.mark.parametrize(("dtype", "upcast"), [(torch.float32, True), (torch.bfloat16, True), (torch.bfloat16, False)])
def test_rmsnorm_is_its_normalisation_times_its_scale_bit_for_bit(dtype, upcast):
    """`normalize` is the norm before its weight, in each path: what lets QKVAttention norm q and k as one tensor."""
    torch.manual_seed(0)
    norm = RMSNorm(128, eps=1e-6, upcast=upcast, weight_offset=0.5).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
    x = (torch.randn(3, 2, 7, 128) * 20).to(dtype)
    assert torch.equal(norm(x), norm.scale * norm.normalize(x))


def test_rmsnorm_weight_offset_stores_weight_minus_offset():
    norm = RMSNorm(4, weight_offset=1.0)
    assert torch.equal(norm.weight, torch.zeros(4))  # 1 + 0: identity scale at init
    x = torch.randn(2, 4)
    torch.testing.assert_close(norm(x), RMSNorm(4)(x))


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)

    def score(i: int, j: int) -> float:
        cos, sin = rope(torch.tensor([i, j]), 16, 10000.0)
        rq, rk = apply_rotary(q, cos[0], sin[0]), apply_rotary(k, cos[1], sin[1])
        return float(rq @ rk)

    # Float32 angles p * inv_freq are rounded relative to p (at most 104 here, both rotations: eps * 104 on their
    # difference), which the score carries times |q||k|; plus the 16-term dot product itself.
    scale = float(q.norm() * k.norm())
    tolerance = rounding_bound(torch.float32, scale * 104, 1) + rounding_bound(torch.float32, scale, 16)
    assert score(7, 3) == pytest.approx(score(104, 100), abs=tolerance)
    assert score(7, 3) != pytest.approx(score(7, 5), abs=tolerance)


def test_rope_is_a_complex_rotation_of_channel_pairs():
    x = torch.randn(8)
    cos, sin = rope(torch.tensor(5), 8, 100.0)
    as_complex = torch.complex(x[:4], x[4:]) * torch.polar(torch.ones(4), 5 * inverse_frequencies(8, 100.0))
    torch.testing.assert_close(apply_rotary(x, cos, sin), torch.cat([as_complex.real, as_complex.imag]))


@pytest.mark.parametrize("interleaved", [True, False])
def test_mrope_with_equal_rows_is_plain_rope(interleaved):
    positions = torch.arange(10)
    cos, sin = mrope(positions.expand(3, -1), 32, 10000.0, [6, 5, 5], interleaved)
    plain_cos, plain_sin = rope(positions, 32, 10000.0)
    assert torch.equal(cos, plain_cos) and torch.equal(sin, plain_sin)


def test_mrope_takes_each_section_from_its_row():
    positions = torch.stack([torch.full((2,), 3), torch.full((2,), 50), torch.full((2,), 900)])
    cos, _ = mrope(positions, 16, 10000.0, [4, 2, 2], interleaved=False)
    inv = inverse_frequencies(16, 10000.0)
    expected = torch.cat([3 * inv[:4], 50 * inv[4:6], 900 * inv[6:8]]).cos()
    torch.testing.assert_close(cos[0, :8], expected)


def test_longrope_divides_frequencies_and_scales():
    head_dim = 8
    short, long = [1.0] * 4, [1.0, 2.0, 4.0, 8.0]
    same = LongRoPE(head_dim, 10000.0, short, long, max_position=64, original_max_position=64)
    cos, sin = same(torch.arange(5))
    assert same.scaling == 1.0 and torch.equal(cos, rope(torch.arange(5), head_dim, 10000.0)[0])
    extended = LongRoPE(head_dim, 10000.0, short, long, max_position=256, original_max_position=64)
    cos, _ = extended(torch.tensor([3]))
    scale = math.sqrt(1 + math.log(4) / math.log(64))
    expected = (3 * inverse_frequencies(head_dim, 10000.0) / torch.tensor(long)).cos() * scale
    torch.testing.assert_close(cos[0, :4], expected)
    with pytest.raises(ValueError, match="needs 4"):
        LongRoPE(head_dim, 10000.0, [1.0], [1.0], 64, 64)


def test_llama3_scaling_keeps_fast_slows_long_and_blends_between():
    inv = inverse_frequencies(128, 500000.0)
    scaled = llama3_inverse_frequencies(inv, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192)
    wavelen = 2 * math.pi / inv
    assert torch.equal(scaled[wavelen < 8192 / 4], inv[wavelen < 8192 / 4])
    assert torch.equal(scaled[wavelen > 8192], inv[wavelen > 8192] / 8)
    between = (wavelen >= 8192 / 4) & (wavelen <= 8192)
    assert between.any()
    assert bool(((scaled[between] < inv[between]) & (scaled[between] > inv[between] / 8)).all())


@pytest.mark.parametrize("make", [partial(rope, head_dim=128, theta=1e6),
                                  partial(interleaved_rope, head_dim=64, theta=1e4, table_dtype=torch.bfloat16)])
def test_a_step_table_gives_each_position_the_rows_made_for_it_alone(make):
    table = StepTable(make, 16)
    for dtype in (None, torch.bfloat16):
        for start, count in ((0, 2), (2, 1), (15, 1), (14, 3), (20, 1)):  # the last two run past the table
            alone = make(torch.arange(start, start + count))
            alone = alone if dtype is None else tuple(t.to(dtype) for t in alone)
            got = table(start, count, torch.device("cpu"), dtype)
            assert all(torch.equal(a, b) for a, b in zip(got, alone, strict=True))
    assert len(table._tables) == 2  # made once per dtype


def test_apply_rotary_upcast_rotates_in_float32():
    torch.manual_seed(0)
    x = (torch.randn(4, 32) * 50).bfloat16()
    cos, sin = rope(torch.arange(4) * 997, 32, 10000.0)
    upcast = apply_rotary(x, cos, sin, upcast=True)
    assert upcast.dtype == torch.bfloat16
    assert torch.equal(upcast, apply_rotary(x.float(), cos, sin).bfloat16())


def test_gated_mlp_uses_its_activation():
    torch.manual_seed(0)
    mlp = GatedMLP(8, 16, act=F.gelu)
    x = torch.randn(2, 8)
    expected = mlp.down_proj(F.gelu(mlp.gate_proj(x)) * mlp.up_proj(x))
    assert torch.equal(mlp(x), expected)
    assert set(mlp.state_dict()) == {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}


def _attention(qk_norm: bool, bias: bool) -> QKVAttention:
    torch.manual_seed(0)
    return QKVAttention(32, heads=4, kv_heads=2, head_dim=8, bias=bias, qk_norm_eps=1e-6 if qk_norm else None).eval()


def test_attention_keys_follow_the_checkpoints():
    keys = set(_attention(qk_norm=True, bias=True).state_dict())
    assert keys == {f"{p}_proj.{w}" for p in "qkvo" for w in ("weight", "bias")} | {"q_norm.weight", "k_norm.weight"}
    assert set(_attention(qk_norm=False, bias=False).state_dict()) == {f"{p}_proj.weight" for p in "qkvo"}


@pytest.mark.parametrize(("qk_norm", "bias"), [(True, False), (False, True)])
def test_cached_attention_in_chunks_equals_dense_causal(qk_norm, bias):
    """Two sequences in one cache: a prefill in two chunks then decodes equals one dense causal pass per sequence."""
    attention = _attention(qk_norm, bias)
    cache = PagedKVCache(CacheShape(num_layers=1, num_kv_heads=2, head_dim=8, max_len=32), num_blocks=8, block_size=4)
    block_tables = [[5, 2, 7], [0, 6]]  # scattered blocks: sequence 0 holds 9 positions, sequence 1 holds 6
    torch.manual_seed(1)
    rows = [torch.randn(9, 32), torch.randn(6, 32)]
    expected = []
    with traced() as path:  # both rows' steps counted: an overestimate
        for x in rows:
            cos, sin = rope(torch.arange(len(x)), 8, 10000.0)
            mask = torch.ones(len(x), len(x), dtype=torch.bool).tril()
            expected.append(attention.dense(x[None], (cos, sin), mask)[0])
    steps = [[(0, 0, 5), (1, 0, 4)], [(0, 5, 4), (1, 4, 1)], [(1, 5, 1)]]  # (sequence, start, length)
    got: list[list[torch.Tensor]] = [[], []]
    with torch.no_grad():
        for step in steps:
            batch = cache.batch([block_tables[s] for s, _, _ in step], [p for _, p, _ in step], [n for _, _, n in step])
            x = torch.cat([rows[s][p:p + n] for s, p, n in step])
            out = attention.cached(x, rope(batch.token_positions, 8, 10000.0), cache, 0, batch)
            for (s, _, _), part in zip(step, out.split([n for _, _, n in step]), strict=True):
                got[s].append(part)
    for s in (0, 1):
        torch.testing.assert_close(torch.cat(got[s]), expected[s], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_dense_attention_kv_list_extends_step_by_step():
    attention = _attention(qk_norm=True, bias=False)
    torch.manual_seed(2)
    x = torch.randn(2, 5, 32)
    cos, sin = rope(torch.arange(5), 8, 10000.0)
    with traced() as path:
        whole = attention.dense(x, (cos, sin), torch.ones(5, 5, dtype=torch.bool).tril())
    kv: list[torch.Tensor] = []
    parts = [attention.dense(x[:, :3], (cos[:3], sin[:3]), torch.ones(3, 3, dtype=torch.bool).tril(), kv)]
    for t in (3, 4):
        parts.append(attention.dense(x[:, t:t + 1], (cos[t:t + 1], sin[t:t + 1]), None, kv))
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
    assert kv[0].shape == (2, 2, 5, 8)


def test_decoder_layer_scales_each_branch():
    torch.manual_seed(0)

    def layer(**scales) -> PreNormDecoderLayer:
        torch.manual_seed(0)
        return PreNormDecoderLayer(32, QKVAttention(32, 4, 4, 8), GatedMLP(32, 64), lambda d: RMSNorm(d), **scales)

    x = torch.randn(1, 4, 32)
    plain, scaled, learned = layer(), layer(residual_scale=0.25), layer(layer_scale=True)
    attn = plain.self_attn.dense(plain.input_layernorm(x), None)
    h = x + attn
    torch.testing.assert_close(plain.dense(x, None), h + plain.mlp(plain.post_attention_layernorm(h)))
    h = x + attn * 0.25
    torch.testing.assert_close(scaled.dense(x, None), h + scaled.mlp(scaled.post_attention_layernorm(h)) * 0.25)
    with torch.no_grad():
        learned.self_attn_layer_scale.scale.fill_(0.0)
        learned.mlp_layer_scale.scale.fill_(0.0)
    torch.testing.assert_close(learned.dense(x, None), x)
    assert {"self_attn_layer_scale.scale", "mlp_layer_scale.scale", "input_layernorm.weight"} <= set(learned.state_dict())
