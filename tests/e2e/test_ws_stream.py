"""WS /v1/audio/speech/stream end to end on a real server: utterances, splitting, clear, flush ids, protocol errors."""

from __future__ import annotations

import io
import json
import random

import httpx
import pytest
import soundfile as sf
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.audio_checks import assert_speech
from tests.ws_session import receive

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
PCM_STREAM = {"type": "session.config", "response_format": "pcm", "stream_audio": True, "extra_params": NOISELESS}


@pytest.fixture
def ws_url(server) -> str:
    return f"ws://127.0.0.1:{server.http_port}/v1/audio/speech/stream"


def send(ws: ClientConnection, type: str, **fields) -> None:
    ws.send(json.dumps({"type": type, **fields}))


def receive_until(ws: ClientConnection, kind: str, timeout: float = 30) -> list[dict | bytes]:
    """Frames up to and including the first JSON frame of type `kind` (JSON decoded, audio as bytes),
    less the `session.configured` acknowledgements (their own test checks them)."""
    frames = receive(ws, (kind,), timeout)
    if kind == "session.configured":
        return frames
    return [f for f in frames if not (isinstance(f, dict) and f["type"] == "session.configured")]


def sentences(frames: list[dict | bytes]) -> list[tuple[str, bytes]]:
    """(sentence_text, audio) of every sentence in `frames`, checking the start/audio/done bracketing."""
    found, current, audio = [], None, bytearray()
    for frame in frames:
        if isinstance(frame, bytes):
            assert current is not None, "audio outside audio.start/audio.done"
            audio += frame
        elif frame["type"] == "audio.start":
            assert current is None
            current, audio = frame, bytearray()
        elif frame["type"] == "audio.done":
            assert current is not None and frame["sentence_index"] == current["sentence_index"]
            assert frame["total_bytes"] == len(audio) and not frame["error"]
            found.append((current["sentence_text"], bytes(audio)))
            current = None
    return found


def speak(ws_url: str, pieces: list[str], config: dict = PCM_STREAM) -> list[dict | bytes]:
    with connect(ws_url) as ws:
        send(ws, **config)
        for piece in pieces:
            send(ws, "input.text", text=piece)
        send(ws, "input.done")
        return receive_until(ws, "session.done")


def assert_closed(ws: ClientConnection, code: int) -> None:
    with pytest.raises(ConnectionClosed) as caught:
        ws.recv(timeout=10)
    assert caught.value.rcvd is not None and caught.value.rcvd.code == code, caught.value


def test_three_utterances_on_one_connection(ws_url):
    utterances = [["The first ", "answer is short."], ["Second answer. ", "It has two sentences."], ["Third and last."]]
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        for index, pieces in enumerate(utterances):
            for piece in pieces:
                send(ws, "input.text", text=piece)
            send(ws, "input.done")
            frames = receive_until(ws, "session.done")
            starts = [f for f in frames if isinstance(f, dict) and f["type"] == "audio.start"]
            assert {(s["format"], s["sample_rate"], s["channels"], s["utterance_index"]) for s in starts} == {("pcm", 22050, 1, index)}
            spoken = sentences(frames)
            assert [text for text, _ in spoken] == [s.strip() for s in "".join(pieces).replace(". ", ".|").split("|")]
            assert all(len(audio) > 22050 for _, audio in spoken)
            assert frames[-1] == {"type": "session.done", "utterance_index": index, "total_sentences": len(spoken)}
        send(ws, "session.close")
        assert_closed(ws, 1000)


def test_default_config_sends_one_wav_file_per_sentence(ws_url):
    frames = speak(ws_url, ["One sentence here. And a second one."], {"type": "session.config", "extra_params": NOISELESS})
    spoken = sentences(frames)
    assert [text for text, _ in spoken] == ["One sentence here.", "And a second one."]
    assert [f for f in frames if isinstance(f, bytes)] == [audio for _, audio in spoken]  # one binary frame each
    for _, audio in spoken:
        samples, rate = sf.read(io.BytesIO(audio), dtype="float32")
        assert rate == 22050
        assert_speech(samples, rate)
    assert {f["format"] for f in frames if isinstance(f, dict) and f["type"] == "audio.start"} == {"wav"}


def test_text_split_mid_word_gives_the_same_units_and_audio(ws_url):
    text = "Mr. Brown bought 2.5 kilos of apples. Then he went home! Did he eat them all? Nobody knows."
    whole = sentences(speak(ws_url, [text]))
    assert [t for t, _ in whole] == ["Mr. Brown bought 2.5 kilos of apples.", "Then he went home!", "Did he eat them all?", "Nobody knows."]
    cuts = sorted(random.Random(1).sample(range(1, len(text)), 30))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert sentences(speak(ws_url, pieces)) == whole


def test_clear_during_a_long_utterance_stops_audio_and_the_next_works(ws_url):
    long_text = " ".join(f"This is sentence {i} of a long answer the listener interrupts." for i in range(30))
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        send(ws, "input.text", text=long_text)
        send(ws, "input.done")
        before: list[dict | bytes] = []
        while not before or not isinstance(before[-1], bytes):
            frame = ws.recv(timeout=30)
            before.append(frame if isinstance(frame, bytes) else json.loads(frame))
        send(ws, "input.clear")  # the socket reads while it synthesizes
        frames = receive_until(ws, "input.cleared")
        assert sum(isinstance(f, bytes) for f in frames) <= 1  # within one chunk
        kinds = [f["type"] for f in before + frames if isinstance(f, dict)]
        assert "session.done" in kinds  # the input.done sent before the clear is still answered
        assert kinds.count("audio.start") == kinds.count("audio.done")  # a cut sentence is closed (cleared: true)
        send(ws, "input.text", text="The next utterance works.")
        send(ws, "input.done")
        after = receive_until(ws, "session.done")
    spoken = sentences(after)
    assert [t for t, _ in spoken] == ["The next utterance works."] and len(spoken[0][1]) > 22050
    assert after[-1]["utterance_index"] == 1


def test_flush_id_round_trips(ws_url):
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        send(ws, "input.text", text="Say this now")
        send(ws, "input.flush", flush_id="turn-7")
        frames = receive_until(ws, "flush.done")
        assert frames[-1] == {"type": "flush.done", "flush_id": "turn-7"}
        assert [t for t, _ in sentences(frames)] == ["Say this now"]
        send(ws, "input.flush")  # nothing buffered, no id: still answered
        assert receive_until(ws, "flush.done") == [{"type": "flush.done", "flush_id": ""}]


def test_config_between_utterances_but_not_during_one(ws_url):
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        send(ws, "input.text", text="Open utterance")
        send(ws, **PCM_STREAM, sample_rate=16000)
        (error,) = receive_until(ws, "error")
        assert error["reason"] == "CONFIG_IN_UTTERANCE"
        send(ws, "input.done")
        assert [f for f in receive_until(ws, "session.done") if isinstance(f, dict) and f["type"] == "audio.start"][0]["sample_rate"] == 22050
        send(ws, **PCM_STREAM, sample_rate=16000)
        send(ws, "input.text", text="Now at sixteen kilohertz.")
        send(ws, "input.done")
        frames = receive_until(ws, "session.done")
    assert {f["sample_rate"] for f in frames if isinstance(f, dict) and f["type"] == "audio.start"} == {16000}


@pytest.mark.parametrize(
    ("frame", "reason", "close"),
    [
        ("{not json", "INVALID_JSON", 1007),
        (b"\x00\x01binary", "BINARY_FRAME", 1003),
        ('["a list"]', "INVALID_MESSAGE", 1007),
        (json.dumps({"type": "input.text", "text": "Too early."}), "CONFIG_REQUIRED", 1008),
        (json.dumps({"type": "session.config", "speed": "fast"}), "INVALID_CONFIG", 1008),
        (json.dumps({"type": "session.config", "response_format": "mp3", "stream_audio": True}), "INVALID_CONFIG", 1008),
        (json.dumps({"type": "session.config", "voice": "nobody"}), "UNKNOWN_VOICE", 1008),
        (json.dumps({"type": "session.config", "split_granularity": "word"}), "INVALID_CONFIG", 1008),
    ],
)
def test_errors_before_a_config_close_the_socket(ws_url, server, frame, reason, close):
    with connect(ws_url) as ws:
        ws.send(frame)
        (error,) = receive_until(ws, "error")
        assert error["reason"] == reason and error["message"] and error["code"] in (400, 404)
        assert_closed(ws, close)
    assert httpx.get(f"{server.http_url}/health").status_code == 200


def test_a_speed_outside_the_models_range_is_the_servers_400_naming_speed(ws_url):
    """The gateway keeps no speed range of its own: the server's, from the model's capabilities, answers."""
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM, speed=9)
        (error,) = receive_until(ws, "error")
        assert (error["code"], error["param"]) == (400, "speed") and "0.25 to 4" in error["message"], error


def test_errors_after_a_config_leave_the_session_usable(ws_url):
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        for frame, reason in [
            ("{not json", "INVALID_JSON"),
            (b"\x00binary", "BINARY_FRAME"),
            (json.dumps({"type": "input.text", "text": "x" * (129 * 1024)}), "MESSAGE_TOO_LARGE"),
            (json.dumps({"type": "input.text", "text": 42}), "INVALID_FIELD"),
            ('{"type": "input.text", "text": "a\\udc00b."}', "INVALID_FIELD"),
            ('{"type": "input.flush", "flush_id": "\\ud800"}', "INVALID_FIELD"),
            (json.dumps({"type": "input.magic"}), "UNKNOWN_MESSAGE_TYPE"),
        ]:
            ws.send(frame)
            (error,) = receive_until(ws, "error")
            assert error["reason"] == reason, error
        send(ws, "input.text", text="Still here.")
        send(ws, "input.done")
        assert [t for t, _ in sentences(receive_until(ws, "session.done"))] == ["Still here."]


def test_a_server_side_limit_is_an_error_frame_and_a_close(ws_url):
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        for _ in range(6):  # 6 x 900 characters: over the server's 5000 per session
            send(ws, "input.text", text="word " * 180)
        frames = receive_until(ws, "error")
        error = frames[-1]
        assert (error["code"], error["reason"], error["param"]) == (400, "INPUT_TOO_LONG", "text")
        assert_closed(ws, 1008)


def test_sglang_additions_configured_commit_and_the_socket_stays_open(ws_url):
    with connect(ws_url) as ws:
        send(ws, **PCM_STREAM)
        (configured,) = receive_until(ws, "session.configured")
        assert configured["type"] == "session.configured" and configured["sample_rate"] == 22050 and configured["session_id"]
        send(ws, "input.text", text="First part")
        send(ws, "input.commit", flush_id="c1")
        first = receive_until(ws, "input.committed")
        assert first[-1] == {"type": "input.committed", "flush_id": "c1", "segment_index": 0, "total_sentences": 1}
        assert [text for text, _ in sentences(first)] == ["First part"]
        send(ws, "input.text", text="Second part.")
        send(ws, "input.done")
        done = receive_until(ws, "session.done")
        assert len(sentences(done)) == 1
        send(ws, "input.text", text="Still open after input.done.")  # vLLM-Omni's rule: the socket lives on
        send(ws, "input.done")
        assert len(sentences(receive_until(ws, "session.done"))) == 1


def test_frames_larger_than_any_message_are_dropped_unread_and_the_session_goes_on(ws_url):
    with connect(ws_url, max_size=None) as ws:
        send(ws, **PCM_STREAM)
        for _ in range(3):  # 4.5 MB each: over every message limit, under the socket's frame limit
            ws.send(json.dumps({"type": "input.text", "text": "x" * 4_500_000}))
            (error,) = receive_until(ws, "error")
            assert (error["code"], error["reason"]) == (413, "MESSAGE_TOO_LARGE"), error
        send(ws, "input.text", text="Still here.")
        send(ws, "input.done")
        assert [t for t, _ in sentences(receive_until(ws, "session.done"))] == ["Still here."]


def test_a_frame_over_the_socket_limit_closes_with_1009(ws_url):
    with connect(ws_url, max_size=None) as ws:
        send(ws, **PCM_STREAM)
        ws.send("x" * 6 * 1024 * 1024)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
