"""How much left context the speech-tokenizer decoder needs, measured on the tiny Base checkpoint (sliding window 72,
two layers): a chunk decoded behind k frames against the same samples of the whole decode.

Behind `receptive_field_frames` the chunk equals the whole decode; behind the deploy file's left context (25, the
reference's own chunked decode) it still differs, so the deploy decodes no more left context than the decoder can use
(bench/qwen3_codec_context.py prints the whole curve, and the same at the published sizes).
"""

import torch

from vocalis.stages.deploy import load_deploy
from vocalis.stages.models.qwen3_tts.loader import DEPLOY_DEFAULTS

from .goldens import modules
from .test_goldens import WAVE_ATOL


def chunk_error(k: int, start: int) -> float:
    decoder = modules("base-1b7").decoder
    c = decoder.config
    hop = c.samples_per_frame
    codes = torch.randint(0, c.codebook_size, (1, c.num_quantizers, start + 2), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        whole = decoder(codes)[0, start * hop:]
        part = decoder(codes[:, :, start - k:])[0, k * hop:]
    return float((part - whole).abs().max())


def test_receptive_field_bounds_the_context_and_the_deploy_context_is_within_it():
    rf = modules("base-1b7").decoder.config.receptive_field_frames
    start = rf + 8  # frames before the chunk: more than any context tried
    assert chunk_error(rf, start) < 1e-6  # the config's bound is exact
    deployed = load_deploy(DEPLOY_DEFAULTS).stage("code2wav").left_context_frames
    assert deployed < rf
    # measured 1.3e-2 at 25 frames, 2.3e-3 at the sliding window (72), 2e-5 at 140: every deployed frame is used
    assert chunk_error(deployed, start) > WAVE_ATOL
    assert chunk_error(deployed - 5, start) > chunk_error(deployed, start)
