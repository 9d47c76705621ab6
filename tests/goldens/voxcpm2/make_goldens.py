"""Make the VoxCPM2 golden data: tiny random checkpoints run through the official `voxcpm` package.

Run by hand, in a venv of its own outside the repository (never in the project venv):

    python -m venv /work/voxcpm_ref_venv && . /work/voxcpm_ref_venv/bin/activate
    pip install torch==2.13.0 voxcpm==2.0.3        # pulls transformers 5.24, librosa, ...
    python tests/goldens/voxcpm2/make_goldens.py    # from the repository root

It writes, next to itself:
  tiny/, long/          two checkpoints in the publisher's layout (config.json, model.safetensors,
                        audiovae.safetensors with old-style weight norm, tokenizer.json, tokenizer_config.json)
  ref.wav, prompt.wav, prompt_long.wav   the clips the cloning cases use (24 kHz, resampled by both sides)
  goldens_<config>.safetensors           per case: prompt token ids and masks, the flow-matching noise of
                                         every step, per-step stop logits, DiT conditions and patch latents,
                                         the latents handed to the VAE and the waveform it decoded
  goldens.json          the cases (text, mode, settings), tokenizer ids of sample texts, sha256 of every file
  real_keys.json        parameter names and shapes the reference builds for the published VoxCPM2 config
                        (real_config.json), so the loader's names are checked against the real checkpoint

"tiny" keeps the real model's structural flags (no muP, short RoPE factors, residual LM without RoPE,
depthwise VAE with the sample-rate condition); "long" flips them (muP, long RoPE factors with their
scaling factor, RoPE in the residual LM, non-depthwise VAE) and runs long enough for chunked VAE
decoding with left context. The reference's randomness (the CFM start noise) is drawn from a seeded
generator here and recorded, so the tests inject it instead of replaying torch's RNG.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

HERE = Path(__file__).resolve().parent

# torchaudio (a voxcpm dependency) has no build for torch 2.13; VoxCPM2 never uses it (only the v1 model
# module imports it), so a placeholder module lets the package import.
try:
    import torchaudio  # noqa: F401
except Exception:  # noqa: BLE001
    placeholder = types.ModuleType("torchaudio")
    placeholder.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules["torchaudio"] = placeholder

from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, trainers  # noqa: E402
from voxcpm import VoxCPM  # noqa: E402
from voxcpm.model.voxcpm2 import VoxCPM2Model, VoxCPMConfig  # noqa: E402
from voxcpm.modules.audiovae import AudioVAEConfigV2, AudioVAEV2  # noqa: E402

AUDIO_MARKERS = ["<|audio_start|>", "<|audio_end|>", "<|ref_audio_start|>", "<|ref_audio_end|>"]  # ids 101..104


# ---------------------------------------------------------------------------------------------- tokenizer


def build_tokenizer(path: Path) -> None:
    """A Llama-style byte-fallback BPE with the real model's fixed ids: <unk> <s> </s> = 0 1 2, audio markers 101-104."""
    corpus = [
        "hello world, this is a tiny voice speaking for the tests.",
        "the quick brown fox jumps over the lazy dog and then it continues.",
        "a short prompt. a reference clone. streaming audio at forty eight kilohertz.",
        "你好世界 你好 世界 测试 声音 克隆",
        "numbers 123 456 7890, punctuation! questions? yes.",
    ] * 40
    special = ["<unk>", "<s>", "</s>"] + [f"<|reserved_{i}|>" for i in range(3, 101)] + AUDIO_MARKERS
    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(
        vocab_size=560, special_tokens=special + byte_tokens, initial_alphabet=list("▁你好世界测试声音克隆"), show_progress=False
    )
    tokenizer.train_from_iterator(corpus, trainer)
    assert tokenizer.token_to_id("<|ref_audio_end|>") == 104
    assert any(len(t.strip("▁")) > 1 and all("\u4e00" <= c <= "\u9fff" for c in t.strip("▁")) for t in tokenizer.get_vocab())
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
             "add_bos_token": True, "add_eos_token": False, "legacy": True},
            indent=2,
        )
    )


# ---------------------------------------------------------------------------------------------- configs


def rope(kv: int, original: int, long: bool) -> dict:
    half = kv // 2
    short = [1.0 + 0.05 * i for i in range(half)]
    return {
        "type": "longrope",
        "short_factor": short,
        "long_factor": [1.0 + 0.5 * i for i in range(half)] if long else short,
        "original_max_position_embeddings": original,
    }


def tiny_config(vocab: int) -> dict:
    """The real model's structure at toy sizes. Every sub-model shares the LM's head size (kv_channels), as in the
    real config: the LocEnc and LocDiT copy the LM's RoPE factors, whose length is head size / 2."""
    return {
        "architecture": "voxcpm2",
        "lm_config": {
            "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 32, "intermediate_size": 64,
            "max_position_embeddings": 1024, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-05, "rope_theta": 10000, "kv_channels": 16, "rope_scaling": rope(16, 1024, long=False),
            "vocab_size": vocab, "use_mup": False, "scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4,
        },
        "patch_size": 2,
        "feat_dim": 8,
        "scalar_quantization_latent_dim": 16,
        "scalar_quantization_scale": 9,
        "residual_lm_num_layers": 1,
        "residual_lm_no_rope": True,
        "encoder_config": {"hidden_dim": 24, "ffn_dim": 48, "num_heads": 4, "num_layers": 1, "kv_channels": 16},
        "dit_config": {
            "hidden_dim": 24, "ffn_dim": 48, "num_heads": 4, "num_layers": 2, "kv_channels": 16, "mean_mode": False,
            "cfm_config": {"sigma_min": 1e-06, "solver": "euler", "t_scheduler": "log-norm", "inference_cfg_rate": 2.0},
        },
        "audio_vae_config": {
            "encoder_dim": 4, "encoder_rates": [2, 5, 8, 8], "latent_dim": 8, "decoder_dim": 64,
            "decoder_rates": [8, 6, 5, 2, 2, 2], "sr_bin_boundaries": [20000, 30000, 40000],
            "sample_rate": 16000, "out_sample_rate": 48000,
        },
        "max_length": 512,
        "device": "cpu",
        "dtype": "float32",
    }


def long_config(vocab: int) -> dict:
    """The branches the real config does not take: muP, long RoPE factors, RoPE in the residual LM, plain convs."""
    config = tiny_config(vocab)
    config["lm_config"].update(
        use_mup=True, scale_emb=2.5, scale_depth=1.4, num_hidden_layers=3,
        max_position_embeddings=2048, rope_scaling=rope(16, 32, long=True),
    )
    config.update(patch_size=4, residual_lm_num_layers=2, residual_lm_no_rope=False, scalar_quantization_scale=5)
    config["dit_config"].update(num_layers=1, num_heads=2)
    config["audio_vae_config"].update(depthwise=False, decoder_dim=64, encoder_dim=2)
    return config


# ---------------------------------------------------------------------------------------------- weights


def randomize(module: torch.nn.Module, generator: torch.Generator, vae_gain: float) -> None:
    """Overwrite every parameter with seeded random values (default inits leave zeros, ones and 0.01s).

    `vae_gain` scales the VAE decoder's weight norms: it sets the loudness of the output, steeply (on the
    tiny decoder 0.7 gives std 0.02, 0.9 already saturates the final tanh); chosen for std 0.05-0.2."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            shape = parameter.shape
            leaf = name.rsplit(".", 1)[-1]
            is_decoder = name.startswith("audio_vae.decoder.")
            if leaf == "alpha":  # Snake
                value = 0.5 + torch.rand(shape, generator=generator)
            elif leaf == "weight_g":
                value = 0.5 + 0.5 * torch.rand(shape, generator=generator)
                value = value * (vae_gain if is_decoder else 1.0)
            elif "norm" in name or "layernorm" in name:
                value = 1.0 + 0.1 * torch.randn(shape, generator=generator)
            elif "scale_embed" in name:
                value = 1.0 + 0.2 * torch.randn(shape, generator=generator)
            elif leaf == "bias" or "bias_embed" in name:
                value = 0.05 * torch.randn(shape, generator=generator)
            elif "embed_tokens" in name or "special_token" in name:
                value = torch.randn(shape, generator=generator)
            elif parameter.dim() >= 2:
                fan_in = parameter[0].numel()
                value = torch.randn(shape, generator=generator) / math.sqrt(fan_in)
            else:
                value = 0.1 * torch.randn(shape, generator=generator)
            parameter.copy_(value)


def build_checkpoint(path: Path, config: dict, seed: int, vae_gain: float) -> None:
    (path / "config.json").write_text(json.dumps(config, indent=2))
    parsed = VoxCPMConfig.model_validate(config)
    vae = AudioVAEV2(config=AudioVAEConfigV2(**config["audio_vae_config"]))
    from transformers import LlamaTokenizerFast

    model = VoxCPM2Model(parsed, LlamaTokenizerFast.from_pretrained(str(path)), vae, device="cpu").float().eval()
    randomize(model, torch.Generator().manual_seed(seed), vae_gain)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file({k: v for k, v in state.items() if not k.startswith("audio_vae.")}, str(path / "model.safetensors"))
    save_file({k.removeprefix("audio_vae."): v for k, v in state.items() if k.startswith("audio_vae.")}, str(path / "audiovae.safetensors"))


# ---------------------------------------------------------------------------------------------- clips


def write_clip(path: Path, seconds: float, seed: int, rate: int = 24000) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 60 * np.sin(2 * np.pi * 0.7 * t)
    signal = 0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / rate) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    signal += 0.02 * rng.standard_normal(len(t))
    sf.write(str(path), signal.astype(np.float32), rate, subtype="PCM_16")


# ---------------------------------------------------------------------------------------------- recording


class Recorder:
    """Hooks on the reference model that record what each step consumed and produced."""

    def __init__(self, tts: VoxCPM2Model, noise_seed: int) -> None:
        self.tts = tts
        self.generator = torch.Generator().manual_seed(noise_seed)
        self.data: dict[str, list[torch.Tensor]] = {}

    def add(self, key: str, value: torch.Tensor) -> None:
        self.data.setdefault(key, []).append(value.detach().clone().float())

    @contextlib.contextmanager
    def recording(self):
        tts = self.tts
        handles = []
        original_randn = torch.randn
        original_inference = tts._inference
        original_encode = tts.audio_vae.encode
        original_decode = tts.audio_vae.decode

        def randn(*shape, **kwargs):
            kwargs.pop("generator", None)
            size = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)) else shape
            value = original_randn(size, generator=self.generator, dtype=torch.float32).to(kwargs.get("dtype") or torch.float32)
            self.add("noise", value[0])
            return value

        def inference(text, text_mask, feat, feat_mask, *args, **kwargs):
            self.add("prompt_ids", text[0].long())
            self.add("text_mask", text_mask[0].long())
            self.add("audio_mask", feat_mask[0].long())
            self.add("prompt_feats", feat[0])
            return original_inference(text, text_mask, feat, feat_mask, *args, **kwargs)

        def encode(audio, sample_rate):
            out = original_encode(audio, sample_rate)
            self.add("vae_encode_input", audio.reshape(-1))
            self.add("vae_encode_output", out[0])
            return out

        def decode(z, *args, **kwargs):
            out = original_decode(z, *args, **kwargs)
            self.add("vae_decode_input", z[0])
            return out

        handles.append(tts.stop_head.register_forward_hook(lambda m, i, o: self.add("stop_logits", o[0])))
        def cfm_inputs(module, args, kwargs):
            self.add("dit_mu", kwargs["mu"][0])
            self.add("cond", kwargs["cond"][0])

        handles.append(tts.feat_decoder.register_forward_pre_hook(cfm_inputs, with_kwargs=True))
        handles.append(tts.base_lm.register_forward_hook(lambda m, i, o: self.add("prefill_lm_out", o[0][0])))
        torch.randn = randn
        tts._inference = inference
        tts.audio_vae.encode = encode
        tts.audio_vae.decode = decode
        try:
            yield self
        finally:
            torch.randn = original_randn
            tts._inference = original_inference
            tts.audio_vae.encode = original_encode
            tts.audio_vae.decode = original_decode
            for handle in handles:
                handle.remove()


def run_case(engine: VoxCPM, case: dict, noise_seed: int) -> tuple[dict[str, torch.Tensor], dict]:
    tts = engine.tts_model
    recorder = Recorder(tts, noise_seed)
    kwargs = dict(
        text=case["text"], cfg_value=case["cfg_value"], inference_timesteps=case["inference_timesteps"],
        min_len=case["min_len"], max_len=case["max_len"], retry_badcase=False, normalize=False, denoise=False,
    )
    if case.get("reference"):
        kwargs["reference_wav_path"] = str(HERE / case["reference"])
    if case.get("prompt"):
        kwargs["prompt_wav_path"] = str(HERE / case["prompt"])
        kwargs["prompt_text"] = case["prompt_text"]
    with recorder.recording():
        wav = engine.generate(**kwargs)
    data = recorder.data
    steps = len(data["stop_logits"])
    tensors = {
        "prompt_ids": data["prompt_ids"][0].long(),
        "text_mask": data["text_mask"][0].long(),
        "audio_mask": data["audio_mask"][0].long(),
        "prompt_feats": data["prompt_feats"][0],
        "prefill_lm_out": data["prefill_lm_out"][0],
        "noise": torch.stack(data["noise"]),  # [steps, D, P]
        "stop_logits": torch.stack(data["stop_logits"]),  # [steps, 2]
        "dit_mu": torch.stack(data["dit_mu"]),
        "cond": torch.stack(data["cond"]),  # [steps, D, P]
        "vae_decode_input": data["vae_decode_input"][0],  # [D, T*P] (context patches first in continuation)
        "waveform": torch.from_numpy(np.asarray(wav, dtype=np.float32)),
    }
    patch = tts.patch_size
    latent = tensors["vae_decode_input"]
    tensors["patches"] = latent.T.reshape(-1, patch, latent.shape[0])[-steps:]  # [steps, P, D]: the generated ones
    for i, (inp, out) in enumerate(zip(data.get("vae_encode_input", []), data.get("vae_encode_output", []), strict=True)):
        tensors[f"encode{i}_input"] = inp
        tensors[f"encode{i}_output"] = out
    info = {**case, "steps": steps, "waveform_std": float(tensors["waveform"].std()), "samples": int(tensors["waveform"].numel())}
    return tensors, info


CASES = {
    "tiny": [
        {"name": "zero_shot", "text": "Hello world, this is a tiny voice.", "cfg_value": 2.0, "inference_timesteps": 10, "min_len": 16, "max_len": 16},
        {"name": "zero_shot_stop", "text": "Hello world, this is a tiny voice.", "cfg_value": 2.0, "inference_timesteps": 10, "min_len": 2, "max_len": 40},
        {"name": "reference", "text": "你好世界, a reference clone.", "reference": "ref.wav", "cfg_value": 1.5, "inference_timesteps": 6, "min_len": 10, "max_len": 10},
        {"name": "continuation", "text": "and then it continues.", "prompt": "prompt.wav", "prompt_text": "a short prompt.", "cfg_value": 2.0, "inference_timesteps": 10, "min_len": 10, "max_len": 10},
        {"name": "ref_continuation", "text": "streaming audio.", "reference": "ref.wav", "prompt": "prompt.wav", "prompt_text": "a short prompt.", "cfg_value": 2.0, "inference_timesteps": 10, "min_len": 8, "max_len": 8},
    ],
    "long": [
        {"name": "zero_shot", "text": "the quick brown fox jumps over the lazy dog and then it continues.", "cfg_value": 2.0, "inference_timesteps": 10, "min_len": 16, "max_len": 16},
        {"name": "continuation", "text": "yes, questions?", "prompt": "prompt_long.wav", "prompt_text": "numbers 123 456.", "cfg_value": 2.5, "inference_timesteps": 8, "min_len": 10, "max_len": 10},
    ],
}
TOKENIZER_SAMPLES = ["Hello world, this is a tiny voice.", "你好世界 测试", "Zebra ü 123!", "a b", " leading space", "声音克隆 ok"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def real_keys() -> dict:
    """Parameter names and shapes of the published config, built on the meta device (no weights needed)."""
    config = json.loads((HERE / "real_config.json").read_text())
    config["device"] = "cpu"

    class Vocab:
        vocab: dict = {}

    with torch.device("meta"):
        vae = AudioVAEV2(config=AudioVAEConfigV2(**config["audio_vae_config"]))
        model = VoxCPM2Model(VoxCPMConfig.model_validate(config), Vocab(), vae, device="cpu")
    state = model.state_dict()
    return {
        "model": {k: list(v.shape) for k, v in state.items() if not k.startswith("audio_vae.")},
        "audiovae": {k.removeprefix("audio_vae."): list(v.shape) for k, v in state.items() if k.startswith("audio_vae.")},
    }


def main() -> None:
    torch.set_num_threads(1)  # one thread: the reduction order the tests' CPUs reproduce most closely
    write_clip(HERE / "ref.wav", 1.0, seed=1)
    write_clip(HERE / "prompt.wav", 1.3, seed=2)
    write_clip(HERE / "prompt_long.wav", 2.1, seed=3)
    summary: dict = {"voxcpm": "2.0.3", "torch": torch.__version__, "configs": {}, "files": {}}
    for index, (name, make, vae_gain) in enumerate((("tiny", tiny_config, 0.87), ("long", long_config, 0.87))):
        path = HERE / name
        build_tokenizer(path)
        vocab = Tokenizer.from_file(str(path / "tokenizer.json")).get_vocab_size()
        build_checkpoint(path, make(vocab), seed=10 + index, vae_gain=vae_gain)
        engine = VoxCPM(str(path), zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
        tensors: dict[str, torch.Tensor] = {}
        cases = []
        for number, case in enumerate(CASES[name]):
            case_tensors, info = run_case(engine, case, noise_seed=1000 + 10 * index + number)
            tensors |= {f"{case['name']}.{k}": v.contiguous() for k, v in case_tensors.items()}
            cases.append(info)
            print(name, case["name"], info["steps"], "steps", info["samples"], "samples, std", round(info["waveform_std"], 4))
        save_file(tensors, str(HERE / f"goldens_{name}.safetensors"))
        tokens = {text: list(engine.tts_model.text_tokenizer(text)) for text in TOKENIZER_SAMPLES}
        summary["configs"][name] = {"cases": cases, "tokenizer": tokens}
    (HERE / "real_keys.json").write_text(json.dumps(real_keys(), indent=0, sort_keys=True))
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and path.suffix in (".safetensors", ".json", ".wav") and path.name != "goldens.json":
            summary["files"][str(path.relative_to(HERE))] = sha256(path)
    (HERE / "goldens.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
