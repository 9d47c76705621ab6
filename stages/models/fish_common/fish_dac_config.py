"""The geometry of Fish Audio's modified DAC (S2 Pro's `codec.pth`, reused by Drama 3).

`codec.pth` is a bare state dict with no configuration beside it; its geometry is fixed by fish-speech's
`modded_dac_vq.yaml` and the code that reads it, which are the defaults here. A checkpoint directory may hold a
`codec_config.json` with any of these fields to override them (the tiny test codecs do; the published repository
has none).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

SIDECAR = "codec_config.json"


@dataclass(frozen=True)
class FishDACConfig:
    sample_rate: int = 44100
    encoder_dim: int = 64
    """Channels of the first encoder convolution; doubled by each encoder block."""
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    encoder_transformer_layers: tuple[int, ...] = (0, 0, 0, 4)
    encoder_window: int = 512
    """Attention window of the encoder blocks' transformers (fixed in the reference's code)."""
    decoder_dim: int = 1536
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    head_dim: int = 64
    """Head size of the encoder transformers, whose head count is their width / head_dim."""
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    semantic_codebook_size: int = 4096
    n_codebooks: int = 9
    """Residual codebooks after the semantic one."""
    codebook_size: int = 1024
    codebook_dim: int = 8
    downsample_factor: tuple[int, ...] = (2, 2)
    """Extra time downsampling inside the quantiser (strided convolutions, undone by transposed ones)."""
    quantizer_layers: int = 8
    quantizer_heads: int = 16
    quantizer_dim: int = 1024
    quantizer_intermediate: int = 3072
    quantizer_head_dim: int = 64
    quantizer_window: int = 128
    """Attention window (in frames) of the quantiser's pre- and post-transformers."""

    @property
    def latent_dim(self) -> int:
        return self.encoder_dim * 2 ** len(self.encoder_rates)

    @property
    def hop_length(self) -> int:
        """Samples per encoder step."""
        return math.prod(self.encoder_rates)

    @property
    def samples_per_frame(self) -> int:
        """Samples per code frame (2048 at 44.1 kHz: ~21.5 frames/s)."""
        return self.hop_length * math.prod(self.downsample_factor)

    @property
    def num_codebooks(self) -> int:
        """Codes per frame: the semantic one and the residual ones."""
        return 1 + self.n_codebooks

    @classmethod
    def for_checkpoint(cls, directory: Path) -> FishDACConfig:
        """The defaults, overridden by `codec_config.json` in `directory` when there is one."""
        path = Path(directory) / SIDECAR
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text())
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown fields {unknown}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)
