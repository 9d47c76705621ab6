"""NeMo NanoCodec's decoder (`nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps`), read from its `.nemo` archive as data.

A `.nemo` file is a tar of `model_config.yaml` and `model_weights.ckpt` (a torch state dict). The yaml is parsed with
yaml.safe_load (never instantiated: its `_target_` classes are not imported, NeMo is not needed), the state dict
read with weights_only=True and its weight norms folded. Only the decoder is served: `audio_encoder.*` (voice
cloning is not served), `discriminator.*` and the loss modules' buffers (training only) are declared unused; `vector_quantizer.*` holds the
FSQ levels as buffers, checked against the yaml.

Gepard's heads emit per-dimension FSQ codes (8 groups x 4 dimensions, levels [8, 7, 6, 6]): code c of a dimension
with L levels is the value (c - L // 2) / (L // 2), which is what NeMo's FSQ decode gives for the same digit of a
group's mixed-radix index. The decoder is NeMo's causal HiFi-GAN: a causal input convolution, then per upsampling
rate an activation, a grouped transposed convolution (stride = rate, kernel 2 x rate, trimmed to exactly rate x the
length) and a residual layer (the mean of one residual chain per kernel size, each chain one block per dilation:
x + skip_conv(act(input_conv(act(x))))), then an activation, a causal output convolution and tanh (or a clamp).
Every convolution is causal, so a frame's samples depend on earlier frames only: `NanoCodec.stream` decodes a
request's next frames from its `StreamState` (each convolution's last inputs, each transposed convolution's overlap
tail), equal to decoding all its frames at once, at the cost of the new frames alone.
"""

from __future__ import annotations

import io
import math
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from vocalis.stages.components.causal_stream import CausalStream, StreamState
from vocalis.stages.layers.audio_blocks import CausalConv1d, CausalConvTranspose1d, HalfSnake, Nested, ResidualUnit, Snake
from vocalis.stages.layers.weights import fold_weight_norm, load_strict

TRAINING_LOSSES = ("mel_loss_fn", "stft_loss_fn", "mmd_loss_fn", "mmd_time_loss_fn", "slm_predictor", "speaker_encoder_resampler")
"""AudioCodecModel's loss modules: NeMo's save_to keeps their buffers (mel filterbanks, STFT windows) in the state dict."""
UNUSED = (r"audio_encoder\..*", r"discriminator\..*", r"vector_quantizer\..*", rf"({'|'.join(TRAINING_LOSSES)})\..*")


@dataclass(frozen=True)
class NanoCodecConfig:
    sample_rate: int
    samples_per_frame: int
    num_groups: int
    levels_per_group: tuple[int, ...]
    input_dim: int
    up_sample_rates: tuple[int, ...]
    base_channels: int
    in_kernel_size: int
    out_kernel_size: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[int, ...]
    activation: str
    output_activation: str
    grouped_upsampling: bool

    @classmethod
    def from_yaml(cls, config: dict[str, Any]) -> NanoCodecConfig:
        decoder = config["audio_decoder"]
        quantizer = config["vector_quantizer"]
        for part, name in ((decoder, "CausalHiFiGANDecoder"), (quantizer, "GroupFiniteScalarQuantizer")):
            # HiFiGANDecoder has the same tensor names but centred padding: refuse it rather than decode it as causal
            if str(part.get("_target_", name)).rsplit(".", 1)[-1] != name:
                raise ValueError(f"NanoCodec needs a {name}, the archive has {part['_target_']}")
        if config.get("semantic_codec") or config.get("semantic_codec_path"):
            raise ValueError("codecs with a semantic codec in front of the decoder are not supported")
        made = cls(
            sample_rate=int(config["sample_rate"]),
            samples_per_frame=int(config["samples_per_frame"]),
            num_groups=int(quantizer["num_groups"]),
            levels_per_group=tuple(int(v) for v in quantizer["num_levels_per_group"]),
            input_dim=int(decoder["input_dim"]),
            up_sample_rates=tuple(int(v) for v in decoder["up_sample_rates"]),
            base_channels=int(decoder.get("base_channels", 512)),
            in_kernel_size=int(decoder.get("in_kernel_size", 7)),
            out_kernel_size=int(decoder.get("out_kernel_size", 3)),
            resblock_kernel_sizes=tuple(int(v) for v in decoder.get("resblock_kernel_sizes", (3, 7, 11))),
            resblock_dilation_sizes=tuple(int(v) for v in decoder.get("resblock_dilation_sizes", (1, 3, 5))),
            activation=str(decoder.get("activation", "lrelu")),
            output_activation=str(decoder.get("output_activation", "tanh")),
            grouped_upsampling=bool(decoder.get("n_groups_equal_to_out_channels", True)),
        )
        if made.num_groups * len(made.levels_per_group) != made.input_dim:
            raise ValueError(f"the quantizer's {made.num_groups} x {len(made.levels_per_group)} codes do not feed a decoder "
                             f"of input_dim {made.input_dim}")
        if math.prod(made.up_sample_rates) != made.samples_per_frame:
            raise ValueError(f"up_sample_rates {list(made.up_sample_rates)} do not make samples_per_frame {made.samples_per_frame}")
        if made.activation not in ACTIVATIONS or made.output_activation not in ("tanh", "clamp"):
            raise ValueError(f"unsupported activations {made.activation!r} / {made.output_activation!r}")
        return made


ACTIVATIONS = {"half_snake": HalfSnake, "snake": Snake, "lrelu": lambda channels: nn.LeakyReLU(0.01), "elu": lambda channels: nn.ELU()}


class Activation(nn.Module):
    """`activation`: the named activation (NeMo's CodecActivation wrapper, kept for its key names)."""

    def __init__(self, name: str, channels: int) -> None:
        super().__init__()
        self.activation = ACTIVATIONS[name](channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(x)

    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        return carry.run(self.activation, x)


class ResidualChain(nn.Module):
    """`res_blocks`: one residual unit per dilation, applied in turn."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...], activation: str) -> None:
        super().__init__()
        names = ("input_activation", "input_conv", "skip_activation", "skip_conv")
        self.res_blocks = nn.ModuleList(
            ResidualUnit(Activation(activation, channels), Nested(CausalConv1d(channels, channels, kernel_size, dilation=d)),
                         Activation(activation, channels), Nested(CausalConv1d(channels, channels, kernel_size)), names)
            for d in dilations
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_blocks:
            x = unit(x)
        return x

    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        return carry.run(self.res_blocks, x)


class ResidualLayer(nn.Module):
    """`res_blocks`: one chain per kernel size; their outputs are averaged."""

    def __init__(self, channels: int, kernel_sizes: tuple[int, ...], dilations: tuple[int, ...], activation: str) -> None:
        super().__init__()
        self.res_blocks = nn.ModuleList(ResidualChain(channels, k, dilations, activation) for k in kernel_sizes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum(chain(x) for chain in self.res_blocks) / len(self.res_blocks)

    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        return sum(carry.run(chain, x) for chain in self.res_blocks) / len(self.res_blocks)


class CausalHiFiGANDecoder(nn.Module):
    def __init__(self, config: NanoCodecConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.pre_conv = Nested(CausalConv1d(c.input_dim, c.base_channels, c.in_kernel_size))
        self.activations = nn.ModuleList()
        self.up_sample_conv_layers = nn.ModuleList()
        self.res_layers = nn.ModuleList()
        channels = c.base_channels
        for rate in c.up_sample_rates:
            out = channels // 2
            self.activations.append(Activation(c.activation, channels))
            self.up_sample_conv_layers.append(
                Nested(CausalConvTranspose1d(channels, out, 2 * rate, rate, groups=out if c.grouped_upsampling else 1)))
            self.res_layers.append(ResidualLayer(out, c.resblock_kernel_sizes, c.resblock_dilation_sizes, c.activation))
            channels = out
        self.post_activation = Activation(c.activation, channels)
        self.post_conv = Nested(CausalConv1d(channels, 1, c.out_kernel_size))

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """[B, input_dim, T] -> [B, T * samples_per_frame]."""
        x = self.pre_conv(latents)
        for act, up, res in zip(self.activations, self.up_sample_conv_layers, self.res_layers, strict=True):
            x = res(up(act(x)))
        return self._output(self.post_conv(self.post_activation(x))[:, 0])

    def stream(self, latents: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        """`forward` of each row's next frames, from its carry."""
        x = carry.run(self.pre_conv, latents)
        for act, up, res in zip(self.activations, self.up_sample_conv_layers, self.res_layers, strict=True):
            x = carry.run(res, carry.run(up, carry.run(act, x)))
        return self._output(carry.run(self.post_conv, carry.run(self.post_activation, x))[:, 0])

    def _output(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) if self.config.output_activation == "tanh" else x.clamp(-1.0, 1.0)


class NanoCodec(nn.Module):
    """`audio_decoder` and the per-dimension FSQ dequantisation in front of it."""

    def __init__(self, config: NanoCodecConfig) -> None:
        super().__init__()
        self.config = config
        self.audio_decoder = CausalHiFiGANDecoder(config)
        half = torch.tensor([levels // 2 for levels in config.levels_per_group] * config.num_groups, dtype=torch.float32)
        self.register_buffer("_half", half, persistent=False)

    @property
    def samples_per_frame(self) -> int:
        return self.config.samples_per_frame

    def dequantize(self, codes: torch.Tensor) -> torch.Tensor:
        """Per-dimension codes [B, T, groups x dims] to the decoder's latents [B, groups x dims, T]."""
        half = self._half.to(codes.device)
        return ((codes.float() - half) / half).transpose(1, 2)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, T, 32] to waveforms [B, T * samples_per_frame] in [-1, 1]."""
        latents = self.dequantize(codes).to(self.audio_decoder.pre_conv.conv.weight.dtype)
        return self.audio_decoder(latents)

    def stream(self, codes: torch.Tensor, states: Sequence[StreamState], frames: Sequence[int]) -> torch.Tensor:
        """Codes [B, L, 32] of each row's next frames[i] frames (right-padded to L) to their waveforms [B, L *
        samples_per_frame] (row i's first frames[i] * samples_per_frame valid), equal to those samples of decoding all
        the row's frames at once; states[i] advances past them."""
        latents = self.dequantize(codes).to(self.audio_decoder.pre_conv.conv.weight.dtype)
        samples = self.audio_decoder.stream(latents, CausalStream([state.carry for state in states], frames))
        for state, count in zip(states, frames, strict=True):
            state.frames += count
        return samples


def read_nemo(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The parsed model_config.yaml and the state dict of a `.nemo` archive."""
    config = weights = None
    with tarfile.open(path, "r:*") as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if name == "model_config.yaml":
                config = yaml.safe_load(archive.extractfile(member).read())
            elif name == "model_weights.ckpt":
                weights = torch.load(io.BytesIO(archive.extractfile(member).read()), map_location="cpu", weights_only=True)
    if config is None or weights is None:
        raise ValueError(f"{path}: a .nemo archive needs model_config.yaml and model_weights.ckpt")
    weights = weights.get("state_dict", weights)
    return config, weights


def load_nanocodec(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> NanoCodec:
    config_dict, weights = read_nemo(Path(path))
    config = NanoCodecConfig.from_yaml(config_dict)
    weights = fold_weight_norm(weights)
    for group in range(config.num_groups):
        levels = weights.get(f"vector_quantizer.fsqs.{group}.num_levels")
        if levels is not None and tuple(int(v) for v in levels.flatten()) != config.levels_per_group:
            raise ValueError(f"{path}: FSQ group {group} has levels {levels.flatten().tolist()}, the yaml says {list(config.levels_per_group)}")
    codec = load_strict(NanoCodec(config), weights, path, unused=UNUSED)
    return codec.to(device=device, dtype=dtype).eval()
