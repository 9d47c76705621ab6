"""What the end-to-end tests of the CosyVoice line (CosyVoice3, GLM-TTS) share: one cloning request pinned in length
and sampling, and the checks that read the same on both families. Each family's file keeps its own server fixture
(the family's conformance rows share that server: tests/conftest.py's worker_group) and what is particular to it.

Lengths are pinned: max_new_tokens with a text whose minimum (2 speech tokens per text token) is at or above it, so no
stop token can come first; sampling is pinned with seed.
"""

from __future__ import annotations

import base64
import io
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import soundfile as sf

from tests.serving import RunningServer
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

RATE = 24000
TOKEN = 960  # samples per 25 Hz speech token at 24 kHz
TOKENS = 12
TEXT = "Hello world, this is a tiny voice."
REF_TEXT = "a short prompt."


def clip_wav(seconds: float = 3.2, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    samples = 0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t) + 0.02 * np.random.default_rng(0).standard_normal(len(t))
    buffer = io.BytesIO()
    sf.write(buffer, samples.astype(np.float32), rate, format="WAV")
    return buffer.getvalue()


CLIP = clip_wav()
REF = base64.b64encode(CLIP).decode()
PINNED = {"max_new_tokens": TOKENS, "seed": 5, "ref_audio": REF, "ref_text": REF_TEXT}


def speak(server: RunningServer, **body: object) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **{**PINNED, **body}}, timeout=120)


def pcm(response: httpx.Response) -> bytes:
    assert response.status_code == 200, response.text
    return response.content


def check_http_wav_at_24k(server: RunningServer) -> None:
    response = speak(server)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert response.headers["x-sample-rate"] == "24000" and rate == RATE
    assert len(samples) == TOKENS * TOKEN and 0.01 < samples.std() < 0.9


def check_grpc_chunks_equal_the_whole(server: RunningServer) -> None:
    """Twice the pinned tokens (still under the text's minimum) over gRPC: chunks as made, the first one token
    (40 ms), together the HTTP response's samples byte for byte."""
    longer = {**PINNED, "max_new_tokens": 2 * TOKENS}
    whole = pcm(speak(server, response_format="pcm", **longer))
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=2 * TOKENS, seed=5, ref_text=REF_TEXT)
    message.ref_audio = REF
    with Client(server.grpc_target, timeout=120) as client:
        responses = list(client.stream(message, TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == RATE
    assert len(chunks) >= 4 and chunks[0].num_samples == TOKEN
    assert sum(c.num_samples for c in chunks) == 2 * TOKENS * TOKEN
    assert b"".join(c.audio for c in chunks) == whole


def check_seed_decides_the_tokens(server: RunningServer) -> None:
    a, b = pcm(speak(server, response_format="pcm")), pcm(speak(server, response_format="pcm"))
    c = pcm(speak(server, response_format="pcm", seed=6))
    assert a == b and a != c and len(c) == len(a)


def check_audio_does_not_depend_on_what_else_runs(server: RunningServer, others: int) -> None:
    """The pinned request alone, then beside `others` longer ones with other seeds: the same bytes."""
    alone = pcm(speak(server, response_format="pcm"))
    bodies = [{"seed": 20 + i, "input": f"{TEXT} " * (i + 1)} for i in range(others)]
    with ThreadPoolExecutor(others + 1) as pool:
        futures = [pool.submit(speak, server, response_format="pcm", **body) for body in bodies]
        target = pool.submit(speak, server, response_format="pcm")
        assert all(f.result().status_code == 200 for f in futures)
        assert pcm(target.result()) == alone


def check_bad_request_is_400_naming_the_field(server: RunningServer, body: dict, param: str, message: str) -> None:
    """`body` over the pinned request (None removes a field): a 400 naming `param`, and the server keeps serving."""
    full = {"input": TEXT, **PINNED, **body}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={k: v for k, v in full.items() if v is not None}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"]
    assert speak(server).status_code == 200
