"""A tiny Gepard-1.0 checkpoint in the published layout, with the tiny NanoCodec `.nemo` archive NeMo itself saved.

The backbone is the tiny `qwen3_5_text` of tests/goldens/qwen3_5 (checked against transformers there), so `model.*`
is backed by that parity; the heads, audio embeddings, stop head and speaker prefix are random (seeded), and a few
tensors of each declared-unused group (voice-clone compressor, training-only heads) ride along as the published
file has them. The codec archive is the one nemo-toolkit's AudioCodecModel saved (tests/goldens/gepard): weight
norm as parametrizations (g, v), plus encoder, discriminator, quantizer and loss-module tensors the server does not
use; tests/stages/models/gepard/test_nanocodec_nemo.py checks our decode of it against NeMo's.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import torch
import yaml
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers

from vocalis.stages.components.hybrid import HybridConfig, HybridDecoder
from vocalis.stages.models.gepard.nanocodec import read_nemo

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


def build_checkpoint(path: Path, seed: int = 7, with_codec: bool = True, full_attention_only: bool = False) -> Path:
    """With `full_attention_only`, every backbone layer is full attention, as in the published checkpoint (its vendor's
    model guide: 14 full-attention layers); its `model.*` weights are then random (seeded), not the goldens'."""
    path.mkdir(parents=True, exist_ok=True)
    config = json.loads((GOLDENS / "config.json").read_text())
    if full_attention_only:
        config["layer_types"] = ["full_attention"] * config["num_hidden_layers"]
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
    if full_attention_only:
        with torch.random.fork_rng():  # seeded here, the caller's generator left as it was
            torch.manual_seed(seed)
            backbone = HybridDecoder(HybridConfig.from_dict(config))
        weights = {f"model.{k}": v.detach() for k, v in backbone.state_dict().items()}
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


NEMO_ARCHIVE = Path(__file__).resolve().parents[1] / "goldens" / "gepard" / "tiny" / "nemo-nano-codec-tiny.nemo"
"""A tiny NanoCodec saved by NeMo's own AudioCodecModel.save_to (tests/goldens/gepard/make_goldens.py)."""


def build_nemo(path: Path, extra: dict[str, torch.Tensor] | None = None) -> Path:
    """NeMo's tiny NanoCodec archive, with `extra` tensors laid over its state dict when given (to test the loader's
    refusals)."""
    if not extra:
        shutil.copyfile(NEMO_ARCHIVE, path)
        return path
    config, weights = read_nemo(NEMO_ARCHIVE)
    buffer = io.BytesIO()
    torch.save(weights | extra, buffer)
    with tarfile.open(path, "w") as archive:
        for name, data in (("./model_config.yaml", yaml.safe_dump(config).encode()), ("./model_weights.ckpt", buffer.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path
