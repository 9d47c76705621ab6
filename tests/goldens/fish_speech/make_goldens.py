"""Build the tiny Fish S2 Pro codec and record fish-speech 0.1.0's modified DAC on it.

Run by hand, in a venv of its own that has the reference package (never the project's venv, never CI):

    python3 -m venv /tmp/fish-ref
    /tmp/fish-ref/bin/pip install torch==2.13.0 numpy einops loguru hydra-core omegaconf 'transformers<5' \
        tiktoken soundfile natsort rich click pyrootutils loralib safetensors librosa flatten_dict julius ffmpy \
        importlib_resources tensorboard randomname argbind
    /tmp/fish-ref/bin/pip install --no-deps fish-speech==0.1.0 descript-audio-codec descript-audiotools torchaudio
    # PyPI's torchaudio cannot load its extension beside the CPU torch 2.13; only its Python parts are imported
    # (by audiotools), so the extension is moved out of the way:
    mv /tmp/fish-ref/lib/python3.11/site-packages/torchaudio/lib/_torchaudio.so /tmp/
    /tmp/fish-ref/bin/python tests/goldens/fish_speech/make_goldens.py

It writes, beside itself:
- tiny/codec.pth + tiny/codec_config.json: the reference DAC built with the published geometry's structural flags
  (causal, the same rates, a semantic codebook larger than the residual ones and equal to the
  language model's codebook_size, transformers in the last encoder block and around the quantiser with
  width equal to the latent, so no projections) and the sizes shrunk, every tensor re-randomised with a seed; its
  attention windows shrunk (encoder 512 -> 8, quantiser 128 -> 4) so the windowed paths run on a short clip; the
  state dict saved as the reference's `state_dict()` gives it (weight norm in both spellings, RoPE/mask buffers);
- real_codec_keys.json: every tensor name and shape of the reference DAC built (on the meta device) with the
  published geometry (modded_dac_vq.yaml), for the key-set test;
- dac.safetensors: the input clip, the reference's codes, encoder latents and decoded waveform;
- tiny/config.json + tiny/model.safetensors: a tiny S2 Pro dual-AR checkpoint in the published layout
  (`fish_qwen3_omni`, `text_model.model.*`, `audio_decoder.*`), made by building fish-speech 0.1.0's
  DualARTransformer from a translation of that config (S2 Pro's structural flags: q/k-norm in the slow AR only,
  tied embeddings, equal slow and fast widths so no projection, scaled codebook embeddings) and renaming its
  re-randomised tensors to the published names;
- tiny/tokenizer.json: a byte-level BPE trained on a few sentences, with S2 Pro's control tokens added and the
  tiny semantic range (<|semantic:i|>) at the config's ids, for the prompt and the served model;
- dual_ar.safetensors: for one token sequence (text, then semantic tokens with their frames' codes), the slow AR's
  logits and hidden states at every position, and the fast AR's logits for codebooks 1..K-1 of every frame,
  teacher-forced on the given codes (the reference's KV-cached generation path, `forward_generate_fast`).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny"
SEED = 20261203

DAC_CONFIG = {
    "sample_rate": 44100,
    "encoder_dim": 4,
    "encoder_rates": [2, 4, 8, 8],
    "encoder_transformer_layers": [0, 0, 0, 2],
    "encoder_window": 8,
    "decoder_dim": 64,
    "decoder_rates": [8, 8, 4, 2],
    "head_dim": 64,
    "semantic_codebook_size": 64,
    "n_codebooks": 9,
    "codebook_size": 32,
    "codebook_dim": 8,
    "downsample_factor": [2, 2],
    "quantizer_layers": 2,
    "quantizer_heads": 2,
    "quantizer_dim": 64,
    "quantizer_intermediate": 96,
    "quantizer_head_dim": 32,
    "quantizer_window": 4,
}
DAC_GAIN = float(__import__("os").environ.get("DAC_GAIN", "0.75"))
"""Scale of the weight-norm magnitudes and matrices, calibrated for an output std near 0.1 with little clipping."""
CLIP_SAMPLES = 2048 * 14 - 777
"""Not a whole number of frames, so the encoder's right padding is exercised."""


def build_reference_dac(c: dict) -> torch.nn.Module:
    from fish_speech.models.dac.modded_dac import DAC, ModelArgs, WindowLimitedTransformer
    from fish_speech.models.dac.rvq import DownsampleResidualVectorQuantize

    general = functools.partial(ModelArgs, block_size=256, n_local_heads=-1, head_dim=c["head_dim"], rope_base=10000,
                                norm_eps=1e-5, dropout_rate=0.1, attn_dropout_rate=0.1, channels_first=True)
    latent = c["encoder_dim"] * 2 ** len(c["encoder_rates"])

    def transformer():
        return WindowLimitedTransformer(
            causal=True, window_size=c["quantizer_window"], input_dim=latent,
            config=ModelArgs(block_size=256, n_layer=c["quantizer_layers"], n_head=c["quantizer_heads"],
                             dim=c["quantizer_dim"], intermediate_size=c["quantizer_intermediate"], n_local_heads=-1,
                             head_dim=c["quantizer_head_dim"], rope_base=10000, norm_eps=1e-5, channels_first=True))

    quantizer = DownsampleResidualVectorQuantize(
        input_dim=latent, n_codebooks=c["n_codebooks"], codebook_size=c["codebook_size"], codebook_dim=c["codebook_dim"],
        quantizer_dropout=0.5, downsample_factor=c["downsample_factor"], pre_module=transformer(),
        post_module=transformer(), semantic_codebook_size=c["semantic_codebook_size"])
    dac = DAC(encoder_dim=c["encoder_dim"], encoder_rates=c["encoder_rates"], decoder_dim=c["decoder_dim"],
              decoder_rates=c["decoder_rates"], quantizer=quantizer, sample_rate=c["sample_rate"], causal=True,
              encoder_transformer_layers=c["encoder_transformer_layers"], decoder_transformer_layers=[2, 0, 0, 0],
              transformer_general_config=general)
    for module in dac.encoder.modules():  # the reference fixes this window in code; shrink it like the others
        if isinstance(module, WindowLimitedTransformer):
            module.window_size = c["encoder_window"]
    return dac.eval()


def randomise(model: torch.nn.Module, generator: torch.Generator, gain: float) -> None:
    """Every parameter overwritten: matrices Gaussian gain/sqrt(fan_in), weight-norm magnitudes, norms, Snake
    alphas and branch scales near 1 (scales smaller), biases small but nonzero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("original0", "weight_g"):
                p.copy_(gain * (1.0 + 0.2 * torch.rand(p.shape, generator=generator)))
            elif leaf == "alpha":
                p.copy_(0.5 + torch.rand(p.shape, generator=generator))
            elif leaf == "gamma":
                p.copy_(0.3 + 0.4 * torch.rand(p.shape, generator=generator))
            elif leaf == "bias":
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "codebook" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=generator) * gain / math.sqrt(fan_in))


REAL_DAC_CONFIG = {**DAC_CONFIG, "encoder_dim": 64, "encoder_transformer_layers": [0, 0, 0, 4], "encoder_window": 512,
                   "decoder_dim": 1536, "head_dim": 64, "semantic_codebook_size": 4096, "codebook_size": 1024,
                   "quantizer_layers": 8, "quantizer_heads": 16, "quantizer_dim": 1024, "quantizer_intermediate": 3072,
                   "quantizer_head_dim": 64, "quantizer_window": 128}


def make_real_codec_keys() -> None:
    with torch.device("meta"):
        dac = build_reference_dac(REAL_DAC_CONFIG)
    keys = {name: list(t.shape) for name, t in dac.state_dict().items()}
    (HERE / "real_codec_keys.json").write_text(json.dumps(keys, indent=0, sort_keys=True) + "\n")


def test_clip(samples: int, rate: int) -> torch.Tensor:
    t = torch.arange(samples, dtype=torch.float64) / rate
    g = torch.Generator().manual_seed(7)
    clip = 0.3 * torch.sin(2 * math.pi * 220 * t) + 0.2 * torch.sin(2 * math.pi * 1375 * t + 0.5) * torch.sin(2 * math.pi * 3 * t)
    return (clip + 0.02 * torch.randn(samples, generator=g, dtype=torch.float64)).float()


def make_dac() -> None:
    torch.manual_seed(SEED)
    dac = build_reference_dac(DAC_CONFIG)
    randomise(dac, torch.Generator().manual_seed(SEED), gain=DAC_GAIN)
    TINY.mkdir(exist_ok=True)
    state = dac.state_dict()
    torch.save(state, TINY / "codec.pth")
    (TINY / "codec_config.json").write_text(json.dumps(DAC_CONFIG, indent=1) + "\n")

    clip = test_clip(CLIP_SAMPLES, DAC_CONFIG["sample_rate"])
    with torch.inference_mode():
        codes, _ = dac.encode(clip[None, None], None)
        padded = torch.nn.functional.pad(clip, (0, -clip.shape[-1] % dac.frame_length))
        latents = dac.encoder(padded[None, None])
        audio, _ = dac.decode(codes, torch.tensor([codes.shape[-1]]))
    audio = audio[0, 0]
    print(f"dac: {sum(p.numel() for p in dac.parameters())} params, {len(state)} keys, codes {tuple(codes.shape)}, "
          f"audio {tuple(audio.shape)} std {audio.std():.3f} clipped {(audio.abs() > 0.999).float().mean():.3f}, "
          f"distinct codes per book {[len(set(codes[0, k].tolist())) for k in range(codes.shape[1])]}")
    save_file({"clip": clip.contiguous(), "codes": codes[0].contiguous(), "latents": latents[0].contiguous(),
               "audio": audio.contiguous()}, str(HERE / "dac.safetensors"))


TEXT_CONFIG = {"vocab_size": 400, "dim": 32, "n_head": 4, "n_local_heads": 2, "head_dim": 8, "n_layer": 2,
               "intermediate_size": 64, "attention_qk_norm": True, "rope_base": 1000000.0, "max_seq_len": 512,
               "tie_word_embeddings": True, "codebook_size": 64, "num_codebooks": 10, "scale_codebook_embeddings": True,
               "norm_eps": 1e-6}
FAST_CONFIG = {"vocab_size": 64, "num_codebooks": 10, "dim": 32, "n_head": 4, "n_local_heads": 2, "head_dim": 8,
               "n_layer": 2, "intermediate_size": 48, "max_seq_len": 11, "text_dim": 32, "attention_qk_norm": False,
               "rope_base": 1000000.0, "norm_eps": 1e-6}
SEMANTIC_START, SEMANTIC_END = 300, 363


def reference_dual_ar(text: dict = TEXT_CONFIG, fast: dict = FAST_CONFIG, semantic: tuple[int, int] = (SEMANTIC_START, SEMANTIC_END),
                      im_end: int = -1, max_seq_len: int | None = None):
    """fish-speech 0.1.0's DualARTransformer from an S2 Pro config's two sections (its published spelling) and semantic
    range, with S2 Pro's structural flags; `im_end` is the stop id its `generate()` looks up, `max_seq_len` overrides
    the config's (the size of its caches and causal mask). Built in torch's default dtype."""
    from types import SimpleNamespace

    from fish_speech.models.text2semantic.llama import DualARModelArgs, DualARTransformer

    t, f = text, fast
    args = DualARModelArgs(
        vocab_size=t["vocab_size"], n_layer=t["n_layer"], n_head=t["n_head"], dim=t["dim"],
        intermediate_size=t["intermediate_size"], n_local_heads=t["n_local_heads"], head_dim=t["head_dim"],
        rope_base=t["rope_base"], norm_eps=t["norm_eps"], max_seq_len=max_seq_len or t["max_seq_len"], tie_word_embeddings=True,
        attention_qk_norm=True, codebook_size=t["codebook_size"], num_codebooks=t["num_codebooks"],
        scale_codebook_embeddings=True, use_gradient_checkpointing=False, n_fast_layer=f["n_layer"],
        fast_dim=f["dim"], fast_n_head=f["n_head"], fast_n_local_heads=f["n_local_heads"], fast_head_dim=f["head_dim"],
        fast_intermediate_size=f["intermediate_size"], fast_attention_qk_norm=False)
    start, end = semantic
    tokenizer = SimpleNamespace(semantic_id_to_token_id={i: start + i for i in range(end - start + 1)},
                                semantic_begin_id=start, semantic_end_id=end, get_token_id=lambda _token: im_end)
    return DualARTransformer(args, tokenizer).eval()


PUBLISHED_NAMES = (("embeddings.", "text_model.model.embeddings."), ("layers.", "text_model.model.layers."),
                   ("norm.", "text_model.model.norm."), ("codebook_embeddings.", "audio_decoder.codebook_embeddings."),
                   ("fast_embeddings.", "audio_decoder.embeddings."), ("fast_layers.", "audio_decoder.layers."),
                   ("fast_norm.", "audio_decoder.norm."), ("fast_output.", "audio_decoder.output."))


def make_dual_ar() -> None:
    from fish_speech.models.text2semantic.llama import BaseTransformer
    from safetensors.torch import save_file as save

    torch.manual_seed(SEED)
    model = reference_dual_ar()
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "embeddings" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))
    published = {}
    for name, tensor in model.state_dict().items():
        new = next(dst + name[len(src):] for src, dst in PUBLISHED_NAMES if name.startswith(src))
        published[new] = tensor.contiguous()
    save(published, str(TINY / "model.safetensors"))
    config = {"model_type": "fish_qwen3_omni", "text_config": TEXT_CONFIG, "audio_decoder_config": FAST_CONFIG,
              "semantic_start_token_id": SEMANTIC_START, "semantic_end_token_id": SEMANTIC_END,
              "audio_pad_token_id": SEMANTIC_START - 1}
    (TINY / "config.json").write_text(json.dumps(config, indent=1) + "\n")

    k = TEXT_CONFIG["num_codebooks"]
    g = torch.Generator().manual_seed(5)
    tokens = torch.cat([torch.randint(0, SEMANTIC_START - 1, (6,), generator=g),
                        torch.randint(SEMANTIC_START, SEMANTIC_END + 1, (10,), generator=g)])
    codes = torch.randint(0, TEXT_CONFIG["codebook_size"], (len(tokens), k), generator=g)
    semantic = tokens >= SEMANTIC_START
    codes[semantic, 0] = tokens[semantic] - SEMANTIC_START
    codes[~semantic] = 0
    inp = torch.cat([tokens[None], codes.T], dim=0)[None]  # [1, 1 + K, L]
    with torch.inference_mode():
        # the parent's forward_generate (the subclass's does not pass return_all on; its projection is Identity)
        out = BaseTransformer.forward_generate(model, inp, return_all=True)
        logits, hidden = out.logits[0], out.hidden_states[0]
        model.setup_caches(max_batch_size=1, max_seq_len=TEXT_CONFIG["max_seq_len"], dtype=torch.float32)
        fast = []
        for i in torch.nonzero(semantic).flatten().tolist():
            model.forward_generate_fast(hidden[i][None], torch.tensor([0]))
            rows = []
            for book in range(1, k):
                x = model.fast_embeddings(codes[i, book - 1][None])
                rows.append(model.forward_generate_fast(x, torch.tensor([book]))[0, 0])
            fast.append(torch.stack(rows))
    print(f"dual AR: {sum(p.numel() for p in model.parameters())} params, {len(published)} keys, "
          f"slow logits std {logits.std():.2f}, fast logits std {torch.stack(fast).std():.2f}")
    save({"tokens": tokens, "codes": codes, "slow_logits": logits.contiguous(), "slow_hidden": hidden.contiguous(),
          "fast_logits": torch.stack(fast).contiguous()}, str(HERE / "dual_ar.safetensors"))


CORPUS = ["Hello world, this is a tiny voice.", "The quick brown fox jumps over the lazy dog.",
          "convert the provided text to speech reference to the following:", "Text: Speech: system user assistant",
          "Numbers 1, 2, 3 and words like good morning."]
CONTROL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|voice|>", "<|audio_start|>", "<|audio_end|>", "<|speaker:0|>",
                  "<|speaker:1|>"]


def make_tokenizer() -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in CONTROL_TOKENS])
    filler = [f"<|reserved_{i}|>" for i in range(SEMANTIC_START - tokenizer.get_vocab_size())]
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in filler])
    tokenizer.add_special_tokens([AddedToken(f"<|semantic:{i}|>", special=True) for i in range(SEMANTIC_END - SEMANTIC_START + 1)])
    assert tokenizer.token_to_id("<|semantic:0|>") == SEMANTIC_START
    assert tokenizer.get_vocab_size() <= TEXT_CONFIG["vocab_size"]
    tokenizer.save(str(TINY / "tokenizer.json"))


if __name__ == "__main__":
    make_dac()
    make_real_codec_keys()
    make_dual_ar()
    make_tokenizer()
