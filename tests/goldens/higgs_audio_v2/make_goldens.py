"""Build the tiny random higgs-audio v2 checkpoint and record transformers' native implementation on it.

Run by hand in a venv of its own (never the project's venv, never CI). The codec needs torchaudio, whose PyPI
build cannot load its shared libraries beside the CPU torch; its Python parts (functional.resample) work once they
are moved aside:

    python3 -m venv /tmp/higgs-ref && /tmp/higgs-ref/bin/pip install torch==2.13.0 transformers==5.24.0 torchaudio soundfile
    mv /tmp/higgs-ref/lib/python3.11/site-packages/torchaudio/lib/*.so /tmp/

    /tmp/higgs-ref/bin/python tests/goldens/higgs_audio_v2/make_goldens.py

The reference is transformers' `HiggsAudioV2ForConditionalGeneration` (talker, delay-pattern logits processor,
generation loop), `HiggsAudioV2Processor` (prompt audio: encode, stream BOS/EOS, delay pattern; decode: undo the
delay, clip, codec) and `HiggsAudioV2TokenizerModel` (the codec; the tiny OmniVoice one, which is the same model).

It writes, beside itself:
- tiny/: config.json (model_type "higgs_audio_v2") and model.safetensors as `save_pretrained` writes them,
  tokenizer.json + tokenizer_config.json (a ~300-token byte-level BPE with the Llama 3 chat and audio specials);
  the codec is tests/goldens/omnivoice/tiny/audio_tokenizer/, which `checkpoint.py` puts beside it;
- goldens.safetensors + goldens.json: per case the prompt ids, the prompt's audio rows, every generated frame, the
  raw logits of the first steps, which ids the delay processor left allowed, and the decoded waveform;
- real_keys.json: tensor names and shapes of the published 3B model, from the reference class as transformers'
  conversion script builds it (codebook_size 1026, the text head kept), on the meta device.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny"
CODEC = HERE.parent / "omnivoice" / "tiny" / "audio_tokenizer"
SEED = 2026
LOGIT_STEPS = 12
LLAMA_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CORPUS = [
    "Hello world. The quick brown fox jumps over the lazy dog.",
    "It was the night before my birthday. Innovation distinguishes between a leader and a follower.",
    "Generate audio following instruction. Nice to meet you, said the tiny voice.",
    "system user assistant 0123456789",
]
SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<|audio_bos|>", "<|audio_eos|>", "<|audio_out_bos|>", "<|AUDIO|>", "<|AUDIO_OUT|>", "<|reserved_special_token_6|>",
]
SYSTEM = "Generate audio following instruction."


def chat(text: str, ref_text: str | None = None) -> str:
    def turn(role: str, content: str) -> str:
        return f"<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"

    out = "<|begin_of_text|>" + turn("system", SYSTEM)
    if ref_text is not None:
        out += turn("user", ref_text) + (
            "<|start_header_id|>assistant<|end_header_id|>\n\n<|audio_out_bos|><|AUDIO_OUT|><|audio_eos|><|eot_id|>"
        )
    return out + turn("user", text) + "<|start_header_id|>assistant<|end_header_id|>\n\n<|audio_out_bos|>"


def build_tokenizer(out: Path):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|end_of_text|>")
    fast.save_pretrained(str(out))
    return fast


def randomise(module: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, tensor in module.named_parameters():
            shape = tensor.shape
            if tensor.dim() == 1:  # RMSNorm weights
                value = 1.0 + 0.2 * (2 * torch.rand(shape, generator=generator) - 1)
            elif "embed" in name:
                value = torch.randn(shape, generator=generator) * 0.5
            else:
                value = torch.randn(shape, generator=generator) / math.sqrt(shape[1])
            tensor.copy_(value)


def build_model(tokenizer):
    from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    config = HiggsAudioV2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=2048, rms_norm_eps=1e-5,
        # llama3 scaling with a short original context, so that every frequency band is scaled on short prompts
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        num_codebooks=8, codebook_size=1026, audio_token_id=ids["<|AUDIO_OUT|>"],
        audio_bos_token_id=ids["<|audio_out_bos|>"], audio_delay_token_id=ids["<|reserved_special_token_6|>"],
        audio_stream_bos_id=1024, audio_stream_eos_id=1025, pad_token_id=ids["<|end_of_text|>"],
        eos_token_id=ids["<|eot_id|>"], bos_token_id=ids["<|begin_of_text|>"],
    )
    model = HiggsAudioV2ForConditionalGeneration(config).eval()
    randomise(model, torch.Generator().manual_seed(SEED))
    with torch.no_grad():  # make the stream EOS of codebook 0 likelier, so that generations end inside the budget
        model.audio_lm_head.weight[1025] *= 6.0
    return model


def processor_for(tokenizer):
    from transformers import DacFeatureExtractor, HiggsAudioV2Processor, HiggsAudioV2TokenizerModel

    codec = HiggsAudioV2TokenizerModel.from_pretrained(str(CODEC)).eval()
    features = DacFeatureExtractor.from_pretrained(str(CODEC))
    return HiggsAudioV2Processor(features, tokenizer, codec, audio_delay_token="<|reserved_special_token_6|>")


def reference_clip() -> np.ndarray:
    rng = np.random.default_rng(7)
    t = np.arange(24000) / 24000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t) + 0.02 * rng.standard_normal(t.size)).astype(np.float32)


def run_case(model, processor, name: str, text: str, ref_text: str | None, seed: int, max_new_tokens: int):
    clip = reference_clip() if ref_text is not None else None
    inputs = processor(text=chat(text, ref_text), audio=None if clip is None else [clip], return_tensors="pt")
    from transformers.models.higgs_audio_v2.generation_higgs_audio_v2 import HiggsAudioV2DelayPatternLogitsProcessor

    delayed: list[torch.Tensor] = []
    original = HiggsAudioV2DelayPatternLogitsProcessor.__call__

    def recording(self, input_ids, scores):  # what the delay pattern alone leaves allowed, step by step
        out = original(self, input_ids, scores)
        delayed.append(torch.isfinite(out.reshape(-1, 8, 1026)[0]))
        return out

    HiggsAudioV2DelayPatternLogitsProcessor.__call__ = recording
    torch.manual_seed(seed)
    out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_k=50, top_p=0.95,
                         return_dict_in_generate=True, output_logits=True)
    frames = out.audio_sequences[0]
    prompt_rows = 0 if clip is None else int(inputs["audio_input_ids_mask"].sum())
    generated = frames[prompt_rows:]
    wave = processor.decode(out.audio_sequences)
    HiggsAudioV2DelayPatternLogitsProcessor.__call__ = original
    allowed = torch.stack(delayed)
    forced = allowed.sum(-1) == 1
    tensors = {
        f"{name}.input_ids": inputs["input_ids"][0],
        f"{name}.generated": generated.to(torch.int32),
        f"{name}.logits": torch.stack(out.logits[:LOGIT_STEPS]).reshape(-1, 8, 1026),
        f"{name}.forced": forced.to(torch.int8),
        f"{name}.forced_to": allowed[..., 1025].to(torch.int8),
        f"{name}.waveform": wave.float().reshape(-1),
    }
    if clip is not None:
        tensors[f"{name}.audio_input_ids"] = inputs["audio_input_ids"][0]
        tensors[f"{name}.clip"] = torch.from_numpy(clip)
    ended = bool((generated[-1] == 1025).all())
    meta = {"text": text, "ref_text": ref_text, "seed": seed, "max_new_tokens": max_new_tokens, "frames": len(generated),
            "ended_with_eos": ended}
    return tensors, meta


def real_keys() -> dict[str, list[int]]:
    from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration

    config = HiggsAudioV2Config(codebook_size=1026)  # as transformers' conversion script builds the published model
    with torch.device("meta"):
        model = HiggsAudioV2ForConditionalGeneration(config, use_text_head=True)
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def main() -> None:
    from safetensors.torch import save_file

    if TINY.exists():
        shutil.rmtree(TINY)
    TINY.mkdir()
    tokenizer = build_tokenizer(TINY)
    model = build_model(tokenizer)
    model.save_pretrained(str(TINY))
    for extra in ("generation_config.json",):
        (TINY / extra).unlink(missing_ok=True)
    processor = processor_for(tokenizer)
    tensors: dict[str, torch.Tensor] = {}
    cases = {}
    for name, text, ref_text, seed, budget in (
        ("plain", "Hello world.", None, 11, 80),
        ("clone", "The quick brown fox jumps over the lazy dog.", "Nice to meet you.", 5, 80),
    ):
        for attempt in range(40):  # the first seed whose generation ends with the stream EOS inside the budget
            t, meta = run_case(model, processor, name, text, ref_text, seed + attempt, budget)
            if meta["ended_with_eos"] and meta["frames"] > 20:
                break
        tensors |= t
        cases[name] = meta
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(HERE / "goldens.safetensors"))
    hashes = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(TINY.iterdir())}
    (HERE / "goldens.json").write_text(json.dumps({"cases": cases, "sha256": hashes, "logit_steps": LOGIT_STEPS}, indent=2) + "\n")
    (HERE / "real_keys.json").write_text(json.dumps(real_keys(), indent=1) + "\n")
    print(json.dumps(cases, indent=1))


if __name__ == "__main__":
    main()
