"""How much left context the speech-tokenizer decoder needs, measured on the tiny Base checkpoint (sliding window 72,
two layers): a chunk decoded behind k frames against the same samples of the whole decode.

Behind `receptive_field_frames` the chunk equals the whole decode; behind the deploy file's left context (25, the
reference's own chunked decode) it still differs, so the deploy decodes no more left context than the decoder can use
(bench/qwen3_codec_context.py prints the whole curve, and the same at the published sizes).
"""

import torch

from vocalis.stages.chunk_stage import ChunkStage
from vocalis.stages.deploy import load_deploy
from vocalis.stages.models.qwen3_tts.loader import DEPLOY_DEFAULTS
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.stages import CodecDecoderModel, Qwen3TTSInput
from vocalis.stages.models.qwen3_tts.voices import VoiceCloner
from vocalis.stages.request import SynthesisRequest
from vocalis.stages.sampling import SamplingParams
from vocalis.stages.stage import StageItem

from .goldens import modules
from .test_goldens import WAVE_ATOL


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


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


def test_an_icl_clone_decodes_only_the_deployed_context_of_a_longer_clip():
    """A 3 s clip (38 codes) before a 24-frame clone: its first chunk is one frame behind the last 25 codes, not all 38,
    and the audio is the request's own 24 frames."""
    mods = modules("base-1b7")
    policy = load_deploy(DEPLOY_DEFAULTS).stage("code2wav").chunk_policy()
    g = torch.Generator().manual_seed(1)
    groups, size = mods.decoder.config.num_quantizers, mods.decoder.config.codebook_size
    clip, frames = torch.randint(0, size, (38, groups), generator=g), torch.randint(0, size, (24, groups), generator=g)
    decoded: list[int] = []

    class Spy(CodecDecoderModel):
        def decode(self, frames, streams):
            decoded.extend([frames.shape[1]] * frames.shape[0])
            return super().decode(frames, streams)

    stage = ChunkStage("code2wav", Spy(mods.decoder, VoiceCloner(mods)), policy)
    inputs = Qwen3TTSInput(Conditioning(language="english", ref_codes=clip), SamplingParams(), SamplingParams())
    request = SynthesisRequest(text="clone", stage_input=inputs, output=NullOutput())
    stage.add(StageItem(request))
    audio = []
    for t in range(len(frames)):
        stage.add(StageItem(request, frames[t : t + 1], finished=t == len(frames) - 1))
        while stage.has_work():
            with torch.inference_mode():
                audio += [item.payload for item in stage.step() if item.payload is not None]
    assert decoded == [policy.left_context_frames + 1, policy.left_context_frames + 23]  # 26 + 48 frames, not 39 + ...
    assert sum(len(a) for a in audio) == 24 * mods.decoder.config.samples_per_frame
