"""Fish Speech, Qwen3-TTS and higgs-audio v2 sample on the model's device: through each family's pipeline (tiny
checkpoint, its deploy defaults, a greedy and a seeded request side by side), a step's `sample_frames` reads nothing
back to the host but the frames it emits; a seeded request's frames repeat with its seed, and a greedy one's are the
same alone. Fish Speech and Qwen3-TTS run under a repetition penalty, higgs-audio v2's seeded request under a tight
RAS window (every code found in it is drawn again) beside a greedy one without, and what those read of a sequence's past (the penalty's seen ids, the RAS window)
stays on the device: the same tensor every step, updated in place from the drawn codes."""

from __future__ import annotations

import pytest
import torch

from tests.host_reads import HostReads
from tests.stages.test_device import CASES, Collect, bench_gpu, family
from vocalis.stages.autoregressive import AutoregressiveStage
from vocalis.stages.deploy import load_deploy
from vocalis.stages.request import RequestParams, SynthesisRequest
from vocalis.stages.stage import StageItem

FAMILIES = ["fish_speech", "qwen3_tts", "higgs_audio_v2"]
GREEDY = {  # greedy under each family's history rule (Qwen3-TTS's code predictor greedy too)
    "fish_speech": {"temperature": 0.0, "repetition_penalty": 1.5},
    "qwen3_tts": {"temperature": 0.0, "repetition_penalty": 1.5, "subtalker_temperature": 0.0},
    "higgs_audio_v2": {"temperature": 0.0, "ras_win_len": 0},  # RAS off: its redraws are random even when greedy
}
SEEDED = {
    "fish_speech": {"repetition_penalty": 1.3},
    "qwen3_tts": {"repetition_penalty": 1.3},
    "higgs_audio_v2": {"ras_win_len": 3, "ras_win_max_num_repeat": 1},
}


def history(name: str, state) -> torch.Tensor | None:
    """The device tensor a sequence's sampling reads its past from (None: it reads none)."""
    if name == "higgs_audio_v2":
        return state.recent if state.recent.numel() else None
    return state.seen.mask


def holds(name: str, model, state, frame: torch.Tensor) -> bool:
    """Whether the sequence's device history took in the frame [K] it just drew."""
    if name == "higgs_audio_v2":
        return bool((state.recent.cpu() == frame).all(dim=-1).any())
    code = int(frame[0]) + (model.config.semantic_start_token_id if name == "fish_speech" else 0)
    return bool(state.seen.mask[code])


def run(name: str, model, text: str, fields: dict, seeds: list[int | None], reads: list[list[str]],
        storage: dict[int, set[int]] | None = None) -> list[torch.Tensor]:
    """Frames of one request per seed (None: greedy), served together; `reads` gets each sample_frames' host reads,
    `storage` each sequence's history tensor's addresses over its steps (after checking it holds the step's frame)."""
    stages = model.pipeline.stages
    talker = next(s for s in stages if isinstance(s, AutoregressiveStage))
    requests = []
    for seed in seeds:
        extra = {"extra_params": GREEDY[name]} if seed is None else {"seed": seed, "extra_params": SEEDED[name]}
        params = RequestParams(model=model.name, voice=model.adapter.resolve_voice("") or "", fields={**fields, **extra})
        requests.append(SynthesisRequest(text=text, stage_input=model.adapter.stage_input(params), output=Collect()))
    frames: dict[int, list[torch.Tensor]] = {id(r): [] for r in requests}
    sample = talker.model.sample_frames

    def watched(hidden, samplers, histories, states):
        with HostReads() as mode:
            out = sample(hidden, samplers, histories, states)
        reads.append(mode.calls)
        if storage is not None:
            for state, frame in zip(states, out, strict=True):
                if history(name, state) is None:
                    continue
                assert holds(name, talker.model, state, frame)
                storage.setdefault(id(state), set()).add(history(name, state).data_ptr())
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


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    loaded = {}

    def load(name: str):
        if name not in loaded:
            path, text, fields = CASES[name]
            path = bench_gpu().tiny_checkpoint(path, tmp_path_factory.mktemp(name)) if isinstance(path, str) else path
            fam = family(name, path)
            loaded[name] = fam.load(path, load_deploy(fam.deploy_defaults)), text, fields
        return loaded[name]

    return load


@pytest.mark.parametrize("name", FAMILIES)
def test_sampling_reads_back_only_the_frames(name, models):
    model, text, fields = models(name)
    reads: list[list[str]] = []
    greedy, seeded = run(name, model, text, fields, [None, 7], reads)
    assert reads and all(calls == ["cpu"] for calls in reads)
    again = run(name, model, text, fields, [7], [])[0]
    assert torch.equal(again, seeded)
    assert torch.equal(run(name, model, text, fields, [None], [])[0], greedy)


@pytest.mark.parametrize("name", FAMILIES)
def test_histories_stay_on_the_device_in_place(name, models):
    model, text, fields = models(name)
    storage: dict[int, set[int]] = {}
    frames = run(name, model, text, fields, [None, 7], [], storage)
    assert len(storage) == (1 if name == "higgs_audio_v2" else 2) and all(len(f) > 2 for f in frames)
    assert all(len(addresses) == 1 for addresses in storage.values())  # one tensor, never rebuilt
