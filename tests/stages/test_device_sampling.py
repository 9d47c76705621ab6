"""Fish Speech and Qwen3-TTS sample on the model's device: through each family's pipeline (tiny checkpoint, its deploy
defaults, a greedy and a seeded request side by side), a step's `sample_frames` reads nothing back to the host but
the frames it emits; a seeded request's frames repeat with its seed, and a greedy one's are the same alone. Both
run under a repetition penalty (the batched one on the device)."""

from __future__ import annotations

import pytest
import torch

from tests.host_reads import HostReads
from tests.stages.test_device import CASES, Collect, bench_gpu, family
from vocalis.stages.autoregressive import AutoregressiveStage
from vocalis.stages.deploy import load_deploy
from vocalis.stages.request import RequestParams, SynthesisRequest
from vocalis.stages.stage import StageItem


def run(name: str, model, text: str, fields: dict, seeds: list[int | None], reads: list[list[str]]) -> list[torch.Tensor]:
    """Frames of one request per seed (None: greedy), served together; `reads` gets each sample_frames' host reads."""
    stages = model.pipeline.stages
    talker = next(s for s in stages if isinstance(s, AutoregressiveStage))
    greedy_predictor = {"subtalker_temperature": 0.0} if name == "qwen3_tts" else {}
    requests = []
    for seed in seeds:
        if seed is None:  # greedy under a repetition penalty (Qwen3-TTS's code predictor greedy too)
            extra = {"extra_params": {"temperature": 0.0, "repetition_penalty": 1.5} | greedy_predictor}
        else:
            extra = {"seed": seed, "extra_params": {"repetition_penalty": 1.3}}
        params = RequestParams(model=model.name, voice=model.adapter.resolve_voice("") or "", fields={**fields, **extra})
        requests.append(SynthesisRequest(text=text, stage_input=model.adapter.stage_input(params), output=Collect()))
    frames: dict[int, list[torch.Tensor]] = {id(r): [] for r in requests}
    sample = talker.model.sample_frames

    def watched(*args, **kwargs):
        with HostReads() as mode:
            out = sample(*args, **kwargs)
        reads.append(mode.calls)
        return out

    talker.model.sample_frames = watched
    try:
        for r in requests:
            stages[0].add(StageItem(r))
        with torch.inference_mode():
            while any(stage.has_work() for stage in stages[: stages.index(talker) + 1]):
                for index, stage in enumerate(stages[: stages.index(talker) + 1]):
                    for item in stage.step() if stage.has_work() else []:
                        if stage is talker:
                            if item.payload is not None:
                                frames[id(item.request)].append(item.payload)
                        else:
                            stages[index + 1].add(item)
    finally:
        talker.model.sample_frames = sample
    return [torch.cat(frames[id(r)]) for r in requests]


@pytest.mark.parametrize("name", ["fish_speech", "qwen3_tts"])
def test_sampling_reads_back_only_the_frames(name, tmp_path):
    path, text, fields = CASES[name]
    path = bench_gpu().tiny_checkpoint(path, tmp_path) if isinstance(path, str) else path
    fam = family(name, path)
    model = fam.load(path, load_deploy(fam.deploy_defaults))
    reads: list[list[str]] = []
    greedy, seeded = run(name, model, text, fields, [None, 7], reads)
    assert reads and all(calls == ["cpu"] for calls in reads)
    again = run(name, model, text, fields, [7], [])[0]
    assert torch.equal(again, seeded)
    assert torch.equal(run(name, model, text, fields, [None], [])[0], greedy)
