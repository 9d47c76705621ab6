"""What a loaded model is to the rest of the system: capabilities, adapter, pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from vocalis.stages.api.extra_params import ExtraParam
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.stage import Stage
from vocalis.stages.text.text_carry import TextCarry


@dataclass(frozen=True)
class Capabilities:
    """What a model can do, as the server checks requests against and Models.GetModel reports."""

    sample_rate: int
    """Native rate of the audio the model produces, in Hz."""
    voices: tuple[str, ...]
    """Preset voice names."""
    default_voice: str
    accepted_fields: frozenset[str]
    """Request fields it honours beyond those every model honours (model, voice, encoding, ...)."""
    required_fields: frozenset[str] = frozenset()
    extra_params: tuple[ExtraParam, ...] = ()
    """Keys it honours in extra_params: type, range and description of each."""
    streaming: bool = True
    """Whether audio leaves before the whole utterance is synthesized."""
    voice_cloning: bool = False
    preset_over_reference: bool = False
    """A preset `voice` given beside `ref_audio` is the voice and ref_audio is ignored (vLLM-Omni's Voxtral rule); by
    default ref_audio gives the voice and the preset is ignored."""
    languages: tuple[str, ...] = ()
    task: str = ""
    """The checkpoint's own `task_type` (Qwen3-TTS's kind, "voice_design"); a request naming it is neutral."""
    instructions_decide_task: bool = False
    """Where `instructions` are given they decide the task (AuK, Qwen3-TTS VoiceDesign): a `task_type` other than `task`
    is then ignored with a warning (the server's field policy), not honoured nor refused."""
    whole_input: bool = False
    """The model takes a session's whole text as one unit (an instruction, not sentences): the server does not
    split it unless the caller asks for a granularity."""
    instructions_carry_text: bool = False
    """`instructions` can hold all of a request's content (AuK's canonical request: the instruction names what to say):
    an empty input with non-blank instructions is synthesized as one unit, where other models refuse it (EMPTY_INPUT)."""
    min_speed: float = 0.25
    max_speed: float = 4.0
    warmup_fields: tuple[tuple[str, Any], ...] = ()
    """(field, value) pairs the server's warm-up request sets beside its text, for a model whose defaults do not make
    a request (AuK needs a duration without ref_audio)."""


InputT_co = TypeVar("InputT_co", covariant=True)


class ModelAdapter(Protocol[InputT_co]):
    """Turns a validated request into the model's stage-0 input, or raises a RequestError.

    Adapters are pure and cheap: they run on the server's event loop, so they validate and package
    the request; anything that needs a model forward pass (speaker or codec encoders on a reference
    clip) runs on a stage thread, in the stage model's `start()`.
    """

    capabilities: Capabilities

    def stage_input(self, params: RequestParams) -> InputT_co: ...

    def resolve_voice(self, voice: str) -> str:
        """The canonical name of `voice` ("" meaning the default); raises UnknownVoice."""
        ...


InputT = TypeVar("InputT")


@dataclass
class LoadedModel(Generic[InputT]):
    """A model ready to serve: name, what it can do, how to feed it, and its running pipeline."""

    name: str
    family: str
    capabilities: Capabilities
    adapter: ModelAdapter[InputT]
    pipeline: Pipeline
    aliases: tuple[str, ...] = ()
    """Other names requests may use for it (`--served-model-name` given more than once)."""
    aligner: Any = None
    """The forced-aligner worker (stages/text/aligner) that times the words of a model that cannot time its own
    (`--forced-aligner`); None otherwise."""
    text_carry: TextCarry | None = None
    """For inline tags whose reach spans sentences (stages/text/text_carry.py): the session rewrites each unit of the
    text with what the units before it left open. None: a family whose units stand alone."""
    quantized: frozenset[str] = frozenset()
    """The stages whose generator runs with quantised weights: those whose `quantize` deploy setting the family's
    loader applied (stages/models/quantizable.py). load_model refuses a deploy that asks it of any other stage."""

    @classmethod
    def serving(
        cls,
        name: str,
        family: str,
        adapter: ModelAdapter[InputT],
        stages: Sequence[Stage],
        *,
        text_carry: TextCarry | None = None,
        quantized: frozenset[str] = frozenset(),
    ) -> LoadedModel[InputT]:
        """What a family's loader returns: the model `adapter` feeds (its capabilities are the adapter's) and `stages`
        run, in order, as one pipeline."""
        return cls(
            name=name,
            family=family,
            capabilities=adapter.capabilities,
            adapter=adapter,
            pipeline=Pipeline(list(stages)),
            text_carry=text_carry,
            quantized=quantized,
        )

    @property
    def served_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def close(self) -> None:
        self.pipeline.close()
        if self.aligner is not None:
            self.aligner.close()
