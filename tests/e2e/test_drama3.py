"""Fish Audio Drama 3 served end to end on the tiny checkpoint of tests/tiny_drama3 (config.json fish_omni with FP8
experts, model.safetensors, tokenizer.json, S2 Pro's tiny codec beside them): 44.1 kHz over HTTP, gRPC and the
WebSocket, seeded and streamed audio equal to the whole, multi-speaker input, a cloned voice, long text spoken and
streamed one utterance at a time, and the refusals.

The random tiny model may choose end of speech at any frame after the first, so lengths are whole frames up to
max_new_tokens, and streams are checked against the whole file of the same seeded request.
"""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf
from websockets.sync.client import connect

from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

FRAME = 2048
FRAMES = 5
TEXT = "Hello world, this is a tiny voice."
MAX_LEN = 320
"""The talker's cache (16384 as deployed): the peer's max_new_tokens 4096 ends where it does."""
PINNED = {"max_new_tokens": FRAMES, "seed": 7}


def clip_data_url(pitch: float = 220, seconds: float = 1.2, rate: int = 24000) -> str:
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * pitch * t)).astype(np.float32), rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def drama(family_servers):
    return family_servers.get("drama3")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **PINNED, **body}, timeout=120)


def pcm(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_http_wav_at_44k_in_whole_frames_and_seeded(drama):
    response = speak(drama, response_format="wav")
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 44100 and response.headers["x-sample-rate"] == "44100"
    assert len(samples) % FRAME == 0 and 1 <= len(samples) // FRAME <= FRAMES
    assert samples.std() > 1e-3
    same, other = pcm(speak(drama, response_format="pcm")), pcm(speak(drama, response_format="pcm", seed=8))
    assert np.array_equal(same, pcm(speak(drama, response_format="pcm")))  # seed determinism
    assert not np.array_equal(same, other)


def test_grpc_and_websocket_stream_the_whole(drama):
    whole = pcm(speak(drama, response_format="pcm")).tobytes()
    with Client(drama.grpc_target, timeout=120) as client:
        responses = list(client.stream(pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **PINNED), TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio" and r.audio.num_samples]
    assert started.sample_rate == 44100 and chunks[0].num_samples == FRAME  # the first chunk is one frame
    assert b"".join(c.audio for c in chunks) == whole


def test_speaker_tags_reach_the_model_and_a_clone_is_served(drama):
    """All sixteen speaker tags are accepted (speaker 0 is the untagged default); a tag changes the prompt and so
    the seeded audio. A clone with the peer's references alias gives audio too."""
    untagged = pcm(speak(drama, response_format="pcm", input="Hello world."))
    assert np.array_equal(untagged, pcm(speak(drama, response_format="pcm", input="<|speaker:0|> Hello world.")))
    dialogue = [pcm(speak(drama, response_format="pcm", input=f"<|speaker:{n}|> [laughs] Hello <whisper>world</whisper>."))
                for n in (1, 9, 15)]
    assert all(len(d) % FRAME == 0 and len(d) for d in dialogue)
    assert not np.array_equal(dialogue[0], dialogue[2]) and not np.array_equal(dialogue[0], untagged)


def test_multi_reference_cloning_over_http_and_grpc(drama):
    """One voice per speaker: `references` (HTTP, the peer's alias) and ref_audio + more_references (gRPC) give the
    same prompts, hence the same seeded frames, as does an uploaded voice for the first; a second reference changes it; a reference without its transcript
    is a 400 naming it."""
    first = {"audio_path": clip_data_url(220), "text": "<|speaker:0|> A short reference."}
    second = {"audio_path": clip_data_url(330), "text": "<|speaker:1|> The quick brown fox."}
    scene = "<|speaker:0|> Hello world. <|speaker:1|> Good morning, fox!"
    single = pcm(speak(drama, response_format="pcm", input=scene, references=[first]))
    both = pcm(speak(drama, response_format="pcm", input=scene, references=[first, second]))
    assert len(both) % FRAME == 0 and len(both) > 0 and not np.array_equal(single, both)
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, ref_audio=first["audio_path"], ref_text=first["text"], **PINNED)
    config.more_references.add(audio=second["audio_path"], text=second["text"])
    with Client(drama.grpc_target, timeout=120) as client:
        responses = list(client.stream(config, scene))
    streamed = np.frombuffer(b"".join(r.audio.audio for r in responses if r.WhichOneof("response") == "audio"), dtype="<i2")
    # the same frames; the two sentences may run side by side in one path and not the other: float rounding only
    assert streamed.shape == both.shape and np.abs(streamed.astype(np.int32) - both.astype(np.int32)).max() <= 4
    clip = base64.b64decode(first["audio_path"].split(",", 1)[1])
    upload = httpx.post(f"{drama.http_url}/v1/audio/voices", data={"name": "narrator", "consent": "c-1", "ref_text": first["text"]},
                        files={"audio_sample": ("voice.wav", clip, "audio/wav")}, timeout=60)
    assert upload.status_code == 200, upload.text
    stored = pcm(speak(drama, response_format="pcm", input=scene, voice="narrator"))  # an uploaded voice clones the same
    assert stored.shape == single.shape and np.abs(stored.astype(np.int32) - single.astype(np.int32)).max() <= 4
    missing = speak(drama, references=[first, {"audio_path": second["audio_path"]}])
    assert missing.status_code == 400 and "more_references[0]" in missing.text


def test_long_text_is_spoken_and_streamed_one_utterance_at_a_time(drama):
    sentences = ["<|speaker:0|> Hello world.", "<|speaker:1|> The quick brown fox.", "<|speaker:0|> Good morning."]
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=3, seed=2)
    with Client(drama.grpc_target, timeout=120) as client:
        responses = list(client.stream(config, " ".join(sentences)))
    kinds = [r.WhichOneof("response") for r in responses]
    dones = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert [d.utterance_index for d in dones] == [0, 1, 2]
    first_done = kinds.index("utterance_done")
    assert "audio" in kinds[:first_done]  # the first utterance's audio leaves before the rest is spoken
    for done in dones:
        assert done.num_samples % FRAME == 0 and 1 <= done.num_samples // FRAME <= 3


def ws_pcm(server, messages: list[dict]) -> np.ndarray:
    """The PCM of one WebSocket call: its config, then `messages` (text pieces, flushes), then input.done."""
    with connect(f"ws://127.0.0.1:{server.http_port}/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True, **PINNED}))
        for message in [*messages, {"type": "input.done"}]:
            ws.send(json.dumps(message))
        frames = []
        while not (frames and isinstance(frames[-1], dict) and frames[-1]["type"] in ("session.done", "error")):
            frame = ws.recv(timeout=120)
            frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
    assert frames[-1]["type"] == "session.done", frames[-1]
    return np.frombuffer(b"".join(f for f in frames if isinstance(f, bytes)), dtype="<i2")


def close_to(a: np.ndarray, b: np.ndarray) -> bool:
    """The same frames, within float rounding of another batch shape (sentences may run side by side or not)."""
    return a.shape == b.shape and np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 4


def test_tags_carry_across_sentences_over_http_and_the_websocket(drama):
    """Each sentence has its own prompt, yet a speaker tag reaches the untagged sentences after it and a whisper may
    span sentences, as in the reference server's one prompt per request; text arriving in pieces (each piece's end a
    tentative sentence end) gives the same prompts."""
    def http(text: str) -> np.ndarray:
        return pcm(speak(drama, response_format="pcm", input=text))

    carried = http("<|speaker:3|> Hello there. How are you?")
    assert close_to(carried, http("<|speaker:3|> Hello there. <|speaker:3|> How are you?"))
    assert not close_to(carried, http("<|speaker:3|> Hello there. <|speaker:0|> How are you?"))
    pieces = ["<|speaker:3|> Hel", "lo there.", " How are", " you?"]
    assert close_to(ws_pcm(drama, [{"type": "input.text", "text": piece} for piece in pieces]), carried)

    whispered = http("<whisper>One. Two.</whisper>")  # refused before: each sentence held half a pair
    explicit = ws_pcm(drama, [{"type": "input.text", "text": "<whisper>One.</whisper>"}, {"type": "input.flush"},
                              {"type": "input.text", "text": " <whisper>Two.</whisper>"}])  # a flush makes the units
    assert close_to(whispered, explicit) and not close_to(whispered, http("One. Two."))
    pieces = ["<whisp", "er>One.", " Two.</whi", "sper>"]
    assert close_to(ws_pcm(drama, [{"type": "input.text", "text": piece} for piece in pieces]), whispered)
    unclosed = speak(drama, input="<whisper>One. Two.")
    assert unclosed.status_code == 400 and "without its closing" in unclosed.text


def test_the_peers_max_new_tokens_is_accepted_up_to_4096(drama):
    """The peer's bound for every model (1..4096); Drama 3 refused past its 2048-frame default. The cache ends the
    frames here, and the response says so."""
    samples = capped_audio(speak(drama, max_new_tokens=PEER_MAX_NEW_TOKENS, response_format="wav"), 44100)
    assert len(samples) % FRAME == 0 and FRAMES * FRAME <= len(samples) < MAX_LEN * FRAME


@pytest.mark.parametrize(("body", "field"), [
    ({"input": "hi <|im_end|> there"}, "input"),
    ({"input": "<|speaker:16|> hi"}, "input"),
    ({"input": "<whisper>hi there."}, "input"),
    ({"input": "hi</whisper> there."}, "input"),
    ({"ref_text": "transcript only"}, "ref_text"),
])
def test_refusals_are_400_naming_the_field(drama, body, field):
    response = speak(drama, **body)
    assert response.status_code == 400, response.text
    assert field in response.text
    assert speak(drama, response_format="pcm").status_code == 200  # the server keeps serving


def test_batched_requests_equal_their_solo_runs(drama):
    """Batch invariance through the server: seeded requests running together (backbone, tower and codec batched
    across them, each tower over its own cache) give what each gives alone, within float rounding of another
    batch shape (a few int16 steps)."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [dict(input=TEXT, seed=3, response_format="pcm"), dict(input="<|speaker:4|> Good morning, brown fox.", seed=4,
                                                                   response_format="pcm"),
              dict(input="The lazy dog.", seed=5, response_format="pcm", max_new_tokens=3)]
    solo = [pcm(speak(drama, **body)) for body in bodies]
    with ThreadPoolExecutor(len(bodies)) as pool:
        together = list(pool.map(lambda body: pcm(speak(drama, **body)), bodies))
    for alone, batched in zip(solo, together, strict=True):
        assert alone.shape == batched.shape
        assert np.abs(alone.astype(np.int32) - batched.astype(np.int32)).max() <= 4
