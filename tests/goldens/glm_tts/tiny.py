"""A tiny GLM-TTS checkpoint in the published layout, built from the published configs with the sizes shrunk.

    python -m tests.goldens.glm_tts.tiny OUT_DIR

writes llm/ (a Llama config.json + model.safetensors, HF names, tied head), vq32k-phoneme-tokenizer/ (a tiktoken
`tokenizer.model` of base64 ranks and a tokenizer_config.json whose added tokens hold the specials and <|audio_k|>),
flow/config.yaml + flow/flow.pt (the published `Flow` flags: adaLN speaker embedding, no speaker concat, no token CFG,
25 Hz tokens to 50 Hz mel), hift/hift.pt (CosyVoice2's HiFT, weight-normed convolutions in the parametrizations
spelling), speech_tokenizer/ (a WhisperVQ config + model.safetensors) and frontend/campplus.onnx.
Kept structural: 80 mel bins, 192-d speaker embeddings, the flags above, 4 ConvNeXt text blocks, upsampling 8·5·3
with a 16-point iSTFT (24 kHz), 3 resblock kernels, tokens pooled 2x at the quantizer. Shrunk: widths, depths, the
speech vocabulary (64 <|audio_k|> tokens). Every tensor is seeded random.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SPEECH_TOKENS = 64
SEED = 4321
WORDS = ["hello", "world", "this", "is", "a", "tiny", "voice", "the", "of", "and", "you", "speak", "short", "prompt", "text"]
SPECIALS = ["<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|begin_of_audio|>", "<|end_of_audio|>"]
EAR = "👂"
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": 1, "eos_token_id": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 32, "intermediate_size": 64,
         "max_position_embeddings": 2048, "mlp_bias": False, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
         "use_cache": True}
FLOW_YAML = """flow: !new:flow.flow.Flow
    spkr_emb_adaLN: True
    speech_token_cfg: False
    remove_spkr_concat_condition: True
    mel_dim: 80
    mel_framerate: 50
    input_frame_rate: 25
    speech_token_dim: 16
    vocab_size: 64
    trans_dim: 32
    depth: 2
    heads: 2
    dim_head: 16
"""


def tokenizer_vocab() -> tuple[dict[bytes, int], dict[str, int]]:
    """Byte-level ranks (every byte, then merges spelling WORDS, with and without a leading space, and the ear emoji),
    and the added tokens after them."""
    ranks = {bytes([b]): b for b in range(256)}
    for word in [*WORDS, *(" " + w for w in WORDS), EAR]:
        pieces = [bytes([b]) for b in word.encode()]
        while len(pieces) > 1:
            merged = pieces[0] + pieces[1]
            ranks.setdefault(merged, len(ranks))
            pieces = [merged, *pieces[2:]]
    added = {}
    for token in [*SPECIALS, *(f"<|audio_{k}|>" for k in range(SPEECH_TOKENS))]:
        added[token] = len(ranks) + len(added)
    return ranks, added


def write_tokenizer(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    ranks, added = tokenizer_vocab()
    lines = [f"{base64.b64encode(token).decode()} {rank}" for token, rank in ranks.items()]
    (folder / "tokenizer.model").write_text("\n".join(lines) + "\n")
    decoder = {str(i): {"content": t, "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}
               for t, i in added.items()}
    (folder / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": decoder, "tokenizer_class": "ChatGLM4Tokenizer",
                                                              "eos_token": "<|user|>", "pad_token": "<|endoftext|>"}, indent=1))
    return len(ranks) + len(added)


def randomize(module: torch.nn.Module, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Seeded random values for every tensor (gain / sqrt(fan_in) matrices, norms and Snake alphas near 1)."""
    state = {}
    for name, tensor in module.state_dict().items():
        if name.endswith("inv_freq"):
            state[name] = tensor.clone()
            continue
        if name.endswith(("norm.weight", "layernorm.weight", ".alpha", "_layer_norm.weight")):
            value = 1 + 0.1 * torch.randn(tensor.shape, generator=generator)
        elif tensor.dim() >= 2:
            value = torch.randn(tensor.shape, generator=generator) / tensor[0].numel() ** 0.5
        else:
            value = 0.05 * torch.randn(tensor.shape, generator=generator)
        state[name] = value.to(tensor.dtype)
    return state


def write_llm(folder: Path, vocab: int, generator: torch.Generator, audio_start: int) -> None:
    from vocalis.stages.models.glm_tts.config import LlamaConfig
    from vocalis.stages.models.glm_tts.lm import GLMSpeechLM

    folder.mkdir(parents=True, exist_ok=True)
    config = LLAMA | {"vocab_size": vocab + 8}  # a few unused rows, as real vocabularies are padded
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    state = randomize(GLMSpeechLM(LlamaConfig.from_dict(config)), generator)
    embed = state["model.embed_tokens.weight"]
    embed[audio_start:audio_start + SPEECH_TOKENS] *= 2.0  # speech ids likelier than text ids, so utterances are speech
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def weight_normed(state: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Conv weights under `prefixes` split into the parametrizations spelling (g = |v| per output channel)."""
    out = {}
    for name, value in state.items():
        if name.endswith(".weight") and name.startswith(prefixes) and value.dim() == 3:
            base = name[: -len("weight")]
            out[base + "parametrizations.weight.original0"] = torch.linalg.vector_norm(value.flatten(1), dim=1).view(-1, 1, 1)
            out[base + "parametrizations.weight.original1"] = value * 1.3
        else:
            out[name] = value
    return out


def write_flow_and_hift(out: Path, generator: torch.Generator) -> None:
    from vocalis.stages.models.glm_tts.config import GLMTTSConfig
    from vocalis.stages.models.glm_tts.weights import build_flow, build_hift

    (out / "flow").mkdir(parents=True, exist_ok=True)
    (out / "flow" / "config.yaml").write_text(FLOW_YAML)
    config = GLMTTSConfig.from_dir(out)
    torch.save(randomize(build_flow(config), generator), out / "flow" / "flow.pt")
    hift_state = randomize(build_hift(config, base_channels=16, f0_channels=16), generator)
    # F0 near 150 Hz (voiced, above the 10 Hz threshold) and smooth, and magnitudes mostly below the clamp, so that
    # small mel differences stay small in the waveform, as they do for trained weights
    hift_state["f0_predictor.classifier.weight"] *= 0.1
    hift_state["f0_predictor.classifier.bias"] += 150.0
    hift_state["conv_post.weight"] *= 0.3
    (out / "hift").mkdir(exist_ok=True)
    torch.save(weight_normed(hift_state, ("conv_pre", "ups.", "resblocks.", "source_resblocks.", "conv_post", "f0_predictor.condnet")),
               out / "hift" / "hift.pt")


WHISPER_VQ = {"architectures": ["WhisperVQForConditionalGeneration"], "model_type": "whisper", "activation_function": "gelu",
              "d_model": 32, "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "encoder_layers": 3, "decoder_layers": 1,
              "num_mel_bins": 128, "max_source_positions": 1500, "pooling_kernel_size": 2, "pooling_position": 2, "pooling_type": "avg",
              "quantize_position": 2, "quantize_vocab_size": SPEECH_TOKENS, "quantize_causal_block_size": 20,
              "quantize_causal_encoder": False, "encoder_causal_attention": False, "encoder_causal_convolution": False,
              "quantize_ema_decay": 0.99, "scale_embedding": False, "torch_dtype": "float32"}
"""The published WhisperVQ config shrunk: 2 of 3 layers before the quantizer (pooled there), and a 20-frame causal
block (the published 200 is 4 s: shrunk so that a 3 s clip crosses blocks)."""


def codebook_from_speech(encoder, generator: torch.Generator) -> torch.Tensor:
    """Codes drawn near the encoder's pooled frames of a voiced test clip (as VQ codebooks start from data), so that
    speech maps onto many codes rather than the one nearest the frames' common mean."""
    import math

    from vocalis.stages.components.speech_features import whisper_log_mel

    t = torch.arange(int(3.2 * 16000)) / 16000
    clip = 0.3 * torch.sin(2 * math.pi * 180 * t) * torch.sin(2 * math.pi * 2 * t) + 0.05 * torch.randn(len(t), generator=generator)
    frames = []
    encoder.layers[-1].register_forward_hook(lambda module, args, out: frames.append(out[0]))
    with torch.no_grad():
        encoder(whisper_log_mel(clip[: len(clip) // 640 * 640])[None], len(clip) // 160)
    pooled = torch.nn.functional.avg_pool1d(frames[0].T[None], 2)[0].T
    picks = torch.randint(0, len(pooled), (encoder.codebook.num_embeddings,), generator=generator)
    return pooled[picks] + 0.3 * torch.randn(encoder.codebook.weight.shape, generator=generator)


def write_speech_tokenizer(folder: Path, generator: torch.Generator) -> None:
    from vocalis.stages.api.config_json import from_json
    from vocalis.stages.models.glm_tts.speech_tokenizer import WhisperVQConfig, WhisperVQEncoder

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(WHISPER_VQ, indent=1))
    config = from_json(WhisperVQConfig, WHISPER_VQ)
    encoder = WhisperVQEncoder(config)
    encoder.load_state_dict(randomize(encoder, generator))
    encoder.codebook.weight.data = codebook_from_speech(encoder, generator)
    state = {"model.encoder." + k: v for k, v in encoder.state_dict().items()}
    d = config.d_model
    extra = {"layers.2.fc1.weight": (64, d), "layers.2.fc1.bias": (64,), "layer_norm.weight": (d,), "layer_norm.bias": (d,),
             "embed_positions2.weight": (750, d), "ema_count": (SPEECH_TOKENS,), "ema_weight": (SPEECH_TOKENS, d)}
    for name, shape in extra.items():  # present in the published file, left out by its loader (and ours)
        state["model.encoder." + name] = torch.randn(shape, generator=generator)
    state["model.decoder.embed_tokens.weight"] = torch.randn(16, d, generator=generator)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def write_campplus(path: Path, generator: torch.Generator) -> None:
    """A small graph with the published input (fbank [1, T, 80]) and output ([1, 192])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    path.parent.mkdir(parents=True, exist_ok=True)
    weight = numpy_helper.from_array((torch.randn(80, 192, generator=generator) / 4).numpy(), "w")
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["pooled"], axes=[1], keepdims=0),
         helper.make_node("MatMul", ["pooled", "w"], ["projected"]), helper.make_node("Tanh", ["projected"], ["embedding"])],
        "campplus", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, "T", 80])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, 192])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build(out: Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(SEED)
    vocab = write_tokenizer(out / "vq32k-phoneme-tokenizer")
    _, added = tokenizer_vocab()
    write_llm(out / "llm", vocab, generator, added["<|audio_0|>"])
    write_flow_and_hift(out, generator)
    write_speech_tokenizer(out / "speech_tokenizer", generator)
    write_campplus(out / "frontend" / "campplus.onnx", generator)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
