"""The sizes a transformer stack's config.json publishes under transformers' Llama/Qwen names, declared and read once
for every family config that holds such a stack: `TransformerSizes` for any stack (a codec's transformer, an audio
encoder's), `DecoderSizes` for a decoder-only language model over a vocabulary (a backbone, a talker, a code
predictor). The values come from the checkpoint's own file, never from a default written here: a published config
always carries them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from vocalis.stages.api.config_json import from_json

SizesT = TypeVar("SizesT", bound="TransformerSizes")


@dataclass(frozen=True)
class TransformerSizes:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int

    @classmethod
    def read(cls: type[SizesT], data: Mapping[str, Any] | None, where: str, *, aliases: Mapping[str, str] | None = None,
             **sections: Any) -> SizesT:
        """`cls` from one config.json object, strictly (`from_json`'s `where`), with transformers' rules for the two
        sizes a file may leave out: `num_key_value_heads` is `num_attention_heads` (no grouped-query attention) and
        `head_dim` is `hidden_size // num_attention_heads`. `aliases` map a publisher's own spelling (Fish Audio's
        `dim`, `n_head`) to these names; `sections` win over the file, as in `from_json`."""
        data = data or {}
        named = {aliases[k]: v for k, v in data.items() if aliases and k in aliases} | dict(data)
        heads, hidden = named.get("num_attention_heads"), named.get("hidden_size")
        implied: dict[str, Any] = {}
        if named.get("num_key_value_heads") is None and heads is not None:
            implied["num_key_value_heads"] = heads
        if not named.get("head_dim") and isinstance(heads, int) and isinstance(hidden, int) and heads:
            implied["head_dim"] = hidden // heads
        return from_json(cls, named, where=where, **(implied | sections))


@dataclass(frozen=True)
class DecoderSizes(TransformerSizes):
    vocab_size: int
