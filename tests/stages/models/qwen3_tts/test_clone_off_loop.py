"""A clone request's clip is encoded on the pipeline's `voices` stage: not on the event loop, not on the talker.

The tiny Base checkpoint is loaded as the server loads it. Its encoders are made slow on purpose (a
sleep that holds neither the GIL nor a core, so the timing does not depend on how busy the machine
is); while a clone request's clip is being encoded, another request's chunks keep reaching the
event loop.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

from tests.stages.models.qwen3_tts.goldens import ROOT
from vocalis.stages.models.qwen3_tts import voices
from vocalis.stages.models.qwen3_tts.loader import DEPLOY_DEFAULTS, load
from vocalis.stages.runtime.deploy import load_deploy
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest

ENCODING_SECONDS = 6.0
SMALL_CHUNKS = '{"code2wav": {"chunk_frames": 4, "max_chunk_frames": 4}}'
"""Chunks of 4 frames: the other stream's chunks come often, so a stall stands out."""


async def test_another_stream_keeps_its_chunks_while_a_clip_is_encoded(monkeypatch):
    encodings: list[tuple[float, float]] = []
    real = voices.voice_artifacts

    def slow(*args, **kwargs):
        start = time.monotonic()
        time.sleep(ENCODING_SECONDS / 2)  # the x-vector and the codes: two encodings per clip
        result = real(*args, **kwargs)
        encodings.append((start, time.monotonic()))
        return result

    monkeypatch.setattr(voices, "voice_artifacts", slow)
    model = load(ROOT / "base-1b7", load_deploy(DEPLOY_DEFAULTS, None, SMALL_CHUNKS))
    try:
        adapter = model.adapter

        def submit(text: str, **fields) -> SynthesisRequest:
            reference = fields.pop("reference", None)
            params = RequestParams(model=model.name, voice="", fields={"extra_params": {"temperature": 0}, **fields}, reference=reference)
            started, before = time.monotonic(), len(encodings)
            stage_input = adapter.stage_input(params)  # on the event loop: must encode nothing
            assert len(encodings) == before and time.monotonic() - started < ENCODING_SECONDS / 2
            request = SynthesisRequest(text, stage_input, AudioOutput())
            model.pipeline.submit(request)
            return request

        arrivals: list[float] = []
        talking = True

        async def talk() -> None:
            """The other session: utterance after utterance, as a session with many sentences sends them."""
            while talking:
                other = submit("The other stream talks on and on.", speaker_embedding=[0.1] * 32, max_new_tokens=300,
                               initial_codec_chunk_frames=1)
                async for _ in other.output:
                    arrivals.append(time.monotonic())

        talker = asyncio.create_task(talk())
        while not arrivals:
            await asyncio.sleep(0.01)
        t = np.arange(24000 * 20) / 24000
        clip = ReferenceAudio((0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32), 24000, text="A long reference clip.")
        clone = submit("Cloned.", reference=clip, max_new_tokens=4)
        cloned = [piece async for piece in clone.output]
        talking = False
        await talker
    finally:
        model.close()
    assert sum(len(piece) for piece in cloned) > 0 and len(encodings) == 2
    start, end = encodings[0][0], encodings[-1][1]
    during = [t for t in arrivals if start <= t <= end]
    gaps = np.diff([start, *during, end])
    # Encoded on the event loop, no chunk would arrive in the window; on the talker's thread, the other
    # stream would stop generating for the whole window. Off both, chunks keep coming through it (on a loaded
    # 2-core machine the encoder and the talker share the cores, so a pause of a few seconds can occur).
    assert len(during) >= 5 and gaps.max() < 0.6 * (end - start), (round(end - start, 3), gaps.round(3).tolist())
