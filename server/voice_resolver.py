"""Which voice a session speaks with: the one place that decides between a preset, a stored voice and `ref_audio`.

It runs after `session_config.validate`, so a field the model refuses is refused by name before
anything is fetched or decoded. The fetching and checking of clips stays in `reference_audio`
(inline `ref_audio`) and `voice_catalog` (stored and precomputed voices); this module only orders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocalis.server.errors import from_request_error
from vocalis.server.reference_audio import ReferenceResolver
from vocalis.stages.api.errors import RequestError
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.request import ReferenceAudio
from vocalis.tts.v1 import synthesizer_pb2


@dataclass(frozen=True)
class ResolvedVoice:
    """The voice of a session, as the model will use it."""

    name: str
    """What SessionStarted.voice reports: the preset's canonical name, the stored voice's name, or "" for ref_audio."""
    preset: str
    """The model's preset voice, "" when the session clones `reference` instead."""
    reference: ReferenceAudio | None
    """The clip (and precomputed artifacts) to clone, from `ref_audio` or a stored voice; None for a preset."""
    more_references: tuple[ReferenceAudio, ...] = ()
    """Further clips to clone (`more_references`, for models that take several), after `reference`."""


class VoiceResolver:
    def __init__(self, references: ReferenceResolver | None = None) -> None:
        self.references = references
        """Resolves ref_audio and stored voices (None: this server offers presets only)."""

    async def resolve(self, config: synthesizer_pb2.SessionConfig, model: LoadedModel) -> ResolvedVoice:
        """The voice `config` asks for on `model`; StatusError naming `voice` or `ref_audio` when there is none."""
        reference = await self.references.resolve(config, model) if self.references else None
        more = await self.references.resolve_more(config, model) if self.references and config.more_references else ()
        cloned = reference is not None and reference.name is not None and not config.HasField("ref_audio")
        try:
            preset = "" if cloned else model.adapter.resolve_voice(config.voice)
        except RequestError as error:
            raise from_request_error(error) from error
        name = reference.name if cloned and reference is not None and reference.name else preset
        return ResolvedVoice(name=name, preset=preset, reference=reference, more_references=more)
