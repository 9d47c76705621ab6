"""Loading CosyVoice3 as published: the real key set, strict loading, detection, every tensor mattering, and the
ONNX frontend (speaker embedding, prompt tokens, prompt mel; kept per clip)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.stages.models.cosyvoice3.conftest import reference_clip
from tests.tolerance import log_power_bound, rounding_bound
from vocalis.stages.api import family as families
from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
from vocalis.stages.models.cosyvoice3.frontend import Frontend
from vocalis.stages.models.cosyvoice3.lm import CosyVoice3LM
from vocalis.stages.models.cosyvoice3.weights import build_flow, build_hift, hift_weights, load_modules

GOLDENS = Path(__file__).parents[3] / "goldens" / "cosyvoice3"
REAL = json.loads((GOLDENS / "real_keys.json").read_text())


def folded(keys: dict[str, list[int]]) -> dict[str, tuple[int, ...]]:
    """The published names as the loader sees them after folding weight norm."""
    out = {}
    for name, shape in keys.items():
        if name.endswith("parametrizations.weight.original0"):
            continue
        out[name.replace("parametrizations.weight.original1", "weight")] = tuple(shape)
    return out


@pytest.mark.parametrize("file", ["llm.pt", "flow.pt", "hift.pt"])
def test_modules_at_real_size_have_the_published_key_set(file):
    config = CosyVoice3Config.from_dir(GOLDENS / "real")
    with torch.device("meta"):
        module = {"llm.pt": lambda: CosyVoice3LM(config.qwen, config.lm), "flow.pt": lambda: build_flow(config),
                  "hift.pt": lambda: build_hift(config)}[file]()
    ours = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    expected = folded(REAL[file])
    if file == "llm.pt":
        expected.pop("llm.model.lm_head.weight")  # declared unused (lm.UNUSED_KEYS): the speech LM decodes through llm_decoder
    assert ours == expected


def test_tiny_files_use_the_published_names(tiny_checkpoint):
    def normalise(keys):
        return {re.sub(r"\.\d+\.", ".N.", k) for k in keys}

    for file in ("llm.pt", "flow.pt", "hift.pt"):
        tiny = torch.load(tiny_checkpoint / file, weights_only=True)
        assert normalise(tiny) == normalise(REAL[file]), file


def test_strict_loading_names_missing_and_unexpected_keys(tiny_checkpoint, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_checkpoint, broken)
    state = torch.load(broken / "flow.pt", weights_only=True)
    state["decoder.estimator.extra.weight"] = state.pop("decoder.estimator.proj_out.weight")
    torch.save(state, broken / "flow.pt")
    with pytest.raises(ValueError, match=r"missing \['decoder.estimator.proj_out.weight'\], unexpected \['decoder.estimator.extra.weight'\]"):
        load_modules(broken)


def test_hift_prefix_and_weight_norm_spellings_load_alike(tiny_checkpoint, tmp_path):
    state = torch.load(tiny_checkpoint / "hift.pt", weights_only=True)
    torch.save({"generator." + k: v for k, v in state.items()}, tmp_path / "hift.pt")
    assert all(torch.equal(a, b) for a, b in zip(hift_weights(tmp_path / "hift.pt").values(), hift_weights(tiny_checkpoint / "hift.pt").values(), strict=True))


def test_detected_by_file_set_or_model_type(tiny_checkpoint, tmp_path):
    families.discover()
    assert not (tiny_checkpoint / "config.json").exists()
    assert families.family_for_checkpoint(tiny_checkpoint).name == "cosyvoice3"
    other = tmp_path / "with-config"
    shutil.copytree(tiny_checkpoint, other)
    (other / "config.json").write_text(json.dumps({"model_type": "cosyvoice3"}))
    (other / "campplus.onnx").unlink()
    assert families.family_for_checkpoint(other).name == "cosyvoice3"


def changed_everywhere(module: torch.nn.Module, run, unused: tuple[str, ...] = ()) -> list[str]:
    """Names of tensors whose perturbation leaves `run()` unchanged."""
    base = run()
    inert = []
    with torch.inference_mode():
        for name, tensor in module.state_dict(keep_vars=True).items():
            if name in unused:
                continue
            saved = tensor.detach().clone()
            tensor.data.add_(0.05 * (torch.rand_like(saved) + 0.5))
            if torch.equal(run(), base):
                inert.append(name)
            tensor.data.copy_(saved)
    return inert


def test_every_loaded_tensor_changes_the_output(modules):
    lm, flow, hift = modules.lm, modules.flow, modules.hift
    embeds_ids = ([72, 101, 108], [5, 9, 33, 12])

    def lm_out():
        return lm.logits(lm.dense(lm.prompt_embeds(*embeds_ids)[None]))

    assert changed_everywhere(lm, lm_out, unused=("llm.model.lm_head.weight",)) == []
    tokens, prompt = torch.tensor([[3, 60, 17, 8, 41, 22]]), torch.tensor([[5, 9, 33]])
    prompt_mel, embedding = torch.randn(1, 6, 80, generator=torch.Generator().manual_seed(1)), torch.randn(1, 192)

    def flow_out():
        return flow.inference(tokens, prompt, prompt_mel, embedding, n_timesteps=2)

    assert changed_everywhere(flow, flow_out) == []
    mel = torch.randn(1, 80, 6, generator=torch.Generator().manual_seed(2)) - 3

    def hift_out():
        return hift(mel)

    assert changed_everywhere(hift, hift_out) == []


def test_frontend_encodes_a_clip_once(tiny_checkpoint, modules):
    frontend = Frontend(tiny_checkpoint, modules.config)
    clip = reference_clip(3.2)
    prompt = frontend.prompt(clip, 16000)
    assert prompt.embedding.shape == (192,) and prompt.embedding.abs().sum() > 0
    assert len(prompt.speech_tokens) == 80 and all(0 <= t < 64 for t in prompt.speech_tokens)  # 25 Hz
    assert prompt.mel.shape == (160, 80)  # 50 Hz, two frames per token
    assert frontend.prompt(clip.copy(), 16000) is prompt and len(frontend.cache) == 1
    with pytest.raises(ValueError, match="at most 30 s"):
        frontend.prompt(np.zeros(16000 * 31, dtype=np.float32), 16000)


def test_prompt_tokens_match_s3tokenizer(tiny_checkpoint, modules, tmp_path):
    """Our Whisper log-mel against s3tokenizer's (whose filters are Whisper's own), and the frontend's ONNX path on a
    tiny random S3TokenizerV3 exported from s3tokenizer 0.3.0 (make_tokenizer_goldens.py): the same tokens."""
    from safetensors.torch import load_file

    from vocalis.stages.components.speech_features import whisper_log_mel

    golden = load_file(str(GOLDENS / "tokenizer_goldens.safetensors"))
    clip = reference_clip(3.2)
    # (log10 of the mel power + 4) / 4, the power from a 400-point FFT through 201-bin filters
    tolerance = log_power_bound(10 ** (4 * golden["mel"].double() - 4), 0, 400 + 201) / (4 * torch.tensor(10.0).log())
    assert ((whisper_log_mel(torch.from_numpy(clip)) - golden["mel"]).abs() <= tolerance).all()
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, checkpoint)
    shutil.copy(GOLDENS / "speech_tokenizer_v3_tiny.onnx", checkpoint / "speech_tokenizer_v3.onnx")
    assert Frontend(checkpoint, modules.config).speech_tokens(clip) == golden["tokens"].tolist()


def test_speaker_features_match_torchaudio_kaldi_fbank():
    from safetensors.torch import load_file

    from vocalis.stages.components.speech_features import kaldi_fbank

    golden = load_file(str(GOLDENS / "fbank_goldens.safetensors"))["fbank"]
    ours = kaldi_fbank(torch.from_numpy(reference_clip(3.2)))
    # log mel energies, each from a 512-point FFT through 257-bin filters; torchaudio builds its filters in float32
    # from mel values up to 1127 ln(1 + 8000 / 700) = 2840 over bins (2840 - 31) / 81 = 35 mel wide: four roundings
    # (divide, add, log, multiply) of the mel scale, relative to a bin's width, off every weight (and energy)
    banks = rounding_bound(torch.float32, 2840 / 35, 4)
    tolerance = log_power_bound(golden.exp(), 1, 512 + 257) + banks
    assert ours.shape == golden.shape and ((ours - golden).abs() <= tolerance).all()
