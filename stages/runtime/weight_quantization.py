"""Which weight quantisations a stage may ask for, and which of the stages asked were not quantised.

`quantize` is a per-stage deploy setting (stages/runtime/deploy.py). A family's loader declares the modules of each
stage it can quantise and applies the setting to them (stages/models/quantizable.py, with the kernel of
stages/layers/int8_linear.py); the loaded model records the stages quantised (`LoadedModel.quantized`), and
`load_model` refuses a model whose config asks to quantise any other stage, naming it (`unapplied`), rather than
serving it in float silently. Torch-free: the Piper-only install imports it.
"""

from __future__ import annotations

from collections.abc import Collection

QUANTIZE_CHOICES = ("none", "int8-dynamic", "int4-weight", "int4-decode")
"""none: the stage's weights in its `dtype`. int8-dynamic: every nn.Linear of the stage's generator holds int8
weights (symmetric, one scale per output channel) and quantises its input per row at each call (int8 x int8 -> int32
matmul, rescaled to the stage's dtype). int4-weight: every nn.Linear of a shape the kernel takes (inputs in multiples
of 32, outputs of 16) holds int4 weights (a scale and zero point per 32 inputs and output channel) and multiplies its
input in bfloat16; faster than int8-dynamic at a few rows (a decode step), slower at many (a long prompt).
int4-decode: both, each linear held as int4 and as int8, a call of up to 8 rows through the int4 weights and a larger
one through the int8 (the faster of the two at each size, for the memory of both). Embeddings, norms and
convolutions keep the stage's dtype."""


def unapplied(requested: dict[str, str], applied: Collection[str]) -> list[str]:
    """The stages whose deploy asked for a quantisation (`requested`: stage name -> choice) that was not applied."""
    return [name for name, choice in requested.items() if choice != "none" and name not in applied]
