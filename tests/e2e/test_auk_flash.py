"""AuK-Flash served from its tiny checkpoint: it keeps its distilled 4-step, unguided schedule whatever is asked, and
tells the caller so; its model reports the extra_params it takes."""

from __future__ import annotations

import io

import httpx
import pytest
import soundfile as sf

from tests.serving import start_server
from vocalis.clients.sync import Client

INSTRUCTION = 'Say the following: "Hi."'


@pytest.fixture(scope="module")
def flash(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("auk-flash-server"), "tests/goldens/auk/tiny-flash", timeout=180)
    yield running
    running.stop()


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": INSTRUCTION, "duration_seconds": 0.1, "seed": 2, **body}, timeout=180)


def test_flash_keeps_its_schedule_and_says_so(flash):
    asked = speech(flash, extra_params={"num_inference_steps": 32, "guidance_scale": 2.0})
    plain = speech(flash)
    assert asked.status_code == 200 and plain.status_code == 200, asked.text
    assert asked.content == plain.content  # the same 4 steps either way
    assert any("AuK-Flash" in w and "num_inference_steps, guidance_scale" in w for w in asked.headers.get_list("x-vocalis-warning"))
    assert not any("AuK-Flash" in w for w in plain.headers.get_list("x-vocalis-warning"))
    samples, rate = sf.read(io.BytesIO(plain.content))
    assert rate == 24000 and len(samples) == 5 * 480


def test_the_model_lists_its_extra_params(flash):
    with Client(flash.grpc_target, timeout=30) as client:
        (model,) = client.list_models()
    specs = {spec.name: spec.type for spec in model.capabilities.extra_param_specs}
    assert specs == {"num_inference_steps": "integer", "guidance_scale": "number", "sway": "number", "t_grid": "array", "vae_sample": "boolean"}
    assert "duration_seconds" in model.capabilities.accepted_fields
