"""The requests vLLM-Omni's example clients send, byte for byte in shape, to Vocalis serving tiny checkpoints
under the clients' default model ids (from a Hugging Face cache laid out offline, or --served-model-name).

Each body, form and message sequence below is what the named client (examples/online_serving/text_to_speech/
in vLLM-Omni 0.20.0 and its repository's newer OmniVoice client) builds for its default or documented
invocation; the answers are checked as those clients read them.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shutil

import httpx
import numpy as np
import pytest
import soundfile as sf
import websockets

from tests.hf_cache import add_to_cache, offline_env
from tests.serving import ROOT, start_server

QWEN = ROOT / "tests/goldens/qwen3_tts"
CUSTOM_VOICE, VOICE_DESIGN, BASE = (f"Qwen/Qwen3-TTS-12Hz-1.7B-{kind}" for kind in ("CustomVoice", "VoiceDesign", "Base"))
OMNIVOICE = "k2-fsa/OmniVoice"
SHORT = {"max_new_tokens": 8}  # the tiny checkpoints' generation_config.json default, so that default requests end soon
JSON_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}


def serve_from_cache(factory, repo_id: str, checkpoint, *args: str, generation: dict | None = None):
    home = factory.mktemp("hf-home")
    add_to_cache(home, repo_id, checkpoint, generation)
    return start_server(factory.mktemp("peer"), repo_id, *args, timeout=180, env=offline_env(home))


@pytest.fixture(scope="module")
def custom_voice(tmp_path_factory):
    running = serve_from_cache(tmp_path_factory, CUSTOM_VOICE, QWEN / "cv-1b7", generation=SHORT)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def voice_design(tmp_path_factory):
    running = serve_from_cache(tmp_path_factory, VOICE_DESIGN, QWEN / "vd-1b7", generation=SHORT)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    running = serve_from_cache(tmp_path_factory, BASE, QWEN / "base-1b7", generation=SHORT)
    yield running
    running.stop()


def wav(response: httpx.Response, rate: int) -> np.ndarray:
    assert response.status_code == 200, response.text
    samples, got = sf.read(io.BytesIO(response.content))
    assert got == rate and len(samples) > 0
    return samples


def clip_data_url() -> str:
    """What the clients' encode_audio_to_base64 makes of a local .wav file."""
    t = np.arange(24000 * 2) / 24000
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(6 * t))).astype(np.float32), 24000, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()


def post(server, path: str, payload: dict) -> httpx.Response:
    return httpx.post(f"{server.http_url}{path}", json=payload, headers=JSON_HEADERS, timeout=300)


# -- qwen3_tts/openai_speech_client.py -------------------------------------------------------------


def test_qwen_openai_client_custom_voice_default(custom_voice):
    payload = {"model": CUSTOM_VOICE, "input": "Hello, how are you?", "voice": "vivian", "response_format": "wav"}
    response = post(custom_voice, "/v1/audio/speech", payload)
    assert len(wav(response, 24000)) <= 8 * 1920 and "x-vocalis-warning" not in response.headers
    excited = post(custom_voice, "/v1/audio/speech", {**payload, "input": "I'm so happy!", "instructions": "Speak with excitement"})
    wav(excited, 24000)


def test_qwen_openai_client_voice_design_example(voice_design):
    payload = {"model": VOICE_DESIGN, "input": "Hello world", "voice": "vivian", "response_format": "wav",
               "instructions": "A warm, friendly female voice", "task_type": "VoiceDesign"}
    response = post(voice_design, "/v1/audio/speech", payload)
    wav(response, 24000)
    assert response.headers.get_list("x-vocalis-warning") == [
        f"FIELD_IGNORED voice: voice ignored: model {VOICE_DESIGN} has no preset voices ('vivian' is not used)"
    ]


def test_qwen_openai_client_base_example(base):
    payload = {"model": BASE, "input": "Hello world", "voice": "vivian", "response_format": "wav", "task_type": "Base",
               "ref_audio": clip_data_url(), "ref_text": "This is the reference transcript"}
    response = post(base, "/v1/audio/speech", payload)
    wav(response, 24000)
    (warning,) = response.headers.get_list("x-vocalis-warning")
    assert warning.startswith("FIELD_IGNORED voice:") and "ref_audio gives the voice" in warning


# -- qwen3_tts/batch_speech_client.py --------------------------------------------------------------


def test_qwen_batch_client(custom_voice):
    payload = {"items": [{"input": "Hello, how are you?"}, {"input": "Goodbye, see you later!"}], "response_format": "wav",
               "voice": "vivian"}
    response = post(custom_voice, "/v1/audio/speech/batch", payload)
    assert response.status_code == 200, response.text
    data = response.json()
    assert (data["total"], data["succeeded"], data["failed"]) == (2, 2, 0)
    for index, result in enumerate(data["results"]):
        assert result["index"] == index and result["status"] == "success" and result["media_type"] == "audio/wav"
        samples, rate = sf.read(io.BytesIO(base64.b64decode(result["audio_data"])))
        assert rate == 24000 and len(samples) > 0


# -- qwen3_tts/streaming_speech_client.py ----------------------------------------------------------


async def ws_client_session(url: str, text: str, config: dict, simulate_stt: bool) -> tuple[list[dict], dict[int, bytes]]:
    """The client's message sequence, and what it keeps: every JSON message and the audio per sentence."""
    messages, audio, current = [], {}, bytearray()
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"type": "session.config", **config}))

        async def send_text() -> None:
            if simulate_stt:
                words = text.split(" ")
                for i, word in enumerate(words):
                    await ws.send(json.dumps({"type": "input.text", "text": word + (" " if i < len(words) - 1 else "")}))
                    await asyncio.sleep(0.1)
            else:
                await ws.send(json.dumps({"type": "input.text", "text": text}))
            await ws.send(json.dumps({"type": "input.done"}))

        sender = asyncio.create_task(send_text())
        try:
            while True:
                message = await asyncio.wait_for(ws.recv(), 120)
                if isinstance(message, bytes):
                    current += message
                    continue
                msg = json.loads(message)
                messages.append(msg)
                if msg["type"] == "audio.start":
                    current = bytearray()
                elif msg["type"] == "audio.done":
                    audio[msg["sentence_index"]] = bytes(current)
                elif msg["type"] == "session.done":
                    break
        finally:
            sender.cancel()
    return messages, audio


@pytest.mark.parametrize("simulate_stt", [False, True], ids=["default", "simulate-stt"])
def test_qwen_streaming_ws_client(custom_voice, simulate_stt):
    config = {"speaker": "Vivian", "task_type": "CustomVoice", "language": "Auto", "response_format": "wav", "speed": 1.0}
    url = f"ws://127.0.0.1:{custom_voice.http_port}/v1/audio/speech/stream"
    messages, audio = asyncio.run(ws_client_session(url, "Hello world. How are you? I am fine.", config, simulate_stt))
    types = [m["type"] for m in messages]
    assert "error" not in types and "warning" not in types
    starts = [m for m in messages if m["type"] == "audio.start"]
    assert [m["sentence_text"].strip() for m in starts] == ["Hello world.", "How are you?", "I am fine."]
    done = [m for m in messages if m["type"] == "audio.done"]
    assert all(not m["error"] and m["total_bytes"] == len(audio[m["sentence_index"]]) for m in done)
    assert messages[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}
    for sentence in audio.values():
        samples, rate = sf.read(io.BytesIO(sentence))
        assert rate == 24000 and len(samples) > 0


# -- omnivoice/speech_client.py --------------------------------------------------------------------


@pytest.fixture(scope="module")
def omnivoice(tmp_path_factory):
    running = serve_from_cache(tmp_path_factory, OMNIVOICE, ROOT / "tests/goldens/omnivoice/tiny")
    yield running
    running.stop()


@pytest.mark.parametrize(
    "extra",
    [{}, {"language": "French"}, {"extra_params": {"seed": 42}}, {"instructions": "female, low pitch"}, {"voice": "default"}],
    ids=["plain", "language", "seed", "instructions", "voice-default-0.20"],
)
def test_omnivoice_client(omnivoice, extra):
    text = "Bonjour, comment allez-vous?" if "language" in extra else "Hello, how are you?"
    response = post(omnivoice, "/v1/audio/speech", {"model": OMNIVOICE, "input": text, "response_format": "wav", **extra})
    wav(response, 24000)
    assert "x-vocalis-warning" not in response.headers


def test_omnivoice_client_seed_is_the_seed(omnivoice):
    payload = {"model": OMNIVOICE, "input": "Hello, how are you?", "response_format": "wav"}
    first = post(omnivoice, "/v1/audio/speech", {**payload, "extra_params": {"seed": 42}})
    again = post(omnivoice, "/v1/audio/speech", {**payload, "extra_params": {"seed": 42}})
    top_level = post(omnivoice, "/v1/audio/speech", {**payload, "seed": 42})
    other = post(omnivoice, "/v1/audio/speech", {**payload, "extra_params": {"seed": 43}})
    assert first.content == again.content == top_level.content != other.content


# -- voxcpm2/openai_speech_client.py ---------------------------------------------------------------


@pytest.fixture(scope="module")
def voxcpm2(tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp("vox") / "VoxCPM2"
    shutil.copytree(ROOT / "tests/goldens/voxcpm2/tiny", checkpoint)
    overrides = json.dumps({"latent_generator": {"max_len": 48}, "audio_vae": {"chunk_frames": 2, "chunk_growth": 1.0}})
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # thousands of tiny ops: one thread is much faster
    try:
        running = start_server(tmp_path_factory.mktemp("vox-serve"), str(checkpoint), "--served-model-name", "voxcpm2",
                               "--served-model-name", "openbmb/VoxCPM2", "--stage-overrides", overrides, timeout=180)
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = threads
    yield running
    running.stop()


def test_voxcpm2_client(voxcpm2):
    payload = {"model": "voxcpm2", "input": "Hello, this is VoxCPM2.", "voice": "default", "response_format": "wav"}
    headers = {"Authorization": "Bearer sk-empty"}
    plain = httpx.post(f"{voxcpm2.http_url}/v1/audio/speech", json=payload, headers=headers, timeout=300)
    wav(plain, 48000)
    cloned = httpx.post(f"{voxcpm2.http_url}/v1/audio/speech", json={**payload, "model": "openbmb/VoxCPM2", "ref_audio": clip_data_url()},
                        headers=headers, timeout=300)
    wav(cloned, 48000)
    assert "x-vocalis-warning" not in plain.headers and "x-vocalis-warning" not in cloned.headers
