"""DecoderSizes.read: the published sizes read strictly, transformers' rules for the two a file may leave out, and a
publisher's own spelling through aliases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vocalis.stages.api.decoder_sizes import DecoderSizes, TransformerSizes

LLAMA = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}


@dataclass(frozen=True)
class Backbone(DecoderSizes):
    rope_theta: float = 10000.0


def test_key_value_heads_and_head_dim_follow_transformers_when_left_out():
    sizes = Backbone.read(LLAMA, "llm")
    assert (sizes.num_key_value_heads, sizes.head_dim) == (4, 16)
    assert Backbone.read(LLAMA | {"num_key_value_heads": 2, "head_dim": 8}, "llm").head_dim == 8
    assert Backbone.read(LLAMA | {"head_dim": None}, "llm").head_dim == 16


def test_a_missing_or_mistyped_size_is_named():
    with pytest.raises(ValueError, match=r"llm\.vocab_size is missing"):
        Backbone.read({k: v for k, v in LLAMA.items() if k != "vocab_size"}, "llm")
    with pytest.raises(ValueError, match=r"llm\.hidden_size must be"):
        Backbone.read(LLAMA | {"hidden_size": 64.5}, "llm")


def test_a_publishers_spelling_reads_through_aliases_and_sections_win():
    fish = {"vocab_size": 100, "dim": 64, "intermediate_size": 128, "n_layer": 2, "n_head": 4, "n_local_heads": 1}
    aliases = {"dim": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "n_local_heads": "num_key_value_heads"}
    sizes = Backbone.read(fish, "text_config", aliases=aliases, rope_theta=5.0)
    assert (sizes.hidden_size, sizes.num_key_value_heads, sizes.head_dim, sizes.rope_theta) == (64, 1, 16, 5.0)


def test_a_stack_without_a_vocabulary_reads_the_same_sizes():
    sizes = TransformerSizes.read({k: v for k, v in LLAMA.items() if k != "vocab_size"}, "decoder_config")
    assert sizes == TransformerSizes(64, 128, 2, 4, 4, 16)
