"""The field policy: which request fields a model accepts, accepts with a warning, or refuses.

Clients written for vLLM-Omni send fields that mean nothing to some models (the Qwen3-TTS
client always sends a voice; the WebSocket client always sends `speed: 1.0`). Refusing them
breaks those clients; ignoring them in silence hides mistakes. So, for each field the caller
set, in this order:

1. **Neutral values are accepted in silence.** A value equal to what the model does anyway:
   `speed` 1.0 on a model without speed control, `language` "Auto" on a model that does not
   pick languages by name.
2. **Fields vLLM-Omni silently ignores for the model are accepted and reported.** The field is
   dropped and the caller gets a `Warning` (gRPC message after SessionStarted; HTTP header
   `X-Vocalis-Warning`; SSE and WebSocket `warning` event) naming it: `instructions`,
   `task_type`, `language`, `max_new_tokens`, `initial_codec_chunk_frames`, `seed` or
   `ref_text` on a model that does not use them; a `voice` when `ref_audio` gives the voice or
   the model has no preset voices (Qwen3-TTS VoiceDesign and Base, AuK), or `ref_audio` beside a preset
   where the preset wins (Voxtral with its encoder, `Capabilities.preset_over_reference`); `extra_params.seed` where
   `seed` is not used (where it is, `extra_params.seed` is taken as `seed`); an `extra_params` key the model does not
   declare (`extra_params.<key>`); a `task_type` other than the checkpoint's own where `instructions` decide the task
   (`Capabilities.instructions_decide_task`: AuK, Qwen3-TTS VoiceDesign); and request keys the API does not know at
   all (`unknown_fields`, code UNKNOWN_FIELD).
3. **Values the model cannot honour are refused** with INVALID_ARGUMENT / HTTP 400 naming the
   field: `speed` other than 1.0 where no speed change is possible, `ref_audio` or
   `speaker_embedding` on a model that cannot clone, a language or task the checkpoint does
   not have, out-of-range values. The API's own ranges hold whether or not the model uses the field:
   `max_new_tokens` outside 1..4096 is refused on every model, before rule 2 could drop it.

docs/API.md has the outcome of each such request, per family.

With `--strict-fields` every warning of rule 2 is a refusal of rule 3 instead (reason
FIELD_NOT_SUPPORTED or UNKNOWN_FIELD). Rule 1 holds in strict mode too.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from vocalis.server.errors import StatusError, invalid_argument
from vocalis.server.session_config import enum_name, plain_struct
from vocalis.stages.api.max_new_tokens import PEER_MAX_NEW_TOKENS
from vocalis.stages.api.model import LoadedModel
from vocalis.tts.v1 import synthesizer_pb2 as pb

IGNORED_BY_PEERS = ("instructions", "task_type", "language", "max_new_tokens", "initial_codec_chunk_frames", "seed", "ref_text")
"""Fields vLLM-Omni accepts for every model and drops where the model has no use for them."""
IGNORABLE = (*IGNORED_BY_PEERS, "extra_params")
"""Fields a model that has no use for them answers with a warning (extra_params: each undeclared key is warned)."""
FIELD_IGNORED = "FIELD_IGNORED"
UNKNOWN_FIELD = "UNKNOWN_FIELD"


def warning(field: str, code: str, message: str) -> pb.Warning:
    return pb.Warning(code=code, message=message, field=field)


def apply(config: pb.SessionConfig, model: LoadedModel, strict: bool = False) -> list[pb.Warning]:
    """Drop neutral and ignorable fields from `config` (in place); the warnings for those the caller should hear of.

    Strict: the first warning is raised as INVALID_ARGUMENT instead."""
    caps = model.capabilities
    accepted = caps.accepted_fields
    warnings: list[pb.Warning] = []

    def drop(field: str, why: str, code: str = FIELD_IGNORED) -> None:
        if strict:
            reason = "UNKNOWN_FIELD" if code == UNKNOWN_FIELD else "FIELD_NOT_SUPPORTED"
            raise invalid_argument(field, reason, f"{field} is not supported by model {model.name}: {why} (the server runs with --strict-fields)")
        warnings.append(warning(field, code, f"{field} ignored: {why}"))

    for name in config.unknown_fields:
        drop(name, "not a field of this API", UNKNOWN_FIELD)
    config.ClearField("unknown_fields")

    if config.HasField("speed") and "speed" not in accepted and config.speed == 1.0:
        config.ClearField("speed")
    if config.HasField("language") and config.language.strip().lower() == "auto":
        if "auto" not in (language.lower() for language in caps.languages):
            config.ClearField("language")
    if config.HasField("max_new_tokens") and not 1 <= config.max_new_tokens <= PEER_MAX_NEW_TOKENS:
        raise invalid_argument("max_new_tokens", "OUT_OF_RANGE",
                               f"max_new_tokens must be from 1 to {PEER_MAX_NEW_TOKENS}, got {config.max_new_tokens}")
    _take_extra_seed(config, model, drop)
    _drop_undeclared_extra_params(config, model, drop)
    if caps.instructions_decide_task and config.task_type != pb.TASK_TYPE_UNSPECIFIED and config.instructions.strip():
        task = enum_name(config.DESCRIPTOR.fields_by_name["task_type"], config.task_type)
        if task != caps.task:
            config.ClearField("task_type")
            drop("task_type", f"instructions decide the task of model {model.name} (task_type {task} is not used)")
    for name in IGNORED_BY_PEERS:
        is_set = config.task_type != pb.TASK_TYPE_UNSPECIFIED if name == "task_type" else config.HasField(name)
        if name not in accepted and is_set:
            config.ClearField(name)
            drop(name, f"model {model.name} does not use it")
    if config.voice and config.voice.lower() != "default" and config.HasField("ref_audio") and "ref_audio" in accepted:
        if caps.preset_over_reference and caps.voice_cloning and config.voice.strip().lower() in caps.voices:
            drop("ref_audio", f"the preset voice {config.voice!r} gives the voice (ref_audio is not used)")
            config.ClearField("ref_audio")
        else:
            drop("voice", f"ref_audio gives the voice ({config.voice!r} is not used)")
            config.voice = ""
    return warnings


def ignore_unknown_voice(config: pb.SessionConfig, model: LoadedModel, error: StatusError, strict: bool) -> pb.Warning | None:
    """For a voice the model does not know: a warning (and the voice dropped) where the model takes no preset voice
    at all, as vLLM-Omni ignores a voice there; None where the unknown voice is a real mistake."""
    if error.field != "voice" or model.capabilities.voices or strict or not config.voice:
        return None
    voice, config.voice = config.voice, ""
    return warning("voice", FIELD_IGNORED, f"voice ignored: model {model.name} has no preset voices ({voice!r} is not used)")


def _drop_undeclared_extra_params(config: pb.SessionConfig, model: LoadedModel, drop) -> None:
    """Keys of `extra_params` the model does not declare are dropped (rule 2), and an empty `extra_params` with them."""
    if not config.HasField("extra_params"):
        return
    plain_struct(config.extra_params, "extra_params", 1)  # what JSON cannot hold is refused, declared or not
    declared = {param.name for param in model.capabilities.extra_params}
    for key in sorted(set(config.extra_params.fields) - declared):
        del config.extra_params.fields[key]
        known = ", ".join(sorted(declared)) or "none"
        drop(f"extra_params.{key}", f"model {model.name} does not declare it (its extra_params: {known})")
    if not config.extra_params.fields:
        config.ClearField("extra_params")


def _take_extra_seed(config: pb.SessionConfig, model: LoadedModel, drop) -> None:
    """`extra_params.seed` (vLLM-Omni's diffusion path reads it there) is `seed` by another name."""
    if not config.HasField("extra_params") or "seed" not in config.extra_params.fields:
        return
    value = config.extra_params.fields["seed"]
    rest = struct_pb2.Struct()
    rest.CopyFrom(config.extra_params)
    del rest.fields["seed"]
    config.ClearField("extra_params")
    if rest.fields:
        config.extra_params.CopyFrom(rest)
    is_integer = value.WhichOneof("kind") == "number_value" and float(value.number_value).is_integer()
    if not is_integer:
        raise invalid_argument("extra_params.seed", "INVALID_VALUE", "extra_params.seed must be an integer")
    if "seed" not in model.capabilities.accepted_fields:
        drop("extra_params.seed", f"model {model.name} does not use a seed")
    elif config.HasField("seed") and config.seed != int(value.number_value):
        raise invalid_argument("extra_params.seed", "CONFLICT", "extra_params.seed and seed differ; give one")
    else:
        config.seed = int(value.number_value)
