"""The code predictor's sub-step loop on static buffers padded to a few batch sizes (the CUDA-graph path minus the
capture, on CPU): the same codes and logits as the eager loop, and the eager loop above the largest size."""

from __future__ import annotations

import torch

from tests.stages.models.qwen3_tts.goldens import META, conditioning, golden, modules
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.qwen3_tts.runtime import Qwen3TTSInput, TalkerStageModel
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem


def _inputs(rows: int):
    mods = modules("cv-0b6")
    talker = mods.talker
    generator = torch.Generator().manual_seed(rows)
    hidden = torch.randn(rows, mods.config.talker.hidden_size, generator=generator)
    code0 = torch.randint(0, 1000, (rows,), generator=generator)
    return talker.code_predictor, hidden, talker.embed_codec(code0)


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


def greedy(_group: int, logits: torch.Tensor) -> torch.Tensor:
    return torch.argmax(logits, dim=-1)


def test_padded_sub_steps_give_the_eager_codes_and_logits():
    predictor, hidden, code0 = _inputs(3)
    graphs = predictor.frame_code_graphs((4, 8), capture=False)
    with torch.inference_mode():
        with traced() as path:
            codes, logits = predictor.generate(hidden, code0, greedy)
        padded_codes, padded_logits = predictor.generate(hidden, code0, greedy, graphs=graphs)
        again_codes, _ = predictor.generate(hidden, code0, greedy, graphs=graphs)  # buffers reused: no state leaks
    groups = predictor.config.num_code_groups - 1
    assert codes.shape == (3, groups) and len(torch.unique(codes)) > 3
    assert torch.equal(padded_codes, codes) and torch.equal(again_codes, codes)
    # padded rows change the matmuls' shapes, not what a real row sums
    torch.testing.assert_close(padded_logits, logits, rtol=0, atol=rounding_bound(torch.float32, path.peak, path.steps))
    assert all(runner.replays == 2 and runner.fallbacks == 0 for runner in graphs.runners)


def test_batches_above_the_largest_size_run_the_eager_loop():
    predictor, hidden, code0 = _inputs(5)
    graphs = predictor.frame_code_graphs((2, 4), capture=False)
    with torch.inference_mode():
        codes, _ = predictor.generate(hidden, code0, greedy)
        fallback, _ = predictor.generate(hidden, code0, greedy, graphs=graphs)
    assert torch.equal(fallback, codes)
    assert graphs.runners[0].fallbacks == 1 and all(runner.replays == 0 for runner in graphs.runners)


def test_talker_and_predictor_on_padded_buffers_reproduce_the_golden_codes():
    name = "cv-1b7.custom_voice"
    meta, g = META[name], golden(name)
    mods = modules(meta["variant"])
    sizes = (2, 4)  # one sequence, padded to 2
    talker = TalkerStageModel(mods, 512, cuda_graph_batch_sizes=sizes, graph_capture=False)
    stage = AutoregressiveStage("talker", talker, max_num_seqs=4, max_num_batched_tokens=256, cuda_graph_batch_sizes=sizes,
                                graph_capture=False)
    inputs = Qwen3TTSInput(conditioning(name), SamplingParams(temperature=0.0, repetition_penalty=1.05, max_new_tokens=len(g["codes"])),
                           SamplingParams(temperature=0.0))
    request = SynthesisRequest(text=meta["text"], stage_input=inputs, output=NullOutput())
    stage.add(StageItem(request))
    frames = []
    with torch.inference_mode():
        while stage.has_work():
            frames.extend(item.payload for item in stage.step() if item.payload is not None)
    assert torch.equal(torch.cat(frames), g["codes"])
    assert stage.graphs.replays == len(g["codes"]) - 1  # every step after the prompt's
    assert talker.predictor_graphs.runners[0].replays == len(g["codes"])
