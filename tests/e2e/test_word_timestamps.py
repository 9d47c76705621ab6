"""Word timestamps from Piper end to end: gRPC WordTimings, SSE events, WebSocket frames and the HTTP header."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf
from websockets.sync.client import connect

from tests.word_checks import assert_cover_speech, assert_monotonic, assert_words_fit_text
from tests.ws_session import ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
TEXT = "Hello, how can I help you today? Your order number is 4729, and it ships tomorrow."


def config(**fields) -> pb.SessionConfig:
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True, **fields)
    message.extra_params.update(NOISELESS)
    return message


def as_dicts(timings: pb.WordTimings) -> list[dict]:
    return [
        {"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "start_char": w.text_span.start, "end_char": w.text_span.end}
        for w in timings.words
    ]


def words_and_audio(responses) -> tuple[list[dict], np.ndarray, list[pb.SynthesizeResponse]]:
    """Every word, the session's PCM as float samples, and the responses (checking that each word's audio came first)."""
    words, audio, kept = [], bytearray(), []
    rate = None
    for response in responses:
        kept.append(response)
        kind = response.WhichOneof("response")
        if kind == "session_started":
            rate = response.session_started.sample_rate
        elif kind == "audio":
            audio += response.audio.audio
        elif kind == "word_timings":
            sent_ms = len(audio) / 2 / rate * 1000
            assert all(w["end_ms"] <= sent_ms + 1 for w in as_dicts(response.word_timings)), "words before their audio"
            words += as_dicts(response.word_timings)
    return words, np.frombuffer(bytes(audio), dtype=np.int16).astype(np.float32) / 32768, kept


@pytest.fixture(scope="module")
def grpc_words(server):
    with Client(server.grpc_target, timeout=120) as client:
        return words_and_audio(client.stream(config(), TEXT))


def test_grpc_words_are_ordered_slice_the_text_and_cover_the_speech(grpc_words):
    words, samples, responses = grpc_words
    assert_words_fit_text(words, TEXT)
    assert_monotonic(words)
    assert_cover_speech(words, samples, 22050)
    assert words[-1]["end_ms"] <= len(samples) / 22.05 + 1
    assert {r.word_timings.utterance_index for r in responses if r.WhichOneof("response") == "word_timings"} == {0, 1}


def test_three_flushes_give_offsets_into_the_whole_text(server):
    pieces = ["First part of the text, ", "sent in pieces. Then a second", " one arrives", " and a third goes out."]
    with Client(server.grpc_target, timeout=120) as client, client.session(config()) as session:
        for number, piece in enumerate(pieces):
            session.send(piece)
            if number < 3:
                session.flush(f"f{number}")
        session.end()
        words, samples, responses = words_and_audio(session)
    text = "".join(pieces)
    assert [r.flush_done.flush_id for r in responses if r.WhichOneof("response") == "flush_done"] == ["f0", "f1", "f2"]
    assert_words_fit_text(words, text)
    assert_monotonic(words)
    assert_cover_speech(words, samples, 22050)
    for done in (r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"):
        spoken = [w for w in words if done.text_span.start <= w["start_char"] < done.text_span.end]
        assert spoken and spoken[-1]["end_char"] <= done.text_span.end


def test_clear_keeps_the_timeline_and_drops_the_cleared_words(server):
    with Client(server.grpc_target, timeout=120) as client, client.session(config()) as session:
        session.send("This first sentence is spoken. This second one is cleared at once, long before it is said aloud")
        responses = iter(session)
        before = []
        for response in responses:
            before.append(response)
            if response.WhichOneof("response") == "utterance_done":
                break
        session.clear()
        session.send("After the clear.")
        session.end()
        words, samples, after = words_and_audio([*before, *responses])
    text = "This first sentence is spoken. This second one is cleared at once, long before it is said aloud" + "After the clear."
    assert [w["word"] for w in words] == ["This", "first", "sentence", "is", "spoken", "After", "the", "clear"]
    for word in words:
        assert text[word["start_char"] : word["end_char"]] == word["word"]
    assert_monotonic(words)
    assert words[-1]["end_ms"] <= len(samples) / 22.05 + 1
    assert_cover_speech(words, samples, 22050)


def test_speed_and_rate_change_the_times_as_the_audio(server, grpc_words):
    words, _, _ = grpc_words
    with Client(server.grpc_target, timeout=120) as client:
        fast, fast_audio, _ = words_and_audio(client.stream(config(speed=2.0), TEXT))
        resampled, resampled_audio, _ = words_and_audio(client.stream(config(sample_rate=16000), TEXT))
    assert [w["word"] for w in fast] == [w["word"] for w in words]
    ratio = fast[-1]["end_ms"] / words[-1]["end_ms"]
    assert 0.5 <= ratio < 0.7, ratio  # Piper's durations are whole frames: not quite half at twice the speed
    assert abs(ratio - len(fast_audio) / len(grpc_words[1])) < 0.05
    assert_cover_speech(fast, fast_audio, 22050)
    assert resampled == words  # the same speech, so the same times, whatever the rate
    assert_cover_speech(resampled, resampled_audio, 16000)


def test_sse_sends_timestamp_events(server, grpc_words):
    body = {"input": TEXT, "stream": True, "response_format": "pcm", "word_timestamps": True, "extra_params": NOISELESS}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    words = [w for e in events if e["type"] == "speech.audio.timestamps" for w in e["words"]]
    assert words == grpc_words[0]
    kinds = [e["type"] for e in events]
    assert kinds.index("speech.audio.timestamps") > kinds.index("speech.audio.delta") and kinds[-1] == "speech.audio.done"


@pytest.mark.parametrize("response_format", ["wav", "pcm"])
def test_http_header_as_the_peer(server, grpc_words, response_format):
    body = {"input": TEXT, "response_format": response_format, "word_timestamps": True, "extra_params": NOISELESS}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    assert json.loads(response.headers["x-word-timestamps"]) == grpc_words[0]
    if response_format == "wav":
        samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
        assert_cover_speech(grpc_words[0], samples, rate)


def test_a_raw_audio_stream_cannot_carry_them(server):
    body = {"input": TEXT, "stream": True, "stream_format": "audio", "response_format": "pcm", "word_timestamps": True}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "word_timestamps"


def test_websocket_in_the_peers_format(server):
    frames = ws_session(server, {"response_format": "pcm", "stream_audio": True, "word_timestamps": True, "split_granularity": "sentence",
                                 "extra_params": NOISELESS}, TEXT)
    assert all(isinstance(f, dict) for f in frames), "audio must come in audio.chunk frames"
    starts = [f for f in frames if f["type"] == "audio.start"]
    assert len(starts) == 2 and all(f["word_timestamps"] for f in starts)
    words, offset_ms = [], 0.0
    for sentence in (0, 1):
        chunks = [f for f in frames if f["type"] == "audio.chunk" and f["sentence_index"] == sentence]
        assert [c["chunk_id"] for c in chunks] == list(range(len(chunks)))
        audio = b"".join(base64.b64decode(c["audio_b64"]) for c in chunks)
        trailer = chunks[-1]
        assert trailer["audio_b64"] == "" and all(c["timestamps"] is None for c in chunks[:-1])
        assert trailer["chunk_start_ms"] == 0 and abs(trailer["chunk_end_ms"] - len(audio) / 2 / 22.05) <= 1
        samples = np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768
        assert_monotonic(trailer["timestamps"])
        assert_cover_speech(trailer["timestamps"], samples, 22050)
        words += trailer["timestamps"]
        offset_ms += len(samples) / 22.05
    assert_words_fit_text(words, TEXT)


def test_websocket_incremental_events_over_several_texts(server):
    pieces = ["One two three. ", "Four five", " six.", " Seven eight nine."]
    frames = ws_session(server, {"response_format": "pcm", "stream_audio": True, "word_timestamps": True,
                                 "word_timestamps_format": "incremental", "extra_params": NOISELESS}, pieces)
    audio = b"".join(f for f in frames if isinstance(f, bytes))
    events = [f for f in frames if isinstance(f, dict) and f["type"] == "audio.timestamps"]
    words = [w for e in events for w in e["words"]]
    assert_words_fit_text(words, "".join(pieces))
    assert_monotonic(words)
    assert_cover_speech(words, np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768, 22050)


def test_websocket_peer_format_needs_stream_audio(server):
    url = f"ws://127.0.0.1:{server.http_port}/v1/audio/speech/stream"
    with connect(url) as ws:
        ws.send(json.dumps({"type": "session.config", "word_timestamps": True, "word_timestamps_format": "peer"}))
        frame = json.loads(ws.recv(timeout=30))
    assert frame["type"] == "error" and frame["param"] == "word_timestamps_format"


def test_websocket_incremental_events_follow_each_sentence_file(server):
    frames = ws_session(server, {"response_format": "wav", "word_timestamps": True, "split_granularity": "sentence",
                                 "extra_params": NOISELESS}, TEXT)
    kinds = ["audio" if isinstance(f, bytes) else f["type"] for f in frames if isinstance(f, bytes) or f["type"] != "session.configured"]
    assert kinds == ["audio.start", "audio", "audio.timestamps", "audio.done"] * 2 + ["session.done"]
    words, offset_ms = [], 0.0
    for frame in frames:
        if isinstance(frame, bytes):
            samples, rate = sf.read(io.BytesIO(frame), dtype="float32")
        elif frame["type"] == "audio.timestamps":
            assert_cover_speech(frame["words"], samples, rate, shift_ms=offset_ms)
            offset_ms += len(samples) / rate * 1000
            words += frame["words"]
    assert_words_fit_text(words, TEXT)
    assert_monotonic(words)
