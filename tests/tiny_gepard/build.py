"""A tiny Gepard-1.0 checkpoint in the published layout, and a tiny NanoCodec `.nemo` archive in NeMo's.

The backbone is the tiny `qwen3_5_text` of tests/goldens/qwen3_5 (checked against transformers there), so `model.*`
is backed by that parity; the heads, audio embeddings, stop head and speaker prefix are random (seeded), and a few
tensors of each declared-unused group (voice-clone compressor, training-only heads) ride along as the published
file has them. The codec archive stores its convolutions weight-normed as parametrizations (g, v), as NeMo saves
them, plus encoder, discriminator and quantizer tensors the server does not use.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import torch
import yaml
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers

from vocalis.stages.models.gepard.nanocodec import NanoCodec, NanoCodecConfig

GOLDENS = Path(__file__).resolve().parents[1] / "goldens" / "qwen3_5"
WORDS = ("hello world the quick brown fox jumps over a lazy dog this is tiny gepard speaking now and then some more "
         "words to make longer sentences with").split()
LEVELS = [8, 7, 6, 6]
GROUPS = 8
SIDECAR = {
    "backbone_config": {"model_type": "qwen3_5_text", "rope_parameters": {"mrope_section": [1, 1, 0], "mrope_interleaved": True}},
    # out of order on purpose: heads are ordered by their numeric suffix
    "audio_heads": {f"level_audio_{i}": LEVELS[i % 4] for i in reversed(range(4 * GROUPS))},
    "audio_embed_dim": 4,
    "special_tokens": {"start_of_speech": 90, "end_of_speech": 91, "start_of_text": 93, "end_of_text": 94,
                       "tts_pad": 95, "tokeniser_length": 96},
    "text_repetition": {"enabled": True, "target_text_tokens": 16, "apply_below": 13, "max_repeats": 8},
    "codec": {"codec_id": "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps", "sample_rate": 22050, "frame_rate_hz": 21.5,
              "fsq_levels": LEVELS, "num_layers": GROUPS, "do_unfold": True},
    "voice_cloning": {"enabled": True, "compressor": {"num_queries": 3, "num_layers": 2, "num_heads": 8, "d_model": 32}},
    "stop_threshold": 0.5,
    "temperature": 0.3,
}


def build_checkpoint(path: Path, seed: int = 7, with_codec: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config = json.loads((GOLDENS / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config, indent=2))
    (path / "gepard_config.json").write_text(json.dumps(SIDECAR, indent=2))
    vocab = {word: i for i, word in enumerate(["<unk>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path / "tokenizer.json"))
    g = torch.Generator().manual_seed(seed)
    hidden, dim, queries = config["hidden_size"], SIDECAR["audio_embed_dim"], 3

    def rand(*shape, gain=1.0):
        fan_in = shape[-1] if len(shape) > 1 else 1
        return torch.randn(*shape, generator=g) * gain / fan_in**0.5

    weights = {k: v for k, v in load_file(str(GOLDENS / "goldens.safetensors")).items() if k.startswith("model.")}
    heads = [LEVELS[i % 4] for i in range(4 * GROUPS)]
    for i, levels in enumerate(heads):
        weights[f"audio_embeddings.{i}.weight"] = torch.randn(levels, dim, generator=g)
        weights[f"codebook_heads.{i}.weight"] = rand(levels, hidden, gain=3.0)
        weights[f"codebook_heads.{i}.bias"] = rand(levels, gain=0.5)
    weights["audio_embed_proj.0.weight"] = rand(hidden, len(heads) * dim)
    weights["audio_embed_proj.0.bias"] = rand(hidden, gain=0.2)
    weights["audio_embed_proj.2.weight"] = rand(hidden, hidden)
    weights["audio_embed_proj.2.bias"] = rand(hidden, gain=0.2)
    weights["audio_embed_scale"] = torch.tensor([0.8])
    weights["stop_head.weight"] = rand(1, hidden)
    weights["stop_head.bias"] = torch.tensor([-6.0])  # rarely fires on its own; tests force it both ways
    weights["null_prefix"] = torch.randn(queries, hidden, generator=g)
    weights["ref_compressor.queries"] = torch.randn(queries, hidden, generator=g)
    weights["aligner.proj.weight"] = rand(4, hidden)
    weights["supcon_head.net.0.weight"] = rand(4, hidden)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    if with_codec:
        build_nemo(path / "nemo-nano-codec-tiny.nemo")
    return path


TINY = {
    "sample_rate": 22050,
    "samples_per_frame": 16,
    "vector_quantizer": {"_target_": "nemo.collections.tts.modules.audio_codec_modules.GroupFiniteScalarQuantizer",
                         "num_groups": 8, "num_levels_per_group": [8, 7, 6, 6]},
    "audio_decoder": {"_target_": "nemo.collections.tts.modules.audio_codec_modules.CausalHiFiGANDecoder",
                      "input_dim": 32, "up_sample_rates": [4, 2, 2], "base_channels": 32, "in_kernel_size": 7,
                      "out_kernel_size": 3, "resblock_kernel_sizes": [3, 5], "resblock_dilation_sizes": [1, 2],
                      "activation": "half_snake", "output_activation": "tanh", "pad_mode": "zeros"},
    "audio_encoder": {"_target_": "nemo.collections.tts.modules.audio_codec_modules.HiFiGANEncoder", "encoded_dim": 32},
}


def build_nemo(path: Path, seed: int = 11, extra: dict[str, torch.Tensor] | None = None) -> Path:
    """A .nemo archive in NeMo's layout: weight-normed convolutions stored as parametrizations (g, v)."""
    torch.manual_seed(seed)
    codec = NanoCodec(NanoCodecConfig.from_yaml(TINY))
    weights: dict[str, torch.Tensor] = {}
    for name, tensor in codec.state_dict().items():
        key = "audio_decoder." + name.removeprefix("audio_decoder.")
        if name.endswith("alpha"):
            weights[key] = 0.5 + torch.rand_like(tensor)
        elif name.endswith("conv.weight"):
            v = torch.randn_like(tensor)
            g = torch.rand(tensor.shape[0], *[1] * (tensor.ndim - 1)) * 1.5 + 0.5
            if "post_conv" in key:
                g = g * 0.02  # keeps the output off tanh's saturation
            stem = key.removesuffix("weight")
            weights[stem + "parametrizations.weight.original0"] = g
            weights[stem + "parametrizations.weight.original1"] = v
        else:
            weights[key] = torch.randn_like(tensor) * 0.1
    for group in range(8):
        weights[f"vector_quantizer.fsqs.{group}.num_levels"] = torch.tensor([8, 7, 6, 6], dtype=torch.int32).view(1, 4, 1)
        weights[f"vector_quantizer.fsqs.{group}.dim_base_index"] = torch.tensor([1, 8, 56, 336], dtype=torch.int32).view(1, 4, 1)
    weights["audio_encoder.pre_conv.conv.parametrizations.weight.original0"] = torch.ones(4, 1, 1)
    weights["audio_encoder.pre_conv.conv.parametrizations.weight.original1"] = torch.ones(4, 1, 7)
    weights["discriminator.discriminators.0.conv.weight"] = torch.ones(2)
    weights |= extra or {}
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    with tarfile.open(path, "w") as archive:
        for name, data in (("./model_config.yaml", yaml.safe_dump(TINY).encode()), ("./model_weights.ckpt", buffer.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


