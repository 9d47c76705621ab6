"""Deploy configuration: how each stage of a model runs (batch bounds, chunking, dtype, device, threads).

Each family ships a YAML of defaults beside its code; `--deploy-config PATH` merges
a YAML of the same shape over it, stage by stage, and `--stage-overrides JSON`
merges last, keyed by stage index or name: '{"1": {"max_num_seqs": 4}}'.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.weight_quantization import QUANTIZE_CHOICES


@dataclass(frozen=True)
class StageDeploy:
    name: str
    max_num_seqs: int = 16
    """Most requests in one step's batch (and, for autoregressive stages, KV-cache slots)."""
    max_num_batched_tokens: int = 2048
    """Token budget of one autoregressive step (prefill chunks plus decodes)."""
    max_len: int = 4096
    """Most positions (prompt + generated) of one sequence in an autoregressive stage."""
    kv_cache_bytes: int = 0
    """KV-cache memory of an autoregressive stage, in bytes. 0: kv_cache_fraction, or else room for
    max_num_seqs sequences of max_len."""
    kv_cache_fraction: float = 0.0
    """KV-cache memory as a fraction of the device's free memory (the machine's on CPU); used when kv_cache_bytes is 0."""
    kv_block_size: int = 16
    """Positions per KV-cache block."""
    dtype: str = "float32"
    """The stage's weights and compute: float32 (the parity path), bfloat16 or float16. On a CPU without native
    instructions for a half precision the stage still runs, slower than float32, with a warning (cpu_features)."""
    quantize: str = "none"
    """Weight quantisation of the stage's generator: one of weight_quantization.QUANTIZE_CHOICES (what each does is
    said there); CPU only. Families that cannot quantise a stage refuse it at load."""
    packed_linears: bool = True
    """On a CPU, the linears of the stage's quantisable modules (a generator's, a flow's DiT) that `quantize` leaves in
    float (all of them under none) hold their weights in oneDNN's layout and run its product
    (stages/layers/packed_linear.py): the same dtype, in float32 1.6-3.9x faster than nn.Linear's BLAS product at the
    rows of a decode step here (bfloat16 1.0-1.35x). false: nn.Linear as loaded. No effect on a GPU."""
    device: str = "cpu"
    threads: int = 0
    """Intra-op threads (ONNX sessions per stage; torch's pool is per process). 0: the library's default."""
    first_chunk_frames: int = 1
    chunk_frames: int = 25
    left_context_frames: int = 25
    lookahead_frames: int = 0
    chunk_growth: float = 1.0
    max_chunk_frames: int = 100
    chunk_hold_ms: float = 20.0
    """A chunked decoder stage: how long a ready chunk (not a request's first or last) may wait for other requests'
    chunks while fewer than half of the requests have one ready, so that one decoder call covers more of them (the
    calls' fixed cost is paid once per batch). 0: every chunk is decoded as soon as it can be."""
    prompt_cache_bytes: int = 0
    """A chunked decoder stage that streams a voice's prompt through attention it holds (CosyVoice3's flow): bytes of
    recent voices' prompt work kept (the DiT's keys and values of the prompt's final frames, ~360 MB for a 3-s clip
    at real size in float32), so that a voice's later requests start after it. 0: none kept. Other stages have no
    such work: a family refuses the setting on them (`ModelFamily.prompt_cache_stages`)."""
    min_tokens_per_text_token: float = 0.0
    """An autoregressive stage whose family bounds its output by the text's length (GLM-TTS): at least this many tokens
    per text token before a stop is allowed. 0: the family's default."""
    max_tokens_per_text_token: float = 0.0
    """... and at most this many (before max_new_tokens and max_len). 0: the family's default."""
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    """Batch sizes at which an autoregressive stage captures its decode step as a CUDA graph (a batch is padded up to
    the next one; larger batches run eagerly), e.g. [1, 2, 4, 8, 16]. Used on a CUDA device only; empty: off."""
    weights_dir: str = ""
    """A second directory this stage loads weights from, where a model is published in two parts (AuK served from
    its upstream directory: the condition stage's Qwen2.5-Omni-3B snapshot). Empty: none."""

    def chunk_policy(self) -> ChunkPolicy:
        return ChunkPolicy(
            first_chunk_frames=self.first_chunk_frames,
            chunk_frames=self.chunk_frames,
            left_context_frames=self.left_context_frames,
            lookahead_frames=self.lookahead_frames,
            growth=self.chunk_growth,
            max_chunk_frames=self.max_chunk_frames,
            max_hold_s=self.chunk_hold_ms / 1000,
        )

    def kv_cache_options(self) -> dict[str, int | float]:
        """The KV-cache keyword arguments of AutoregressiveStage."""
        return {"kv_cache_bytes": self.kv_cache_bytes, "kv_cache_fraction": self.kv_cache_fraction, "block_size": self.kv_block_size}

    def graph_options(self) -> dict[str, tuple[int, ...]]:
        """The CUDA-graph keyword arguments of AutoregressiveStage: the batch sizes on a CUDA device, none elsewhere."""
        if self.cuda_graph_batch_sizes and self.device.startswith("cuda"):
            return {"cuda_graph_batch_sizes": self.cuda_graph_batch_sizes}
        return {}

    @property
    def torch_dtype(self):  # -> torch.dtype, imported lazily: Piper-only servers need no torch here
        import torch

        dtype = getattr(torch, self.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {self.dtype!r}")
        return dtype


_KEYS = {f.name for f in fields(StageDeploy)}


@dataclass(frozen=True)
class DeployConfig:
    stages: tuple[StageDeploy, ...]

    def stage(self, name: str) -> StageDeploy:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage {name!r} in the deploy config; stages: {[s.name for s in self.stages]}")


def load_deploy(defaults: Path, config_path: Path | None = None, overrides: str | dict[str, Any] | None = None) -> DeployConfig:
    """The family's defaults, with `config_path` merged over them, then `overrides`."""
    stages = [_stage(entry, str(defaults)) for entry in _read(defaults)]
    if config_path is not None:
        for entry in _read(config_path):
            name = entry.get("name")
            index = _index(stages, str(name), str(config_path))
            stages[index] = _merge(stages[index], entry, str(config_path))
    if overrides:
        parsed = json.loads(overrides) if isinstance(overrides, str) else overrides
        if not isinstance(parsed, dict):
            raise ValueError("--stage-overrides must be a JSON object keyed by stage index or name")
        for key, values in parsed.items():
            if not isinstance(values, dict):
                raise ValueError(f"--stage-overrides[{key!r}] must be an object")
            index = int(key) if str(key).isdigit() else _index(stages, str(key), "--stage-overrides")
            if not 0 <= index < len(stages):
                raise ValueError(f"--stage-overrides: no stage {index}; there are {len(stages)}")
            stages[index] = _merge(stages[index], values, "--stage-overrides")
    return DeployConfig(tuple(stages))


def _read(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
        raise ValueError(f"{path}: expected a mapping with a 'stages' list")
    return data["stages"]


def _stage(entry: dict[str, Any], where: str) -> StageDeploy:
    if "name" not in entry:
        raise ValueError(f"{where}: every stage needs a name")
    return _merge(StageDeploy(name=entry["name"]), entry, where)


def _merge(stage: StageDeploy, values: dict[str, Any], where: str) -> StageDeploy:
    unknown = sorted(set(values) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown stage settings {unknown}; known: {sorted(_KEYS - {'name'})}")
    merged = dataclasses.replace(stage, **{k: v for k, v in values.items() if k != "name"})
    for field in fields(StageDeploy):
        value = getattr(merged, field.name)
        if field.type == "tuple[int, ...]":
            if not isinstance(value, list | tuple) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
                raise ValueError(f"{where}: {stage.name}.{field.name} must be a list of positive integers, got {value!r}")
            merged = dataclasses.replace(merged, **{field.name: tuple(value)})
            continue
        if field.type == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where}: {stage.name}.{field.name} must be true or false, got {value!r}")
            continue
        expected = float if field.type == "float" else int if field.type == "int" else str
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ValueError(f"{where}: {stage.name}.{field.name} must be {expected.__name__}, got {value!r}")
    if merged.quantize not in QUANTIZE_CHOICES:
        raise ValueError(f"{where}: {stage.name}.quantize must be one of {list(QUANTIZE_CHOICES)}, got {merged.quantize!r}")
    if merged.quantize != "none" and not merged.device.startswith("cpu"):
        raise ValueError(f"{where}: {stage.name}.quantize {merged.quantize!r} runs on a CPU only (device {merged.device!r}); "
                         "on a GPU use dtype bfloat16")
    return merged


def _index(stages: list[StageDeploy], name: str, where: str) -> int:
    for i, stage in enumerate(stages):
        if stage.name == name:
            return i
    raise ValueError(f"{where}: no stage named {name!r}; stages: {[s.name for s in stages]}")
