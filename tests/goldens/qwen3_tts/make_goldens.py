"""Build the tiny Qwen3-TTS checkpoints and their golden outputs with the reference package.

Run by hand, never in CI, from the repository root, in a separate venv that has `qwen-tts`
(0.1.1: transformers 4.57.3, torch/torchaudio 2.9.1):

    /path/to/qwen_ref_venv/bin/python tests/goldens/qwen3_tts/make_goldens.py

It writes, beside this file:
- one tiny checkpoint per structural variant, in the real Hugging Face layout (config.json,
  generation_config.json, vocab.json + merges.txt + tokenizer_config.json, model.safetensors,
  speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}); variants that differ
  from another only in configuration share its weight files through symlinks;
- one golden file per (variant, mode): `<variant>.<mode>.safetensors` with the token ids after prompt
  building, the talker's first-layer input embeddings, the talker's raw logits per step, the code
  predictor's raw logits per frame and step, the chosen codes, the reference codes/x-vector for
  cloning, and the waveform; plus `goldens.json` with the request of each golden and sha256 hashes
  of every weight file.

Every tensor is re-randomised (seeded) with calibrated gains, because Hugging Face's default init
leaves biases, Snake parameters and codebooks at zero and the decoder would output silence.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
TEXT_VOCAB = 320  # BPE tokens + the special tokens, rounded up
CODEBOOK = 64  # codes per codebook; the talker's vocab is this plus 1024 control ids (as 2048 + 1024 in the real ones)
GROUPS = 4  # codebooks per frame (16 in the real checkpoints)
OFFSET = CODEBOOK - 2048  # real control ids shifted into the tiny vocab

SPECIALS = {  # names as in the Qwen2 vocabulary; ids are assigned after the BPE vocabulary
    "<|endoftext|>": None, "<|im_start|>": None, "<|im_end|>": None,
    "<|tts_pad|>": None, "<|tts_text_bos|>": None, "<|tts_text_eod|>": None,
}

CORPUS = [
    "assistant", "user", "Hello world, this is a tiny test of speech synthesis.",
    "The quick brown fox jumps over the lazy dog. It's nine o'clock!",
    "Speak slowly and warmly, like a calm narrator.", "A deep voice, a bit husky; very expressive.",
    "She sells sea shells by the sea shore.", "Numbers: 1234, 56 and 7.", "CamelCase words like OpenAI and iPhone.",
]


def build_tokenizer(directory: Path) -> dict[str, int]:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 50 + ["assistant\n", "user\n"] * 200, trainer)
    tmp = directory / "_bpe"
    tmp.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(tmp))
    fast = Qwen2TokenizerFast(vocab_file=str(tmp / "vocab.json"), merges_file=str(tmp / "merges.txt"),
                              unk_token=None, bos_token=None, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": [s for s in SPECIALS if s != "<|endoftext|>"]})
    fast.save_pretrained(str(directory))
    shutil.rmtree(tmp)
    (directory / "tokenizer.json").unlink()  # the real checkpoints ship vocab.json + merges.txt only
    for name in ("special_tokens_map.json", "added_tokens.json"):
        if (directory / name).exists():
            (directory / name).unlink()
    loaded = Qwen2TokenizerFast.from_pretrained(str(directory))
    ids = {s: loaded.convert_tokens_to_ids(s) for s in SPECIALS}
    for word in ("assistant", "user", "\n"):
        assert len(loaded(word)["input_ids"]) == 1, word
    assert len(loaded) <= TEXT_VOCAB
    return ids


def talker_config(hidden: int, cp_hidden: int, speakers: dict, dialects: dict, sliding=None) -> dict:
    languages = {"chinese": 2055, "english": 2050, "german": 2053, "japanese": 2058, "french": 2061}
    if dialects:
        languages |= {"beijing_dialect": 2074, "sichuan_dialect": 2062}
    return {
        "vocab_size": CODEBOOK + 1024, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": {"interleaved": True, "mrope_section": [2, 1, 1], "rope_type": "default", "type": "default"},
        "attention_bias": False, "use_sliding_window": False, "sliding_window": sliding, "attention_dropout": 0.0,
        "num_code_groups": GROUPS, "text_hidden_size": 24, "text_vocab_size": TEXT_VOCAB,
        "codec_eos_token_id": 2150 + OFFSET, "codec_think_id": 2154 + OFFSET, "codec_nothink_id": 2155 + OFFSET,
        "codec_think_bos_id": 2156 + OFFSET, "codec_think_eos_id": 2157 + OFFSET, "codec_pad_id": 2148 + OFFSET,
        "codec_bos_id": 2149 + OFFSET, "position_id_per_seconds": 13,
        "codec_language_id": {k: v + OFFSET for k, v in languages.items()},
        "spk_id": {k: ([v + OFFSET] if isinstance(k, str) and k == "serena" else v + OFFSET) for k, v in speakers.items()},
        "spk_is_dialect": dialects,
        "code_predictor_config": {
            "vocab_size": CODEBOOK, "hidden_size": cp_hidden, "intermediate_size": 2 * cp_hidden, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "hidden_act": "silu",
            "max_position_embeddings": 65536, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28,
            "layer_types": ["full_attention", "full_attention"], "attention_dropout": 0.0, "num_code_groups": GROUPS,
        },
    }


def top_config(kind: str, size: str, talker: dict, specials: dict, with_encoder: bool) -> dict:
    config = {
        "architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts",
        "tts_model_type": kind, "tts_model_size": size, "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "im_start_token_id": specials["<|im_start|>"], "im_end_token_id": specials["<|im_end|>"],
        "tts_pad_token_id": specials["<|tts_pad|>"], "tts_bos_token_id": specials["<|tts_text_bos|>"],
        "tts_eos_token_id": specials["<|tts_text_eod|>"], "talker_config": talker,
        "torch_dtype": "float32", "transformers_version": "4.57.3",
    }
    if with_encoder:
        config["speaker_encoder_config"] = {
            "mel_dim": 128, "enc_dim": talker["hidden_size"], "enc_channels": [16, 16, 16, 16, 48],
            "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1], "enc_attention_channels": 8,
            "enc_res2net_scale": 8, "enc_se_channels": 8, "sample_rate": 24000,
        }
    return config


def speech_tokenizer_config(sliding_window: int) -> dict:
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"], "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": GROUPS, "input_sample_rate": 24000, "output_sample_rate": 24000,
        "decode_upsample_rate": 1920, "encode_downsample_rate": 1920, "transformers_version": "4.57.3",
        "encoder_config": {
            "model_type": "mimi", "sampling_rate": 24000, "frame_rate": 12.5, "audio_channels": 1, "hidden_size": 32,
            "num_filters": 4, "num_residual_layers": 1, "upsampling_ratios": [8, 6, 5, 4], "kernel_size": 7,
            "last_kernel_size": 3, "residual_kernel_size": 3, "dilation_growth_rate": 2, "use_causal_conv": True,
            "pad_mode": "constant", "compress": 2, "trim_right_ratio": 1.0, "codebook_size": CODEBOOK,
            "codebook_dim": 16, "num_quantizers": 8, "use_conv_shortcut": False,
            "vector_quantization_hidden_dimension": 16, "num_semantic_quantizers": 1, "upsample_groups": 32,
            "num_hidden_layers": 2, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
            "head_dim": 8, "hidden_act": "gelu", "max_position_embeddings": 8000, "norm_eps": 1e-5,
            "use_cache": False, "use_streaming": False, "rope_theta": 10000.0, "sliding_window": 250,
            "attention_dropout": 0.0, "layer_scale_initial_scale": 0.01, "attention_bias": False,
        },
        "decoder_config": {
            "codebook_size": CODEBOOK, "hidden_size": 32, "latent_dim": 32, "codebook_dim": 16,
            "max_position_embeddings": 8000, "rope_theta": 10000, "num_attention_heads": 4, "num_key_value_heads": 4,
            "attention_bias": False, "sliding_window": sliding_window, "intermediate_size": 64, "hidden_act": "silu",
            "layer_scale_initial_scale": 0.01, "rms_norm_eps": 1e-5, "num_hidden_layers": 2, "num_quantizers": GROUPS,
            "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2], "decoder_dim": 64, "attention_dropout": 0.0,
        },
    }


GENERATION_CONFIG = {
    "do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0, "top_k": 50,
    "subtalker_dosample": True, "subtalker_temperature": 0.9, "subtalker_top_k": 50, "subtalker_top_p": 1.0,
    "max_new_tokens": 8192,
}

PREPROCESSOR = {
    "chunk_length_s": None, "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1, "overlap": None,
    "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True, "sampling_rate": 24000,
}


def randomize(module: torch.nn.Module, seed: int, gain: float, embed_std: float = 1.0, bias_mean: float = 0.0) -> None:
    """Overwrite every float tensor (parameters and persistent buffers) with seeded random values."""
    generator = torch.Generator().manual_seed(seed)

    def randn(shape):
        return torch.randn(shape, generator=generator)

    with torch.no_grad():
        for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
            if not tensor.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "initialized":
                tensor.fill_(1.0)
            elif leaf == "cluster_usage":
                tensor.copy_(0.5 + 1.5 * torch.rand(tensor.shape, generator=generator))
            elif leaf in ("embedding_sum", "embed_sum"):
                tensor.copy_(randn(tensor.shape) * tensor.shape[-1] ** -0.5 * 2.0)
            elif leaf in ("alpha", "beta"):  # SnakeBeta, log scale
                tensor.copy_(0.2 * randn(tensor.shape))
            elif leaf in ("scale", "gamma"):  # LayerScale, ConvNeXt gamma
                tensor.copy_(0.3 + 0.05 * randn(tensor.shape))
            elif "norm" in name and leaf == "weight":
                tensor.copy_(1.0 + 0.1 * randn(tensor.shape))
            elif leaf == "bias":
                tensor.copy_(bias_mean + 0.05 * randn(tensor.shape))
            elif "embedding" in name and tensor.dim() == 2:
                tensor.copy_(embed_std * randn(tensor.shape))
            elif tensor.dim() >= 2:
                fan_in = tensor[0].numel() if not isinstance(_owner(module, name), torch.nn.ConvTranspose1d) else tensor.shape[0] * tensor.shape[2] / max(1, _owner(module, name).stride[0])
                tensor.copy_(randn(tensor.shape) * gain / float(fan_in) ** 0.5)
            else:
                tensor.copy_(0.1 * randn(tensor.shape))


def _owner(module: torch.nn.Module, name: str) -> torch.nn.Module:
    return module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def link(target: Path, link_path: Path) -> None:
    if link_path.is_symlink() or link_path.exists():
        link_path.unlink()
    link_path.symlink_to(os.path.relpath(target, link_path.parent))


def make_speech_tokenizer(directory: Path, seed: int) -> None:
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    directory.mkdir(parents=True, exist_ok=True)
    data = speech_tokenizer_config(72)
    model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**{k: v for k, v in data.items() if k not in ("architectures", "model_type", "transformers_version")}))
    randomize(model.encoder, seed, gain=1.0)
    decoder_gain = calibrate_decoder(model, seed + 1)
    print(f"decoder gain {decoder_gain}")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    write_json(directory / "config.json", data)
    write_json(directory / "preprocessor_config.json", PREPROCESSOR)


def calibrate_decoder(model, seed: int) -> float:
    """The smallest gain whose output std reaches 0.05 with under 1 % of samples clipped."""
    codes = torch.randint(0, CODEBOOK, (1, GROUPS, 30), generator=torch.Generator().manual_seed(seed))
    for gain in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6):
        randomize(model.decoder, seed, gain=gain)
        with torch.no_grad():
            wav = model.decoder(codes)
        std, clipped = float(wav.std()), float((wav.abs() >= 0.999).float().mean())
        print(f"  gain {gain}: std {std:.4f} clipped {clipped:.4f}")
        if std >= 0.05 and clipped < 0.01:
            return gain
    raise RuntimeError("no decoder gain gives a usable waveform")


def make_checkpoint(directory: Path, config: dict, seed: int, specials_dir: Path | None) -> None:
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

    directory.mkdir(parents=True, exist_ok=True)
    model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**{k: v for k, v in config.items() if k not in ("architectures", "model_type", "transformers_version", "torch_dtype")}))
    randomize(model.talker, seed, gain=2.2, embed_std=1.0)
    if model.speaker_encoder is not None:
        randomize(model.speaker_encoder, seed + 7, gain=0.6, bias_mean=0.5)  # keeps the tiny ReLUs alive
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    write_json(directory / "config.json", config)
    write_json(directory / "generation_config.json", GENERATION_CONFIG)


class Recorder:
    """Wraps the talker's and the code predictor's generate() to keep per-step raw logits and inputs."""

    def __init__(self, model) -> None:
        self.talker_calls = []
        self.predictor_logits = []
        talker = model.talker
        original_talker = talker.generate
        original_predictor = talker.code_predictor.generate

        def talker_generate(*args, **kwargs):
            kwargs.update(output_logits=True, output_scores=True)
            result = original_talker(*args, **kwargs)
            self.talker_calls.append({"inputs_embeds": kwargs["inputs_embeds"].detach().clone(),
                                      "trailing": kwargs["trailing_text_hidden"].detach().clone(),
                                      "tts_pad": kwargs["tts_pad_embed"].detach().clone(), "result": result})
            return result

        def predictor_generate(*args, **kwargs):
            kwargs.update(output_logits=True)
            result = original_predictor(*args, **kwargs)
            self.predictor_logits.append(torch.stack([x[0] for x in result.logits]))  # [G-1, V]
            return result

        talker.generate = talker_generate
        talker.code_predictor.generate = predictor_generate


def reference_audio() -> np.ndarray:
    """Two seconds of a deterministic voiced-like signal at 24 kHz."""
    t = np.arange(48000) / 24000.0
    f0 = 140 + 20 * np.sin(2 * np.pi * 1.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 24000.0
    wav = sum(0.3 / k * np.sin(k * phase) for k in range(1, 8)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    wav = wav + 0.01 * np.random.default_rng(0).standard_normal(len(t))
    return wav.astype(np.float32)


GREEDY = {"do_sample": False, "subtalker_dosample": False}


def run_golden(variant: str, mode: str, request: dict, out: dict) -> None:
    from qwen_tts import Qwen3TTSModel

    wrapper = Qwen3TTSModel.from_pretrained(str(HERE / variant), dtype=torch.float32, local_files_only=True)
    recorder = Recorder(wrapper.model)
    tokenized = []
    original_tokenize = wrapper._tokenize_texts

    def tokenize(texts):
        ids = original_tokenize(texts)
        tokenized.extend((t, i[0].tolist()) for t, i in zip(texts, ids, strict=True))
        return ids

    wrapper._tokenize_texts = tokenize
    frames = request["frames"]
    kwargs = dict(GREEDY, max_new_tokens=frames + 1, **request.get("sampling", {}))
    tensors: dict[str, torch.Tensor] = {}
    if mode.startswith("custom_voice"):
        wavs, rate = wrapper.generate_custom_voice(text=request["text"], speaker=request["speaker"], language=request["language"],
                                                   instruct=request.get("instructions"), non_streaming_mode=request["non_streaming_mode"], **kwargs)
    elif mode.startswith("voice_design"):
        wavs, rate = wrapper.generate_voice_design(text=request["text"], instruct=request["instructions"], language=request["language"],
                                                   non_streaming_mode=request["non_streaming_mode"], **kwargs)
    else:
        audio = reference_audio()
        items = wrapper.create_voice_clone_prompt(ref_audio=(audio, 24000), ref_text=request.get("ref_text"),
                                                  x_vector_only_mode=request["x_vector_only_mode"])
        if not request["x_vector_only_mode"]:
            tensors["ref_audio"] = torch.from_numpy(audio)
        tensors["speaker_embedding"] = items[0].ref_spk_embedding.float()
        if items[0].ref_code is not None:
            tensors["ref_codes"] = items[0].ref_code.long()
        from qwen_tts.core.models.modeling_qwen3_tts import mel_spectrogram

        if not request["x_vector_only_mode"]:
            tensors["ref_mel"] = mel_spectrogram(torch.from_numpy(audio).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000,
                                                 hop_size=256, win_size=1024, fmin=0, fmax=12000)[0]
        wavs, rate = wrapper.generate_voice_clone(text=request["text"], language=request["language"], voice_clone_prompt=items,
                                                  non_streaming_mode=request["non_streaming_mode"], **kwargs)
    assert rate == 24000
    call = recorder.talker_calls[-1]
    result = call["result"]
    codes = torch.stack([h[-1] for h in result.hidden_states if h[-1] is not None], dim=1)[0]
    eos = wrapper.model.config.talker_config.codec_eos_token_id
    stop = (codes[:, 0] == eos).nonzero()
    length = int(stop[0]) if len(stop) else codes.shape[0]
    tensors |= {
        "prompt_embeds": call["inputs_embeds"][0].float(),
        "trailing_text": call["trailing"][0].float(),
        "tts_pad_embed": call["tts_pad"].reshape(-1).float(),
        "talker_logits": torch.stack([x[0] for x in result.logits]).float(),  # [steps, V], raw
        "talker_suppressed": torch.stack([torch.isinf(x[0]) for x in result.scores]),  # where the processed logits are -inf
        "talker_tokens": result.sequences[0].long(),
        "predictor_logits": torch.stack(recorder.predictor_logits).float(),  # [frames, G-1, Vcp]
        "codes": codes[:length].long(),
        "waveform": torch.from_numpy(np.asarray(wavs[0], dtype=np.float32)),
    }
    for i, (_text, ids) in enumerate(tokenized):
        tensors[f"token_ids.{i}"] = torch.tensor(ids, dtype=torch.long)
    if "long_decode" in request:  # the chunked-decode branch, with its sizes shrunk
        chunk, left = request["long_decode"]
        full = tensors["codes"]
        if "ref_codes" in tensors:
            full = torch.cat([tensors["ref_codes"], full])
        decoder = wrapper.model.speech_tokenizer.model.decoder
        with torch.no_grad():
            tensors["waveform_chunked"] = decoder.chunked_decode(full.T[None], chunk_size=chunk, left_context_size=left)[0, 0].float()
            if chunk < 300:
                tensors["waveform_whole"] = decoder(full.T[None])[0, 0].float()
    name = f"{variant}.{mode}"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(HERE / f"{name}.safetensors"))
    out[name] = {"variant": variant, "mode": mode, **request, "token_texts": [t for t, _ in tokenized],
                 "frames_generated": int(tensors["codes"].shape[0]), "waveform_std": float(tensors["waveform"].std())}
    print(name, "frames", tensors["codes"].shape[0], "wave", tuple(tensors["waveform"].shape), "std", out[name]["waveform_std"])


# The published checkpoints' structure (config.json / speech_tokenizer/config.json values that decide the
# key set and the shapes). Widths and counts as in the public configs of Qwen/Qwen3-TTS-12Hz-*.
REAL_TALKER = {
    "1b7": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "text_hidden_size": 2048},
    "0b6": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "text_hidden_size": 2048},
}
REAL_COMMON = {"vocab_size": 3072, "text_vocab_size": 151936, "num_code_groups": 16, "rope_theta": 1000000,
               "rope_scaling": {"interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
               "code_predictor_config": {"vocab_size": 2048, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 5,
                                         "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "num_code_groups": 16}}
REAL_SPEECH_TOKENIZER = {
    "encoder_valid_num_quantizers": 16,
    "encoder_config": {"audio_channels": 1, "num_filters": 64, "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 3,
                       "num_residual_layers": 1, "compress": 2, "upsampling_ratios": [8, 6, 5, 4], "hidden_size": 512,
                       "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64,
                       "intermediate_size": 2048, "num_quantizers": 32, "num_semantic_quantizers": 1, "codebook_size": 2048,
                       "codebook_dim": 256, "vector_quantization_hidden_dimension": 256, "frame_rate": 12.5, "sampling_rate": 24000},
    "decoder_config": {"latent_dim": 1024, "codebook_dim": 512, "codebook_size": 2048, "decoder_dim": 1536, "hidden_size": 512,
                       "intermediate_size": 1024, "head_dim": 64, "num_attention_heads": 16, "num_hidden_layers": 8,
                       "num_key_value_heads": 16, "num_quantizers": 16, "sliding_window": 72, "upsample_rates": [8, 5, 4, 3],
                       "upsampling_ratios": [2, 2]},
}
REAL_CHECKPOINTS = {
    "Qwen3-TTS-12Hz-1.7B-CustomVoice": ("custom_voice", "1b7"), "Qwen3-TTS-12Hz-1.7B-VoiceDesign": ("voice_design", "1b7"),
    "Qwen3-TTS-12Hz-1.7B-Base": ("base", "1b7"), "Qwen3-TTS-12Hz-0.6B-CustomVoice": ("custom_voice", "0b6"),
    "Qwen3-TTS-12Hz-0.6B-Base": ("base", "0b6"),
}


def write_real_key_sets() -> None:
    """Keys and shapes the reference classes hold for each published checkpoint (built on the meta device)."""
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    out: dict = {"note": "generated by make_goldens.py from qwen-tts 0.1.1 classes and the published configs", "checkpoints": {}}
    for name, (kind, size) in REAL_CHECKPOINTS.items():
        talker = {**REAL_COMMON, **REAL_TALKER[size], "spk_id": {}, "spk_is_dialect": {}, "codec_language_id": {"english": 2050}}
        config = {"tts_model_type": kind, "tts_model_size": size, "talker_config": talker}
        if kind == "base":
            config["speaker_encoder_config"] = {"enc_dim": REAL_TALKER[size]["hidden_size"], "sample_rate": 24000}
        with torch.device("meta"):
            model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**config))
        out["checkpoints"][name] = {"config": config, "keys": {k: list(v.shape) for k, v in model.state_dict().items()}}
    with torch.device("meta"):
        tokenizer = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**REAL_SPEECH_TOKENIZER))
    out["speech_tokenizer"] = {"config": REAL_SPEECH_TOKENIZER, "keys": {k: list(v.shape) for k, v in tokenizer.state_dict().items()}}
    path = HERE.parents[1] / "stages" / "models" / "qwen3_tts" / "real_key_sets.json"
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


def main() -> None:
    if "--key-sets" in sys.argv:
        return write_real_key_sets()
    write_real_key_sets()
    torch.manual_seed(0)
    specials = build_tokenizer(HERE / "cv-1b7")
    tok_files = ("vocab.json", "merges.txt", "tokenizer_config.json")
    speakers = {"ryan": 3061, "vivian": 3065, "serena": 3066, "eric": 2875, "dylan": 2878}
    dialects = {"eric": "sichuan_dialect", "dylan": "beijing_dialect", "ryan": False, "vivian": False, "serena": False}

    make_speech_tokenizer(HERE / "cv-1b7" / "speech_tokenizer", seed=100)
    make_checkpoint(HERE / "cv-1b7", top_config("custom_voice", "1b7", talker_config(32, 16, speakers, dialects), specials, False), 1, None)

    def sibling(name: str, config: dict | None, weights_from: str | None, tokenizer_sliding: int | None = None) -> None:
        directory = HERE / name
        directory.mkdir(exist_ok=True)
        for f in tok_files:
            link(HERE / "cv-1b7" / f, directory / f)
        link(HERE / "cv-1b7" / "generation_config.json", directory / "generation_config.json")
        if weights_from is not None:
            link(HERE / weights_from / "model.safetensors", directory / "model.safetensors")
        if config is not None:
            write_json(directory / "config.json", config)
        st = directory / "speech_tokenizer"
        if tokenizer_sliding is None:
            link(HERE / "cv-1b7" / "speech_tokenizer", st)
        else:
            if st.is_symlink():
                st.unlink()
            st.mkdir(exist_ok=True)
            for f in ("model.safetensors", "preprocessor_config.json"):
                link(HERE / "cv-1b7" / "speech_tokenizer" / f, st / f)
            write_json(st / "config.json", speech_tokenizer_config(tokenizer_sliding))

    # 0.6B style: equal talker and code-predictor widths (no small_to_mtp_projection); own weights.
    sibling("cv-0b6", None, None)
    make_checkpoint(HERE / "cv-0b6", top_config("custom_voice", "0b6", talker_config(16, 16, speakers, dialects), specials, False), 2, None)
    sibling("vd-1b7", top_config("voice_design", "1b7", talker_config(32, 16, {}, {}), specials, False), "cv-1b7")
    sibling("base-1b7", None, None)
    make_checkpoint(HERE / "base-1b7", top_config("base", "1b7", talker_config(32, 16, {}, {}), specials, True), 3, None)
    # Long path: decoder sliding window 4 (reached in a 30-frame utterance); chunked decode shrunk in the golden.
    sibling("long-1b7", top_config("custom_voice", "1b7", talker_config(32, 16, speakers, dialects), specials, False), "cv-1b7", tokenizer_sliding=4)

    goldens: dict = {}
    text = "Hello world, it's a CamelCase test. 42!"
    run_golden("cv-1b7", "custom_voice", {"text": text, "speaker": "Ryan", "language": "English", "non_streaming_mode": True, "frames": 24}, goldens)
    run_golden("cv-1b7", "custom_voice_instruct", {"text": text, "speaker": "vivian", "language": "Auto", "instructions": "Speak slowly and warmly.",
                                                   "non_streaming_mode": True, "frames": 24}, goldens)
    run_golden("cv-1b7", "custom_voice_dialect_streaming_text", {"text": text, "speaker": "Eric", "language": "Chinese", "non_streaming_mode": False, "frames": 24}, goldens)
    run_golden("cv-0b6", "custom_voice", {"text": text, "speaker": "Serena", "language": "German", "non_streaming_mode": True, "frames": 24}, goldens)
    run_golden("vd-1b7", "voice_design", {"text": text, "language": "English", "instructions": "A deep voice, a bit husky.", "non_streaming_mode": True, "frames": 24}, goldens)
    run_golden("base-1b7", "base_icl", {"text": text, "language": "English", "ref_text": "She sells sea shells.", "x_vector_only_mode": False,
                                        "non_streaming_mode": False, "frames": 24, "long_decode": [300, 25]}, goldens)
    run_golden("base-1b7", "base_xvector", {"text": text, "language": "Auto", "x_vector_only_mode": True, "non_streaming_mode": False, "frames": 24}, goldens)
    run_golden("long-1b7", "custom_voice", {"text": text, "speaker": "ryan", "language": "English", "non_streaming_mode": True, "frames": 30,
                                            "long_decode": [8, 3]}, goldens)
    hashes = {}
    for path in sorted(HERE.rglob("*.safetensors")):
        if not path.is_symlink():
            hashes[str(path.relative_to(HERE))] = sha256(path)
    write_json(HERE / "goldens.json", {"qwen_tts": "0.1.1", "transformers": "4.57.3", "torch": torch.__version__,
                                       "goldens": goldens, "sha256": hashes})


if __name__ == "__main__":
    sys.exit(main())
