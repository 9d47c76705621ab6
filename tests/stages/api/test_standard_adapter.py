"""The standard adapter's rows of the edge policy (docs/API.md): voices, the common fields, extra params, sampling
defaults, the same for every family; and every family's adapter is built on it."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import CAPPED
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import SamplingTable, StandardAdapter, Voices
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams


class Talker(StandardAdapter[dict]):
    MODEL = "Talker"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("temperature", float, "temperature", minimum=0),
        ExtraParam("sub_top_k", int, "the second sampler's top-k", minimum=0),
    ])
    REFERENCE = ReferencePolicy(MODEL)
    MAX_INITIAL_CODEC_CHUNK_FRAMES = 50

    def stage_input(self, params: RequestParams) -> dict:
        return {"prologue": self.prologue(params)}


def talker() -> Talker:
    return Talker(sample_rate=24000, voices=Voices.single(), fields={"seed", "max_new_tokens", "initial_codec_chunk_frames"})


def params(voice: str = "default", reference: ReferenceAudio | None = None, **fields) -> RequestParams:
    return RequestParams(model="m", voice=voice, fields=fields, reference=reference)


def refused(adapter: StandardAdapter, request: RequestParams) -> InvalidField:
    with pytest.raises(InvalidField) as caught:
        adapter.prologue(request)
    return caught.value


# -- voices ---------------------------------------------------------------------------------------------------------


def test_a_single_voice_answers_its_aliases_and_nothing_else():
    voices = Voices.single(aliases=("auto",))
    assert [voices.resolve(name) for name in ("", "Default", " auto ")] == ["default"] * 3
    with pytest.raises(UnknownVoice) as caught:
        voices.resolve("no-such-voice")
    assert (caught.value.field, caught.value.reason) == ("voice", "UNKNOWN_VOICE")


def test_presets_resolve_case_blind_to_their_canonical_name():
    voices = Voices.preset(("Ryan", "Vivian"), default="Ryan")
    assert (voices.resolve(""), voices.resolve("vivian"), voices.resolve("RYAN")) == ("Ryan", "Vivian", "Ryan")
    with pytest.raises(UnknownVoice, match="Ryan, Vivian"):
        voices.resolve("no-such-voice")
    assert Voices.preset(("casual_male",)).resolve("") == ""  # no default: a voice must be named


def test_no_voice_of_its_own_resolves_the_default_to_nothing():
    assert Voices.none().resolve("default") == "" and Voices.none().presets == ()
    with pytest.raises(UnknownVoice):
        Voices.none().resolve("no-such-voice")


# -- capabilities ---------------------------------------------------------------------------------------------------


def test_capabilities_add_extra_params_and_the_cloning_fields():
    caps = talker().capabilities
    assert caps.accepted_fields == {"seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params", "ref_audio", "ref_text"}
    assert caps.voices == ("default",) and caps.default_voice == "default" and caps.voice_cloning
    assert [param.name for param in caps.extra_params] == ["temperature", "sub_top_k"]
    plain = StandardAdapter(sample_rate=16000, voices=Voices.none(), fields={"speed"})
    assert plain.capabilities.accepted_fields == {"speed"} and not plain.capabilities.voice_cloning


# -- the common fields ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 4097, 1_000_000])
def test_max_new_tokens_outside_the_api_range_is_refused(value):
    error = refused(talker(), params(max_new_tokens=value))
    assert (error.field, error.reason) == ("max_new_tokens", "OUT_OF_RANGE")


def test_max_new_tokens_within_the_api_range_passes_unwarned_the_cache_is_the_runtimes():
    """The cap by the KV cache is decided by the runtime alone (stages/runtime/prompt_room.py), from the real prompt."""
    request = params(max_new_tokens=4096)
    assert talker().prologue(request).max_new_tokens == 4096
    assert CAPPED not in [code for _, code, _ in request.warnings]


@pytest.mark.parametrize("value", [0, 51])
def test_initial_codec_chunk_frames_is_checked_against_the_familys_bound(value):
    error = refused(talker(), params(initial_codec_chunk_frames=value))
    assert (error.field, error.reason) == ("initial_codec_chunk_frames", "OUT_OF_RANGE")


def test_the_common_fields_are_typed():
    prologue = talker().prologue(params(seed=1234.0, initial_codec_chunk_frames=4, max_new_tokens=30))
    assert (prologue.seed, prologue.initial_codec_chunk_frames, prologue.max_new_tokens, prologue.speed) == (1234, 4, 30, 1.0)
    assert prologue.language is None and prologue.reference is None and prologue.extra == {}


def test_a_language_the_family_lacks_is_one_refusal_naming_the_field():
    error = talker().unsupported_language("xx-notalanguage", "it speaks English")
    assert (error.field, error.reason) == ("language", "UNSUPPORTED_LANGUAGE")
    assert "'xx-notalanguage'" in error.message and "Talker" in error.message


def test_a_declared_extra_param_out_of_range_is_refused_by_its_name():
    error = refused(talker(), params(extra_params={"temperature": -1}))
    assert (error.field, error.reason) == ("extra_params.temperature", "OUT_OF_RANGE")


def test_the_reference_policy_runs_first():
    clip = ReferenceAudio(samples=np.zeros(24000, np.float32), sample_rate=24000, text="")
    error = refused(talker(), params(reference=clip, extra_params={"temperature": -1}))
    assert (error.field, error.reason) == ("ref_text", "REF_TEXT_REQUIRED")


# -- sampling -------------------------------------------------------------------------------------------------------


def test_the_sampling_table_maps_extra_params_onto_defaults():
    table = SamplingTable({"temperature": "temperature", "sub_top_k": "top_k"})
    defaults = {"temperature": 0.9, "top_k": 50, "top_p": 0.8}
    sampling = table.params({"sub_top_k": 5}, defaults, seed=7, max_new_tokens=None)
    assert (sampling.temperature, sampling.top_k, sampling.top_p, sampling.seed, sampling.max_new_tokens) == (0.9, 5, 0.8, 7, 2048)
    assert table.params({"temperature": 0.0}, defaults, max_new_tokens=12).greedy
    assert SamplingTable.same_names("top_p").params({"top_p": 0.5}, defaults).top_p == 0.5


def test_the_standard_adapter_imports_without_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any import of torch now fails
        from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
        print(StandardAdapter(sample_rate=16000, voices=Voices.single()).resolve_voice("Default"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "default", out.stderr


# -- every family ---------------------------------------------------------------------------------------------------


def family_adapters() -> list[str]:
    import vocalis.stages.models as models

    return sorted(f"{models.__name__}.{info.name}.adapter" for info in pkgutil.iter_modules(models.__path__)
                  if info.ispkg and importlib.util.find_spec(f"{models.__name__}.{info.name}.adapter") is not None)


def test_there_are_twelve_families_with_an_adapter():
    families = [module for module in family_adapters() if not module.split(".")[-2].startswith("_")]
    assert len(families) == 12, families  # and the template (`_template`), which is checked below like them


@pytest.mark.parametrize("module", family_adapters())
def test_every_family_adapter_is_a_standard_adapter(module):
    adapters = [value for value in vars(importlib.import_module(module)).values()
                if isinstance(value, type) and value.__module__ == module and value.__name__.endswith("Adapter")]
    assert len(adapters) == 1 and issubclass(adapters[0], StandardAdapter), adapters
    assert adapters[0].MODEL, f"{adapters[0].__name__} names its model for messages"


def test_top_k_minus_one_is_vllms_disabled_and_keeps_all():
    """vLLM's clients send top_k -1 for "no top-k" (issue 33): declared keys take it, and SamplingParams gets 0."""
    from vocalis.stages.api.extra_params import ExtraParams
    from vocalis.stages.api.standard_adapter import SamplingTable, sampling_params

    declared = ExtraParams("m", sampling_params({"top_k": 30}))
    settings = declared.parse({"top_k": -1})
    assert SamplingTable.same_names("top_k").params(settings, {"top_k": 30}).top_k == 0
    with pytest.raises(InvalidField):
        declared.parse({"top_k": -2})
