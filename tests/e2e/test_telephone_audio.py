"""Telephone audio end to end: G.711 mu-law and A-law at 8 kHz over HTTP, the WebSocket and gRPC, streamed and whole.

Every answer is decoded back by libsndfile (raw G.711, or the WAV of format tag 7/6 a whole file is) and held
against the same request in 16-bit PCM at 8 kHz: the same length, and equal within G.711's quantisation error.
"""

from __future__ import annotations

import io
import struct

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.audio_checks import assert_speech
from tests.ws_session import audio, ws_session
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
TEXT = "Thank you for calling. Your appointment is confirmed for Tuesday."
SUBTYPES = {"ulaw": "ULAW", "alaw": "ALAW"}
FORMAT_TAGS = {"ulaw": 7, "alaw": 6}
PROTO = {"ulaw": audio_pb2.AUDIO_ENCODING_MULAW, "alaw": audio_pb2.AUDIO_ENCODING_ALAW}


@pytest.fixture(scope="module")
def http(server) -> httpx.Client:
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def reference(http) -> np.ndarray:
    """The text as 16-bit PCM at 8 kHz, as floats."""
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": "pcm", "sample_rate": 8000, "extra_params": NOISELESS})
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, "<i2").astype(np.float32) / 32768


def raw_g711(data: bytes, fmt: str) -> np.ndarray:
    return sf.read(io.BytesIO(data), format="RAW", subtype=SUBTYPES[fmt], samplerate=8000, channels=1, dtype="float32")[0]


def wav_g711(data: bytes, fmt: str) -> np.ndarray:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert struct.unpack("<H", data[20:22])[0] == FORMAT_TAGS[fmt]  # the fmt chunk's format tag
    with sf.SoundFile(io.BytesIO(data)) as wav:
        assert (wav.samplerate, wav.channels, wav.subtype) == (8000, 1, SUBTYPES[fmt])
        return wav.read(dtype="float32")


def assert_same_speech(decoded: np.ndarray, reference: np.ndarray) -> None:
    """Same length as the PCM, and equal to it within G.711's quantisation (about 38 dB SNR on speech)."""
    assert len(decoded) == len(reference), (len(decoded), len(reference))
    noise = decoded - reference
    snr = 10 * np.log10(np.sum(reference**2) / max(np.sum(noise**2), 1e-12))
    assert snr > 30, snr
    # A G.711 step is at most 1/16 of its segment's top: no sample is off by more than that, plus the zero step.
    assert np.all(np.abs(noise) <= np.abs(reference) / 16 + 2e-3), np.max(np.abs(noise) - np.abs(reference) / 16)
    assert_speech(decoded, 8000)


@pytest.mark.parametrize("fmt", ["ulaw", "alaw"])
def test_http_whole_response_is_a_g711_wav(http, reference, fmt):
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": fmt, "extra_params": NOISELESS})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/wav"
    assert response.headers["x-sample-rate"] == "8000"
    assert_same_speech(wav_g711(response.content, fmt), reference)


@pytest.mark.parametrize("fmt", ["ulaw", "alaw"])
def test_http_stream_is_raw_g711(http, reference, fmt):
    body = {"input": TEXT, "response_format": fmt, "stream_format": "audio", "extra_params": NOISELESS}
    with http.stream("POST", "/v1/audio/speech", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == {"ulaw": "audio/PCMU", "alaw": "audio/PCMA"}[fmt]
        data = response.read()
    assert data[:4] != b"RIFF"
    assert_same_speech(raw_g711(data, fmt), reference)


@pytest.mark.parametrize(("name", "fmt"), [("ulaw_8000", "ulaw"), ("alaw_8000", "alaw"), ("pcm_mulaw", "ulaw"), ("mulaw", "ulaw")])
def test_http_spellings_clients_send(http, reference, name, fmt):
    """ElevenLabs' `ulaw_8000` is raw bytes even unstreamed, as ElevenLabs answers it; the codec names are `ulaw`."""
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": name, "extra_params": NOISELESS})
    assert response.status_code == 200, response.text
    decoded = raw_g711(response.content, fmt) if name.endswith("_8000") else wav_g711(response.content, fmt)
    assert_same_speech(decoded, reference)


def test_elevenlabs_spelling_refuses_another_rate(http):
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": "ulaw_8000", "sample_rate": 16000})
    assert response.status_code == 400
    assert "8000" in response.text


def test_sample_rate_overrides_8000(http):
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": "ulaw", "sample_rate": 16000})
    assert response.status_code == 200, response.text
    with sf.SoundFile(io.BytesIO(response.content)) as wav:
        assert (wav.samplerate, wav.subtype) == (16000, "ULAW")
        assert_speech(wav.read(dtype="float32"), 16000)


@pytest.mark.parametrize("fmt", ["ulaw", "alaw"])
def test_websocket_streams_raw_g711(server, fmt):
    """Against the socket's own PCM: it cuts the text where its session does, not as one HTTP request."""
    config = {"stream_audio": True, "sample_rate": 8000, "extra_params": NOISELESS}
    pcm = audio(ws_session(server, {**config, "response_format": "pcm"}, TEXT, refuse_errors=True))
    frames = ws_session(server, {**config, "response_format": fmt}, TEXT, refuse_errors=True)
    assert_same_speech(raw_g711(audio(frames), fmt), np.frombuffer(pcm, "<i2").astype(np.float32) / 32768)


def test_websocket_sentences_as_g711_wavs(server):
    frames = ws_session(server, {"response_format": "alaw", "extra_params": NOISELESS}, "Press one for sales.", refuse_errors=True)
    files = [frame for frame in frames if isinstance(frame, bytes)]
    assert files
    for data in files:
        assert_speech(wav_g711(data, "alaw"), 8000)


@pytest.mark.parametrize("fmt", ["ulaw", "alaw"])
@pytest.mark.parametrize("delivery", [pb.AUDIO_DELIVERY_STREAM, pb.AUDIO_DELIVERY_FILE])
def test_grpc_g711(server, reference, fmt, delivery):
    config = pb.SessionConfig(encoding=PROTO[fmt], delivery=delivery)
    config.extra_params.update(NOISELESS)
    with grpc.insecure_channel(server.grpc_target) as channel:
        responses = list(synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(
            iter([pb.SynthesizeRequest(config=config), pb.SynthesizeRequest(text=pb.TextInput(text=TEXT))]), timeout=60
        ))
    started = responses[0].session_started
    assert (started.encoding, started.sample_rate, started.channels) == (PROTO[fmt], 8000, 1)
    data = b"".join(r.audio.audio for r in responses if r.WhichOneof("response") == "audio")
    if delivery == pb.AUDIO_DELIVERY_STREAM:
        assert started.media_type == {"ulaw": "audio/PCMU", "alaw": "audio/PCMA"}[fmt]
        assert sum(r.audio.num_samples for r in responses if r.WhichOneof("response") == "audio") == len(data)
        assert_same_speech(raw_g711(data, fmt), reference)
    else:
        assert started.media_type == "audio/wav"
        assert_same_speech(wav_g711(data, fmt), reference)


def test_the_twilio_media_streams_bridge_speaks_into_a_call(server):
    """clients/telephone_bridge.py, driven as Twilio drives it: the call's socket sends `connected` and `start`, and
    gets base64 mu-law in 20 ms `media` frames, then the done mark."""
    import asyncio
    import base64
    import json

    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    from tests.serving import free_port
    from vocalis.clients.telephone_bridge import DONE_MARK, call_handler

    vocalis = f"ws://127.0.0.1:{server.http_port}/v1/audio/speech/stream"

    async def call() -> list[dict]:
        port = free_port()
        async with serve(call_handler(vocalis, TEXT), "127.0.0.1", port), connect(f"ws://127.0.0.1:{port}") as twilio:
            await twilio.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
            await twilio.send(json.dumps({"event": "start", "streamSid": "MZ1", "start": {"streamSid": "MZ1", "callSid": "CA1",
                                          "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}}))
            received = []
            while not received or received[-1]["event"] != "mark":
                received.append(json.loads(await asyncio.wait_for(twilio.recv(), 60)))
            await twilio.send(json.dumps({"event": "stop", "streamSid": "MZ1"}))
            return received

    events = asyncio.run(call())
    media, mark = events[:-1], events[-1]
    assert mark == {"event": "mark", "streamSid": "MZ1", "mark": {"name": DONE_MARK}}
    assert media and all(e["event"] == "media" and e["streamSid"] == "MZ1" for e in media)
    payloads = [base64.b64decode(e["media"]["payload"]) for e in media]
    assert all(len(p) == 160 for p in payloads)  # 20 ms at 8 kHz
    pcm = audio(ws_session(server, {"response_format": "pcm", "stream_audio": True, "sample_rate": 8000}, TEXT, refuse_errors=True))
    seconds = len(pcm) / 2 / 8000  # the same text as PCM (Piper's durations vary by a few percent from draw to draw)
    assert abs(len(payloads) * 0.02 - seconds) <= 0.15 * seconds, (len(payloads) * 0.02, seconds)
    assert_speech(raw_g711(b"".join(payloads), "ulaw"), 8000)
