"""Our Qwen3-TTS against the reference package (`qwen-tts` 0.1.1), on the committed tiny checkpoints.

tests/goldens/qwen3_tts/make_goldens.py made the checkpoints (real layout, every tensor re-randomised)
and ran the reference greedily in every mode. Here our loader and modules reproduce it: token ids
exactly, the talker's first-layer input, logits under teacher forcing on the reference codes and the
waveform to float32 rounding along their paths (tests/tolerance.py), the codes themselves exactly.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from tests.stages.models.qwen3_tts.goldens import META, NAMES, ROOT, conditioning, golden, modules, teacher_forced
from tests.tolerance import log_power_bound, rounding_bound, traced
from vocalis.stages.components.speech_features import matcha_log_mel
from vocalis.stages.models.qwen3_tts.prompt import build_prompt
from vocalis.stages.models.qwen3_tts.runtime import Qwen3TTSInput, TalkerStageModel, code2wav
from vocalis.stages.models.qwen3_tts.speaker import SPEAKER_MEL
from vocalis.stages.models.qwen3_tts.voices import VoiceCloner
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams

WAVE_ATOL = 1e-3
"""Only the chunked-reference check below: the reference's own chunking departs from its whole decode by more."""


def wave_bound(mods, frames: torch.Tensor) -> float:
    """float32 rounding along a whole decode of `frames` [T, codebooks] (traced), which the reference's decode and a
    stream of it round differently; at the magnitude of the samples, not of the path's peak: the decoder is
    well-conditioned (test_codec_stream.py's `exact`)."""
    with torch.inference_mode(), traced() as path:
        samples = mods.decoder(frames.T[None])
    return rounding_bound(torch.float32, float(samples.abs().max()), path.steps)
GREEDY = SamplingParams(temperature=0.0, repetition_penalty=1.05, max_new_tokens=24)


def test_goldens_cover_every_mode_and_variant():
    modes = {META[n]["mode"].split("_")[0] for n in NAMES}
    assert {"custom", "voice", "base"} <= modes
    assert {META[n]["variant"] for n in NAMES} == {"cv-1b7", "cv-0b6", "vd-1b7", "base-1b7", "long-1b7"}
    for name in NAMES:  # nothing degenerate: varied codes, audible, unclipped audio
        g = golden(name)
        assert len(set(g["codes"][:, 0].tolist())) >= 4
        assert 0.03 < float(g["waveform"].std()) < 0.3 and float((g["waveform"].abs() > 0.999).float().mean()) < 0.01


@pytest.mark.parametrize("name", NAMES)
def test_prompt_token_ids_and_embeddings(name):
    meta, g = META[name], golden(name)
    mods = modules(meta["variant"])
    with traced() as path:
        prompt = build_prompt(mods.talker, mods.config, mods.tokenizer, meta["text"], conditioning(name))
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    reference_ids = [g[f"token_ids.{i}"].tolist() for i in range(len(meta["token_texts"]))]
    assert sorted(map(tuple, prompt.token_ids)) == sorted(map(tuple, reference_ids))
    torch.testing.assert_close(prompt.embeds, g["prompt_embeds"], atol=tolerance, rtol=0)
    torch.testing.assert_close(prompt.trailing, g["trailing_text"], atol=tolerance, rtol=0)
    torch.testing.assert_close(prompt.pad, g["tts_pad_embed"], atol=tolerance, rtol=0)  # as the embeds: 1.3e-6 on an AVX-512 Xeon


@pytest.mark.parametrize("name", NAMES)
def test_logits_and_codes_under_teacher_forcing(name):
    g = golden(name)
    mods = modules(META[name]["variant"])
    with traced() as path:
        run = teacher_forced(mods, name)
    frames = len(g["codes"])
    # a step's logits chain its own talker and predictor passes (earlier steps' keys and values enter its attention
    # in parallel, at the same depth): a frames-th of the trace, the prefill's share included
    tolerance = rounding_bound(torch.float32, path.peak, path.steps // frames)
    torch.testing.assert_close(run.talker_logits, g["talker_logits"][: frames + 1], atol=tolerance, rtol=0)
    torch.testing.assert_close(run.predictor_logits, g["predictor_logits"][:frames], atol=tolerance, rtol=0)
    assert torch.equal(run.predictor_codes, g["codes"][:, 1:])
    # Codebook 0 after the reference's processing (repetition penalty 1.05, suppressed control ids, no early EOS).
    model = TalkerStageModel(mods, 512)
    tokens = g["talker_tokens"]
    for step in range(frames + 1):
        logits = model.code0_logits(torch.zeros(1, mods.config.talker.hidden_size), [step])  # the masks alone
        processed = g["talker_logits"][step].clone()
        history = torch.unique(tokens[:step])
        picked = processed[history]
        processed[history] = torch.where(picked > 0, picked / 1.05, picked * 1.05)
        processed[torch.isinf(logits[0])] = float("-inf")
        assert torch.equal(torch.isinf(processed), g["talker_suppressed"][step])
        assert int(processed.argmax()) == int(tokens[step])


@pytest.mark.parametrize("name", NAMES)
def test_waveform(name):
    g = golden(name)
    mods = modules(META[name]["variant"])
    codes = g["codes"]
    context = g.get("ref_codes")
    frames = torch.cat([context, codes]) if context is not None else codes
    with torch.inference_mode():
        wave = mods.decoder(frames.T[None])[0]
    if context is not None:
        wave = wave[len(context) * 1920 :]
    torch.testing.assert_close(wave, g["waveform"], atol=wave_bound(mods, frames), rtol=0)


def test_speaker_encoder_mel_and_reference_codes():
    g = golden("base-1b7.base_icl")
    mods = modules("base-1b7")
    with torch.inference_mode():
        mel = matcha_log_mel(g["ref_audio"], **SPEAKER_MEL)
        # the log of mel-weighted STFT magnitudes (1024-point FFT, 513-bin filters): a magnitude's log is off by half
        # of what its square's (the power's) is
        tolerance = log_power_bound(g["ref_mel"].T.double().exp() ** 2, 0, 1024 + 513) / 2
        assert ((mel - g["ref_mel"].T).abs() <= tolerance).all()
        with traced() as path:
            embedding = mods.speaker_encoder(mel[None])[0]
        torch.testing.assert_close(embedding, g["speaker_embedding"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
        assert torch.equal(mods.encoder(g["ref_audio"][None])[0], g["ref_codes"])
    torch.testing.assert_close(golden("base-1b7.base_xvector")["speaker_embedding"], g["speaker_embedding"])


def run_pipeline(name: str, policy: ChunkPolicy, max_new_tokens: int) -> tuple[torch.Tensor, np.ndarray, list[int]]:
    """Free-running greedy synthesis of a golden's request through the runtime's two stages."""
    meta = META[name]
    mods = modules(meta["variant"])
    cond = conditioning(name)
    frames_seen: list[torch.Tensor] = []
    chunk_sizes: list[int] = []

    cloner = VoiceCloner(mods)
    talker = TalkerStageModel(mods, 512, cloner)
    decoder = code2wav(mods.decoder, cloner)
    pipeline = Pipeline([AutoregressiveStage("talker", talker, max_num_seqs=4, max_num_batched_tokens=256),
                         ChunkStage("code2wav", decoder, policy, max_num_seqs=4)])
    inputs = Qwen3TTSInput(cond, SamplingParams(temperature=0.0, repetition_penalty=1.05, max_new_tokens=max_new_tokens),
                           SamplingParams(temperature=0.0))

    async def go():
        request = SynthesisRequest(text=meta["text"], stage_input=inputs, output=AudioOutput())
        original = talker.sample_frames

        def spy(*args):
            frames = original(*args)
            frames_seen.append(frames)
            return frames

        talker.sample_frames = spy
        pipeline.submit(request)
        pieces = [chunk async for chunk in request.output]
        chunk_sizes.extend(len(p) for p in pieces)
        return np.concatenate(pieces)

    try:
        audio = asyncio.run(go())
    finally:
        pipeline.close()
    return torch.cat(frames_seen), audio, chunk_sizes


@pytest.mark.parametrize("name", ["cv-1b7.custom_voice", "vd-1b7.voice_design", "base-1b7.base_icl", "cv-1b7.custom_voice_dialect_streaming_text"])
def test_free_running_greedy_pipeline_reproduces_codes_and_audio(name):
    g = golden(name)
    frames = len(g["codes"])
    # One window as the reference decodes an utterance under 300 frames (left context 25 covers the 25 reference frames).
    codes, audio, _ = run_pipeline(name, ChunkPolicy(first_chunk_frames=300, chunk_frames=300, left_context_frames=25), frames)
    assert torch.equal(codes, g["codes"])
    context = g.get("ref_codes")  # decoded ahead of the codes, as in test_waveform
    whole = torch.cat([context, codes]) if context is not None else codes
    np.testing.assert_allclose(audio, g["waveform"].numpy(), atol=wave_bound(modules(META[name]["variant"]), whole), rtol=0)


def test_long_path_streams_the_whole_decode_not_the_reference_chunking():
    """Sliding window 4 and 8-frame chunks: the reference's chunked_decode(8, 3) re-decodes 3 frames of left context
    and so departs from its whole decode; code2wav's carried decoder state streams the whole decode, whatever left
    context the policy names (its frames are not decoded again)."""
    g = golden("long-1b7.custom_voice")
    codes, audio, sizes = run_pipeline("long-1b7.custom_voice", ChunkPolicy(first_chunk_frames=8, chunk_frames=8, left_context_frames=3),
                                       len(g["codes"]))
    assert torch.equal(codes, g["codes"])
    assert sizes[:3] == [8 * 1920] * 3
    np.testing.assert_allclose(audio, g["waveform_whole"].numpy(), atol=wave_bound(modules("long-1b7"), codes), rtol=0)
    assert float(np.abs(g["waveform_chunked"].numpy() - g["waveform_whole"].numpy()).max()) > WAVE_ATOL  # the branch matters


def test_streamed_equals_whole_from_one_frame_chunks_on():
    """A 1-frame first chunk, then 5-frame chunks, no left context (as deployed): the whole-utterance decode;
    streaming changes when audio leaves, not what it is."""
    g = golden("long-1b7.custom_voice")
    codes, audio, sizes = run_pipeline("long-1b7.custom_voice", ChunkPolicy(first_chunk_frames=1, chunk_frames=5, left_context_frames=0),
                                       len(g["codes"]))
    assert sizes[0] == 1920 and sizes[1] == 5 * 1920
    np.testing.assert_allclose(audio, g["waveform_whole"].numpy(), atol=wave_bound(modules("long-1b7"), codes), rtol=0)


def test_checkpoint_files_are_the_ones_the_goldens_were_made_from():
    import hashlib
    import json

    hashes = json.loads((ROOT / "goldens.json").read_text())["sha256"]
    for relative, digest in hashes.items():
        assert hashlib.sha256((ROOT / relative).read_bytes()).hexdigest() == digest, relative
