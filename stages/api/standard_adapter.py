"""The standard adapter: what every family's adapter does the same way, written once.

A family's `adapter.py` subclasses `StandardAdapter` and keeps only its quirks. The base declares and decides:

- **voices** (`Voices`): preset speakers, a single default voice, or none of its own; `resolve_voice` answers an
  unknown name with `UnknownVoice` (404 / NOT_FOUND, reason UNKNOWN_VOICE) for every family;
- **capabilities**: the accepted fields are the family's own plus `extra_params` when it declares keys, and `ref_audio`
  + `ref_text` when it clones (a `ReferencePolicy`);
- **the prologue of `stage_input`** (`prologue`): the reference checked by the family's `ReferencePolicy`, the
  `extra_params` parsed by its declaration, and the common fields (`seed`, `max_new_tokens`,
  `initial_codec_chunk_frames`, `speed`, `language`) checked against the same ranges for every family;
- **sampling** (`SamplingTable`): a table from `extra_params` names to `SamplingParams` fields, with defaults the
  family reads from its checkpoint's generation config (or the peer's deploy values where the checkpoint has none).

Which request fields a family takes, ignores or refuses, and what an unknown `extra_params` key does, is the server's
field policy (server/field_policy.py, README "the field policy"); the adapter sees only fields it accepts and keys it
declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import PEER_MAX_NEW_TOKENS, checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

if TYPE_CHECKING:
    from vocalis.stages.runtime.sampling import SamplingParams

InputT = TypeVar("InputT")

DEFAULT_ALIASES = ("", "default")
"""Names that mean "the model's default voice" on every family."""
CLONING_FIELDS = frozenset({"ref_audio", "ref_text"})


@dataclass(frozen=True)
class Voices:
    """The voices a family speaks without cloning: presets, one default voice, or none of its own."""

    presets: tuple[str, ...] = ()
    """Names listed by /v1/audio/voices and GetModel, canonical spelling."""
    default: str = ""
    """What an empty voice (or an alias) resolves to; "" when the family has no voice of its own."""
    aliases: tuple[str, ...] = DEFAULT_ALIASES
    """Lower-case names that mean `default`."""

    @classmethod
    def single(cls, name: str = "default", aliases: Iterable[str] = ()) -> Voices:
        """One voice, listed under `name` (a model that speaks with one voice, or picks it from the text)."""
        return cls((name,), name, (*DEFAULT_ALIASES, name.lower(), *aliases))

    @classmethod
    def preset(cls, names: Iterable[str], default: str = "") -> Voices:
        """Preset speakers; `default` is what no voice means ("": a voice must be named, or a clip given)."""
        return cls(tuple(names), default)

    @classmethod
    def none(cls) -> Voices:
        """No voice of its own: the voice comes from a clip, a description or an instruction."""
        return cls()

    def resolve(self, voice: str) -> str:
        """The canonical name of `voice` ("" and the aliases: the default); UnknownVoice for any other name."""
        key = voice.strip().lower()
        if key in self.aliases:
            return self.default
        for name in self.presets:
            if name.lower() == key:
                return name
        raise UnknownVoice(voice, list(self.presets) or ["default"])


SAMPLING_RANGES: dict[str, tuple[type, dict[str, Any]]] = {
    "temperature": (float, {"minimum": 0}),
    "top_k": (int, {"minimum": -1}),
    "top_p": (float, {"minimum": 0, "maximum": 1, "exclusive_minimum": True}),
    "repetition_penalty": (float, {"minimum": 0, "exclusive_minimum": True}),
}
"""The type and range of each SamplingParams field an extra param may set, as SamplingParams accepts them (top_k
also takes vLLM's -1, "disabled", which the table turns into SamplingParams's 0)."""
TOP_K_DISABLED = -1


SAMPLING_TEXT = {
    "temperature": "Sampling temperature; 0 is greedy",
    "top_k": "Top-k: the k most likely tokens are kept",
    "top_p": "Nucleus sampling, in (0, 1]",
    "repetition_penalty": "Penalty on tokens already generated; 1 is none",
}


def sampling_params(defaults: Mapping[str, Any], notes: Mapping[str, str] | None = None, prefix: str = "",
                    minimums: Mapping[str, float] | None = None) -> list[ExtraParam]:
    """Extra params for the SamplingParams fields among `defaults` (field -> the family's default, or where it comes
    from), named `prefix` + field, in SamplingParams's ranges, described the same way for every family plus the
    family's `notes` on a field (what it samples); `minimums` raises a lower bound (RAS needs top_k >= 1)."""
    params = []
    for name, default in defaults.items():
        if name not in SAMPLING_RANGES:
            continue
        kind, bounds = SAMPLING_RANGES[name]
        if minimums and name in minimums:
            bounds = bounds | {"minimum": minimums[name]}
        text = SAMPLING_TEXT[name] + ("; 0 or -1 (vLLM's \"disabled\") keep all" if name == "top_k" and bounds["minimum"] < 1 else "")
        note = f" ({notes[name]})" if notes and name in notes else ""
        params.append(ExtraParam(prefix + name, kind, f"{text}{note}. Default {default}.", **bounds))
    return params


@dataclass(frozen=True)
class SamplingTable:
    """Which `extra_params` keys set which `SamplingParams` fields (by the key's setting name)."""

    fields: Mapping[str, str]
    """extra-param setting -> SamplingParams field (`subtalker_temperature` -> `temperature`)."""

    @classmethod
    def same_names(cls, *names: str) -> SamplingTable:
        return cls({name: name for name in names})

    def params(self, extra: Mapping[str, Any], defaults: Mapping[str, Any], **fixed: Any) -> SamplingParams:
        """`defaults` (SamplingParams fields), overridden by the keys of `extra` this table maps, then `fixed`
        (seed, max_new_tokens)."""
        from vocalis.stages.runtime.sampling import SamplingParams  # torch, imported when a request is built

        values = dict(defaults)
        values.update({target: extra[name] for name, target in self.fields.items() if name in extra})
        if values.get("top_k") == TOP_K_DISABLED:
            values["top_k"] = 0  # vLLM's spelling of "no top-k": SamplingParams keeps all at 0
        values.update({key: value for key, value in fixed.items() if value is not None})
        return SamplingParams(**values)


@dataclass(frozen=True)
class Prologue:
    """A request after the checks every family makes, before the family's own."""

    fields: Mapping[str, Any]
    """The request fields the adapter accepts, as set (params.fields)."""
    extra: dict[str, Any]
    """Typed `extra_params` by setting name (the declared keys only)."""
    reference: ReferenceAudio | None
    """The voice to clone, checked by the family's ReferencePolicy; None when the request does not clone."""
    seed: int | None = None
    max_new_tokens: int | None = None
    """Checked against 1..4096; None when the request does not set it (the runtime caps it by the cache)."""
    initial_codec_chunk_frames: int | None = None
    speed: float = 1.0
    """The model's own speed (1 unless the family accepts `speed`: else the server time-stretches)."""
    language: str | None = None
    """As the caller wrote it (None: not set); a family that selects languages checks it (`unsupported_language`)."""


class StandardAdapter(Generic[InputT]):
    """A `ModelAdapter[InputT]` built from declarations; subclasses set the class attributes and `stage_input`."""

    MODEL: ClassVar[str] = ""
    """The family's name as messages give it."""
    EXTRA_PARAMS: ClassVar[ExtraParams] = ExtraParams("", [])
    REFERENCE: ClassVar[ReferencePolicy | None] = None
    """How the family clones (None: it does not clone a clip)."""
    MAX_INITIAL_CODEC_CHUNK_FRAMES: ClassVar[int | None] = None
    """The largest first chunk the family decodes (None: no bound of its own)."""

    def __init__(self, *, sample_rate: int, voices: Voices, fields: Iterable[str] = (),
                 max_new_tokens: int = PEER_MAX_NEW_TOKENS, **capabilities: Any) -> None:
        """`fields`: the request fields the family honours beyond what the base adds; `max_new_tokens`: its upper
        bound (the cap by the cache is the runtime's: stages/runtime/prompt_room.py); `capabilities`: the other
        Capabilities."""
        self.voices = voices
        self.max_new_tokens_bound = max_new_tokens
        accepted = set(fields)
        if len(self.EXTRA_PARAMS):
            accepted.add("extra_params")
        cloning = self.REFERENCE is not None
        if cloning:
            accepted |= CLONING_FIELDS if self.REFERENCE.transcript else {"ref_audio"}
        capabilities.setdefault("voice_cloning", cloning)
        self.capabilities = Capabilities(
            sample_rate=sample_rate, voices=voices.presets, default_voice=voices.default, accepted_fields=frozenset(accepted),
            extra_params=tuple(self.EXTRA_PARAMS), **capabilities,
        )

    def resolve_voice(self, voice: str) -> str:
        return self.voices.resolve(voice)

    def stage_input(self, params: RequestParams) -> InputT:
        raise NotImplementedError

    def prologue(self, params: RequestParams) -> Prologue:
        """The checks every family makes, in one order: the reference, then extra_params, then the common fields."""
        fields = params.fields
        reference = self.REFERENCE.check(params) if self.REFERENCE is not None else None
        extra = self.EXTRA_PARAMS.parse(fields.get("extra_params"))
        max_new = None
        if "max_new_tokens" in fields:
            max_new = checked_max_new_tokens(params, upper=self.max_new_tokens_bound)
        language = fields.get("language")
        return Prologue(
            fields=fields, extra=extra, reference=reference,
            seed=int(fields["seed"]) if fields.get("seed") is not None else None,
            max_new_tokens=max_new,
            initial_codec_chunk_frames=self._first_chunk(fields.get("initial_codec_chunk_frames")),
            speed=float(fields.get("speed", 1.0)),
            language=str(language) if language is not None else None,
        )

    def _first_chunk(self, value: Any) -> int | None:
        if value is None:
            return None
        upper = self.MAX_INITIAL_CODEC_CHUNK_FRAMES
        if value < 1 or (upper is not None and value > upper):
            wanted = f"from 1 to {upper}" if upper is not None else "at least 1"
            raise InvalidField("initial_codec_chunk_frames", "OUT_OF_RANGE", f"initial_codec_chunk_frames must be {wanted}, got {value}")
        return int(value)

    def unsupported_language(self, value: str, known: str) -> InvalidField:
        """The one refusal of a language that a family selecting languages does not have (`known`: which it has)."""
        return InvalidField("language", "UNSUPPORTED_LANGUAGE", f"language {value!r} is not supported by {self.MODEL}: {known}")
