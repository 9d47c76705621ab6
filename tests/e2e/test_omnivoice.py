"""OmniVoice served end to end from the tiny checkpoint: HTTP, gRPC and WebSocket; auto voice, design, cloning; long texts."""

from __future__ import annotations

import base64
import io
import time

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.ws_session import audio as ws_audio
from tests.ws_session import events, ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

RATE = 24000
HOP = 960
PAD = RATE // 10
FAST = {"num_step": 2}


@pytest.fixture(scope="module")
def omnivoice(family_servers):
    return family_servers.get("omnivoice")  # shared with test_family_conformance.py (family_servers.py)


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"extra_params": FAST, **body}, timeout=120)


def config(**fields) -> pb.SessionConfig:
    extra = fields.pop("extra_params", FAST)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    message.extra_params.update(extra)
    return message


def clip(seconds: float = 1.0, seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    t = np.arange(int(RATE * seconds)) / RATE
    samples = 0.2 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) + 0.01 * rng.standard_normal(len(t))
    buffer = io.BytesIO()
    sf.write(buffer, samples.astype(np.float32), RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def test_http_auto_voice_is_24khz_with_padding(omnivoice):
    response = speech(omnivoice, input="Hello world.", language="English", extra_params={"num_step": 2, "postprocess_output": False})
    assert response.status_code == 200, response.text
    assert response.headers["x-sample-rate"] == str(RATE)
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and (len(samples) - 2 * PAD) % HOP == 0 and len(samples) > 2 * PAD
    body = samples[PAD:-PAD]
    assert np.abs(samples[:PAD]).max() == 0 and 0.45 < np.abs(body).max() <= 0.51  # peak-levelled to 0.5


def test_http_voice_design_and_cloning(omnivoice):
    designed = speech(omnivoice, input="Good morning.", instructions="female, low pitch, british accent", seed=1)
    assert designed.status_code == 200, designed.text
    reference = base64.b64encode(clip()).decode()
    cloned = speech(omnivoice, input="Nice to meet you.", ref_audio=reference, ref_text="A short reference.", seed=1)
    assert cloned.status_code == 200, cloned.text
    assert sf.read(io.BytesIO(cloned.content))[0].std() > 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"x_vector_only_mode": True}, "x_vector_only_mode"),
        ({"instructions": "male, female"}, "instructions"),
        ({"instructions": "robot voice"}, "instructions"),
        ({"ref_text": "no audio"}, "ref_text"),
        ({"ref_audio": base64.b64encode(clip()).decode()}, "ref_text"),
    ],
)
def test_fields_it_cannot_honour_are_refused_by_name(omnivoice, body, field):
    response = speech(omnivoice, input="Hello.", **body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == field


def test_fields_vllm_omni_ignores_are_accepted_with_a_warning(omnivoice):
    response = speech(omnivoice, input="Hello.", initial_codec_chunk_frames=2, max_new_tokens=300,
                      extra_params={**FAST, "top_k": 5})
    assert response.status_code == 200, response.text
    warned = [value.split(":")[0] for value in response.headers.get_list("x-vocalis-warning")]
    assert warned == ["FIELD_IGNORED extra_params.top_k", "FIELD_IGNORED max_new_tokens", "FIELD_IGNORED initial_codec_chunk_frames"]


def test_seed_reproduces_with_position_noise(omnivoice):
    noisy = {"num_step": 2, "position_temperature": 5.0}
    a, b, c = (speech(omnivoice, input="Seeded words.", seed=s, extra_params=noisy).content for s in (7, 7, 8))
    assert a == b and a != c


def test_three_sentences_stream_unit_by_unit_over_grpc(omnivoice):
    text = "The first sentence. The second one here. And the third."
    arrivals: list[tuple[str, int, float]] = []
    with Client(omnivoice.grpc_target, timeout=120) as client:
        for response in client.stream(config(), text):
            kind = response.WhichOneof("response")
            if kind == "audio" and response.audio.num_samples:
                arrivals.append(("audio", response.audio.utterance_index, time.monotonic()))
            elif kind == "utterance_done":
                arrivals.append(("done", response.utterance_done.utterance_index, time.monotonic()))
    done = [a for a in arrivals if a[0] == "done"]
    assert [index for _, index, _ in done] == [0, 1, 2]
    first_audio = next(a for a in arrivals if a[0] == "audio")
    assert first_audio[1] == 0 and first_audio[2] < done[-1][2]
    assert arrivals.index(first_audio) < arrivals.index(done[-1])


def test_one_long_unit_is_generated_and_streamed_in_pieces(omnivoice):
    """A unit longer than audio_chunk_threshold is cut inside the model, and each piece leaves when it is ready."""
    text = "The first sentence. The second one here. And the third."
    extra = {"num_step": 2, "audio_chunk_threshold": 1.0, "audio_chunk_duration": 1.0}
    cfg = config(extra_params=extra, text_splitting=pb.TextSplitting(granularity=pb.SPLIT_GRANULARITY_NONE))
    with Client(omnivoice.grpc_target, timeout=120) as client:
        responses = list(client.stream(cfg, text))
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio" and r.audio.num_samples]
    dones = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert len(dones) == 1 and len(chunks) >= 3
    assert all(c.utterance_index == 0 for c in chunks)


def test_a_split_text_is_levelled_once_as_a_file_and_unit_by_unit_as_a_stream(omnivoice):
    """As a file, the joined units of a long utterance peak at 0.5 together, as the reference levels them; streamed, each does."""
    text = "The first sentence. The second one here. And the third."
    extra = {"num_step": 2, "audio_chunk_threshold": 1.0, "audio_chunk_duration": 1.0}
    one_utterance = pb.TextSplitting(granularity=pb.SPLIT_GRANULARITY_NONE)
    peaks: dict[int, list[np.ndarray]] = {}
    for delivery in (pb.AUDIO_DELIVERY_STREAM, pb.AUDIO_DELIVERY_FILE):
        cfg = config(extra_params=extra, text_splitting=one_utterance, seed=3, delivery=delivery)
        with Client(omnivoice.grpc_target, timeout=120) as client:
            responses = list(client.stream(cfg, text))
        peaks[delivery] = [np.frombuffer(r.audio.audio, "<i2") / 32768 for r in responses if r.WhichOneof("response") == "audio" and r.audio.audio]
    streamed, whole = peaks[pb.AUDIO_DELIVERY_STREAM], np.concatenate(peaks[pb.AUDIO_DELIVERY_FILE])
    assert len(streamed) >= 3 and [np.abs(p).max() for p in streamed] == pytest.approx([0.5] * len(streamed), abs=1e-3)
    assert len(whole) == sum(len(p) for p in streamed) and np.abs(whole).max() == pytest.approx(0.5, abs=1e-3)
    # The file's units are the streamed ones under one gain, the loudest unit's: the others come out quieter.
    gains, start = [], 0
    for piece in streamed:
        part, start = whole[start : start + len(piece)], start + len(piece)
        gains.append(np.abs(part).max() / np.abs(piece).max())
    assert max(gains) == pytest.approx(1.0, abs=2e-3) and min(gains) < 0.99


def test_forty_sentences_keep_every_sentence(omnivoice):
    sentences = [f"Sentence number {n} is here." for n in range(1, 41)]
    with Client(omnivoice.grpc_target, timeout=300) as client:
        responses = list(client.stream(config(extra_params={"num_step": 1}), " ".join(sentences)))
    dones = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert len(dones) == 40
    spans = [" ".join(sentences)[d.text_span.start : d.text_span.end] for d in dones] if dones[0].HasField("text_span") else None
    if spans is not None:
        assert spans == sentences
    assert all(d.num_samples > 2 * PAD for d in dones)
    session = next(r.session_done for r in responses if r.WhichOneof("response") == "session_done")
    assert session.utterance_count == 40


def test_websocket_session(omnivoice):
    config = {"response_format": "pcm", "stream_audio": True, "extra_params": FAST}
    frames = ws_session(omnivoice, config, "Hello there. How are you?", refuse_errors=True)
    audio, done = ws_audio(frames), events(frames, "audio.done")
    assert len(done) == 2 and all(d["total_bytes"] > 0 for d in done) and len(audio) == sum(d["total_bytes"] for d in done)


def test_model_reports_its_languages_and_fields(omnivoice):
    with Client(omnivoice.grpc_target, timeout=30) as client:
        (model,) = client.list_models()
    caps = model.capabilities
    assert "en" in caps.languages and "zh" in caps.languages and len(caps.languages) > 600
    assert caps.voice_cloning and caps.sample_rate == RATE
    assert {"language", "instructions", "ref_audio", "ref_text", "seed", "speed", "extra_params"} <= set(caps.accepted_fields)
    assert {"num_step", "guidance_scale"} <= set(caps.extra_params)


def test_a_stored_voice_clones(omnivoice):
    files = {"audio_sample": ("ref.wav", clip(seed=5), "audio/wav")}
    form = {"name": "omni-voice", "consent": "consent-1", "ref_text": "A stored reference."}
    created = httpx.post(f"{omnivoice.http_url}/v1/audio/voices", files=files, data=form, timeout=60)
    assert created.status_code == 200, created.text
    response = speech(omnivoice, input="Spoken in a stored voice.", voice="omni-voice")
    assert response.status_code == 200, response.text
