"""Every GPU check in one command: device correctness, CUDA graphs on and off, real-size serving and memory.

Three sections, in this order, within one wall-clock budget (--budget-s: work that would start after it is skipped
and listed, so that a run on one H200 ends within 8 minutes), one JSON (--out) and one table per section:
1. parity: each family's stages on --device against the CPU in float32, on the tiny checkpoints, the codes forced
   (bench/device_parity.py: float32 judged against the checkpoint's own float64/float32 floor, --parity-dtype reported);
2. graphs: --graph-family (Qwen3-TTS 1.7B Base) at --graph-levels (1, 16, 64) with its deploy file's CUDA graphs, then
   eager: audio-s/s, TTFA p50/p99, RTF, KV per stream;
3. families: every family at --levels (1 and 8), the same figures with the weights and the device's peak memory.
Sections 2 and 3 build checkpoints with random weights at the published sizes (the committed tiny checkpoint's files,
with the published sizes of tests/stages/models/qwen3_tts/real_key_sets.json, tests/goldens/voxcpm2/real_config.json,
bench/configs/omnivoice_real_sizes.json and auk_real_sizes.json and
bench/configs/higgs_audio_v2_real_sizes.json laid over its config; Fish Speech S2 Pro: bench/configs/fish_speech_s2_pro.json; Voxtral's tiny checkpoint is built by
tests/goldens/voxtral/build_tiny.py and its real one from tests/goldens/voxtral/real_params.json; CosyVoice3: the published
cosyvoice3.yaml and Qwen2 sizes of tests/goldens/cosyvoice3/real/; GLM-TTS: the published Llama and flow configs of
tests/goldens/glm_tts/real/; Gepard-1.0: bench/configs/gepard_real_sizes.json (its backbone as its vendor's model guide
gives it, the rest assumed from Qwen3.5-0.8B; the tiny NanoCodec); Fish Audio Drama 3: assumed sizes,
bench/drama3_build.py (its published ones are not known here), only when named in --families), load them as the
server would (family loader, deploy defaults, --device/--dtype overrides), and serve closed-loop callers in process.
Random weights make random audio: stop heads are silenced so every request runs to --frames, and the figures measure
speed only.

    python bench/gpu.py                          # on a GPU machine: all three sections, bfloat16 serving
    python bench/gpu.py --dry-run                # CI: every section and path on the CPU with the tiny checkpoints
    python bench/gpu.py --device cpu --tiny --sections families --levels 1,4 --frames 4

RTF is end-to-end latency over audio duration (vLLM-Omni's definition, TTFA included).
KV bytes per stream: the autoregressive stage's peak KV blocks in use over its peak running sequences.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_json  # noqa: E402
from bench.stage_weights import model_weight_bytes  # noqa: E402
from bench.voice_clip import bench_voice, reference_audio  # noqa: E402
from tests import tiny_checkpoints as tiny  # noqa: E402
from vocalis.stages.layers.weights import SAFETENSORS_DTYPES  # noqa: E402
from vocalis.stages.models.registry import load_model  # noqa: E402
from vocalis.stages.runtime.output import AudioOutput  # noqa: E402
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest  # noqa: E402

GOLDENS = ROOT / "tests" / "goldens"
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."


def _committed(path: Path) -> Callable[[Path], Path | None]:
    return lambda work: path


def _voxtral_tiny(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    return tiny.voxtral(Path(tempfile.mkdtemp(prefix="voxtral-tiny-", dir=work)))  # fresh: parallel runs never share one


@dataclass(frozen=True)
class Case:
    name: str
    tiny: Callable[[Path], Path | None]
    """The tiny checkpoint in the real layout, given a work dir: a committed folder, or one built or assembled there."""
    clone: bool = False
    """Needs a reference clip (a Base checkpoint)."""
    layout: Callable[[Path], Path | None] | None = None
    """What the real-size weights are laid over (its weights left out; None from it: nothing), given a work dir;
    None: the tiny checkpoint."""


CASES = {
    "qwen3-1.7b-base": Case("Qwen3-TTS-12Hz-1.7B-Base", _committed(GOLDENS / "qwen3_tts" / "base-1b7"), clone=True),
    "qwen3-1.7b-customvoice": Case("Qwen3-TTS-12Hz-1.7B-CustomVoice", _committed(GOLDENS / "qwen3_tts" / "cv-1b7")),
    "voxcpm2": Case("VoxCPM2", _committed(GOLDENS / "voxcpm2" / "tiny")),
    "omnivoice": Case("OmniVoice", _committed(GOLDENS / "omnivoice" / "tiny")),
    "voxtral": Case("Voxtral-4B-TTS-2603", _voxtral_tiny, layout=lambda work: None),
    "auk": Case("AuK", _committed(GOLDENS / "auk" / "tiny")),
    "higgs-audio-v2": Case("higgs-audio-v2-generation-3B-base", tiny.higgs_audio_v2),
    "fish-speech-s2-pro": Case("s2-pro", _committed(GOLDENS / "fish_speech" / "tiny")),
    "cosyvoice3": Case("Fun-CosyVoice3-0.5B-2512", tiny.cosyvoice3, clone=True, layout=_committed(GOLDENS / "cosyvoice3" / "real")),
    "glm-tts": Case("GLM-TTS", tiny.glm_tts, clone=True, layout=lambda work: None),  # _build_glm_tts builds its base
    "drama-3": Case("drama-3", tiny.drama3),
    "gepard": Case("gepard-1.0", tiny.gepard),
}
NO_REAL_SIZES = {"drama-3": "the published sizes of fishaudio/drama-3 are not known here: bench/drama3_build.py builds "
                             "assumed ones (Qwen3.5-35B-A3B's backbone, ~33 GiB of FP8 experts)"}
"""Families left out of a real-size run unless named in --families (why)."""


def tiny_checkpoint(key: str, work: Path) -> Path:
    path = CASES[key].tiny(work)
    assert path is not None
    return path


# -- real-size checkpoints ------------------------------------------------------------------------


def _overlay(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        out[key] = _overlay(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


SAFETENSORS_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}
"""The header's dtype name of each torch dtype: the reader's table (stages/layers/weights.py), turned round."""


def save_file(tensors: dict[str, torch.Tensor], path: str | Path) -> None:
    """A .safetensors file written one tensor at a time from the tensors' own memory: safetensors' save_file makes a
    bytes copy of every tensor before it writes, twice the checkpoint in memory (20 GiB for higgs-audio v2's talker in
    bfloat16). Tensors that share memory (tied weights) are written once under each name, as the builders' state dicts
    name them."""
    header: dict[str, dict] = {}
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name]
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": SAFETENSORS_NAMES[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little"))
        f.write(encoded)
        for name in sorted(tensors):
            tensor = tensors[name].detach().to("cpu").contiguous()
            if tensor.numel():
                f.write(tensor.reshape(-1).view(torch.uint8).numpy())


@contextmanager
def _built_in(dtype: torch.dtype) -> Iterator[None]:
    """Modules made meanwhile get their parameters in `dtype` from the start: the checkpoints are written in bfloat16,
    and a generator of 4-5 B parameters built in float32 first (16-20 GiB) does not fit beside anything on a 24 GiB
    machine."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _save(module: torch.nn.Module, path: Path, prefix: str = "", into: dict | None = None) -> dict:
    tensors = into if into is not None else {}
    for key, value in module.state_dict().items():
        tensors[prefix + key] = value.detach().to("cpu", torch.bfloat16 if value.is_floating_point() else value.dtype).contiguous()
    if into is None:
        save_file(tensors, str(path))
    return tensors


def build_real(key: str, work: Path, device: str, layers: int | None = None) -> Path:
    """A random-weight checkpoint at the published sizes, in `work`/key (reused when present); with `layers`, only that
    many of the backbone's layers (Drama 3 only: the whole one does not fit a 24 GiB machine)."""
    case = CASES[key]
    if layers is not None and key != "drama-3":
        raise SystemExit(f"{key}: only drama-3 builds a shallower checkpoint (--layers)")
    out = work / (key if layers is None else f"{key}-{layers}-layers")
    if (out / ".complete").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    layout = (case.layout or case.tiny)(work)
    if layout is not None:
        shutil.copytree(layout, out, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.manual_seed(0)
    with torch.device(device), torch.no_grad():
        if key == "voxtral":
            _build_voxtral(out)
        elif key.startswith("qwen3"):
            _build_qwen3(case.name, out)
        elif key == "voxcpm2":
            _build_voxcpm2(out)
        elif key == "auk":
            _build_auk(out)
        elif key == "higgs-audio-v2":
            _build_higgs(out)
        elif key == "cosyvoice3":
            _build_cosyvoice3(out)
        elif key == "glm-tts":
            _build_glm_tts(out)
        elif key == "fish-speech-s2-pro":
            _build_fish(out)
        elif key == "gepard":
            _build_gepard(out)
        elif key == "drama-3":
            from bench import drama3_build

            drama3_build.build(out, json.loads((out / "config.json").read_text()), layers, save_file)
            _write_s2_pro_codec(out)
        else:
            _build_omnivoice(out)
    (out / ".complete").write_text("")
    return out


def _build_qwen3(name: str, out: Path) -> None:
    from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder, SpeechEncoder
    from vocalis.stages.models.qwen3_tts.config import Qwen3TTSConfig
    from vocalis.stages.models.qwen3_tts.speaker import SpeakerEncoder
    from vocalis.stages.models.qwen3_tts.talker import Talker

    real = json.loads((ROOT / "tests" / "stages" / "models" / "qwen3_tts" / "real_key_sets.json").read_text())
    config = _overlay(json.loads((out / "config.json").read_text()), real["checkpoints"][name]["config"])
    (out / "config.json").write_text(json.dumps(config, indent=2))
    speech = _overlay(json.loads((out / "speech_tokenizer" / "config.json").read_text()), real["speech_tokenizer"]["config"])
    (out / "speech_tokenizer" / "config.json").write_text(json.dumps(speech, indent=2))
    parsed = Qwen3TTSConfig.from_dir(out)
    talker = Talker(parsed.talker)
    talker.codec_head.weight[parsed.talker.codec_eos_token_id] = 0  # never stop early
    tensors = _save(talker, out / "model.safetensors", "talker.", {})
    if parsed.speaker_encoder is not None:
        _save(SpeakerEncoder(parsed.speaker_encoder), out, "speaker_encoder.", tensors)
    save_file(tensors, str(out / "model.safetensors"))
    st = parsed.speech_tokenizer
    codec = _save(SpeechDecoder(st.decoder), out, "decoder.", {})
    if st.encoder is not None:
        _save(SpeechEncoder(st.encoder, st.encoder_valid_num_quantizers, st.encode_downsample_rate), out, "encoder.", codec)
    save_file(codec, str(out / "speech_tokenizer" / "model.safetensors"))


def _build_voxcpm2(out: Path) -> None:
    from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
    from vocalis.stages.models.voxcpm2.modules import VoxCPM2
    from vocalis.stages.models.voxcpm2.vae import AudioVAE

    shutil.copy(GOLDENS / "voxcpm2" / "real_config.json", out / "config.json")
    config = VoxCPM2Config.from_dir(out)
    model = VoxCPM2(config)
    model.stop_head.weight.zero_()  # never stop early
    _save(model, out / "model.safetensors")
    _save(AudioVAE(config.audio_vae), out / "audiovae.safetensors")


def _build_omnivoice(out: Path) -> None:
    from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
    from vocalis.stages.models.omnivoice.backbone import OmniVoiceLM
    from vocalis.stages.models.omnivoice.config import AudioTokenizerConfig, OmniVoiceConfig

    sizes = json.loads((ROOT / "bench" / "configs" / "omnivoice_real_sizes.json").read_text())
    for name, top in (("config.json", sizes["config"]), ("audio_tokenizer/config.json", sizes["audio_tokenizer"])):
        (out / name).write_text(json.dumps(_overlay(json.loads((out / name).read_text()), top), indent=2))
    _save(OmniVoiceLM(OmniVoiceConfig.from_dir(out)), out / "model.safetensors")
    _save(AudioTokenizer(AudioTokenizerConfig.from_dir(out / "audio_tokenizer")), out / "audio_tokenizer" / "model.safetensors")


def _build_voxtral(out: Path) -> None:
    from vocalis.stages.models.voxtral.codec import AudioTokenizerDecoder
    from vocalis.stages.models.voxtral.config import VoxtralConfig
    from vocalis.stages.models.voxtral.decoder import VoxtralLM
    from vocalis.stages.models.voxtral.weights import CODEC_PREFIX, checkpoint_key

    out.mkdir(parents=True)
    params = json.loads((GOLDENS / "voxtral" / "real_params.json").read_text())
    (out / "params.json").write_text(json.dumps(params, indent=2))
    shutil.copy(GOLDENS / "voxtral" / "tekken_tiny.json", out / "tekken.json")  # a 4000-token vocabulary: speed does not care
    config = VoxtralConfig.from_dict(params)
    with _built_in(torch.bfloat16):
        lm = VoxtralLM(config)
    lm.flow.semantic_codebook_output.weight[1] = 0  # [END_AUDIO] never wins: every request runs to --frames
    tensors = {checkpoint_key(k): v.to("cpu", torch.bfloat16).contiguous() for k, v in lm.state_dict().items()}
    del lm
    for key, value in AudioTokenizerDecoder(config.codec).state_dict().items():
        value = value.to("cpu", torch.float32)
        if key.endswith("conv.weight"):
            prefix = CODEC_PREFIX + key[: -len("weight")] + "parametrizations.weight."
            tensors[prefix + "original0"] = value.flatten(1).norm(dim=1)[:, None, None].to(torch.bfloat16)
            tensors[prefix + "original1"] = value.to(torch.bfloat16).contiguous()
        else:
            tensors[CODEC_PREFIX + key] = value.to(torch.bfloat16).contiguous()
    save_file(tensors, str(out / "consolidated.safetensors"))
    (out / "voice_embedding").mkdir()
    for name, rows in json.loads((out / "tekken.json").read_text())["audio"]["voice_num_audio_tokens"].items():
        torch.save(torch.randn(rows, config.decoder.dim, device="cpu").to(torch.bfloat16), out / "voice_embedding" / f"{name}.pt")


def _build_fish(out: Path, config: dict | None = None) -> None:
    """S2 Pro's published geometry for the dual AR (empty config sections: the family fills them from its
    `s2_pro_config.json`), and the codec at its published geometry (no codec_config.json beside codec.pth). The tiny
    tokenizer stays: its control tokens fit the real vocabulary, and text tokenization is not what is measured."""
    from vocalis.stages.models.fish_speech.config import FishSpeechConfig
    from vocalis.stages.models.fish_speech.dual_ar import FishDualAR
    from vocalis.stages.models.fish_speech.prompt import FishTokenizer

    config = config or json.loads((ROOT / "bench" / "configs" / "fish_speech_s2_pro.json").read_text())
    (out / "config.json").write_text(json.dumps(config, indent=2))
    with _built_in(torch.bfloat16):
        dual_ar = FishDualAR(FishSpeechConfig.from_dict(config))
    im_end = FishTokenizer.from_file(str(out / "tokenizer.json")).im_end
    dual_ar.text_model.model.embeddings.weight[im_end] = 0  # the tied head's stop logit is 0: never the likeliest
    _save(dual_ar, out / "model.safetensors")
    del dual_ar
    _write_s2_pro_codec(out)


def _write_s2_pro_codec(out: Path) -> None:
    """S2 Pro's DAC at its published geometry (FishDACConfig's defaults, so no codec_config.json) as codec.pth: S2 Pro's
    and Drama 3's (whose reference server takes S2 Pro's codec)."""
    from vocalis.stages.models.fish_common.fish_dac import FishDAC
    from vocalis.stages.models.fish_common.fish_dac_config import FishDACConfig

    (out / "codec_config.json").unlink(missing_ok=True)
    torch.save({k: v.detach().cpu() for k, v in FishDAC(FishDACConfig()).state_dict().items()}, out / "codec.pth")


def _build_auk(out: Path) -> None:
    from vocalis.stages.models.auk.config import AuKConfig
    from vocalis.stages.models.auk.dit import AuKDiT
    from vocalis.stages.models.auk.encoder import ConditionEncoder
    from vocalis.stages.models.auk.vae import AuKVAE

    sizes = json.loads((ROOT / "bench" / "configs" / "auk_real_sizes.json").read_text())
    config = _overlay(json.loads((out / "config.json").read_text()), sizes)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    parsed = AuKConfig.from_dict(config)
    with _built_in(torch.bfloat16):
        encoder = ConditionEncoder(parsed.text, parsed.audio)
    qwen = {k: v for k, v in _save(encoder, out, "", {}).items() if k.startswith("thinker.")}
    save_file(qwen, str(out / "model.safetensors"))
    fusion = {"layer_weights": encoder.layer_weights.detach().cpu(), "layer_scale": encoder.layer_scale.detach().cpu()}
    del qwen, encoder  # one of the two big modules in memory at a time
    with _built_in(torch.bfloat16):
        dit = _save(AuKDiT(parsed.dit, parsed.vae.latent_dim), out, "transformer.", {})
    save_file(dit | fusion, str(out / "auk_base.safetensors"))
    del dit
    (out / "auk.safetensors").symlink_to("auk_base.safetensors")
    vae = {k: v for k, v in _save(AuKVAE(parsed.vae), out, "", {}).items()}
    save_file(vae, str(out / "vae.safetensors"))


def _build_gepard(out: Path) -> None:
    """Gepard's talker at bench/configs/gepard_real_sizes.json (the tokenizer and NanoCodec stay the tiny ones); its stop
    head silenced. The published file also holds the voice compressor and training-only heads, which the server
    declares unused (talker.UNUSED): left out here, they would only be read past."""
    from vocalis.stages.models.gepard.config import SIDECAR, GepardConfig
    from vocalis.stages.models.gepard.talker import GepardTalker

    sizes = json.loads((ROOT / "bench" / "configs" / "gepard_real_sizes.json").read_text())
    for name, top in (("config.json", sizes["config"]), (SIDECAR, sizes["sidecar"])):
        (out / name).write_text(json.dumps(_overlay(json.loads((out / name).read_text()), top), indent=2))
    with _built_in(torch.bfloat16):
        talker = GepardTalker(GepardConfig.from_dir(out))
    talker.stop_head.weight.zero_()
    talker.stop_head.bias.fill_(-30.0)  # sigmoid ~ 1e-13: every request runs to --frames
    _save(talker, out / "model.safetensors")


def _build_higgs(out: Path) -> None:
    from vocalis.stages.components.higgs_audio_v2_tokenizer.config import AudioTokenizerConfig
    from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
    from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config
    from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker

    sizes = json.loads((ROOT / "bench" / "configs" / "higgs_audio_v2_real_sizes.json").read_text())
    codec_sizes = json.loads((ROOT / "bench" / "configs" / "omnivoice_real_sizes.json").read_text())["audio_tokenizer"]
    for name, top in (("config.json", sizes["config"]), ("audio_tokenizer/config.json", codec_sizes)):
        (out / name).write_text(json.dumps(_overlay(json.loads((out / name).read_text()), top), indent=2))
    config = HiggsAudioV2Config.from_dir(out)
    with _built_in(torch.bfloat16):
        talker = HiggsAudioV2Talker(config)
    for k in range(config.num_codebooks):  # never stop early
        talker.audio_lm_head.weight[k * config.codebook_size + config.audio_stream_eos_id] = 0
    _save(talker, out / "model.safetensors")
    del talker
    _save(AudioTokenizer(AudioTokenizerConfig.from_dir(out / "audio_tokenizer")), out / "audio_tokenizer" / "model.safetensors")


def _build_cosyvoice3(out: Path) -> None:
    """The published yaml and Qwen2 sizes (copied from tests/goldens/cosyvoice3/real), the tiny tokenizer and ONNX
    frontend (their cost is not what is measured), and random llm.pt / flow.pt / hift.pt at the published sizes."""
    from tests.goldens.cosyvoice3.tiny import write_onnx, write_tokenizer
    from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
    from vocalis.stages.models.cosyvoice3.lm import CosyVoice3LM
    from vocalis.stages.models.cosyvoice3.weights import build_flow, build_hift

    real_qwen = (out / "CosyVoice-BlankEN" / "config.json").read_text()
    write_tokenizer(out / "CosyVoice-BlankEN")
    (out / "CosyVoice-BlankEN" / "config.json").write_text(real_qwen)
    write_onnx(out, torch.Generator().manual_seed(0))
    config = CosyVoice3Config.from_dir(out)
    lm = CosyVoice3LM(config.qwen, config.lm)
    lm.llm_decoder.weight[config.lm.speech_token_size :] = 0  # stop tokens rarely win: requests run to --frames
    state = {k: v.detach().cpu() for k, v in lm.state_dict().items()}
    state["llm.model.lm_head.weight"] = state["llm.model.model.embed_tokens.weight"]
    torch.save(state, out / "llm.pt")
    torch.save({k: v.detach().cpu() for k, v in build_flow(config).state_dict().items()}, out / "flow.pt")
    torch.save({k: v.detach().cpu() for k, v in build_hift(config).state_dict().items()}, out / "hift.pt")




def _build_glm_tts(out: Path) -> None:
    """The tiny checkpoint (its tokenizers and CAM++: their cost is not what is measured), then the published Llama
    config and flow config (tests/goldens/glm_tts/real) with random llm/, flow.pt and hift.pt at the published sizes."""
    from tests.goldens.glm_tts.tiny import build
    from vocalis.stages.models.glm_tts.config import GLMTTSConfig
    from vocalis.stages.models.glm_tts.lm import GLMSpeechLM
    from vocalis.stages.models.glm_tts.tokenizer import GLMTokenizer
    from vocalis.stages.models.glm_tts.weights import build_flow, build_hift

    real = GOLDENS / "glm_tts" / "real"
    build(out)
    shutil.copy(real / "llm_config.json", out / "llm" / "config.json")
    shutil.copy(real / "flow_config.yaml", out / "flow" / "config.yaml")
    config = GLMTTSConfig.from_dir(out)
    lm = GLMSpeechLM(config.llama)
    lm.model.embed_tokens.weight[GLMTokenizer.from_dir(out / "vq32k-phoneme-tokenizer").stop_ids()] = 0  # stops rarely win
    _save(lm, out / "llm" / "model.safetensors")
    torch.save({k: v.detach().cpu() for k, v in build_flow(config).state_dict().items()}, out / "flow" / "flow.pt")
    torch.save({k: v.detach().cpu() for k, v in build_hift(config).state_dict().items()}, out / "hift" / "hift.pt")


# -- serving --------------------------------------------------------------------------------------


class KVWatch:
    """Peak KV blocks in use and peak running sequences of the autoregressive stage (pipeline observer)."""

    def __init__(self, model) -> None:
        self.stage = next((s for s in model.pipeline.stages if hasattr(s, "cache")), None)
        self.peak_blocks = self.peak_running = 0

    def __call__(self, name: str, batch: int) -> None:
        stage = self.stage
        if stage is not None and name == stage.name:
            self.peak_blocks = max(self.peak_blocks, stage.cache.num_blocks - stage.cache.num_free)
            self.peak_running = max(self.peak_running, stage.num_running)

    def bytes_per_stream(self) -> float | None:
        if self.stage is None or not self.peak_running:
            return None
        return self.peak_blocks * self.stage.cache.bytes / self.stage.cache.num_blocks / self.peak_running


def make_request(model, case: Case, frames: int) -> SynthesisRequest:
    fields = {"max_new_tokens": frames, "seed": 1} if not isinstance(model.family, str) or model.family != "omnivoice" else {"seed": 1}
    if model.family == "auk":  # told its length: `frames` latent frames (50 per second)
        fields = {"seed": 1, "duration_seconds": frames / 50}
    if model.family == "higgs_audio_v2":
        fields["max_new_tokens"] = frame_budget(model.family, frames)
    if model.family == "qwen3_tts":  # greedy, as bench/real_size_cpu.py asks (the deploy samples: temperature 0.9, top-k 50)
        fields["extra_params"] = {"temperature": 0.0, "subtalker_temperature": 0.0}
    params = RequestParams(model=model.name, voice=bench_voice(model, case.clone), fields=fields,
                           reference=reference_audio() if case.clone else None)
    return SynthesisRequest(text=TEXT, stage_input=model.adapter.stage_input(params), output=AudioOutput())


def frame_budget(family: str, frames: int) -> int:
    """The max_new_tokens that gives `frames` frames of audio: higgs-audio v2 counts, as its reference does, the opening
    all-BOS frame and the delay pattern's 7 rows, which complete no frame."""
    return frames + 8 if family == "higgs_audio_v2" else frames


async def one(model, case: Case, frames: int) -> tuple[float, float, float]:
    """(TTFA s, end-to-end s, audio s) of one request."""
    return await timed(model, make_request(model, case, frames))


async def timed(model, request) -> tuple[float, float, float]:
    """(TTFA s, end-to-end s, audio s) of `request` through the model's pipeline."""
    start = time.perf_counter()
    model.pipeline.submit(request)
    first, samples = None, 0
    async for chunk in request.output:
        first = first or time.perf_counter() - start
        samples += len(chunk)
    if request.error:
        raise request.error
    return first or 0.0, time.perf_counter() - start, samples / model.capabilities.sample_rate


async def level(model, case: Case, clients: int, rounds: int, frames: int) -> dict:
    async def caller(offset: float) -> list[tuple[float, float, float]]:
        await asyncio.sleep(offset)
        return [await one(model, case, frames) for _ in range(rounds)]

    start = time.perf_counter()
    results = [r for rs in await asyncio.gather(*(caller(0.01 * i) for i in range(clients))) for r in rs]
    wall = time.perf_counter() - start
    ttfa = sorted(r[0] for r in results)
    return {
        "concurrency": clients,
        "audio_s_per_s": sum(r[2] for r in results) / wall,
        "ttfa_p50_s": statistics.median(ttfa),
        "ttfa_p99_s": float(np.percentile(ttfa, 99)),
        "rtf_p50": statistics.median(r[1] / r[2] for r in results if r[2] > 0) if any(r[2] > 0 for r in results) else None,
    }


def bench_family(key: str, path: Path, args, levels: list[int], eager: bool = False, label: dict | None = None) -> list[dict]:
    """`key` served closed-loop at each level; each row (with `label`) has the weights, the KV cache and the device's
    peak memory."""
    case = CASES[key]
    top = max(levels)
    stages = {"0": {"device": args.device, "dtype": args.dtype, "max_num_seqs": top}, "1": {"device": args.device, "max_num_seqs": top}}
    if key == "auk":  # condition -> flow -> decode: the flow is the stage the dtype is for
        stages |= {"1": {"device": args.device, "dtype": args.dtype, "max_num_seqs": top}, "2": {"device": args.device}}
    if eager:
        stages["0"]["cuda_graph_batch_sizes"] = []
    on_device = args.device.startswith("cuda")
    if on_device:
        torch.cuda.reset_peak_memory_stats()
    model = load_model(str(path), stage_overrides=json.dumps(stages))
    watch = KVWatch(model)
    model.pipeline.observe(watch)
    memory = {"weight_bytes": model_weight_bytes(model), "kv_cache_bytes": watch.stage.cache.bytes if watch.stage else None}
    rows = []
    try:
        asyncio.run(level(model, case, 1, 1, args.frames))  # warm-up
        for clients in levels:
            watch.peak_blocks = watch.peak_running = 0
            row = asyncio.run(level(model, case, clients, args.rounds, args.frames))
            row |= {"family": key, **(label or {}), "kv_bytes_per_stream": watch.bytes_per_stream(), **memory,
                    "device_peak_bytes": torch.cuda.max_memory_allocated() if on_device else None}
            rows.append(row)
            print(_line(row), flush=True)
    finally:
        model.close()
    return rows


def _line(r: dict) -> str:
    kv = f"{r['kv_bytes_per_stream'] / 2**10:.1f}" if r["kv_bytes_per_stream"] else "-"
    rtf = f"{r['rtf_p50']:.3f}" if r["rtf_p50"] is not None else "-"
    peak = f"{r['device_peak_bytes'] / 2**30:.2f}" if r.get("device_peak_bytes") else "-"
    graphs = f" {r['graphs']} |" if "graphs" in r else ""
    return (f"| {r['family']} |{graphs} {r['concurrency']} | {r['audio_s_per_s']:.2f} | {1000 * r['ttfa_p50_s']:.0f} | "
            f"{1000 * r['ttfa_p99_s']:.0f} | {rtf} | {kv} | {r['weight_bytes'] / 2**30:.2f} | {peak} |")


SERVING_COLUMNS = "concurrency | audio-s/s | TTFA p50 ms | TTFA p99 ms | RTF p50 | KV KiB/stream | weights GiB | device peak GiB |"
SECTIONS = ("parity", "graphs", "families")
DRY_RUN = {"device": "cpu", "tiny": True, "levels": "1,2", "graph_levels": "1,2", "frames": 3, "rounds": 1, "dtype": "float32",
           "parity_dtype": "bfloat16"}
"""--dry-run: every section and path on the CPU with the tiny checkpoints, small enough for CI; only the device
calls (CUDA graphs captured, device memory read) are not made."""


class Budget:
    """The run's wall-clock allowance: work that would start after it is skipped and listed, so the command ends
    within its time (the last unit started may overrun by its own length)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.perf_counter()
        self.skipped: list[str] = []

    def allows(self, what: str) -> bool:
        if time.perf_counter() - self.start <= self.seconds:
            return True
        self.skipped.append(what)
        print(f"skipped (over the {self.seconds:.0f} s budget): {what}", flush=True)
        return False

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def checkpoint_for(key: str, args) -> Path:
    return tiny_checkpoint(key, args.work_dir) if args.tiny else build_real(key, args.work_dir, args.device)


def run_parity(args, budget: Budget) -> list[dict]:
    from bench.device_parity import PARITY_HEADER, family_rows, parity_line
    from bench.half_precision_drift import CASES as PARITY_CASES

    print(f"\n## Stages on {args.device} against the CPU in float32 (tiny checkpoints, codes forced)\n\n{PARITY_HEADER}")
    rows = []
    for family in PARITY_CASES:
        if not budget.allows(f"parity {family}"):
            continue
        try:
            found = family_rows(family, args.work_dir / "parity", args.device, args.parity_dtype)
        except Exception as error:  # a family that fails on the device is a row of the table, not the end of the run
            found = [{"family": family, "device": args.device, "dtype": "float32", "verdict": f"failed: {error!r}"}]
        for row in found:
            rows.append(row)
            print(parity_line(row), flush=True)
    return rows


def run_graphs(args, budget: Budget) -> list[dict]:
    print(f"\n## CUDA graphs on and off: {args.graph_family}\n\n| family | graphs | {SERVING_COLUMNS}\n" + "|---" * 10 + "|")
    rows = []
    if not budget.allows(f"graphs {args.graph_family}"):
        return rows
    path = checkpoint_for(args.graph_family, args)
    for eager in (False, True):
        if budget.allows(f"graphs {'off' if eager else 'on'}"):
            rows += bench_family(args.graph_family, path, args, args.graph_levels, eager, {"graphs": "off" if eager else "on"})
    return rows


def run_families(args, budget: Budget) -> list[dict]:
    print(f"\n## Every family{' (tiny)' if args.tiny else ' at real size'}\n\n| family | {SERVING_COLUMNS}\n" + "|---" * 9 + "|")
    rows = []
    for key in args.families.split(","):
        if not budget.allows(f"family {key}"):
            continue
        start = time.perf_counter()
        path = checkpoint_for(key, args)
        built = time.perf_counter() - start
        rows.extend(dict(r, build_s=built) for r in bench_family(key, path, args, args.levels))
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="every section on the CPU with the tiny checkpoints, small (CI): "
                        "every path but the device calls")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, of " + ", ".join(SECTIONS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", help="compute dtype of the autoregressive/generator stage when serving")
    parser.add_argument("--parity-dtype", default="bfloat16", help="the generator's dtype in the device check's reported run")
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoints instead of real-size random ones")
    parser.add_argument("--families", default=None, help="comma-separated; default every family (with --tiny) or "
                        "every family with a real-size build")
    parser.add_argument("--levels", default="1,8", help="the families section's concurrencies")
    parser.add_argument("--graph-family", default="qwen3-1.7b-base")
    parser.add_argument("--graph-levels", default="1,16,64", help="the CUDA-graph section's concurrencies")
    parser.add_argument("--rounds", type=int, default=2, help="requests each caller sends back to back")
    parser.add_argument("--frames", type=int, default=64, help="frames (max_new_tokens) per request")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no work after this many seconds (the last "
                        "unit started may overrun by its own length: 420 s keeps a real run within 8 minutes)")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-gpu-bench")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu.json")
    args = parser.parse_args(argv)
    if args.dry_run:
        for name, value in DRY_RUN.items():
            setattr(args, name, value)
    args.levels = [int(x) for x in str(args.levels).split(",")]
    args.graph_levels = [int(x) for x in str(args.graph_levels).split(",")]
    if args.families is None:
        args.families = ",".join(k for k in CASES if args.tiny or k not in NO_REAL_SIZES)
    sections = args.sections.split(",")
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    budget = Budget(args.budget_s)
    print(f"device {args.device}, serving dtype {args.dtype}, {'tiny' if args.tiny else 'real-size random'} checkpoints, "
          f"{args.frames} frames per request, {args.rounds} requests per caller, budget {args.budget_s:.0f} s"
          + (" (dry run)" if args.dry_run else ""))
    runs = {"parity": run_parity, "graphs": run_graphs, "families": run_families}
    result = {"device": args.device, "dtype": args.dtype, "tiny": args.tiny, "dry_run": args.dry_run, "budget_s": args.budget_s}
    for section in SECTIONS:
        if section in sections:
            result[section] = runs[section](args, budget)
    result |= {"skipped": budget.skipped, "elapsed_s": budget.elapsed()}
    print(f"\n{budget.elapsed():.0f} s" + (f"; skipped over budget: {', '.join(budget.skipped)}" if budget.skipped else ""))
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
