"""Every tensor the tiny talker loads changes its output when perturbed (none is silently unused).

The probe is a cloning prompt (text and audio positions, so both DualFFN experts run) followed by generated frames,
through the runtime's cached attention; the output compared is every position's audio logits.
"""

from __future__ import annotations

import torch

from vocalis.stages.models.higgs_audio_v2.loader import load_modules
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsInput, HiggsTalkerModel
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.request import ReferenceAudio
from vocalis.stages.runtime.sampling import SamplingParams


def probe(model: HiggsTalkerModel, rows: torch.Tensor, cache: PagedKVCache) -> torch.Tensor:
    table: list[int] = []
    cache.blocks.grow(table, len(rows))
    batch = cache.batch([table], [0], [len(rows)])
    with torch.inference_mode():
        out = model.talker.logits(model.forward(rows, batch, cache))
    cache.blocks.release(table)
    return out


def test_every_weight_matters(native_dir, goldens):
    g, info = goldens
    talker, codec, tokenizer = load_modules(native_dir)
    model = HiggsTalkerModel(talker, tokenizer, codec, 1024)
    meta = info["cases"]["clone"]
    reference = ReferenceAudio(samples=g["clone.clip"].numpy(), sample_rate=24000, text=meta["ref_text"])
    prompt = model.prompt(meta["text"], HiggsInput(SamplingParams(), reference))
    with torch.inference_mode():
        rows = torch.cat([model.prompt_rows(prompt), model.audio_rows(g["clone.generated"][1:6].long())])
    cache = PagedKVCache.from_budget(model.cache_shape, len(rows) * model.cache_shape.bytes_per_position(4) * 2, 16)
    base = probe(model, rows, cache)
    generator = torch.Generator().manual_seed(0)
    for name, tensor in talker.state_dict().items():
        original = tensor.clone()
        with torch.no_grad():
            tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.1)
        with torch.inference_mode():
            rows_now = torch.cat([model.prompt_rows(prompt), model.audio_rows(g["clone.generated"][1:6].long())])
        changed = not torch.allclose(probe(model, rows_now, cache), base, atol=1e-6, rtol=0)
        with torch.no_grad():
            tensor.copy_(original)
        assert changed, f"{name} does not change the output"
