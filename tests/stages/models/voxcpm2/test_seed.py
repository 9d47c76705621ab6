"""`seed: N` on VoxCPM2 reproduces the reference run after `torch.manual_seed(N)` (CPU, float32).

The goldens' flow-matching noise was drawn by the reference, in its own order, from a generator
seeded with 1000 + 10 x config index + case number (tests/goldens/voxcpm2/make_goldens.py). Served
with that number as its seed and nothing injected, the pipeline must draw the same noise and so
generate the reference's patches.
"""

from __future__ import annotations

import pytest
import torch

from tests.goldens.voxcpm2.cases import CONFIGS, case, case_request, cases, generate, generator_stage, load_family, tensor
from tests.tolerance import rounding_bound, traced


def reference_seed(config: str, name: str) -> int:
    return 1000 + 10 * list(CONFIGS).index(config) + [c["name"] for c in cases(config)].index(name)


@pytest.fixture(scope="module")
def tiny():
    return load_family("tiny")


def test_stream_zero_is_the_plain_seed(tiny):
    noise = tensor("tiny", "zero_shot", "noise")  # [steps, feat_dim, patch_size]
    drawn = torch.Generator().manual_seed(reference_seed("tiny", "zero_shot"))
    from vocalis.stages.runtime.sampling import SamplerState, SamplingParams

    state = SamplerState(SamplingParams(seed=reference_seed("tiny", "zero_shot")))
    for step in noise:
        assert torch.equal(torch.randn(tuple(step.shape), generator=state.generator), step)
        assert torch.equal(torch.randn(tuple(step.shape), generator=drawn), step)


@pytest.mark.parametrize("name", [c["name"] for c in cases("tiny")])
def test_a_seeded_request_generates_the_references_patches(tiny, name):
    request = case_request("tiny", name, inject_noise=False, seed=reference_seed("tiny", name))
    with traced() as path:  # free-running: each step starts from the last, all chained
        patches = generate(generator_stage(tiny), [request])[id(request)]
    assert len(patches) == case("tiny", name)["steps"]
    torch.testing.assert_close(patches, tensor("tiny", name, "patches"), atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
