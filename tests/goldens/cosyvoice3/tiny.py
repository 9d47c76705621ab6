"""A tiny CosyVoice3 checkpoint in the published layout, built from the published structure with the sizes shrunk.

    python -m tests.goldens.cosyvoice3.tiny OUT_DIR

writes cosyvoice3.yaml (HyperPyYAML, the published sections and tags), CosyVoice-BlankEN/ (a Qwen2 config and a
byte-level BPE tokenizer), llm.pt / flow.pt / hift.pt (state dicts under the published names; hift's convolutions
weight-normed in the parametrizations spelling, as torch saves them), and campplus.onnx / speech_tokenizer_v3.onnx
(small graphs with the published inputs and outputs). Kept structural: 80 mel bins, 192-d speaker embeddings, 200 stop
tokens, token_mel_ratio 2, pre-lookahead 3, upsampling 8·5·3 with a 16-point iSTFT (24 kHz), 3 resblock kernels.
Shrunk: widths, depths, the speech vocabulary (64), and the DiT's attention chunk (8 mel frames, so that utterances
of a few seconds cross several chunks). Every tensor is seeded random (no zero biases, no unit norms).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

SPEECH_TOKENS = 64
SEED = 1234

YAML = """# tiny CosyVoice3 (tests/goldens/cosyvoice3/tiny.py)
__set_seed1: !apply:random.seed [1986]
sample_rate: 24000
llm_input_size: 32
llm_output_size: 32
spk_embed_dim: 192
qwen_pretrain_path: ''
token_frame_rate: 25
token_mel_ratio: 2
chunk_size: 4
num_decoding_left_chunks: -1

llm: !new:cosyvoice.llm.llm.CosyVoice3LM
    llm_input_size: !ref <llm_input_size>
    llm_output_size: !ref <llm_output_size>
    speech_token_size: 64
    length_normalized_loss: True
    lsm_weight: 0
    mix_ratio: [5, 15]
    llm: !new:cosyvoice.llm.llm.Qwen2Encoder
        pretrain_path: !ref <qwen_pretrain_path>
    sampling: !name:cosyvoice.utils.common.ras_sampling
        top_p: 0.8
        top_k: 25
        win_size: 10
        tau_r: 0.1

flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithDiT
    input_size: 80
    output_size: 80
    spk_embed_dim: !ref <spk_embed_dim>
    output_type: 'mel'
    vocab_size: 64
    input_frame_rate: !ref <token_frame_rate>
    only_mask_loss: True
    token_mel_ratio: !ref <token_mel_ratio>
    pre_lookahead_len: 3
    pre_lookahead_layer: !new:cosyvoice.transformer.upsample_encoder.PreLookaheadLayer
        in_channels: 80
        channels: 32
        pre_lookahead_len: 3
    decoder: !new:cosyvoice.flow.flow_matching.CausalConditionalCFM
        in_channels: 240
        n_spks: 1
        spk_emb_dim: 80
        cfm_params: !new:omegaconf.DictConfig
            content:
                sigma_min: 1e-06
                solver: 'euler'
                t_scheduler: 'cosine'
                training_cfg_rate: 0.2
                inference_cfg_rate: 0.7
                reg_loss_type: 'l1'
        estimator: !new:cosyvoice.flow.DiT.dit.DiT
            dim: 32
            depth: 2
            heads: 2
            dim_head: 16
            ff_mult: 2
            mel_dim: 80
            mu_dim: 80
            spk_dim: 80
            out_channels: 80
            static_chunk_size: !ref <chunk_size> * <token_mel_ratio>
            num_decoding_left_chunks: !ref <num_decoding_left_chunks>

hift: !new:cosyvoice.hifigan.generator.CausalHiFTGenerator
    in_channels: 80
    base_channels: 16
    nb_harmonics: 8
    sampling_rate: !ref <sample_rate>
    nsf_alpha: 0.1
    nsf_sigma: 0.003
    nsf_voiced_threshold: 10
    upsample_rates: [8, 5, 3]
    upsample_kernel_sizes: [16, 11, 7]
    istft_params:
        n_fft: 16
        hop_len: 4
    resblock_kernel_sizes: [3, 7, 11]
    resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    source_resblock_kernel_sizes: [7, 7, 11]
    source_resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    lrelu_slope: 0.1
    audio_limit: 0.99
    conv_pre_look_right: 4
    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.CausalConvRNNF0Predictor
        num_class: 1
        in_channels: 80
        cond_channels: 16

feat_extractor: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1920
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 480
    win_size: 1920
    fmin: 0
    fmax: null
    center: False
"""

QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 512, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "max_position_embeddings": 4096, "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "float32",
        "bos_token_id": 256, "eos_token_id": 256, "use_sliding_window": False}
WORDS = ["hello", "world", "this", "is", "a", "tiny", "voice", "the", "of", "and", "you", "are", "helpful", "assistant", "short", "prompt"]


def _bytes_to_unicode() -> dict[int, str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def write_tokenizer(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    byte_chars = _bytes_to_unicode()
    vocab = {byte_chars[b]: i for i, b in enumerate(sorted(byte_chars))}
    merges = []
    for word in WORDS:
        for prefix in (" ", ""):
            pieces = [byte_chars[b] for b in (prefix + word).encode()]
            while len(pieces) > 1:
                merged = pieces[0] + pieces[1]
                if merged not in vocab:
                    vocab[merged] = len(vocab)
                    merges.append(f"{pieces[0]} {pieces[1]}")
                pieces = [merged, *pieces[2:]]
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = {str(len(vocab) + i): {"content": t, "special": True, "normalized": False, "lstrip": False, "rstrip": False,
                                   "single_word": False} for i, t in enumerate(specials)}
    (folder / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added, "model_max_length": 32768}))
    config = QWEN | {"bos_token_id": len(vocab), "eos_token_id": len(vocab)}
    (folder / "config.json").write_text(json.dumps(config, indent=1))


def randomize(module: torch.nn.Module, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Seeded random values for every tensor (gain / sqrt(fan_in) matrices, norms and Snake alphas near 1)."""
    state = {}
    for name, tensor in module.state_dict().items():
        if name.endswith("inv_freq"):
            state[name] = tensor.clone()
            continue
        if name.endswith(("norm.weight", "layernorm.weight", ".alpha")):
            value = 1 + 0.1 * torch.randn(tensor.shape, generator=generator)
        elif tensor.dim() >= 2:
            fan_in = tensor[0].numel()
            value = torch.randn(tensor.shape, generator=generator) / fan_in**0.5
        else:
            value = 0.05 * torch.randn(tensor.shape, generator=generator)
        state[name] = value.to(tensor.dtype)
    return state


def weight_normed(state: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Conv weights under `prefixes` split into the parametrizations spelling (g = |v| per output channel)."""
    out = {}
    for name, value in state.items():
        if name.endswith(".weight") and name.startswith(prefixes) and value.dim() == 3:
            base = name[: -len("weight")]
            v = value * 1.3
            g = torch.linalg.vector_norm(value.flatten(1), dim=1).view(-1, 1, 1)
            out[base + "parametrizations.weight.original0"] = g
            out[base + "parametrizations.weight.original1"] = v
        else:
            out[name] = value
    return out


def _onnx(path: Path, nodes, inputs, outputs, initializers) -> None:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, path.stem, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def write_onnx(folder: Path, generator: torch.Generator) -> None:
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array((torch.randn(80, 192, generator=generator) / 4).numpy(), "w")
    _onnx(folder / "campplus.onnx",
          [helper.make_node("ReduceMean", ["input"], ["pooled"], axes=[1], keepdims=0),
           helper.make_node("MatMul", ["pooled", "w"], ["projected"]),
           helper.make_node("Tanh", ["projected"], ["embedding"])],
          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, "T", 80])],
          [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, 192])], [weight])
    kernel = numpy_helper.from_array(torch.randn(SPEECH_TOKENS, 128, 4, generator=generator).numpy(), "kernel")
    _onnx(folder / "speech_tokenizer_v3.onnx",
          [helper.make_node("Conv", ["feats", "kernel"], ["scores"], strides=[4]),
           helper.make_node("ArgMax", ["scores"], ["codes"], axis=1, keepdims=0),
           helper.make_node("Cast", ["codes"], ["indices"], to=TensorProto.INT32)],
          [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, 128, "T"]),
           helper.make_tensor_value_info("feats_length", TensorProto.INT32, [1])],
          [helper.make_tensor_value_info("indices", TensorProto.INT32, [1, "N"])], [kernel])


def build(out: Path, onnx_files: bool = True) -> Path:
    from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
    from vocalis.stages.models.cosyvoice3.lm import CosyVoice3LM
    from vocalis.stages.models.cosyvoice3.weights import build_flow, build_hift

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cosyvoice3.yaml").write_text(YAML)
    write_tokenizer(out / "CosyVoice-BlankEN")
    config = CosyVoice3Config.from_dir(out)
    generator = torch.Generator().manual_seed(SEED)
    lm = CosyVoice3LM(config.qwen, config.lm)
    llm_state = randomize(lm, generator)
    llm_state["llm_decoder.weight"][SPEECH_TOKENS:] *= 0.2  # stop tokens rarer than speech ones, so utterances last
    llm_state["llm_decoder.weight"][:SPEECH_TOKENS] *= 6.0
    llm_state["llm.model.lm_head.weight"] = llm_state["llm.model.model.embed_tokens.weight"].clone()  # tied, saved
    torch.save(llm_state, out / "llm.pt")
    torch.save(randomize(build_flow(config), generator), out / "flow.pt")
    hift_state = randomize(build_hift(config), generator)
    hift_state["f0_predictor.classifier.weight"] *= 40.0  # F0 around 150 Hz: voiced, above the 10 Hz threshold
    hift_state["f0_predictor.classifier.bias"] += 150.0
    torch.save(weight_normed(hift_state, ("conv_pre", "ups.", "resblocks.", "source_resblocks.", "conv_post", "f0_predictor.condnet")),
               out / "hift.pt")
    torch.save({}, out / "spk2info.pt")
    if onnx_files:
        write_onnx(out, generator)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
