"""Every tensor of the tiny Drama 3 checkpoint reaches the output: the backbone's logits and the codebook heads'
logits of a teacher-forced prompt (text rows, then semantic frames) have a non-zero gradient with respect to each
published tensor, taken through the loader's renaming, splitting, expert fusion and FP8 dequantisation (an FP8
expert through its dequantised values, its block scales directly), so changing any one of them changes the output.
It runs the model with the experts dequantised on load; test_fp8_experts.py shows the loaded model, which keeps
them FP8 and dequantises at use, computes the same outputs bit for bit.
A tensor the loader accepts but the forward pass leaves out (a misrouted name, an expert no row reaches, a skipped
norm) fails here. One forward and backward pass rather than one perturbed run per tensor: 420 tensors, ~1 s."""

from __future__ import annotations

import dataclasses

import torch
from torch.func import functional_call

from tests.tiny_drama3.build import NUM_CODEBOOKS, SEMANTIC_START
from vocalis.stages.layers.weights import read_safetensors
from vocalis.stages.models.drama3.block_fp8 import dequantize_checkpoint
from vocalis.stages.models.drama3.config import FP8_BLOCK, Drama3Config
from vocalis.stages.models.drama3.modules import Drama3
from vocalis.stages.models.drama3.tower import RowGroup
from vocalis.stages.models.drama3.weights import module_weights

ROWS, TEXT_ROWS = 48, 16


def test_every_published_tensor_reaches_the_output(drama3_dir):
    config = Drama3Config.from_dir(drama3_dir)
    assert config.fp8_experts
    published = read_safetensors(drama3_dir)
    leaves = {n: t.float().requires_grad_() if t.is_floating_point() and t.dtype != torch.float8_e4m3fn else t
              for n, t in published.items()}
    dequantised = dequantize_checkpoint(leaves, FP8_BLOCK)
    fp8 = [n for n, t in published.items() if t.dtype == torch.float8_e4m3fn]
    for name in fp8:
        dequantised[name].retain_grad()
    dense = dataclasses.replace(config, fp8_experts=False)  # dequantised on load: the FP8-kept model's reference
    weights = module_weights(dequantised, dense)
    model = Drama3(dense).eval()
    assert set(weights) == set(model.state_dict())

    g = torch.Generator().manual_seed(4)
    codes = torch.randint(0, config.decoder.vocab_size, (ROWS, NUM_CODEBOOKS), generator=g)
    rows = torch.cat([codes[:, :1] + SEMANTIC_START, codes], dim=1)
    rows[:TEXT_ROWS] = 0
    rows[:TEXT_ROWS, 0] = torch.randint(0, SEMANTIC_START, (TEXT_ROWS,), generator=g)
    probe = Probe(model, rows)
    out = functional_call(probe, {f"model.{n}": t for n, t in weights.items()}, ())  # strict would ask for the non-persistent buffers too
    assert torch.isfinite(out).all()
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    grads = {n: (dequantised[n] if n in fp8 else t).grad for n, t in leaves.items()}
    inert = sorted(n for n, grad in grads.items() if grad is None or not grad.abs().gt(0).any())
    assert not inert, f"{len(inert)} published tensors do not reach the output: {inert[:10]}"
    assert len(grads) == len(published) > 400 and len(fp8) >= 96


class Probe(torch.nn.Module):
    """The backbone over `rows`, then the tower teacher-forced on every row: full-vocabulary logits and every
    codebook head's logits, flattened."""

    def __init__(self, model: Drama3, rows: torch.Tensor) -> None:
        super().__init__()
        self.model, self.rows = model, rows

    def forward(self) -> torch.Tensor:
        model, rows = self.model, self.rows
        hidden = model.backbone.dense(model.embed_rows(rows)[None])[0]
        heads: list[torch.Tensor] = []

        def choose(j: int, logits: torch.Tensor) -> torch.Tensor:
            heads.append(logits)
            return rows[1:, 2 + j]

        model.tower.run(hidden[:-1], torch.arange(len(rows) - 1), rows[:-1], rows[1:, 0],
                        [RowGroup(model.tower.new_cache(torch.float32, "cpu"), 0, len(rows) - 1)], choose=choose)
        return torch.cat([model.logits(hidden).flatten(), *(h.flatten() for h in heads)])
