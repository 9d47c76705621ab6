"""S2 Pro's slow and fast AR against fish-speech 0.1.0's DualARTransformer, built from a translation of the tiny
`fish_qwen3_omni` config (tests/goldens/fish_speech/make_goldens.py), teacher-forced: slow logits and hidden
states at every position, fast logits of codebooks 1..K-1 of every frame, all to float32 rounding
along their paths.

What this cannot check: 0.1.0 is the S1-era package, so S2-only details are not in this oracle: the 4096-id
semantic range, the prompt and tokenizer layout (vLLM-Omni's description, tested in test_prompt.py), the
codebook-embedding scaling being unconditional and the fast AR reading the slow AR's hidden state after the final
norm (S2's own modelling code, read but not runnable here: it needs flash-attn; vLLM-Omni does the same). The fast
AR is compared here on the hidden states 0.1.0 hands it, so that difference does not enter the comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.fish_speech.config import FishSpeechConfig
from vocalis.stages.models.fish_speech.weights import load_dual_ar

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech"
TINY = GOLDENS / "tiny"


@pytest.fixture(scope="module")
def model():
    return load_dual_ar(TINY, FishSpeechConfig.from_dir(TINY))


@pytest.fixture(scope="module")
def golden():
    return load_file(str(GOLDENS / "dual_ar.safetensors"))


def test_slow_ar_logits_and_hidden_states(model, golden):
    with torch.inference_mode(), traced() as path:
        hidden = model.slow_dense(model.embed(golden["tokens"], golden["codes"])[None])[0]
        logits = model.token_logits(hidden)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)  # to the logits: the hidden states' path and more
    torch.testing.assert_close(hidden, golden["slow_hidden"], atol=tolerance, rtol=0)
    torch.testing.assert_close(logits, golden["slow_logits"], atol=tolerance, rtol=0)
    assert torch.equal(logits.argmax(-1), golden["slow_logits"].argmax(-1))


def test_fast_ar_logits_teacher_forced(model, golden):
    start = model.config.semantic_start_token_id
    semantic = golden["tokens"] >= start
    hidden, codes = golden["slow_hidden"][semantic], golden["codes"][semantic]
    with torch.inference_mode(), traced() as path:
        forced, logits = model.frame_codes(hidden, codes[:, 0], choose=None, forced=codes[:, 1:])
    assert torch.equal(forced, codes[:, 1:])
    torch.testing.assert_close(logits, golden["fast_logits"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_fast_ar_free_run_picks_the_argmax_and_masks_past_the_residual_codebook(model, golden):
    start = model.config.semantic_start_token_id
    semantic = golden["tokens"] >= start
    hidden, codes = golden["slow_hidden"][semantic], golden["codes"][semantic]
    with torch.inference_mode():
        chosen, logits = model.frame_codes(hidden, codes[:, 0], choose=lambda _g, x: x.argmax(-1), residual_vocab=16)
    assert chosen.max() < 16
    assert torch.equal(chosen, logits.argmax(-1))
    assert torch.isinf(logits[..., 16:]).all()
