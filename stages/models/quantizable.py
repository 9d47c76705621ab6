"""The one place a model's `quantize` and `packed_linears` deploy settings are applied, and the record of what was
quantised.

Each family's loader declares, per stage, the generator modules that may be quantised and the linears to keep in
float (`Quantizable`), and passes them to `quantize_stages` once; the names of the stages it quantised are the loaded
model's `LoadedModel.quantized`, from which `load_model` (registry.py) refuses a deploy that asks to quantise any other
stage, naming it, rather than serving it in float silently.

Why the loader calls it, and not `load_model` after the loader returns: the loader builds its stages before it returns,
and an autoregressive stage allocates its KV cache when it is built (1-2 GiB by default, zeroed, so resident).
Quantising after that would hold the float weights and the whole cache at once (the peak memory of a load up by the
KV budget), and on a GPU a `kv_cache_fraction` would be taken of the memory left beside the float weights. So the call
sits where the stage's weights are final (loaded, in their dtype, on their device) and nothing has been built from them
yet. Imports torch: the registry does not import this module (the Piper-only install has no torch).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from vocalis.stages.layers.int4_decode_linear import Int4DecodeLinear
from vocalis.stages.layers.int4_linear import Int4WeightLinear
from vocalis.stages.layers.int8_linear import Int8DynamicLinear
from vocalis.stages.layers.packed_linear import PackedLinear
from vocalis.stages.layers.quantized_linear import QuantizedLinear, replace_linears
from vocalis.stages.runtime.deploy import DeployConfig
from vocalis.stages.runtime.freed_memory import give_back_freed

KERNELS: dict[str, type[QuantizedLinear]] = {"int8-dynamic": Int8DynamicLinear, "int4-weight": Int4WeightLinear,
                                             "int4-decode": Int4DecodeLinear}
"""The linear each `quantize` choice but none puts in place (weight_quantization.QUANTIZE_CHOICES says what each does)."""


@dataclass(frozen=True)
class Quantizable:
    """The modules of one stage that its `quantize` deploy setting applies to."""

    stage: str
    """The stage's name in the family's deploy file."""
    modules: tuple[nn.Module, ...]
    """The generator modules whose nn.Linear layers are quantised (embeddings, norms and convolutions stay)."""
    keep: tuple[nn.Module, ...] = ()
    """Linears under `modules` left in float: those whose weight the family reads directly (a head whose rows are
    read as a matrix, a dtype or device read from its weight)."""

    @classmethod
    def flow_dit(cls, stage: str, dit: nn.Module) -> Quantizable:
        """A flow-matching DiT's stage (AuK's, CosyVoice3's, GLM-TTS's): every linear but the two its dtype is read
        from, its output projection (by the solvers) and its time MLP's first layer (by the shared time embedding)."""
        return cls(stage, (dit,), keep=(dit.proj_out, dit.time_embed.time_mlp[0]))


def quantize_stages(deploy: DeployConfig, *declared: Quantizable) -> frozenset[str]:
    """Apply each declared stage's `quantize` deploy setting to its modules, in place; the names of the stages
    quantised (`LoadedModel.quantized`). A stage that the deploy asks to quantise and `declared` does not name is left
    as it is, for load_model to refuse."""
    quantized: set[str] = set()
    for item in declared:
        stage = deploy.stage(item.stage)
        if stage.quantize != "none":
            if not replace_linears(*item.modules, kind=KERNELS[stage.quantize], keep=item.keep):
                raise ValueError(f"stage {item.stage!r}: quantize {stage.quantize} found no linear layer to quantise")
            quantized.add(item.stage)
        if stage.packed_linears:  # what is left in float; PackedLinear takes CPU linears only
            # Each packed weight is a new block beside the one it replaces, and glibc reuses few of the freed ones for
            # the next (other sizes, joined): given back one by one, the load's peak stays the unpacked model's.
            replace_linears(*item.modules, kind=PackedLinear, keep=item.keep, after_each=give_back_freed)
    return frozenset(quantized)
