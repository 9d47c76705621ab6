"""CosyVoice3's flow read from its published tensors in plain torch (torch only, no vocalis): the golden tests' oracle
for the DiT and the flow's whole-utterance inference, and the flow of bench/real_size_reference.py's CosyVoice3
reference, which runs in a venv without vocalis.

Written from the published architecture (`CausalMaskedDiffWithDiT.inference`, `CausalConditionalCFM`, the F5-style
`DiT`), not from Vocalis's modules: explicit softmax attention, complex-number rotary on the first head's channels,
the chunk mask by loops, the Euler steps over the cosine schedule with the guided and free rows in one batch as the
published solver runs them. `state` is flow.pt's state dict with the `decoder.` prefix taken off the estimator's
names ("estimator.*"), beside "input_embedding.*", "spk_embed_affine_layer.*" and "pre_lookahead_layer.*".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def linear(state: dict[str, torch.Tensor], h: torch.Tensor, name: str) -> torch.Tensor:
    return h @ state[name + ".weight"].T + state[name + ".bias"]


def reference_dit(state: dict[str, torch.Tensor], heads: int, dim_head: int, chunk: int, x: torch.Tensor, mu: torch.Tensor,
                  t: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
    """The published DiT read from its tensors: [B, 80, L] in and out; `chunk` mel frames per attention chunk (a frame
    sees to its chunk's end)."""
    x, mu, cond = x.transpose(1, 2), mu.transpose(1, 2), cond.transpose(1, 2)
    b, length, _ = x.shape
    half = state["estimator.time_embed.time_mlp.0.weight"].shape[1] // 2
    freq = torch.exp(-math.log(10000) * torch.arange(half) / (half - 1))
    sinus = torch.cat([torch.sin(1000 * t[:, None] * freq), torch.cos(1000 * t[:, None] * freq)], dim=1)
    temb = linear(state, F.silu(linear(state, sinus, "estimator.time_embed.time_mlp.0")), "estimator.time_embed.time_mlp.2")
    h = linear(state, torch.cat([x, cond, mu, spks[:, None].expand(b, length, -1)], dim=-1), "estimator.input_embed.proj")
    conv = h.transpose(1, 2)
    for name in ("conv1", "conv2"):
        weight, bias = state[f"estimator.input_embed.conv_pos_embed.{name}.0.weight"], state[f"estimator.input_embed.conv_pos_embed.{name}.0.bias"]
        conv = F.mish(F.conv1d(F.pad(conv, (weight.shape[2] - 1, 0)), weight, bias, groups=h.shape[-1] // weight.shape[1]))
    h = h + conv.transpose(1, 2)
    angles = torch.arange(length)[:, None].float() * state["estimator.rotary_embed.inv_freq"][None]  # [L, dim_head / 2]
    rotation = torch.polar(torch.ones_like(angles), angles)

    def rotate(v):  # the first dim_head channels, as complex pairs (0,1), (2,3), ...
        pairs = torch.view_as_complex(v[..., :dim_head].reshape(b, length, dim_head // 2, 2).contiguous())
        return torch.cat([torch.view_as_real(pairs * rotation).reshape(b, length, dim_head), v[..., dim_head:]], dim=-1)

    visible = torch.tensor([[j < (i // chunk + 1) * chunk for j in range(length)] for i in range(length)])
    for i in range(sum(1 for k in state if k.endswith("attn_norm.linear.weight"))):
        p = f"estimator.transformer_blocks.{i}"
        mods = linear(state, F.silu(temb), f"{p}.attn_norm.linear").chunk(6, dim=1)
        norm = F.layer_norm(h, (h.shape[-1],), eps=1e-6) * (1 + mods[1][:, None]) + mods[0][:, None]
        q, k, v = rotate(linear(state, norm, f"{p}.attn.to_q")), rotate(linear(state, norm, f"{p}.attn.to_k")), linear(state, norm, f"{p}.attn.to_v")
        q, k, v = (z.view(b, length, heads, dim_head).permute(0, 2, 1, 3) for z in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dim_head)
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        attended = (weights @ v).permute(0, 2, 1, 3).reshape(b, length, heads * dim_head)
        h = h + mods[2][:, None] * linear(state, attended, f"{p}.attn.to_out.0")
        norm = F.layer_norm(h, (h.shape[-1],), eps=1e-6) * (1 + mods[4][:, None]) + mods[3][:, None]
        ff = linear(state, F.gelu(linear(state, norm, f"{p}.ff.ff.0.0"), approximate="tanh"), f"{p}.ff.ff.2")
        h = h + mods[5][:, None] * ff
    scale, shift = linear(state, F.silu(temb), "estimator.norm_out.linear").chunk(2, dim=1)
    h = F.layer_norm(h, (h.shape[-1],), eps=1e-6) * (1 + scale[:, None]) + shift[:, None]
    return linear(state, h, "estimator.proj_out").transpose(1, 2)


def estimator_shape(state: dict[str, torch.Tensor]) -> tuple[int, int]:
    """(heads, dim_head) from the tensors: the rotary covers one head's channels."""
    dim_head = 2 * state["estimator.rotary_embed.inv_freq"].shape[0]
    return state["estimator.proj_out.weight"].shape[1] // dim_head, dim_head


def token_features(state: dict[str, torch.Tensor], tokens: torch.Tensor, ratio: int) -> torch.Tensor:
    """Speech tokens [T] -> mu [1, 80, T * ratio]: the embedding, the pre-lookahead layer (conv1 reads
    kernel - 1 tokens ahead, zeros past the end; leaky ReLU; conv2 causal; residual), each token's row `ratio` times."""
    embedded = state["input_embedding.weight"][tokens.clamp(min=0)].T[None]  # [1, 80, T]
    conv1, conv2 = state["pre_lookahead_layer.conv1.weight"], state["pre_lookahead_layer.conv2.weight"]
    h = F.leaky_relu(F.conv1d(F.pad(embedded, (0, conv1.shape[2] - 1)), conv1, state["pre_lookahead_layer.conv1.bias"]))
    h = F.conv1d(F.pad(h, (conv2.shape[2] - 1, 0)), conv2, state["pre_lookahead_layer.conv2.bias"]) + embedded
    return h.repeat_interleave(ratio, dim=2)


def reference_mel(state: dict[str, torch.Tensor], chunk: int, ratio: int, tokens: torch.Tensor, prompt_tokens: torch.Tensor,
                  prompt_mel: torch.Tensor, embedding: torch.Tensor, steps: int, noise: torch.Tensor, cfg_rate: float = 0.7) -> torch.Tensor:
    """The published whole-utterance flow: mel [1, 80, T * ratio] of `tokens` [T] after the voice's prompt (tokens [P],
    mel [P * ratio, 80], speaker embedding [E]), from `noise` [1, 80, >= (P + T) * ratio] (the published fixed seed-0
    draw); `steps` Euler steps on t = 1 - cos(pi/2 * s), the guided row (mu, speaker, prompt) and the free row (all
    zero) in one batch, v = (1 + cfg_rate) * guided - cfg_rate * free."""
    heads, dim_head = estimator_shape(state)
    normed = embedding[None] / embedding.norm().clamp(min=1e-12)
    spks = linear(state, normed, "spk_embed_affine_layer")  # [1, 80]
    mu = token_features(state, torch.cat([prompt_tokens, tokens]), ratio)
    frames = prompt_mel.shape[0]
    cond = torch.zeros_like(mu)
    cond[0, :, :frames] = prompt_mel.T
    x = noise[:, :, : mu.shape[2]].clone()
    times = [1 - math.cos(i / steps * 0.5 * math.pi) for i in range(steps + 1)]
    mu2, spks2, cond2 = (torch.cat([v, torch.zeros_like(v)]) for v in (mu, spks, cond))
    for i in range(steps):
        velocity = reference_dit(state, heads, dim_head, chunk, torch.cat([x, x]), mu2, torch.full((2,), times[i]), spks2, cond2)
        guided, free = velocity.chunk(2)
        x = x + (times[i + 1] - times[i]) * ((1 + cfg_rate) * guided - cfg_rate * free)
    return x[:, :, frames:]


def flow_state(flow_pt: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """flow.pt's state dict under this module's names (float32)."""
    return {k.removeprefix("decoder."): v.float() for k, v in flow_pt.items()}
