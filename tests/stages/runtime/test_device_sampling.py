"""Fish Speech, Qwen3-TTS, higgs-audio v2, CosyVoice3 and GLM-TTS sample on the model's device: through each family's
pipeline (tiny checkpoint, its deploy defaults, a greedy and a seeded request side by side), a step's `sample_frames`
reads nothing back to the host but the frames it emits; a seeded request's frames repeat with its seed, and a greedy
one's are the same alone. Fish Speech and Qwen3-TTS run under a repetition penalty, higgs-audio v2's seeded request
under a tight RAS window (every code found in it is drawn again) beside a greedy one without; CosyVoice3 and GLM-TTS
seed RAS (its published window: one repeat in the last 10 redraws) beside a greedy request (CosyVoice3's under the
standard sampler's repetition penalty, GLM-TTS's with no history). What those read of a sequence's past (the
penalty's seen ids, the RAS window) stays on the device: the same tensor every step, updated in place from the drawn
codes. The tiny checkpoints are tests/tiny_checkpoints.py's, through test_device's CASES."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.family_cases import CASES, CLONES, Collect, family
from tests.host_reads import HostReads
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.deploy import load_deploy
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

FAMILIES = ["fish_speech", "qwen3_tts", "higgs_audio_v2", "cosyvoice3", "glm_tts"]
GREEDY = {  # greedy under each family's history rule (Qwen3-TTS's code predictor greedy too)
    "fish_speech": {"temperature": 0.0, "repetition_penalty": 1.5},
    "qwen3_tts": {"temperature": 0.0, "repetition_penalty": 1.5, "subtalker_temperature": 0.0},
    "higgs_audio_v2": {"temperature": 0.0, "ras_win_len": 0},  # RAS off: its redraws are random even when greedy
    "cosyvoice3": {"sampler": "standard", "temperature": 0.0, "repetition_penalty": 1.5},
    "glm_tts": {"temperature": 0.0},
}
SEEDED = {
    "fish_speech": {"repetition_penalty": 1.3},
    "qwen3_tts": {"repetition_penalty": 1.3},
    "higgs_audio_v2": {"ras_win_len": 3, "ras_win_max_num_repeat": 1},
    "cosyvoice3": {},
    "glm_tts": {},
}
TOKENS = {"cosyvoice3": 10, "glm_tts": 10}
"""max_new_tokens where the device-check case's is too short to see RAS at work."""
t = np.arange(16000 * 3) / 16000
CLIP = ReferenceAudio((0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), 16000, text="a short prompt.")
"""The voice CosyVoice3 and GLM-TTS clone."""


def history(name: str, state) -> torch.Tensor | None:
    """The device tensor a sequence's sampling reads its past from (None: it reads none)."""
    if name == "higgs_audio_v2":
        return state.recent if state.recent.numel() else None
    if name in CLONES:
        kept = state.history
        return kept.recent.ring if kept.recent is not None else kept.seen.mask if kept.seen is not None else None
    return state.seen.mask


def holds(name: str, model, state, frame: torch.Tensor) -> bool:
    """Whether the sequence's device history took in the frame [K] it just drew."""
    if name == "higgs_audio_v2":
        return bool((state.recent.cpu() == frame).all(dim=-1).any())
    if name in CLONES:  # the LM's token id: GLM-TTS's frames are speech ids past audio_start, or STOP for any stop id
        ids = [int(frame[0])] if name == "cosyvoice3" else model.stop_ids if frame[0] < 0 else [int(frame[0]) + model.audio_start]
        if state.history.recent is not None:
            return any(i in state.history.recent.ring.tolist() for i in ids)
        return any(bool(state.history.seen.mask[i]) for i in ids)
    code = int(frame[0]) + (model.config.semantic_start_token_id if name == "fish_speech" else 0)
    return bool(state.seen.mask[code])


def run(name: str, model, text: str, fields: dict, seeds: list[int | None], reads: list[list[str]],
        storage: dict[int, set[int]] | None = None, clone: bool | None = None) -> list[torch.Tensor]:
    """Frames of one request per seed (None: greedy), served together; `reads` gets each sample_frames' host reads,
    `storage` each sequence's history tensor's addresses over its steps (after checking it holds the step's frame)."""
    stages = model.pipeline.stages
    talker = next(s for s in stages if isinstance(s, AutoregressiveStage))
    requests = []
    for seed in seeds:
        extra = {"extra_params": GREEDY[name]} if seed is None else {"seed": seed, "extra_params": SEEDED[name]}
        params = RequestParams(model=model.name, voice=model.adapter.resolve_voice("") or "", fields={**fields, **extra},
                               reference=CLIP if (name in CLONES if clone is None else clone) else None)
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


@pytest.fixture(scope="module", params=FAMILIES)
def loaded(request, tmp_path_factory):
    """One family's model at a time (tests are grouped by it): each holds its deployed KV cache, 2 GiB, so the five
    together would need ~10 GB."""
    name = request.param
    checkpoint, text, fields = CASES[name]
    path = checkpoint(tmp_path_factory.mktemp(name))
    if name in TOKENS:
        fields = {**fields, "max_new_tokens": TOKENS[name]}
    fam = family(name, path)
    model = fam.load(path, load_deploy(fam.deploy_defaults))
    yield name, model, text, fields
    model.close()


def test_sampling_reads_back_only_the_frames(loaded):
    name, model, text, fields = loaded
    reads: list[list[str]] = []
    greedy, seeded = run(name, model, text, fields, [None, 7], reads)
    assert reads and all(calls == ["cpu"] for calls in reads)
    again = run(name, model, text, fields, [7], [])[0]
    assert torch.equal(again, seeded)
    assert torch.equal(run(name, model, text, fields, [None], [])[0], greedy)


def test_histories_stay_on_the_device_in_place(loaded):
    name, model, text, fields = loaded
    storage: dict[int, set[int]] = {}
    frames = run(name, model, text, fields, [None, 7], [], storage)
    assert len(storage) == (1 if name in ("higgs_audio_v2", "glm_tts") else 2) and all(len(f) > 2 for f in frames)
    assert all(len(addresses) == 1 for addresses in storage.values())  # one tensor, never rebuilt


@pytest.mark.parametrize("loaded", ["higgs_audio_v2"], indirect=True)
def test_higgs_routes_its_experts_without_reading_the_device(loaded):
    """higgs-audio v2's forward routes each row to the text or audio expert from its sequence's audio positions (on
    the host): nothing read back, and the same rows as the audio column of its inputs, a cloned prompt's clip and
    text rows beside generated frames included."""
    _, model, text, fields = loaded
    talker = next(s for s in model.pipeline.stages if isinstance(s, AutoregressiveStage))
    forward = talker.model.forward
    reads: list[list[str]] = []
    routes: list[tuple[list[bool], list[bool]]] = []

    def watched(embeds, batch, cache, states=None):
        assert states is not None
        with HostReads() as mode:
            out = forward(embeds, batch, cache, states=states)
        reads.append(mode.calls)
        flags = [f for state, start, count in zip(states, batch.start_positions, batch.query_lens, strict=True)
                 for f in state.audio.flags(start, count)]
        routes.append((flags, (embeds[:, -1] > 0.5).tolist()))
        return out

    talker.model.forward = watched
    try:
        run("higgs_audio_v2", model, text, fields, [None, 7], [], clone=True)
    finally:
        talker.model.forward = forward
    assert reads and all(calls == [] for calls in reads)
    assert all(host == column for host, column in routes)
    assert any(all(host) for host, _ in routes) and any(not all(host) and any(host) for host, _ in routes)
