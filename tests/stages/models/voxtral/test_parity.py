"""Component parity of the tiny checkpoint against transformers' Mistral layers (tests/goldens/voxtral/make_goldens.py):
the decoder over a real speech prompt (dense and through the runtime's KV cache), and the acoustic flow (its transformer
as bidirectional Mistral layers, Euler + CFG + FSQ from recorded noise). No Voxtral TTS implementation installs from
PyPI, so the glue (the Euler loop, the guidance, FSQ) follows the published description, not an oracle."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.stages.models.voxtral.conftest import generate, request
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.voxtral.decoder import time_embedding

GOLDENS = load_file(str(Path(__file__).parents[3] / "goldens/voxtral/goldens.safetensors"))
TEXT, VOICE = "Hello world, this is a tiny voice.", "neutral_female"


def test_prompt_embeddings_are_the_goldens_inputs(tiny):
    embeds = tiny.generator.prompt_embeds(TEXT, VOICE)
    torch.testing.assert_close(embeds, GOLDENS["decoder_inputs"], atol=0, rtol=0)


def test_decoder_matches_transformers_mistral(tiny):
    with torch.inference_mode(), traced() as path:
        hidden = tiny.modules.lm.decoder.dense(GOLDENS["decoder_inputs"][None])[0]
    torch.testing.assert_close(hidden, GOLDENS["decoder_hidden"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_cached_decoder_gives_the_same_first_frame(tiny):
    """The first frame comes from the last prompt position through the paged KV cache: its semantic logits and codes
    equal those of the golden hidden state, with the same injected noise."""
    noise = torch.randn(1, 36, generator=torch.Generator().manual_seed(5))
    r = request(TEXT, voice=VOICE, max_new_tokens=1, noise=noise)
    with traced() as path:  # the prompt through the cache, then the first frame
        (frames,) = generate(tiny.generator, [r]).values()
    flow = tiny.modules.lm.flow
    last = GOLDENS["decoder_hidden"][-1:]
    with torch.inference_mode():
        tolerance = rounding_bound(torch.float32, path.peak, path.steps)
        torch.testing.assert_close(tiny.generator.last_semantic_logits, flow.semantic(last), atol=tolerance, rtol=0)
        codes = flow.quantize(flow.sample(last, noise, torch.tensor([1.2]), 7))
    assert frames[0, 0] == flow.semantic(last).argmax() and torch.equal(frames[0, 1:], codes[0])


def test_flow_velocity_euler_cfg_and_fsq_match(tiny):
    flow = tiny.modules.lm.flow
    hidden, noise, alpha = GOLDENS["flow_hidden"], GOLDENS["flow_noise"], GOLDENS["flow_alpha"]
    with torch.inference_mode():
        with traced() as one:
            t_proj = flow.time_projection(time_embedding(torch.zeros(1), flow.args.dim, flow.args.time_theta))
            velocity = flow.velocity(noise, t_proj.expand(len(noise), -1), flow.llm_projection(hidden))
        with traced() as steps:
            values = flow.sample(hidden, noise, alpha, 7)
    torch.testing.assert_close(velocity, GOLDENS["flow_velocity"], atol=rounding_bound(torch.float32, one.peak, one.steps), rtol=0)
    torch.testing.assert_close(values, GOLDENS["flow_values"], atol=rounding_bound(torch.float32, steps.peak, steps.steps), rtol=0)
    assert torch.equal(flow.quantize(values), GOLDENS["flow_codes"])
    assert int(GOLDENS["flow_codes"].min()) >= 2 and int(GOLDENS["flow_codes"].max()) <= 22
