"""Continuous batching: a seeded request's frames do not depend on what else runs beside it (sampled as deployed:
temperature 1, top-k 50, top-p 0.95, RAS), whether the others start with it or join mid-way, clone or not."""

from __future__ import annotations

from collections import defaultdict

import torch

from vocalis.stages.models.higgs_audio_v2.adapter import HiggsAudioV2Adapter
from vocalis.stages.models.higgs_audio_v2.loader import load_modules
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsTalkerModel
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


def request(adapter: HiggsAudioV2Adapter, text: str, seed: int, reference: ReferenceAudio | None = None) -> SynthesisRequest:
    params = RequestParams(model="tiny", voice="default", fields={"seed": seed, "max_new_tokens": 24}, reference=reference)
    return SynthesisRequest(text=text, stage_input=adapter.stage_input(params), output=NullOutput())


def drive(stage: AutoregressiveStage, joins: dict[int, list[SynthesisRequest]]) -> dict[int, torch.Tensor]:
    frames: dict[int, list[torch.Tensor]] = defaultdict(list)
    step = 0
    while joins or stage.has_work():
        for r in joins.pop(step, []):
            stage.add(StageItem(r))
        with torch.inference_mode():
            for item in stage.step():
                frames[id(item.request)].append(item.payload)
        step += 1
    return {key: torch.cat(value) for key, value in frames.items()}


def test_seeded_frames_do_not_depend_on_the_batch(native_dir, goldens):
    g, info = goldens
    talker, codec, tokenizer = load_modules(native_dir)
    adapter = HiggsAudioV2Adapter(24000)
    reference = ReferenceAudio(samples=g["clone.clip"].numpy(), sample_rate=24000, text=info["cases"]["clone"]["ref_text"])
    specs = [("Hello world.", 1, None), ("The quick brown fox.", 2, reference), ("It was the night before my birthday.", 3, None)]

    def stage() -> AutoregressiveStage:
        return AutoregressiveStage("talker", HiggsTalkerModel(talker, tokenizer, codec, 1024), max_num_seqs=4, max_num_batched_tokens=64)

    alone = []
    for text, seed, ref in specs:
        r = request(adapter, text, seed, ref)
        alone.append(drive(stage(), {0: [r]})[id(r)])
    together = [request(adapter, text, seed, ref) for text, seed, ref in specs]
    out = drive(stage(), {0: together[:1], 3: together[1:2], 5: together[2:]})
    assert all(len(a) > 8 for a in alone)
    for a, r in zip(alone, together, strict=True):
        assert torch.equal(out[id(r)], a)
    assert not torch.equal(alone[0][:8], alone[2][:8])
