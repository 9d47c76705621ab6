"""Build the tiny random OmniVoice checkpoint and record the reference package's behaviour on it.

Run by hand, in a venv of its own that has the reference package (never in the project's venv,
never in CI); the committed outputs are what CI compares against:

    python3 -m venv /work/omnivoice_ref_venv && . /work/omnivoice_ref_venv/bin/activate
    echo torch==2.13.0 > /tmp/c.txt && pip install -c /tmp/c.txt omnivoice==0.2.1 transformers==5.24.0
    # PyPI's torchaudio is a CUDA build that cannot load beside the CPU torch 2.13.0. Its
    # Python-only parts (functional.resample, all this uses) work once its shared libraries
    # are moved out of the way, so that torchaudio imports as it does without them:
    mv $VIRTUAL_ENV/lib/python3.11/site-packages/torchaudio/lib/*.so /tmp/
    python tests/goldens/omnivoice/make_goldens.py

It writes, beside itself:
- tiny/: a checkpoint in the published layout (config.json, model.safetensors, tokenizer.json,
  tokenizer_config.json, audio_tokenizer/{config.json, model.safetensors, preprocessor_config.json}),
  every tensor re-randomised with a seed so that no bias, norm or codebook is degenerate;
- stages/models/omnivoice/languages.json: the model's language table (names and ISO 639 codes,
  data of the Apache-2.0 reference package), which the adapter validates `language` against;
- goldens.npz + goldens.json: per case, the prompt ids, the unmasking schedule, every step's
  predicted tokens, confidence scores and committed tokens, the injected Gumbel uniforms, logits of
  the first frames at step 0, the decoder's output per unit, and the final waveform; for cloning
  also the preprocessed reference clip, its semantic features and its codes.

The recording hooks wrap the reference's own functions; nothing of the reference is copied.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny"
SEED = 1234

# Shrunk long-text thresholds (seconds), so that the chunked path runs on short texts.
LONG_CHUNK_DURATION = 0.8
LONG_CHUNK_THRESHOLD = 1.6

CORPUS = [
    "Hello world, this is a test of the tiny voice.",
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
    "How much wood would a woodchuck chuck if a woodchuck could chuck wood?",
    "Nice to meet you. Good morning, good evening, and good night!",
    "Numbers like 1, 2, 3 and 42 appear in text: 3.14 and 2026.",
    "female, male, child, elderly, low pitch, high pitch, whisper, british accent, american accent",
    "en zh ja de fr es None",
]
OMNIVOICE_SPECIALS = [
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
]
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_tokenizer(out: Path) -> int:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=360, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(OMNIVOICE_SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.save_pretrained(str(out))
    return len(fast)


def randomise(module: torch.nn.Module, generator: torch.Generator, gain: float, norm_spread: float = 0.1) -> None:
    """Overwrite every parameter and float buffer with seeded values that are never degenerate."""
    with torch.no_grad():
        for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
            if not tensor.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            shape = tensor.shape
            if leaf == "alpha":  # Snake
                value = 0.5 + torch.rand(shape, generator=generator)
            elif leaf == "inited":
                value = torch.ones(shape)
            elif leaf == "cluster_size":
                value = 1.0 + torch.rand(shape, generator=generator)
            elif "norm" in name and leaf in ("weight", "original0") and tensor.dim() == 1:
                value = 1.0 + norm_spread * (2 * torch.rand(shape, generator=generator) - 1)
            elif leaf == "original0":  # weight-norm magnitude
                value = 0.5 + torch.rand(shape, generator=generator)
            elif tensor.dim() == 1:  # biases, 1-D norms elsewhere
                value = 0.05 * torch.randn(shape, generator=generator)
            else:
                fan_in = int(np.prod(shape[1:])) if tensor.dim() > 1 else shape[0]
                if leaf in ("embed", "embed_avg") or "embed" in name and tensor.dim() == 2:
                    fan_in = 1
                value = torch.randn(shape, generator=generator) * gain / math.sqrt(max(fan_in, 1))
            tensor.copy_(value.to(tensor.dtype))


def build_checkpoint() -> None:
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig
    from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config

    if TINY.exists():
        shutil.rmtree(TINY)
    TINY.mkdir(parents=True)
    vocab = build_tokenizer(TINY)
    generator = torch.Generator().manual_seed(SEED)

    llm = Qwen3Config(
        # The reference embeds audio positions' ids with the text table too (and then discards
        # them), so the text vocabulary must be larger than the audio one, as the real one is.
        vocab_size=max(vocab, 1100),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    )
    config = OmniVoiceConfig(
        audio_vocab_size=1025, audio_mask_id=1024, num_audio_codebook=8, audio_codebook_weights=[8, 8, 6, 6, 4, 4, 2, 2],
        llm_config=llm,
    )
    config.architectures = ["OmniVoice"]
    model = OmniVoice(config).eval()
    randomise(model, generator, gain=1.6)
    model.save_pretrained(str(TINY))

    codec_config = HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],  # 8 quantizers of 1024 at 25 Hz, as the published tokenizer
        codebook_size=1024,
        codebook_dim=8,
        acoustic_model_config=dict(
            encoder_hidden_size=2,
            downsampling_ratios=[8, 5, 4, 2, 3],
            decoder_hidden_size=32,
            upsampling_ratios=[8, 5, 4, 2, 3],
            hidden_size=8,
        ),
        semantic_model_config=dict(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            conv_dim=[8] * 7,
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
            mask_time_prob=0.0,
        ),
    )
    codec = HiggsAudioV2TokenizerModel(codec_config).eval()
    randomise(codec, generator, gain=1.0)
    randomise(codec.acoustic_decoder, generator, gain=0.7)
    # Calibrate the decoder's output level: std about 0.1 on random codes, far from clipping.
    with torch.no_grad():
        codes = torch.randint(0, 1024, (1, 8, 50), generator=generator)
        std = float(codec.decode(codes).audio_values.std())
        codec.acoustic_decoder.conv2.weight.mul_(0.1 / std)
        codec.acoustic_decoder.conv2.bias.mul_(0.1 / std)
    codec.save_pretrained(str(TINY / "audio_tokenizer"))
    DacFeatureExtractor(
        feature_size=1, hop_length=960, padding_side="right", padding_value=0.0, return_attention_mask=True, sampling_rate=24000
    ).save_pretrained(str(TINY / "audio_tokenizer"))


# -- recording ---------------------------------------------------------------------------------


class Recorder:
    """Wraps the reference's functions to record what each generate() call does."""

    def __init__(self) -> None:
        import omnivoice.models.omnivoice as ov

        self.ov = ov
        self.events: list[tuple[str, dict]] = []
        self._originals = {}

    def __enter__(self):
        ov = self.ov
        cls = ov.OmniVoice
        orig_gumbel = ov._gumbel_sample
        orig_predict = cls._predict_tokens_with_scoring
        orig_iterative = cls._generate_iterative
        orig_prepare = cls._prepare_inference_inputs
        orig_semantic = ov.HiggsAudioV2TokenizerModel._extract_semantic_features
        orig_encode = ov.HiggsAudioV2TokenizerModel.encode
        orig_decode = ov.HiggsAudioV2TokenizerModel.decode
        recorder = self

        def gumbel(logits, temperature):
            scaled = logits / temperature
            u = torch.rand_like(scaled)
            recorder.events.append(("uniform", {"u": u.clone(), "temperature": temperature}))
            return scaled + (-torch.log(-torch.log(u + 1e-10) + 1e-10))

        def predict(self, c_logits, u_logits, gen_config):
            pred, scores = orig_predict(self, c_logits, u_logits, gen_config)
            recorder.events.append(("predict", {"c_logits": c_logits.clone(), "u_logits": u_logits.clone(), "pred": pred.clone(), "scores": scores.clone()}))
            return pred, scores

        def iterative(self, task, gen_config):
            recorder.events.append(("task", {"texts": list(task.texts), "target_lens": list(task.target_lens), "ref_texts": list(task.ref_texts)}))
            out = orig_iterative(self, task, gen_config)
            recorder.events.append(("tokens", {"tokens": [t.clone() for t in out]}))
            return out

        def prepare(self, *args, **kwargs):
            out = orig_prepare(self, *args, **kwargs)
            recorder.events.append(("inputs", {"input_ids": out["input_ids"][0].clone(), "audio_mask": out["audio_mask"][0].clone()}))
            return out

        def semantic(self, input_values):
            out = orig_semantic(self, input_values)
            recorder.events.append(("semantic", {"input": input_values.clone(), "features": out.clone()}))
            return out

        def encode(self, input_values, *args, **kwargs):
            out = orig_encode(self, input_values, *args, **kwargs)
            recorder.events.append(("encode", {"input": input_values.clone(), "codes": out.audio_codes.clone()}))
            return out

        def decode(self, audio_codes, *args, **kwargs):
            out = orig_decode(self, audio_codes, *args, **kwargs)
            recorder.events.append(("decode", {"codes": audio_codes.clone(), "audio": out.audio_values.clone()}))
            return out

        self._originals = {
            (ov, "_gumbel_sample"): orig_gumbel,
            (cls, "_predict_tokens_with_scoring"): orig_predict,
            (cls, "_generate_iterative"): orig_iterative,
            (cls, "_prepare_inference_inputs"): orig_prepare,
            (ov.HiggsAudioV2TokenizerModel, "_extract_semantic_features"): orig_semantic,
            (ov.HiggsAudioV2TokenizerModel, "encode"): orig_encode,
            (ov.HiggsAudioV2TokenizerModel, "decode"): orig_decode,
        }
        ov._gumbel_sample = gumbel
        cls._predict_tokens_with_scoring = predict
        cls._generate_iterative = iterative
        cls._prepare_inference_inputs = prepare
        ov.HiggsAudioV2TokenizerModel._extract_semantic_features = semantic
        ov.HiggsAudioV2TokenizerModel.encode = encode
        ov.HiggsAudioV2TokenizerModel.decode = decode
        return self

    def __exit__(self, *exc):
        for (owner, name), value in self._originals.items():
            setattr(owner, name, value)

    def of(self, kind: str) -> list[dict]:
        return [data for k, data in self.events if k == kind]


def reference_clip(sample_rate: int, seconds: float, seed: int) -> np.ndarray:
    """A voiced-sounding test clip: a few harmonics with a wandering pitch, amplitude-modulated, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(sample_rate * seconds)) / sample_rate
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / sample_rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 + 0.5 * np.abs(np.sin(2 * np.pi * 2.3 * t))
    clip = 0.05 * voice * envelope + 0.003 * rng.standard_normal(len(t))
    return clip.astype(np.float32)


CASES = [
    # name, generate() kwargs, generation config overrides
    ("auto", dict(text="Hello world, this is a test.", language="en"), dict(position_temperature=0.0)),
    ("auto_gumbel", dict(text="The quick brown fox.", language="English"), dict()),
    ("design", dict(text="Good morning, how are you?", language="en", instruct="Female, Low Pitch, British Accent"), dict(position_temperature=0.0)),
    ("design_zh", dict(text="你好，世界。", instruct="male, elderly"), dict(position_temperature=0.0)),
    ("clone", dict(text="Nice to meet you, my friend.", language="en", ref_text="She sells sea shells"), dict(position_temperature=0.0, ref=(24000, 1.3, 7))),
    ("clone_16k", dict(text="How much wood?", ref_text="The quick brown fox."), dict(ref=(16000, 1.1, 8))),
    (
        "long_auto",
        dict(text="Hello world. This is a test, a short one. How much wood? Good night!", language="en"),
        dict(position_temperature=0.0, audio_chunk_duration=LONG_CHUNK_DURATION, audio_chunk_threshold=LONG_CHUNK_THRESHOLD),
    ),
    (
        "long_clone",
        dict(text="Good morning. She sells sea shells. Nice!", ref_text="Hello there."),
        dict(audio_chunk_duration=LONG_CHUNK_DURATION, audio_chunk_threshold=LONG_CHUNK_THRESHOLD, ref=(24000, 1.0, 9)),
    ),
]
NUM_STEP = 8


def run_cases() -> None:
    from omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(str(TINY)).eval()
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    for name, kwargs, overrides in CASES:
        overrides = dict(overrides)
        ref = overrides.pop("ref", None)
        gen = dict(num_step=NUM_STEP, postprocess_output=False, **overrides)
        call = dict(kwargs)
        if ref is not None:
            sr, seconds, seed = ref
            clip = reference_clip(sr, seconds, seed)
            arrays[f"{name}/ref_audio"] = clip
            call["ref_audio"] = (torch.from_numpy(clip), sr)
        torch.manual_seed(SEED)
        with Recorder() as rec:
            audio = model.generate(**call, **gen)[0]
        tasks, inputs, predicts, tokens_out = rec.of("task"), rec.of("inputs"), rec.of("predict"), rec.of("tokens")
        uniforms, decodes = rec.of("uniform"), rec.of("decode")
        units = []
        index = 0
        for t, (task, out) in enumerate(zip(tasks, tokens_out, strict=True)):
            assert len(task["texts"]) == 1, "one item per call"
            inp = inputs[t]
            steps = predicts[index : index + NUM_STEP]
            index += NUM_STEP
            prefix = f"{name}/unit{t}"
            arrays[f"{prefix}/input_ids"] = inp["input_ids"].numpy().astype(np.int32)
            arrays[f"{prefix}/audio_mask"] = inp["audio_mask"].numpy()
            arrays[f"{prefix}/pred"] = torch.stack([s["pred"][0] for s in steps]).numpy().astype(np.int16)
            arrays[f"{prefix}/scores"] = torch.stack([s["scores"][0] for s in steps]).numpy()
            arrays[f"{prefix}/tokens"] = out["tokens"][0].numpy().astype(np.int16)
            if t == 0:  # full logits of the first frames at step 0 (the per-step scores cover the rest)
                arrays[f"{prefix}/c_logits0"] = steps[0]["c_logits"][0, :, :2].numpy()
                arrays[f"{prefix}/u_logits0"] = steps[0]["u_logits"][0, :, :2].numpy()
            units.append({"text": task["texts"][0], "ref_text": task["ref_texts"][0], "target_len": task["target_lens"][0]})
        if uniforms:
            per_unit = len(uniforms) // len(units)
            for t in range(len(units)):
                u = torch.stack([x["u"][0] for x in uniforms[t * per_unit : (t + 1) * per_unit]])
                arrays[f"{name}/unit{t}/uniforms"] = u.numpy()
        for t, dec in enumerate(decodes):
            arrays[f"{name}/unit{t}/decoded"] = dec["audio"][0, 0].numpy().astype(np.float16)  # waveforms: atol 1e-3
        if not name.startswith("long"):  # a long text's assembly (cross-fades, one peak) is not streamed alike
            arrays[f"{name}/audio"] = audio.astype(np.float16)
        case = {"call": {k: v for k, v in kwargs.items()}, "generation": gen, "units": units, "ref": ref}
        semantic, encode = rec.of("semantic"), rec.of("encode")
        if encode:
            arrays[f"{name}/ref_wav"] = encode[0]["input"][0, 0].numpy()
            arrays[f"{name}/ref_codes"] = encode[0]["codes"][0].numpy().astype(np.int16)
            arrays[f"{name}/semantic_features"] = semantic[0]["features"][0].numpy()
        meta[name] = case
        print(f"{name}: {len(units)} unit(s), target lens {[u['target_len'] for u in units]}, audio {len(audio)} samples, "
              f"std {float(np.std(audio)):.3f}", file=sys.stderr)
    arrays.update(silence_cases())
    np.savez_compressed(HERE / "goldens.npz", **arrays)
    hashes = {str(p.relative_to(TINY)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(TINY.rglob("*")) if p.is_file()}
    (HERE / "goldens.json").write_text(json.dumps({"num_step": NUM_STEP, "seed": SEED, "cases": meta, "checkpoint_sha256": hashes}, indent=1, ensure_ascii=False) + "\n")


def silence_cases() -> dict[str, np.ndarray]:
    """The reference's silence trimming (reference clips: 200/100/200 ms; outputs: 500/100/100 ms) on
    tone bursts separated by pauses of 150, 300 and 700 ms, between 400 and 350 ms of near-silence."""
    from omnivoice.utils.audio import remove_silence

    rate = 24000
    rng = np.random.default_rng(11)
    parts = []
    for seconds, voiced in ((0.4, False), (0.5, True), (0.15, False), (0.4, True), (0.3, False), (0.3, True), (0.7, False), (0.45, True), (0.35, False)):
        n = int(rate * seconds)
        t = np.arange(n) / rate
        parts.append(0.3 * np.sin(2 * np.pi * 220 * t) if voiced else 0.0005 * rng.standard_normal(n))
    clip = (np.concatenate(parts) * 32768).astype(np.int16)
    audio = clip.astype(np.float32)[None] / 32768
    out = {"silence/input": clip}
    for name, (mid, lead, trail) in {"reference": (200, 100, 200), "output": (500, 100, 100)}.items():
        trimmed = remove_silence(audio, rate, mid_sil=mid, lead_sil=lead, trail_sil=trail)[0]
        out[f"silence/{name}"] = np.round(trimmed * 32768).astype(np.int16)
    return out


def write_languages() -> None:
    from omnivoice.utils.lang_map import LANG_NAME_TO_ID, lang_display_name

    table = sorted([lang_display_name(name), code] for name, code in LANG_NAME_TO_ID.items())
    out = HERE.parents[2] / "stages" / "models" / "omnivoice" / "languages.json"
    about = (
        "Languages OmniVoice was trained on: [display name, ISO 639 code]; from the omnivoice 0.2.1 package "
        "(Apache-2.0, Xiaomi Corp.), written by tests/goldens/omnivoice/make_goldens.py."
    )
    rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in table)
    out.write_text(f'{{"about": {json.dumps(about)},\n "languages": [\n{rows}\n]}}\n')


def check_margins() -> None:
    """Report how close the greedy choices were (a tiny gap means a fragile golden)."""
    data = np.load(HERE / "goldens.npz")
    for key in sorted(k for k in data.files if k.endswith("c_logits0")):
        logits = torch.from_numpy(data[key])
        top2 = torch.topk(torch.log_softmax(logits, -1), 2, dim=-1).values
        print(f"{key}: min top-2 gap {float((top2[..., 0] - top2[..., 1]).min()):.4f}", file=sys.stderr)


if __name__ == "__main__":
    torch.manual_seed(SEED)
    write_languages()
    build_checkpoint()
    run_cases()
    check_margins()
