"""The family conformance suite: every served model family, each on its tiny checkpoint, answers the same public
surfaces and the same edge requests the same way (issue 30 points 6 and 7).

One row per family (FAMILIES: its minimal valid request and what it takes), one test per surface or edge request;
each family's server starts once (tests/e2e/family_servers.py) and every cell runs against it. The edge cells encode
the outcome table of docs/API.md, the field policy of the README: a field the model ignores is a 200 with a warning
(`X-Vocalis-Warning: CODE field: message`), a value it cannot honour a 400 naming the field, an unknown voice a 404.
"""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.serving import RunningServer, metric
from tests.ws_session import audio as ws_audio
from tests.ws_session import events, ws_session
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

TEXT = "Hello world, this is a tiny voice."


def _clip(seconds: float, rate: int) -> str:
    """A voiced-sounding reference clip as base64 WAV."""
    t = np.arange(int(seconds * rate)) / rate
    samples = 0.3 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    buffer = io.BytesIO()
    sf.write(buffer, samples.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(buffer.getvalue()).decode()


@dataclass(frozen=True)
class Family:
    """A family's row: its minimal valid request and the facts the edge cells depend on."""

    server: str
    """Its shared server (tests/e2e/family_servers.py), or "piper" for the session's default server."""
    body: dict[str, Any]
    """The minimal valid, seeded HTTP request (`input` included)."""
    rate: int
    tokens: bool = True
    """It generates tokens (max_new_tokens means something)."""
    languages: bool = False
    """It selects a language by name."""
    instructions: bool = False
    """It takes `instructions`."""
    task_type: str | None = None
    """Its checkpoint's own task_type, where it has one."""
    other_task_type: str | None = "CustomVoice"
    """A task_type that is not its own (200 with a warning); None: not asked (the field selects a mode here)."""
    voice_by_name: bool = True
    """The minimal request's voice comes from a name (no ref_audio, no voice design)."""
    kv_cache: bool = True
    """It holds prompts in a KV cache (a prompt can be too long)."""
    bad_extra: dict[str, Any] = field(default_factory=dict)
    """A declared extra_params key with a value out of its range; empty: it declares none."""

    @property
    def text(self) -> str:
        return self.body["input"]

    def request(self, **changes: Any) -> dict[str, Any]:
        body = {**self.body, **changes}
        return {k: v for k, v in body.items() if v is not None}


QWEN_GREEDY = {"temperature": 0, "subtalker_temperature": 0}
AUK_INSTRUCTION = 'Say the following with a calm female voice: "Hello there."'
CLONING_REF = {"ref_audio": _clip(3.2, 16000), "ref_text": "a short prompt."}

FAMILIES: dict[str, Family] = {
    "piper": Family("piper", {"input": TEXT, "seed": 5}, 22050, tokens=False, languages=True, kv_cache=False,
                    bad_extra={"noise_scale": 5}),
    "qwen3-cv": Family("qwen3-cv", {"input": "Hello there.", "voice": "Vivian", "max_new_tokens": 12, "seed": 7, "extra_params": QWEN_GREEDY},
                       24000, languages=True, instructions=True, task_type="CustomVoice", other_task_type=None, bad_extra={"top_p": 2}),
    "qwen3-vd": Family("qwen3-vd", {"input": "Designed.", "instructions": "A deep, husky voice.", "max_new_tokens": 8, "seed": 7,
                                    "extra_params": QWEN_GREEDY},
                       24000, languages=True, instructions=True, task_type="VoiceDesign", voice_by_name=False, bad_extra={"top_p": 2}),
    "qwen3-base": Family("qwen3-base", {"input": "Cloned voice.", "ref_audio": _clip(2.0, 24000), "ref_text": "A two second clip.",
                                        "max_new_tokens": 10, "seed": 7, "extra_params": QWEN_GREEDY},
                         24000, languages=True, task_type="Base", other_task_type=None, voice_by_name=False, bad_extra={"top_p": 2}),
    "voxcpm2": Family("voxcpm2", {"input": TEXT, "max_new_tokens": 8, "seed": 11, "extra_params": {"min_len": 8}}, 48000,
                      bad_extra={"cfg_value": 50}),
    "omnivoice": Family("omnivoice", {"input": "Hello world.", "seed": 1, "extra_params": {"num_step": 2}}, 24000, tokens=False,
                        languages=True, instructions=True, kv_cache=False, bad_extra={"num_step": 0}),
    "higgs": Family("higgs", {"model": "higgs_audio_v2", "input": "Hello world.", "max_new_tokens": 60, "seed": 42}, 24000,
                    bad_extra={"top_p": 0}),
    "fish": Family("fish", {"input": TEXT, "max_new_tokens": 6, "seed": 7}, 44100, bad_extra={"top_p": 2}),
    "drama3": Family("drama3", {"input": TEXT, "max_new_tokens": 5, "seed": 7}, 44100, bad_extra={"top_p": 2}),
    "cosyvoice3": Family("cosyvoice3", {"input": TEXT, "max_new_tokens": 12, "seed": 5, **CLONING_REF}, 24000, voice_by_name=False,
                         bad_extra={"sampler": "greedy"}),
    "glm-tts": Family("glm-tts", {"input": TEXT, "max_new_tokens": 12, "seed": 5, **CLONING_REF}, 24000, voice_by_name=False,
                      bad_extra={"sampler": "greedy"}),
    "voxtral": Family("voxtral", {"model": "mistralai/Voxtral-4B-TTS-2603", "input": TEXT, "voice": "neutral_female",
                                  "max_new_tokens": 8, "seed": 7}, 24000, bad_extra={"cfg_alpha": 50}),
    "gepard": Family("gepard", {"input": "hello world the quick brown fox", "max_new_tokens": 24, "seed": 5}, 22050),
    "auk": Family("auk", {"input": AUK_INSTRUCTION, "instructions": AUK_INSTRUCTION, "duration_seconds": 0.2, "seed": 3,
                          "extra_params": {"num_inference_steps": 2}},
                  24000, tokens=False, instructions=True, other_task_type="VoiceDesign", voice_by_name=False, kv_cache=False,
                  bad_extra={"num_inference_steps": 0}),
}
"""The twelve families (Qwen3-TTS as its three checkpoint kinds), keyed as their ids in the test names."""

def cells(name: str, applies: Callable[[Family], bool] = lambda family: True) -> pytest.MarkDecorator:
    """Parametrize a cell over the families it applies to. Module scope: pytest runs a family's cells together,
    against its one server."""
    params = [pytest.param(key, id=key) for key, family in FAMILIES.items() if applies(family)]
    return pytest.mark.parametrize("family", params, scope="module")


@pytest.fixture
def row(family: str) -> Family:
    return FAMILIES[family]


LOG_START: dict[int, int] = {}
"""Where each server's log stood when its first cell ran (a shared server may have logged other tests' requests)."""


@pytest.fixture
def served(request: pytest.FixtureRequest, row: Family) -> RunningServer:
    running = request.getfixturevalue("server") if row.server == "piper" else request.getfixturevalue("family_servers").get(row.server)
    LOG_START.setdefault(running.grpc_port, running.log_path.stat().st_size)
    return running


# --- helpers ---------------------------------------------------------------------------------------------------------

def speech(server: RunningServer, body: dict[str, Any], **extra: Any) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={**body, **extra}, timeout=180)


def pcm(server: RunningServer, body: dict[str, Any]) -> bytes:
    response = speech(server, body, response_format="pcm")
    assert response.status_code == 200, shown(response)
    return response.content


_MINIMAL: dict[tuple[int, str], bytes] = {}


def minimal_pcm(row: Family, served: RunningServer) -> bytes:
    """The minimal request's PCM, asked once per server (it is seeded: test_seeded_twice_is_bit_identical checks that
    asking again gives the same bytes)."""
    key = (served.grpc_port, row.server)
    if key not in _MINIMAL:
        _MINIMAL[key] = pcm(served, row.request())
    return _MINIMAL[key]


def shown(response: httpx.Response) -> str:
    """A response as an assertion message: its status, warnings and error (never the audio bytes)."""
    body = response.text[:500] if not response.headers.get("content-type", "").startswith("audio") else f"{len(response.content)} bytes of audio"
    return f"{response.status_code} {response.headers.get_list('x-vocalis-warning')} {body}"


def warned(response: httpx.Response, name: str) -> list[str]:
    """The response's warnings about field `name` (`CODE field: message`, the field starting with `name`)."""
    return [w for w in response.headers.get_list("x-vocalis-warning") if w.split(":", 1)[0].partition(" ")[2].startswith(name)]


def refused(response: httpx.Response, status: int, param: str) -> dict[str, Any]:
    assert response.status_code == status, shown(response)
    error = response.json()["error"]
    assert error["param"] == param, error
    return error


def accepted_with_warning(response: httpx.Response, name: str) -> None:
    assert response.status_code == 200 and warned(response, name), shown(response)


def session_config(row: Family, **changes: Any) -> pb.SessionConfig:
    fields = row.request(**changes)
    fields.pop("input")
    extra = fields.pop("extra_params", None)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    if extra:
        message.extra_params.update(extra)
    return message


def close(a: np.ndarray, b: np.ndarray, steps: int = 4) -> bool:
    """The same samples within `steps` int16 steps (float rounding of another batch shape), or an assertion saying how far."""
    assert a.shape == b.shape, (a.shape, b.shape)
    gap = int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max(initial=0))
    assert gap <= steps, f"{gap} int16 steps apart"
    return True


def batched_steps(server: RunningServer) -> float:
    """Steps of any stage that held more than one request, so far."""
    counts, single = metric(server, "vocalis_batch_size_count"), metric(server, "vocalis_batch_size_bucket")
    return sum(counts.values()) - sum(v for labels, v in single.items() if 'le="1.0"' in labels)


# --- the public surfaces --------------------------------------------------------------------------------------------

@cells("http_wav")
def test_http_wav_decodes_at_the_model_rate(row, served):
    response = speech(served, row.request(), response_format="wav")
    assert response.status_code == 200, shown(response)
    assert response.headers["x-sample-rate"] == str(row.rate)
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == row.rate and samples.ndim == 1 and np.isfinite(samples).all()
    assert 0.01 < len(samples) / rate < 20 and samples.std() > 1e-3


@cells("http_pcm")
def test_http_pcm_is_the_wav_s_samples(row, served):
    raw = np.frombuffer(pcm(served, row.request()), dtype="<i2")
    wav, rate = sf.read(io.BytesIO(speech(served, row.request(), response_format="wav").content), dtype="int16")
    assert rate == row.rate and np.array_equal(raw, wav)


@cells("seeded")
def test_seeded_twice_is_bit_identical(row, served):
    assert pcm(served, row.request()) == pcm(served, row.request()) == minimal_pcm(row, served)


@cells("http_streams")
def test_raw_stream_and_sse_equal_the_whole_response(row, served):
    whole = minimal_pcm(row, served)
    body = row.request(response_format="pcm", stream=True)
    with httpx.stream("POST", f"{served.http_url}/v1/audio/speech", json={**body, "stream_format": "audio"}, timeout=180) as response:
        assert response.status_code == 200 and response.headers["x-sample-rate"] == str(row.rate)
        raw = b"".join(response.iter_bytes())
    assert raw == whole
    with httpx.stream("POST", f"{served.http_url}/v1/audio/speech", json={**body, "stream_format": "sse"}, timeout=180) as response:
        assert response.status_code == 200
        sse = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert sse[-1]["type"] == "speech.audio.done"
    assert b"".join(base64.b64decode(e["audio"]) for e in sse if e["type"] == "speech.audio.delta") == whole


@cells("websocket")
def test_websocket_session_streams_the_whole_response(row, served):
    whole = minimal_pcm(row, served)
    for stream_audio in (True, False):  # audio as it is made, or each sentence's audio whole
        config = row.request(response_format="pcm", stream_audio=stream_audio)
        config.pop("input")
        frames = ws_session(served, config, row.text, timeout=180, refuse_errors=True)
        assert events(frames, "audio.start")[0]["sample_rate"] == row.rate
        assert ws_audio(frames) == whole, stream_audio


@cells("grpc")
def test_grpc_synthesize_and_stream_equal_the_whole_response(row, served):
    whole = minimal_pcm(row, served)
    with Client(served.grpc_target, timeout=180) as client:
        assert client.synthesize(session_config(row), row.text).audio == whole
        responses = list(client.stream(session_config(row), row.text))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    assert started.sample_rate == row.rate
    assert b"".join(r.audio.audio for r in responses if r.WhichOneof("response") == "audio") == whole


@cells("batch")
def test_batch_items_equal_single_requests(row, served):
    whole = minimal_pcm(row, served)
    shared = row.request(response_format="pcm")
    shared.pop("input")
    response = httpx.post(f"{served.http_url}/v1/audio/speech/batch", json={**shared, "items": [{"input": row.text}] * 2}, timeout=180)
    assert response.status_code == 200, shown(response)
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["success", "success"], results
    for result in results:  # items run side by side: within float rounding of another batch shape (a few int16 steps)
        assert close(np.frombuffer(base64.b64decode(result["audio_data"]), "<i2"), np.frombuffer(whole, "<i2"))


@cells("concurrent")
def test_concurrent_requests_are_batched_and_all_succeed(row, served):
    """Four requests at once: all served, stage steps held more than one of them, and a seeded request's audio is
    what it is alone (within float rounding of another batch shape: a few int16 steps). A tiny model serves a
    request in a fraction of a second, so on a loaded machine four sent at once may not overlap: up to three bursts,
    every one checked, until a step has held more than one."""
    alone = np.frombuffer(minimal_pcm(row, served), "<i2")
    before = batched_steps(served)
    bodies = [row.request(response_format="pcm", seed=row.body.get("seed", 0) + i) for i in range(1, 4)]
    for _ in range(3):
        with ThreadPoolExecutor(4) as pool:
            others = [pool.submit(speech, served, body) for body in bodies]
            target = pool.submit(speech, served, row.request(response_format="pcm"))
            assert [f.result().status_code for f in others] == [200] * 3
            together = target.result()
        assert together.status_code == 200, together.text
        assert close(np.frombuffer(together.content, "<i2"), alone)
        if batched_steps(served) > before:
            break
    assert batched_steps(served) > before, "no stage step held more than one of the requests in three bursts"


def cancel_mid_stream(row: Family, served: RunningServer) -> None:
    """A gRPC session of twelve sentences, cancelled at its first audio."""
    with grpc.insecure_channel(served.grpc_target) as channel:
        requests = [pb.SynthesizeRequest(config=session_config(row)), pb.SynthesizeRequest(text=pb.TextInput(text=" ".join([row.text] * 12)))]
        call = synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(requests), timeout=180)
        for response in call:
            if response.WhichOneof("response") == "audio" and response.audio.num_samples:
                break
        call.cancel()


@cells("cancel")
def test_after_a_cancel_mid_stream_a_request_still_runs(row, served):
    cancel_mid_stream(row, served)
    response = httpx.post(f"{served.http_url}/v1/audio/speech", json=row.request(response_format="pcm"), timeout=60)
    assert response.status_code == 200 and response.content, shown(response)


@cells("cancel_frees")
def test_a_cancel_mid_stream_frees_the_stages(row, served):
    """The cancelled session's utterances leave every stage: the queue and the stages' sequences go back to idle."""
    idle = metric(served, "vocalis_running_sequences")  # a stage may hold kept contexts between requests
    cancel_mid_stream(row, served)
    # A cancelled utterance counts until its stage next looks for the cancel (Piper: between two ONNX runs), which
    # can be seconds on a loaded machine.
    deadline = time.monotonic() + 20
    while any(metric(served, "vocalis_queue_depth").values()) or metric(served, "vocalis_running_sequences") != idle:
        assert time.monotonic() < deadline, (idle, metric(served, "vocalis_queue_depth"), metric(served, "vocalis_running_sequences"))
        time.sleep(0.1)


# --- the edge requests (docs/API.md) -----------------------------------------------------------------------------

@cells("unknown_extra_param")
def test_an_undeclared_extra_param_is_a_warning(row, served):
    response = speech(served, row.request(extra_params={**row.body.get("extra_params", {}), "no_such_knob": 1}))
    accepted_with_warning(response, "extra_params")


@cells("extra_param_out_of_range", lambda family: bool(family.bad_extra))
def test_a_declared_extra_param_out_of_range_is_400_naming_it(row, served):
    (key,) = row.bad_extra
    response = speech(served, row.request(extra_params={**row.body.get("extra_params", {}), **row.bad_extra}))
    refused(response, 400, f"extra_params.{key}")


@cells("instructions_unused", lambda family: not family.instructions)
def test_instructions_on_a_family_without_them_are_a_warning(row, served):
    accepted_with_warning(speech(served, row.request(instructions="Speak softly.")), "instructions")


@cells("task_type_other", lambda family: family.other_task_type is not None)
def test_a_task_type_the_family_does_not_have_is_a_warning(row, served):
    accepted_with_warning(speech(served, row.request(task_type=row.other_task_type)), "task_type")


@cells("task_type_own", lambda family: family.task_type is not None)
def test_the_checkpoints_own_task_type_is_silent(row, served):
    response = speech(served, row.request(task_type=row.task_type))
    assert response.status_code == 200 and not warned(response, "task_type"), shown(response)


@cells("language_unused", lambda family: not family.languages)
def test_language_on_a_family_without_languages_is_a_warning_and_auto_is_silent(row, served):
    accepted_with_warning(speech(served, row.request(language="French")), "language")
    auto = speech(served, row.request(language="Auto"))
    assert auto.status_code == 200 and not warned(auto, "language"), shown(auto)


@cells("language_unknown", lambda family: family.languages)
def test_an_unknown_language_is_400_naming_it(row, served):
    refused(speech(served, row.request(language="xx-notalanguage")), 400, "language")


@cells("max_new_tokens_out_of_range")
def test_max_new_tokens_outside_the_api_range_is_400(row, served):
    refused(speech(served, row.request(max_new_tokens=1_000_000)), 400, "max_new_tokens")


@cells("max_new_tokens_unused", lambda family: not family.tokens)
def test_max_new_tokens_on_a_family_without_tokens_is_a_warning(row, served):
    accepted_with_warning(speech(served, row.request(max_new_tokens=50)), "max_new_tokens")


@cells("unknown_voice")
def test_an_unknown_voice_is_404_where_the_voice_comes_from_its_name_else_a_warning(row, served):
    response = speech(served, row.request(voice="no-such-voice"))
    if row.voice_by_name:
        assert refused(response, 404, "voice").get("reason") == "UNKNOWN_VOICE"
    else:
        accepted_with_warning(response, "voice")


@cells("prompt_too_long", lambda family: family.kv_cache)
def test_a_prompt_longer_than_the_cache_is_invalid_argument_prompt_too_long(row, served):
    text = " ".join(["and then the quick brown fox jumped over the lazy dog"] * 85)  # one unit of ~4,700 characters (under the 5,000 of the input limit), longer than any tiny cache
    config = session_config(row, max_new_tokens=None)
    config.text_splitting.granularity = pb.SPLIT_GRANULARITY_NONE
    with Client(served.grpc_target, timeout=180) as client:
        with pytest.raises(VocalisError) as caught:
            client.synthesize(config, text)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT and caught.value.reason == "PROMPT_TOO_LONG", caught.value


@cells("speed")
def test_speed_two_halves_the_audio(row, served):
    normal = len(minimal_pcm(row, served))
    fast = len(pcm(served, row.request(speed=2.0)))
    assert 0.35 < fast / normal < 0.7, (fast, normal)  # native speed may keep pauses and padding


@cells("warmed_up")
def test_the_family_warmed_up_before_serving(row, served):
    """Every family warms up at start (server/warmup.py), with the fields it declares for it: its server logged the
    warm-up, and neither skipped nor failed it."""
    log = served.log_path.read_text(errors="replace")
    assert "warmed up " in log and "no warm-up for" not in log and "warm-up of" not in log, log[-2000:]


@cells("still_serving")
def test_the_server_still_serves_and_logged_no_traceback(row, served):
    """Last of a family's cells: none of the requests above broke the server or raised an unhandled error."""
    assert pcm(served, row.request())
    with served.log_path.open("rb") as log:
        log.seek(LOG_START[served.grpc_port])
        assert b"Traceback" not in log.read()
