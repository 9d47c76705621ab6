"""GLM-TTS's flow read from its published tensors in plain torch (torch only, no vocalis): the golden tests' oracle for
its DiT, and the whole-utterance flow of bench/real_size_reference.py's GLM-TTS reference, which runs in a venv
without vocalis.

Written from the published architecture, not from Vocalis's modules: explicit softmax attention, complex rotary on the
first head's channels, GRN over the whole sequence, tokens stretched to the mel length by index; the Euler steps over
the cosine schedule with the guided and free rows in one batch. `state` is flow/flow.pt's state dict ("estimator.*").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def reference_dit(state: dict[str, torch.Tensor], heads: int, dim_head: int, x: torch.Tensor, cond: torch.Tensor,
                  tokens: torch.Tensor, t: torch.Tensor, spk: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """The published GLM DiT read from its tensors: x, cond [B, L, *], tokens [B, T], spk [B, 192] -> [B, L, 80]."""
    def linear(h, name):
        return h @ state[name + ".weight"].T + state[name + ".bias"]

    def layer_norm(h, name=None):
        return F.layer_norm(h, (h.shape[-1],), state.get(f"{name}.weight"), state.get(f"{name}.bias"), eps=1e-6)

    b, length, _ = x.shape
    half = state["estimator.time_embed.time_mlp.0.weight"].shape[1] // 2
    freq = torch.exp(-math.log(10000) * torch.arange(half) / (half - 1))
    sinus = torch.cat([torch.sin(1000 * t[:, None] * freq), torch.cos(1000 * t[:, None] * freq)], dim=1)
    temb = linear(F.silu(linear(sinus, "estimator.time_embed.time_mlp.0")), "estimator.time_embed.time_mlp.2")
    temb = torch.cat([temb, spk], dim=-1)
    # tokens stretched to the mel length: frame i reads token floor(i * T / L)
    stretched = torch.stack([tokens[:, (i * tokens.shape[1]) // length] for i in range(length)], dim=1)
    text = state["estimator.text_emb_layer.text_embed.weight"][stretched]
    dim = text.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
    angle = torch.arange(length).float()[:, None] * inv[None]
    text = text + torch.cat([angle.cos(), angle.sin()], dim=-1)
    for k in range(sum(1 for key in state if key.endswith("dwconv.weight"))):
        p = f"estimator.text_emb_layer.text_blocks.{k}"
        y = F.conv1d(text.transpose(1, 2), state[f"{p}.dwconv.weight"], state[f"{p}.dwconv.bias"], padding=state[f"{p}.dwconv.weight"].shape[2] // 2, groups=dim).transpose(1, 2)
        y = F.gelu(linear(layer_norm(y, f"{p}.norm"), f"{p}.pwconv1"))
        energy = y.pow(2).sum(dim=1, keepdim=True).sqrt()  # per channel, over the whole sequence
        y = state[f"{p}.grn.gamma"] * (y * energy / (energy.mean(dim=-1, keepdim=True) + 1e-6)) + state[f"{p}.grn.beta"] + y
        text = text + linear(y, f"{p}.pwconv2")
    h = linear(torch.cat([x, cond, text], dim=-1), "estimator.emb_concator.proj")
    conv = h.transpose(1, 2)
    for index in (0, 2):
        weight = state[f"estimator.emb_concator.conv_pos_embed.conv1d.{index}.weight"]
        conv = F.mish(F.conv1d(conv, weight, state[f"estimator.emb_concator.conv_pos_embed.conv1d.{index}.bias"],
                               padding=weight.shape[2] // 2, groups=h.shape[-1] // weight.shape[1]))
    h = h + conv.transpose(1, 2)
    angles = torch.arange(length)[:, None].float() * state["estimator.rotary_embed.inv_freq"][None]
    rotation = torch.polar(torch.ones_like(angles), angles)

    def rotate(v):
        pairs = torch.view_as_complex(v[..., :dim_head].reshape(b, length, dim_head // 2, 2).contiguous())
        return torch.cat([torch.view_as_real(pairs * rotation).reshape(b, length, dim_head), v[..., dim_head:]], dim=-1)

    for i in range(sum(1 for k in state if k.endswith("attn_norm.linear.weight"))):
        p = f"estimator.transformer_blocks.{i}"
        mods = linear(F.silu(temb), f"{p}.attn_norm.linear").chunk(6, dim=1)
        norm = layer_norm(h) * (1 + mods[1][:, None]) + mods[0][:, None]
        q, k, v = rotate(linear(norm, f"{p}.attn.to_q")), rotate(linear(norm, f"{p}.attn.to_k")), linear(norm, f"{p}.attn.to_v")
        q, k, v = (z.view(b, length, heads, dim_head).permute(0, 2, 1, 3) for z in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dim_head)
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        h = h + mods[2][:, None] * linear((weights @ v).permute(0, 2, 1, 3).reshape(b, length, -1), f"{p}.attn.to_out.0")
        norm = layer_norm(h) * (1 + mods[4][:, None]) + mods[3][:, None]
        h = h + mods[5][:, None] * linear(F.gelu(linear(norm, f"{p}.ff.ff.0.0"), approximate="tanh"), f"{p}.ff.ff.2")
    scale, shift = linear(F.silu(temb), "estimator.norm_out.linear").chunk(2, dim=1)
    return linear(layer_norm(h) * (1 + scale[:, None]) + shift[:, None], "estimator.proj_out")


def reference_mel(state: dict[str, torch.Tensor], ratio: int, tokens: torch.Tensor, prompt_tokens: torch.Tensor,
                  prompt_mel: torch.Tensor, embedding: torch.Tensor, steps: int, noise: torch.Tensor, cfg_rate: float = 0.7,
                  speech_token_cfg: bool = False) -> torch.Tensor:
    """The published whole-utterance flow, every frame attending to every other: mel [1, 80, T * ratio] of `tokens` [T]
    after the voice's prompt (tokens [P], mel [P * ratio, 80], speaker embedding [192]) from `noise` [1, 80, >= L];
    the free row zeroes the prompt mel and the speaker, and the tokens too only with `speech_token_cfg`."""
    dim_head = 2 * state["estimator.rotary_embed.inv_freq"].shape[0]
    heads = state["estimator.proj_out.weight"].shape[1] // dim_head
    every = torch.cat([prompt_tokens, tokens])[None]
    length = every.shape[1] * ratio
    frames = prompt_mel.shape[0]
    cond = torch.zeros(1, length, prompt_mel.shape[1])
    cond[0, :frames] = prompt_mel
    speaker = embedding[None] / embedding.norm().clamp(min=1e-12)
    tokens2 = torch.cat([every, torch.zeros_like(every) if speech_token_cfg else every])
    cond2, speaker2 = torch.cat([cond, torch.zeros_like(cond)]), torch.cat([speaker, torch.zeros_like(speaker)])
    visible = torch.ones(length, length, dtype=torch.bool)
    x = noise[0, :, :length].T[None].clone()  # [1, L, 80]
    times = [1 - math.cos(i / steps * 0.5 * math.pi) for i in range(steps + 1)]
    for i in range(steps):
        velocity = reference_dit(state, heads, dim_head, torch.cat([x, x]), cond2, tokens2, torch.full((2,), times[i]), speaker2, visible)
        guided, free = velocity.chunk(2)
        x = x + (times[i + 1] - times[i]) * ((1 + cfg_rate) * guided - cfg_rate * free)
    return x[:, frames:].transpose(1, 2)
