"""The precision deploy options end to end: Qwen3-TTS's tiny checkpoint served over HTTP with its talker (the
generator stage) in bfloat16, or with int8-dynamic, int4-weight or int4-decode weights (and its decoder in bfloat16), from a `--deploy-config`
YAML; the audio decodes at the family's rate. A quantisation the family cannot apply to a stage is refused at load, naming the stage."""

from __future__ import annotations

import io
import json

import httpx
import pytest
import soundfile as sf

from tests import tiny_checkpoints as tiny
from tests.e2e.cosyvoice_line import check_http_wav_at_24k
from tests.e2e.family_servers import COSYVOICE3_OVERRIDES, GLM_TTS_OVERRIDES
from tests.serving import start_server
from vocalis.stages.models.registry import load_model

CHECKPOINT = "tests/goldens/qwen3_tts/cv-1b7"
RATE = 24000
HOP = 1920
"""Samples per 12.5 Hz frame."""


@pytest.mark.parametrize("talker", ["dtype: bfloat16", "quantize: int8-dynamic", "dtype: bfloat16\n    quantize: int8-dynamic",
                                    "quantize: int8-dynamic\n  - name: code2wav\n    dtype: bfloat16",
                                    "quantize: int4-weight\n  - name: code2wav\n    dtype: bfloat16",
                                    # README's example: the decoder stage in bfloat16 beside the int4-decode talker
                                    "quantize: int4-decode\n  - name: code2wav\n    dtype: bfloat16"])
def test_the_generator_stage_serves_audio_in_the_precision_the_deploy_file_sets(tmp_path, talker):
    config = tmp_path / "deploy.yaml"
    config.write_text(f"stages:\n  - name: talker\n    max_len: 128\n    {talker}\n")
    server = start_server(tmp_path, "--log-level", "info", CHECKPOINT, "--deploy-config", str(config), timeout=120,
                          env={"OMP_NUM_THREADS": "1"})
    try:
        response = httpx.post(f"{server.http_url}/v1/audio/speech", timeout=120, json={
            "input": "Hello there.", "voice": "Vivian", "max_new_tokens": 12, "extra_params": {"temperature": 0}})
        assert response.status_code == 200, response.text
        samples, rate = sf.read(io.BytesIO(response.content))
        assert rate == RATE and len(samples) % HOP == 0 and 0 < len(samples) <= 12 * HOP and samples.std() > 0.01
    finally:
        server.stop()


def test_a_stage_the_family_does_not_quantise_is_refused_by_name():
    with pytest.raises(ValueError, match=r"cannot quantise stage\(s\) \['code2wav'\]"):
        load_model(CHECKPOINT, stage_overrides='{"code2wav": {"quantize": "int8-dynamic"}}')


@pytest.mark.parametrize("flow", [{"dtype": "bfloat16"}, {"quantize": "int8-dynamic"}], ids=["bfloat16", "int8"])
@pytest.mark.parametrize(("build", "overrides"), [(tiny.cosyvoice3, COSYVOICE3_OVERRIDES), (tiny.glm_tts, GLM_TTS_OVERRIDES)],
                         ids=["cosyvoice3", "glm_tts"])
def test_the_cosyvoice_lines_flow_serves_audio_in_bfloat16_or_int8(tmp_path, build, overrides, flow):
    """The flow stage's DiT in bfloat16 or with int8 weights (the LM, conditioning and vocoder float32): a cloned
    request's audio at 24 kHz, its pinned length; how close a bfloat16 mel stays is
    tests/stages/models/cosyvoice_common/test_flow_dtype.py's."""
    overrides = {**overrides, "flow": {**overrides["flow"], **flow}}
    server = start_server(tmp_path, "--stage-overrides", json.dumps(overrides), str(build(tmp_path)), env={"OMP_NUM_THREADS": "1"})
    try:
        check_http_wav_at_24k(server)
    finally:
        server.stop()
