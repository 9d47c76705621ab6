"""Goldens of CosyVoice3's prompt tokenization from the `s3tokenizer` package (its Whisper log-mel and a tiny
random-weight `S3TokenizerV3`, exported to ONNX with the published inputs), so that the family's ONNX frontend path
(our log-mel, onnxruntime, the input layout) is checked against the package vLLM-Omni tokenizes prompts with.

Run in a reference venv with torch and s3tokenizer 0.3.0 (torchaudio is only used by s3tokenizer's file loader and is
stubbed here):

    /tmp/cosy-ref/bin/python tests/goldens/cosyvoice3/make_tokenizer_goldens.py

writes speech_tokenizer_v3_tiny.onnx and tokenizer_goldens.safetensors beside this script.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import torch

sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
import s3tokenizer  # noqa: E402
import s3tokenizer.model_v2 as model_v2  # noqa: E402
from s3tokenizer.model_v3 import ModelConfigV3, S3TokenizerV3  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

HERE = Path(__file__).parent


def clip(seconds: float = 3.2, rate: int = 16000, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    return (0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t) + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


class Exported(torch.nn.Module):
    def __init__(self, model: S3TokenizerV3) -> None:
        super().__init__()
        self.model = model

    def forward(self, feats: torch.Tensor, feats_length: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.model.encoder(feats, feats_length.long())
        return self.model.quantizer.encode(hidden).int()


def _real_rotary(xq, xk, freqs_cis):
    """s3tokenizer's apply_rotary_emb on a real [T, D, 2] table (the tracer cannot export complex constants)."""
    cos, sin = freqs_cis[..., 0][None, :, None].to(xq.dtype), freqs_cis[..., 1][None, :, None].to(xq.dtype)

    def turn(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return xq * cos + turn(xq) * sin, xk * cos + turn(xk) * sin


def main() -> None:
    torch.manual_seed(0)
    model = S3TokenizerV3("tiny", ModelConfigV3(n_mels=128, n_audio_state=64, n_audio_head=1, n_audio_layer=1)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn_like(parameter) / max(parameter.shape[-1], 1) ** 0.5)
    audio = torch.from_numpy(clip())
    mel = s3tokenizer.log_mel_spectrogram(audio, n_mels=128)
    with torch.no_grad():
        codes, _ = model.quantize(mel[None], torch.tensor([mel.shape[1]]))
        model.encoder.freqs_cis = torch.view_as_real(model.encoder.freqs_cis)  # the same table, as real pairs
        model_v2.apply_rotary_emb = _real_rotary
        for module in sys.modules.values():
            if getattr(module, "__name__", "").startswith("s3tokenizer") and hasattr(module, "apply_rotary_emb"):
                module.apply_rotary_emb = _real_rotary
        check, _ = model.quantize(mel[None], torch.tensor([mel.shape[1]]))
        assert torch.equal(check, codes)
        torch.onnx.export(Exported(model), (mel[None], torch.tensor([mel.shape[1]], dtype=torch.int32)),
                          str(HERE / "speech_tokenizer_v3_tiny.onnx"), input_names=["feats", "feats_length"],
                          output_names=["indices"], dynamic_axes={"feats": {2: "T"}, "indices": {1: "N"}}, dynamo=False)
    save_file({"mel": mel.contiguous(), "tokens": codes[0].to(torch.int64).contiguous()}, str(HERE / "tokenizer_goldens.safetensors"))
    print(mel.shape, codes.shape, codes[0, :20].tolist())


if __name__ == "__main__":
    main()
