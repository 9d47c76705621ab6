"""Every tensor the runtime and the families make is on the model's device.

No GPU is needed: the step loop runs with torch's default device set to "meta",
so any tensor created without an explicit device lands on "meta" and the first
operation mixing it with the model's CPU tensors fails (on CUDA that bug is a
device mismatch or a silent host round-trip). Each family serves a short greedy
and a short seeded request through its own deploy defaults, stage by stage. A
request's admission (prompt building on the host) runs outside the meta scope,
whichever stage admits it; every step runs inside. Tiny checkpoints come from
tests/tiny_checkpoints.py (the template's from its own build.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.family_cases import CASES, CLONES, Collect, family
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.decode_graphs import DecodeGraphs
from vocalis.stages.runtime.deploy import load_deploy
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def use_padded_buffers(stages) -> None:
    """Turn on the CUDA-graph path minus the capture (cuda_graph_batch_sizes is used on CUDA only): the talker's
    decode steps and Qwen3-TTS's code predictor on static buffers padded to 1, 2, 4."""
    for stage in stages:
        if isinstance(stage, AutoregressiveStage):
            stage.graphs = DecodeGraphs(stage.model.forward, stage.cache, (1, 2, 4), stage.model.cache_shape.max_len, capture=False)
            if hasattr(stage.model, "predictor_graphs"):
                stage.model.predictor_graphs = stage.model.talker.code_predictor.frame_code_graphs((1, 2, 4), capture=False)


@pytest.mark.parametrize(("name", "padded"), [(name, False) for name in CASES] + [("tiny_tts", True), ("qwen3_tts", True)])
def test_pipeline_steps_make_no_tensor_off_the_model_device(name, padded, tmp_path):
    checkpoint, text, fields = CASES[name]
    path = checkpoint(tmp_path)
    t = np.arange(16000 * 3) / 16000
    reference = ReferenceAudio((0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), 16000, text="a short prompt.") if name in CLONES else None
    fam = family(name, path)
    model = fam.load(path, load_deploy(fam.deploy_defaults))
    try:
        requests = []
        for extra in ({}, {"seed": 7, "extra_params": {"temperature": 0.8}} if name == "tiny_tts" else {"seed": 7}):
            voice = model.adapter.resolve_voice("") or (model.capabilities.voices[0] if model.capabilities.voices and reference is None else "")
            params = RequestParams(model=model.name, voice=voice, fields={**fields, **extra}, reference=reference)
            requests.append(SynthesisRequest(text=text, stage_input=model.adapter.stage_input(params), output=Collect()))
        stages = model.pipeline.stages
        if padded:
            use_padded_buffers(stages)
        # stage 0 takes its requests outside the meta scope: adapters and prompt building run on the event loop /
        # at admission; what must be device-clean is what runs every step
        for r in requests:
            stages[0].add(StageItem(r))
        finished = set()
        torch.set_default_device("meta")
        try:
            with torch.inference_mode():
                for _ in range(2000):
                    if not any(stage.has_work() for stage in stages):
                        break
                    for index, stage in enumerate(stages):
                        if not stage.has_work():
                            continue
                        for item in stage.step():
                            if index + 1 < len(stages):
                                if item.payload is None:  # a request's admission past a PrepareStage: as stage 0's above
                                    torch.set_default_device(None)
                                    try:
                                        stages[index + 1].add(item)
                                    finally:
                                        torch.set_default_device("meta")
                                else:
                                    stages[index + 1].add(item)
                                continue
                            if item.payload is not None:
                                item.request.emit(item.payload)
                            if item.finished:
                                finished.add(id(item.request))
        finally:
            torch.set_default_device(None)
        assert finished == {id(r) for r in requests}
        if padded:
            assert all(stage.graphs.replays > 0 for stage in stages if isinstance(stage, AutoregressiveStage))
        for r in requests:
            audio = np.concatenate(r.output.pieces)
            assert audio.dtype == np.float32 and len(audio) > 0 and np.isfinite(audio).all()
    finally:
        model.close()
