"""The decode-step runner on static buffers padded to a few batch sizes: the CUDA-graph path minus the capture, on CPU."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from tests.stages.runtime.test_runtime import drive, request
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models._template.runtime import TinyTalkerModel
from vocalis.stages.models._template.weights import load_modules
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.deploy import load_deploy
from vocalis.stages.runtime.graph_runner import PaddedGraphRunner
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    return load_modules(build_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-tts", eos_token_id=64))


@pytest.fixture(scope="module")
def eager(modules) -> list[torch.Tensor]:
    """Every request's frames from the ordinary eager step."""
    return frames_of(stage(modules))


def stage(modules, sizes=()) -> AutoregressiveStage:
    _, talker, _ = modules
    return AutoregressiveStage("talker", TinyTalkerModel(talker, 512), max_num_seqs=8, max_num_batched_tokens=256,
                               cuda_graph_batch_sizes=sizes, graph_capture=False)


def joins() -> dict[int, list[SynthesisRequest]]:
    """Requests joining at different steps with different lengths: the batch takes sizes from 1 to 8."""
    rng = random.Random(3)
    out: dict[int, list[SynthesisRequest]] = defaultdict(list)
    for i in range(9):
        sampling = SamplingParams(temperature=0.0, max_new_tokens=rng.randint(5, 40))
        out[rng.randint(0, 30)].append(request(f"request {i} " + "ab" * rng.randint(1, 20), sampling))
    return out


def frames_of(stage_: AutoregressiveStage) -> list[torch.Tensor]:
    plan = joins()
    order = [r for step in sorted(plan) for r in plan[step]]
    frames = drive(stage_, dict(plan))
    return [frames[id(r)] for r in order]


def test_padded_batches_give_the_frames_of_unpadded_ones(modules, eager):
    graphed = stage(modules, sizes=(2, 4, 8))
    padded = frames_of(graphed)
    assert graphed.graphs is not None and graphed.graphs.replays > 20 and graphed.graphs.fallbacks == 0 and len(graphed.graphs.runners) > 1
    assert all(torch.equal(a, b) for a, b in zip(padded, eager, strict=True))
    # the padding rows wrote only into the runner's scratch block, which stays held; every other block came back
    assert graphed.cache.num_free == graphed.cache.num_blocks - 1


def test_the_padded_step_equals_the_eager_step(modules):
    graphed = stage(modules, sizes=(8,))
    positions = [17, 5, 0]
    tables: list[list[int]] = [[], [], []]
    for table, p in zip(tables, positions, strict=True):
        graphed.cache.blocks.grow(table, p + 1)
    assert graphed.graphs.scratch[0] not in sum(tables, [])
    embeds = torch.randn(3, graphed.model.talker.config.hidden_size)
    graphed.cache.k.normal_()  # earlier positions hold keys and values the step attends to
    graphed.cache.v.normal_()
    cache_k, cache_v = graphed.cache.k.clone(), graphed.cache.v.clone()
    with torch.inference_mode():
        hidden = graphed.graphs.run(embeds, tables, positions)
        k_written = graphed.cache.k.clone()
        graphed.cache.k.copy_(cache_k)
        graphed.cache.v.copy_(cache_v)
        batch = graphed.cache.batch(tables, positions, [1, 1, 1])
        with traced() as path:
            expected = graphed.model.forward(embeds, batch, graphed.cache)
    assert hidden.shape == expected.shape
    # float32 rounding only: the static step attends over max_len keys (masked) and pads the matmuls' rows
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    torch.testing.assert_close(hidden, expected, rtol=0, atol=tolerance)
    # the real rows' keys land where the eager step puts them; the padding rows only in the scratch block
    scratch = graphed.graphs.scratch[0]
    real = [b for b in range(graphed.cache.num_blocks) if b != scratch]
    torch.testing.assert_close(k_written[:, real], graphed.cache.k[:, real], rtol=0, atol=tolerance)
    assert not torch.equal(k_written[:, scratch], cache_k[:, scratch])


def test_batches_above_the_largest_size_run_eagerly(modules, eager):
    graphed = stage(modules, sizes=(1, 2))
    mixed = frames_of(graphed)
    assert graphed.graphs.fallbacks > 0 and graphed.graphs.replays > 0
    assert all(torch.equal(a, b) for a, b in zip(mixed, eager, strict=True))


def test_width_buckets(modules):
    graphs = stage(modules, sizes=(4,)).graphs
    assert graphs.max_width == 512 // 16
    assert [graphs.bucket(n) for n in (1, 2, 3, 5, 16, 17, 32)] == [1, 2, 4, 8, 16, 32, 32]


def test_runner_sizes_and_capture_only_on_cuda():
    runner = PaddedGraphRunner([8, 2, 4], lambda size: {"x": torch.zeros(size)}, lambda inputs: inputs["x"] * 2, "cpu")
    assert [runner.size_for(n) for n in (1, 2, 3, 5, 8, 9)] == [2, 2, 4, 8, 8, None]

    def fill(inputs, rows):
        inputs["x"][:rows] = torch.arange(1.0, rows + 1)
        inputs["x"][rows:] = -1.0

    assert runner(3, fill).tolist() == [2.0, 4.0, 6.0]
    assert runner(9, fill) is None and runner.fallbacks == 1
    with pytest.raises(ValueError, match="CUDA"):
        PaddedGraphRunner([1], lambda size: {}, lambda inputs: torch.zeros(1), "cpu", capture=True)


def test_deploy_switch_is_off_on_cpu(tmp_path: Path):
    path = tmp_path / "deploy.yaml"
    path.write_text("stages:\n  - name: talker\n    cuda_graph_batch_sizes: [1, 2, 4, 8]\n")
    talker = load_deploy(path).stage("talker")
    assert talker.cuda_graph_batch_sizes == (1, 2, 4, 8)
    assert talker.graph_options() == {}
    on_gpu = load_deploy(path, None, {"talker": {"device": "cuda"}}).stage("talker")
    assert on_gpu.graph_options() == {"cuda_graph_batch_sizes": (1, 2, 4, 8)}
    with pytest.raises(ValueError, match="positive integers"):
        load_deploy(path, None, {"talker": {"cuda_graph_batch_sizes": [0]}})
