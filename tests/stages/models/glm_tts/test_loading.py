"""GLM-TTS loading: detection by the published file set, the modules built from the published configs
(tests/goldens/glm_tts/real/: llm/config.json, flow/config.yaml, speech_tokenizer/config.json) against the published
key facts (the LM: exactly the HF Llama names of llm/model.safetensors.index.json, tied head; the flow: the published
`Flow` at 768 wide, 18 layers, adaLN over time + 192-d speaker, no speaker concat; HiFT at CosyVoice2's sizes), and
every loaded flow and vocoder tensor changes the output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from vocalis.stages.api.config_json import from_json
from vocalis.stages.api.family import discover, family_for_checkpoint
from vocalis.stages.models.glm_tts.config import HIFT, GLMTTSConfig
from vocalis.stages.models.glm_tts.lm import GLMSpeechLM
from vocalis.stages.models.glm_tts.speech_tokenizer import WhisperVQConfig, WhisperVQEncoder
from vocalis.stages.models.glm_tts.weights import build_flow, build_hift, load_modules

REAL = Path(__file__).parents[3] / "goldens" / "glm_tts" / "real"
LLAMA_LAYER_KEYS = {"input_layernorm.weight", "post_attention_layernorm.weight", "mlp.down_proj.weight", "mlp.gate_proj.weight",
                    "mlp.up_proj.weight", "self_attn.k_proj.weight", "self_attn.o_proj.weight", "self_attn.q_proj.weight",
                    "self_attn.v_proj.weight"}


def test_detected_by_its_file_set_and_vocos_refused_with_the_reason(glm_checkpoint, tmp_path):
    discover()
    assert family_for_checkpoint(glm_checkpoint).name == "glm_tts"
    vocos = tmp_path / "vocos"
    shutil.copytree(glm_checkpoint, vocos)
    shutil.rmtree(vocos / "hift")
    (vocos / "vocos2d").mkdir()
    (vocos / "vocos2d" / "generator_jit.ckpt").write_bytes(b"PK")
    assert family_for_checkpoint(vocos).name == "glm_tts"
    with pytest.raises(ValueError, match="TorchScript"):
        load_modules(vocos)
    state = torch.load(vocos / "flow" / "flow.pt", weights_only=True)
    del state["estimator.rotary_embed.inv_freq"]  # a file without the rotary table (it is fixed) loads too
    torch.save({"model": state}, vocos / "flow" / "flow.pt")  # nested under "model", as the published loader accepts
    shutil.copytree(glm_checkpoint / "hift", vocos / "hift")
    load_modules(vocos)
    (vocos / "flow" / "flow.pt").unlink()
    with pytest.raises(ValueError, match="no config.json"):
        family_for_checkpoint(vocos)


def real_config(tmp_path: Path) -> GLMTTSConfig:
    (tmp_path / "llm").mkdir()
    (tmp_path / "flow").mkdir()
    shutil.copy(REAL / "llm_config.json", tmp_path / "llm" / "config.json")
    shutil.copy(REAL / "flow_config.yaml", tmp_path / "flow" / "config.yaml")
    return GLMTTSConfig.from_dir(tmp_path)


def test_published_llm_key_set(tmp_path):
    config = real_config(tmp_path)
    with torch.device("meta"):
        lm = GLMSpeechLM(config.llama)
    keys = {k: tuple(v.shape) for k, v in lm.state_dict().items()}
    expected = {"model.embed_tokens.weight", "model.norm.weight"} | {f"model.layers.{i}.{k}" for i in range(28) for k in LLAMA_LAYER_KEYS}
    assert set(keys) == expected  # the index's names; no lm_head (tied)
    assert keys["model.embed_tokens.weight"] == (98304, 2048) and keys["model.layers.0.self_attn.k_proj.weight"] == (512, 2048)
    assert sum(torch.Size(s).numel() for s in keys.values()) * 4 == 6208036864  # the index's total_size (float32)


def test_published_flow_and_hift_sizes(tmp_path):
    config = real_config(tmp_path)
    assert config.token_mel_ratio == 2 and config.samples_per_token == 960
    with torch.device("meta"):
        flow, hift = build_flow(config), build_hift(config)
    keys = {k: tuple(v.shape) for k, v in flow.state_dict().items()}
    assert not any(k.startswith("spk_embed_affine_layer") for k in keys)  # remove_spkr_concat_condition
    assert keys["estimator.text_emb_layer.text_embed.weight"] == (100001, 512)
    assert sum(k.endswith("dwconv.weight") for k in keys) == 4
    assert keys["estimator.emb_concator.proj.weight"] == (768, 80 + 512 + 80)
    assert sum(k.endswith("attn_norm.linear.weight") for k in keys) == 18
    assert keys["estimator.transformer_blocks.17.attn_norm.linear.weight"] == (6 * 768, 768 + 192)  # time + speaker adaLN
    assert keys["estimator.transformer_blocks.0.ff.ff.0.0.weight"] == (1536, 768)  # ff_mult 2
    assert keys["estimator.norm_out.linear.weight"] == (2 * 768, 768 + 192)
    assert keys["estimator.rotary_embed.inv_freq"] == (32,)  # dim_head 64, 12 heads
    hift_keys = {k: tuple(v.shape) for k, v in hift.state_dict().items()}
    assert hift_keys["conv_pre.weight"] == (512, 80, 7) and hift_keys["ups.0.weight"] == (512, 256, 16)  # transposed conv
    assert hift_keys["f0_predictor.condnet.8.weight"] == (512, 512, 3) and hift.samples_per_frame == 480
    # The source branch, as in the published hift.pt: the STFT (n_fft 16: 18 channels) brought down 15x, 3x, 1x.
    assert [hift_keys[f"source_downs.{i}.weight"] for i in range(3)] == [(256, 18, 30), (128, 18, 6), (64, 18, 1)]
    assert [hift_keys[f"source_resblocks.{i}.convs1.0.weight"] for i in range(3)] == [(256, 256, 7), (128, 128, 7), (64, 64, 11)]
    assert HIFT["upsample_rates"] == [8, 5, 3]


def test_published_speech_tokenizer_sizes():
    config = from_json(WhisperVQConfig, json.loads((REAL / "speech_tokenizer_config.json").read_text()))
    with torch.device("meta"):
        encoder = WhisperVQEncoder(config)
    assert len(encoder.layers) == 16 and encoder.codebook.weight.shape == (32768, 1280) and encoder.samples_per_token == 640


def test_every_flow_and_vocoder_tensor_matters(glm_checkpoint):
    modules = load_modules(glm_checkpoint)
    generator = torch.Generator().manual_seed(9)
    tokens, prompt = torch.randint(0, 64, (1, 5), generator=generator), torch.randint(0, 64, (1, 4), generator=generator)
    prompt_mel, embedding = torch.randn(1, 8, 80, generator=generator) - 4, torch.randn(1, 192, generator=generator)

    def flow_out():
        return modules.flow.inference(tokens, prompt, prompt_mel, embedding, 1)

    mel = torch.randn(1, 80, 6, generator=generator) - 3
    for module, run in ((modules.flow, flow_out), (modules.hift, lambda: modules.hift(mel))):
        with torch.inference_mode():
            base = run()
            inert = []
            for name, tensor in module.state_dict().items():
                if name.endswith("inv_freq"):
                    continue  # a fixed table, not learned
                saved = tensor.clone()
                tensor.add_(torch.randn(tensor.shape, generator=generator) * (tensor.abs().mean() + 0.1))
                if torch.equal(run(), base):
                    inert.append(name)
                tensor.copy_(saved)
        assert not inert, inert
