"""Goldens of GLM-TTS's speech tokenizer path on the tiny checkpoint's speech_tokenizer/, from transformers.

The published tokenizer is a modified Whisper (WhisperVQ) that no package ships; its parts that transformers has are
the oracle here: `WhisperFeatureExtractor` (128 mels, padded to whole tokens, as the published frontend calls it) and
`WhisperEncoderLayer` (loaded with the file's `model.encoder.layers.*`). The glue between them (convolutions, position
table, block-causal mask over valid frames, 2x average pooling, nearest-code search) is the published encoder's
forward as read, written here independently of stages/models/glm_tts/speech_tokenizer.py. Run in the reference venv:

    .venv/bin/python -m tests.goldens.glm_tts.tiny /tmp/glm-tiny
    /work/refvenv/tf/bin/python tests/goldens/glm_tts/make_tokenizer_goldens.py /tmp/glm-tiny

writes tokenizer_goldens.safetensors beside this script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import WhisperConfig, WhisperFeatureExtractor
from transformers.models.whisper.modeling_whisper import WhisperEncoderLayer

HERE = Path(__file__).parent


def clip(seconds: float = 1.5) -> np.ndarray:
    """A voiced-sounding clip at 16 kHz with noise bursts (numpy's seeded PCG64, so the test rebuilds it exactly)."""
    t = np.arange(int(seconds * 16000), dtype=np.float64) / 16000
    wave = 0.3 * np.sin(2 * np.pi * 170 * t + 3 * np.sin(2 * np.pi * 1.5 * t)) * (0.6 + 0.4 * np.sin(2 * np.pi * 2.5 * t))
    noise = np.random.default_rng(0).standard_normal(len(t)) * 0.2 * (np.sin(2 * np.pi * 3 * t) > 0.5)
    return (wave + noise).astype(np.float32)


def main(checkpoint: Path) -> None:
    folder = checkpoint / "speech_tokenizer"
    config = json.loads((folder / "config.json").read_text())
    state = load_file(str(folder / "model.safetensors"))
    audio = clip()
    extractor = WhisperFeatureExtractor(feature_size=config["num_mel_bins"])
    features = extractor(audio, sampling_rate=16000, padding="longest", pad_to_multiple_of=640, return_attention_mask=True,
                         return_tensors="pt")
    mel, attention = features.input_features, features.attention_mask
    whisper = WhisperConfig(d_model=config["d_model"], encoder_attention_heads=config["encoder_attention_heads"],
                            encoder_ffn_dim=config["encoder_ffn_dim"], activation_function="gelu")
    whisper._attn_implementation = "eager"
    p = "model.encoder."
    with torch.no_grad():
        x = F.gelu(F.conv1d(mel, state[p + "conv1.weight"], state[p + "conv1.bias"], padding=1))
        x = F.gelu(F.conv1d(x, state[p + "conv2.weight"], state[p + "conv2.bias"], stride=2, padding=1)).permute(0, 2, 1)
        x = x + state[p + "embed_positions.weight"][: x.shape[1]]
        valid = attention[:, ::2]

        def additive(valid_keys: torch.Tensor, block: int) -> torch.Tensor:
            n = valid_keys.shape[1]
            causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
            blocks = torch.block_diag(*[torch.ones(min(block, n - s), min(block, n - s), dtype=torch.bool) for s in range(0, n, block)])
            allowed = (causal | blocks) & valid_keys[:, None, :].bool()
            return ((1.0 - allowed.float()) * torch.finfo(torch.float32).min)[:, None]

        mask = additive(valid, config["quantize_causal_block_size"])
        for i in range(config["quantize_position"]):
            layer = WhisperEncoderLayer(whisper).eval()
            layer.load_state_dict({k[len(f"{p}layers.{i}."):]: v for k, v in state.items() if k.startswith(f"{p}layers.{i}.")})
            x = layer(x, mask)
            x = x[0] if isinstance(x, tuple) else x
            if i + 1 == config["pooling_position"]:
                h = x.permute(0, 2, 1)
                if h.shape[-1] % 2:
                    h = F.pad(h, (0, 1))
                x = F.avg_pool1d(h, 2).permute(0, 2, 1)
                valid = valid[:, ::2]
                mask = additive(valid, config["quantize_causal_block_size"] // 2)
        flat = x.reshape(-1, x.shape[-1])
        codebook = state[p + "codebook.weight"]
        distances = torch.addmm(codebook.pow(2).sum(1) + flat.pow(2).sum(1, keepdim=True), flat, codebook.t(), alpha=-2.0, beta=1.0)
        tokens = distances.argmin(dim=1)[valid.reshape(-1).bool()]
    save_file({"features": mel[0].contiguous(), "tokens": tokens.contiguous()}, str(HERE / "tokenizer_goldens.safetensors"))
    print(len(tokens), tokens.tolist())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
