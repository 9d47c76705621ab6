"""Component goldens for AuK on the tiny checkpoint (there is no upstream reference on PyPI).

    /work/refvenv/tf/bin/python tests/goldens/auk/make_goldens.py encoder   # transformers >= 5.3
    /tmp/auk-ref/bin/python tests/goldens/auk/make_goldens.py flow          # sglang-omni 0.1.9 (--no-deps), x-transformers
    /work/refvenv/tf/bin/python tests/goldens/auk/make_goldens.py qwen_keys  # then:
    /tmp/auk-ref/bin/python tests/goldens/auk/make_goldens.py auk_keys

`encoder`: transformers' Qwen2_5OmniThinkerForConditionalGeneration (tiny config, the tiny checkpoint's weights) and
WhisperFeatureExtractor give the hidden states of a text-only and a clip prompt; the layer fusion (softmax
layer_weights, layer_scale over layer-normed layer outputs) is applied on top here. `flow`: sglang-omni's plain-torch
port of AuK (`sglang_omni/models/auk/{dit,vae,flow_matching}.py`, an independent port, not upstream) samples with
recorded noise (guided, unguided on the Flash grid, an explicit t_grid, a batch of two of different lengths) and
encodes and decodes with the VAE. Outputs go to goldens_<part>.safetensors beside this file.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

HERE = Path(__file__).parent
TINY = HERE / "tiny"
SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n"
INSTRUCTION = 'Say the following with a warm voice: "Hello there."'


def clip16k() -> np.ndarray:
    t = np.arange(16000) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def encoder() -> None:
    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as omni
    from transformers.models.qwen2_5_omni.configuration_qwen2_5_omni import Qwen2_5OmniThinkerConfig

    data = json.loads((TINY / "config.json").read_text())
    thinker = data["thinker_config"]
    text = {**thinker["text_config"], "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [1, 1, 2]}}
    vision = {"depth": 1, "hidden_size": 16, "num_heads": 2, "intermediate_size": 16, "out_hidden_size": 32, "fullatt_block_indexes": [0]}
    config = Qwen2_5OmniThinkerConfig(audio_config=thinker["audio_config"], text_config=text, vision_config=vision,
                                      audio_token_index=thinker["audio_token_index"], audio_start_token_id=thinker["audio_start_token_id"],
                                      audio_end_token_id=thinker["audio_end_token_id"])
    config._attn_implementation = "eager"
    model = omni.Qwen2_5OmniThinkerForConditionalGeneration(config).eval()
    # The published names (thinker.model.*, thinker.audio_tower.*) in transformers 5's module tree.
    renames = (("thinker.model.", "model.language_model."), ("thinker.audio_tower.", "model.audio_tower."), ("thinker.", ""))
    weights = {}
    for key, value in load_file(str(TINY / "model.safetensors")).items():
        old, new = next((o, n) for o, n in renames if key.startswith(o))
        weights[new + key[len(old):]] = value
    result = model.load_state_dict(weights, strict=False)
    assert all(k.startswith("model.visual.") for k in result.missing_keys), result.missing_keys
    assert not result.unexpected_keys, result.unexpected_keys
    fusion = load_file(str(TINY / "auk_base.safetensors"))
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))

    def encode(s: str) -> list[int]:
        return tok.encode(s, add_special_tokens=False).ids

    extractor = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400)
    audio = clip16k()
    features = extractor(audio, sampling_rate=16000, return_attention_mask=True, padding="max_length", return_tensors="pt")
    valid = int(features["attention_mask"].sum())
    count = ((valid - 1) // 2 + 1 - 2) // 2 + 1
    ids_text = encode(SYSTEM + INSTRUCTION + "|<no_prompt_audio>|" + ASSISTANT)
    ids_audio = encode(SYSTEM + INSTRUCTION) + [thinker["audio_start_token_id"], *[thinker["audio_token_index"]] * count,
                                                thinker["audio_end_token_id"]] + encode(ASSISTANT)
    out = {"mel": features["input_features"][0, :, :valid].contiguous(), "clip16k": torch.from_numpy(audio)}
    with torch.no_grad():
        for name, ids, extra in (("text", ids_text, {}), ("audio", ids_audio, {"input_features": features["input_features"],
                                                                               "feature_attention_mask": features["attention_mask"]})):
            hidden = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False, **extra).hidden_states
            stacked = torch.stack(hidden, dim=1)[:, 1:]
            fused = (F.layer_norm(stacked, [stacked.shape[-1]]) * F.softmax(fusion["layer_weights"], 0)[None, :, None, None]).sum(1)
            out[f"ids_{name}"] = torch.tensor(ids)
            out[f"cond_{name}"] = (fused * fusion["layer_scale"])[0].contiguous()
    save_file(out, str(HERE / "goldens_encoder.safetensors"))


def _sglang_port():
    """dit, vae and flow_matching from the installed wheel, without sglang_omni's package imports (pydantic, CUDA)."""
    root = Path(importlib.util.find_spec("x_transformers").origin).parent.parent / "sglang_omni" / "models" / "auk"
    for name in ("sglang_omni", "sglang_omni.models", "sglang_omni.models.auk"):
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
    graph = types.ModuleType("sglang_omni.models.auk.step_cuda_graph")
    graph.AuKStepCudaGraphRunner = object
    sys.modules[graph.__name__] = graph
    modules = {}
    for name in ("dit", "vae", "flow_matching"):
        spec = importlib.util.spec_from_file_location(f"sglang_omni.models.auk.{name}", root / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["dit"], modules["vae"], modules["flow_matching"]


def flow() -> None:
    dit_mod, vae_mod, fm = _sglang_port()
    data = json.loads((TINY / "config.json").read_text())
    dit = dit_mod.AuKDit(**{**data["dit"], "latent_dim": data["vae"]["latent_dim"], "dropout": 0.0})
    weights = load_file(str(TINY / "auk_base.safetensors"))
    model = fm.AuKFlowMatching(dit, num_llm_layers=weights["layer_weights"].numel())
    model.load_state_dict(weights, strict=True)
    model.eval()
    vae = vae_mod.BigVGANFlowVAE(vae_mod.AuKVAEConfig.from_dict(data["vae"]["model_init_kwargs"]))
    vae.load_state_dict(load_file(str(TINY / "vae.safetensors")), strict=True)
    vae.remove_weight_norm()
    vae.eval()
    g = torch.Generator().manual_seed(11)
    out: dict[str, torch.Tensor] = {}
    text_a, text_b = torch.randn(9, 32, generator=g), torch.randn(6, 32, generator=g)
    ref_a = torch.randn(7, 8, generator=g)
    out |= {"text_a": text_a, "text_b": text_b, "ref_a": ref_a}
    item_a = fm.AuKSampleItem(text_a, torch.ones(9, dtype=torch.bool), 12, ref_a, seed=5, ref_length=7)
    item_b = fm.AuKSampleItem(text_b, torch.ones(6, dtype=torch.bool), 5, None, seed=6, ref_length=0)
    with torch.no_grad():
        out["noise_a"] = torch.randn(12, 8, generator=torch.Generator().manual_seed(5))
        out["guided_a"] = model.sample(item_a, steps=3, cfg_strength=2.0, sway_sampling_coef=-1.0)
        out["unguided_b"] = model.sample(item_b, steps=4, cfg_strength=0.0, t_grid=fm.build_time_grid(4, None, [0.0, 0.07612049579620361,
                                         0.2928932309150696, 0.6173166036605835, 1.0]).tolist())
        out["tgrid_a"] = model.sample(item_a, steps=2, cfg_strength=1.5, t_grid=[0.0, 0.3, 1.0])
        batch = model.sample_batch([item_a, item_b], steps=3, cfg_strength=2.0, sway_sampling_coef=-1.0)
        out["batch_a"], out["batch_b"] = batch
        out["grid_sway"] = fm.build_time_grid(32, -1.0)
        latent = torch.randn(1, 20, 8, generator=g)
        out["latent"] = latent[0]
        out["decoded"] = vae.decode(latent)[0]
        wave = torch.from_numpy(np.sin(2 * np.pi * 180 * np.arange(4800) / 24000).astype(np.float32) * 0.4)
        out["wave"] = wave
        encoded, _ = vae.encoding_and_normalization(wave.view(1, 1, -1), generator=torch.Generator().manual_seed(9))
        out["encoded_sample_seed9"] = encoded[0]
    save_file({k: v.contiguous().float() for k, v in out.items()}, str(HERE / "goldens_flow.safetensors"))
    assert math.isfinite(float(out["guided_a"].abs().sum()))


REAL_TEXT = {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
             "num_attention_heads": 16, "num_key_value_heads": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                                                                                     "mrope_section": [16, 24, 24]}}
REAL_AUDIO = {"num_mel_bins": 128, "d_model": 1280, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
              "max_source_positions": 1500, "n_window": 100, "output_dim": 2048}
KEYS = HERE / "real_keys.json"


def _write_keys(part: str, shapes: dict[str, list[int]]) -> None:
    keys = json.loads(KEYS.read_text()) if KEYS.is_file() else {}
    keys[part] = dict(sorted(shapes.items()))
    KEYS.write_text(json.dumps(keys, indent=0) + "\n")


def qwen_keys() -> None:
    """The thinker's text model and audio tower at Qwen2.5-Omni-3B's size, under the published names (thinker.*):
    what transformers' from_pretrained maps the real snapshot onto."""
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as omni
    from transformers.models.qwen2_5_omni.configuration_qwen2_5_omni import Qwen2_5OmniThinkerConfig

    config = Qwen2_5OmniThinkerConfig(audio_config=REAL_AUDIO, text_config=REAL_TEXT)
    with torch.device("meta"):
        model = omni.Qwen2_5OmniThinkerForConditionalGeneration(config)
    renames = (("model.language_model.", "thinker.model."), ("model.audio_tower.", "thinker.audio_tower."), ("lm_head.", "thinker.lm_head."))
    shapes = {}
    for key, tensor in model.state_dict().items():
        for old, new in renames:
            if key.startswith(old):
                shapes[new + key[len(old):]] = list(tensor.shape)
    _write_keys("qwen", shapes)


def auk_keys() -> None:
    """auk.safetensors and vae.safetensors at AuK's size: the port loads the published files strictly into these."""
    dit_mod, vae_mod, fm = _sglang_port()
    with torch.device("meta"):
        flow_model = fm.AuKFlowMatching(dit_mod.AuKDit(dim=1536, heads=24, dim_head=64, ff_mult=2.0, text_hidden_dim=2048, num_layers=10,
                                                        num_single_layers=20, latent_dim=64), num_llm_layers=36)
        vae = vae_mod.BigVGANFlowVAE(vae_mod.AuKVAEConfig())
    _write_keys("auk", {k: list(v.shape) for k, v in flow_model.state_dict().items()})
    _write_keys("vae", {k: list(v.shape) for k, v in vae.state_dict().items()})


if __name__ == "__main__":
    {"encoder": encoder, "flow": flow, "qwen_keys": qwen_keys, "auk_keys": auk_keys}[sys.argv[1]]()
