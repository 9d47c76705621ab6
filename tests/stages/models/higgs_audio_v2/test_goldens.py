"""Parity with transformers' native higgs-audio v2 (tests/goldens/higgs_audio_v2/make_goldens.py) on the tiny checkpoint.

Teacher-forced: the reference's sampled frames are fed back through the runtime's two stages, so every step's logits,
the delay pattern's forced codebooks, the end of the stream and the streamed audio (chunked as deployed) are compared
one to one, to float32 rounding along the stages' paths; prompt ids exactly, and a reference clip's codes in the delay pattern exactly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tolerance import Trace, rounding_bound, traced
from vocalis.stages.models.higgs_audio_v2.delay import DelayStep
from vocalis.stages.models.higgs_audio_v2.family import FAMILY
from vocalis.stages.models.higgs_audio_v2.loader import load_modules
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsCodecDecoder, HiggsInput, HiggsTalkerModel
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.deploy import load_deploy
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import ReferenceAudio, SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams

CASES = ("plain", "clone")


class TeacherForced(HiggsTalkerModel):
    """The talker, fed the reference's frames instead of its own draws; records raw logits and forced codebooks."""

    def __init__(self, *args, frames: torch.Tensor, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.frames = frames
        self.logits: list[torch.Tensor] = []
        self.forced: list[torch.Tensor] = []
        self.passes: list[Trace] = []  # each forward pass and its logits, traced (not the reference clip's encoding)

    def forward(self, *args, **kwargs):
        with traced() as path:
            hidden = super().forward(*args, **kwargs)
        self.passes.append(path)
        return hidden

    def sample_frames(self, hidden, samplers, histories, states):
        step = DelayStep(states)
        with traced() as path:
            raw = self.talker.logits(hidden).float()
        self.passes.append(path)
        masked = step.mask(raw)[0]
        self.logits.append(raw[0])
        self.forced.append(torch.isfinite(masked).sum(-1) == 1)
        frame = self.frames[len(self.logits) - 1]
        assert torch.isfinite(masked[torch.arange(len(frame)), frame]).all(), "the reference drew an id the delay pattern forbids"
        step.advance(frame[None])
        return frame[None]


def stage_input(meta: dict, g: dict, name: str) -> HiggsInput:
    reference = None
    if meta["ref_text"] is not None:
        reference = ReferenceAudio(samples=g[f"{name}.clip"].numpy(), sample_rate=24000, text=meta["ref_text"])
    return HiggsInput(SamplingParams(max_new_tokens=meta["max_new_tokens"] - 1), reference)


def run(path: Path, name: str, g: dict, meta: dict) -> tuple[TeacherForced, np.ndarray, list[int]]:
    talker, codec, tokenizer = load_modules(path)
    generated = g[f"{name}.generated"].long()
    model = TeacherForced(talker, tokenizer, codec, 1024, frames=generated[1:])
    policy = load_deploy(FAMILY.deploy_defaults).stage("code2wav").chunk_policy()
    pipeline = Pipeline([AutoregressiveStage("talker", model, max_num_seqs=2, max_num_batched_tokens=64, handover=policy),
                         ChunkStage("code2wav", HiggsCodecDecoder(codec, talker.config.num_codes), policy)])

    async def go():
        request = SynthesisRequest(text=meta["text"], stage_input=stage_input(meta, g, name), output=AudioOutput())
        pipeline.submit(request)
        return [chunk async for chunk in request.output]

    try:
        pieces = asyncio.run(go())
    finally:
        pipeline.close()
    return model, np.concatenate(pieces), [len(p) for p in pieces]


@pytest.mark.parametrize("name", CASES)
def test_prompt_ids_and_reference_rows_match(native_dir, goldens, name):
    g, meta = goldens[0], goldens[1]["cases"][name]
    talker, codec, tokenizer = load_modules(native_dir)
    model = HiggsTalkerModel(talker, tokenizer, codec, 1024)
    prompt = model.prompt(meta["text"], stage_input(meta, g, name))
    ids = g[f"{name}.input_ids"].tolist()
    if prompt.audio is None:
        assert prompt.before == ids
        return
    assert prompt.before == ids[: len(prompt.before)] and list(prompt.after) == ids[len(ids) - len(prompt.after):]
    assert len(prompt) == len(ids)
    assert torch.equal(prompt.audio, g[f"{name}.audio_input_ids"])


@pytest.mark.parametrize("name", CASES)
def test_teacher_forced_logits_delay_pattern_and_streamed_audio(native_dir, goldens, name):
    g, info = goldens
    meta = info["cases"][name]
    with traced(threads=True) as path:  # the stages' worker threads, each traced
        model, audio, chunks = run(native_dir, name, g, meta)
    codec = path.threads["stage-code2wav"]
    # a step's logits chain one pass and the head (earlier steps' keys and values enter at the same depth, in
    # parallel): at most twice the largest traced call's steps, at the largest value of any
    talker = rounding_bound(torch.float32, max(p.peak for p in model.passes), 2 * max(p.steps for p in model.passes))
    generated = g[f"{name}.generated"].long()
    assert meta["ended_with_eos"] and len(model.logits) == len(generated) - 1  # it stops at the all-EOS frame
    steps = info["logit_steps"] - 1
    torch.testing.assert_close(torch.stack(model.logits[:steps]), g[f"{name}.logits"][1 : steps + 1], atol=talker, rtol=0)
    assert torch.equal(torch.stack(model.forced), g[f"{name}.forced"][1:].bool())
    wave = g[f"{name}.waveform"].numpy()
    assert len(chunks) >= 2 and chunks[0] == 960  # a first chunk of one frame, then the rest as frames come
    assert audio.shape == wave.shape
    np.testing.assert_allclose(audio, wave, atol=rounding_bound(torch.float32, codec.peak, codec.steps), rtol=0)


def test_boson_layout_loads_the_same_model(native_dir, boson_dir, goldens):
    g, info = goldens
    meta = info["cases"]["plain"]
    native, _, _ = run(native_dir, "plain", g, meta)
    with traced(threads=True) as path:
        boson, audio, _ = run(boson_dir, "plain", g, meta)
    codec = path.threads["stage-code2wav"]
    assert boson.talker.config.layout == "higgs_audio"
    torch.testing.assert_close(torch.stack(boson.logits), torch.stack(native.logits), atol=0, rtol=0)
    np.testing.assert_allclose(audio, g["plain.waveform"].numpy(), atol=rounding_bound(torch.float32, codec.peak, codec.steps), rtol=0)
