"""Every voice the server can speak with, and which loaded model can use which.

Presets belong to their model. Uploaded and precomputed voices are references to
clone: usable by the models that can clone (a precomputed voice may narrow that).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import numpy as np

from vocalis.server.config import VoiceConfig
from vocalis.server.engine import Engine
from vocalis.server.errors import StatusError
from vocalis.server.precomputed_voices import PrecomputedVoice
from vocalis.server.voice_rules import not_found
from vocalis.server.voice_store import VoiceNotFound, VoiceRecord
from vocalis.server.voice_store_backend import VoiceStoreBackend
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.request import ReferenceAudio


@dataclass(frozen=True)
class CatalogVoice:
    name: str
    kind: str
    """"preset", "precomputed" or "uploaded"."""
    models: tuple[str, ...]
    has_ref_text: bool = False
    created_at: float = 0.0
    description: str = ""
    language: str = ""
    record: VoiceRecord | None = None


class VoiceCatalog:
    def __init__(self, models: list[LoadedModel], store: VoiceStoreBackend, precomputed: list[PrecomputedVoice]) -> None:
        self.models = models
        self.store = store
        self.precomputed = {voice.name.lower(): voice for voice in precomputed}

    def reserved_names(self) -> set[str]:
        """Names an upload may not take: presets, precomputed voices, and "default"."""
        names = {"default", *self.precomputed}
        for model in self.models:
            names.update(voice.lower() for voice in model.capabilities.voices)
        return names

    def cloning_models(self, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
        return tuple(
            m.name for m in self.models if m.capabilities.voice_cloning and (not allowed or m.name in allowed)
        )

    def list(self, model: str = "") -> list[CatalogVoice]:
        """Every voice usable with `model` (all when empty), sorted by lower-case name."""
        voices, _ = self.page(model, after="", size=None)
        return voices

    def page(self, model: str, after: str, size: int | None) -> tuple[list[CatalogVoice], bool]:
        """Up to `size` voices usable with `model` whose lower-case name sorts after `after`, and whether more follow.

        Only the uploaded voices on the page are read from the store, so a page costs the same however many there are.
        """
        builtin = {key: voice for key, voice in self._builtin().items() if key > after and _usable_with(voice, model)}
        uploaded: list[str] = []
        if not model or model.lower() in (m.lower() for m in self.cloning_models()):
            uploaded = [key for key in self.store.names() if key > after and key not in builtin]
        keys = sorted({*builtin, *uploaded})
        voices: list[CatalogVoice] = []
        for key in keys:
            if size is not None and len(voices) >= size:
                return voices, True
            voice = builtin.get(key) or self._uploaded(key)
            if voice is not None:  # None: deleted by another process since the names were read
                voices.append(voice)
        return voices, False

    def find(self, name: str) -> CatalogVoice:
        voice = self._builtin().get(name.lower()) or self._uploaded(name)
        if voice is None:
            raise not_found(name, [v.name for v in self._builtin().values()], field="name")
        return voice

    def _builtin(self) -> dict[str, CatalogVoice]:
        """Presets and precomputed voices, by lower-case name."""
        voices: dict[str, CatalogVoice] = {}
        for loaded in self.models:
            language = loaded.capabilities.languages[0] if loaded.capabilities.languages else ""
            for name in loaded.capabilities.voices:
                current = voices.get(name.lower())
                users = (current.models if current else ()) + (loaded.name,)
                voices[name.lower()] = CatalogVoice(name, "preset", users, language=language)
        for voice in self.precomputed.values():
            voices.setdefault(
                voice.name.lower(),
                CatalogVoice(voice.name, "precomputed", self.cloning_models(voice.models), bool(voice.ref_text), 0.0, voice.description or ""),
            )
        return voices

    def _uploaded(self, name: str) -> CatalogVoice | None:
        try:
            record = self.store.get(name)
        except VoiceNotFound:
            return None
        return CatalogVoice(
            record.name, "uploaded", self.cloning_models(), bool(record.ref_text), record.created_at, record.description or "",
            record=record,
        )

    def reference(self, name: str, model: LoadedModel) -> ReferenceAudio | None:
        """The voice to clone that `name` stands for on `model`, or None when it is one of the model's presets.

        Raises NOT_FOUND for an unknown name, INVALID_ARGUMENT when `model` cannot use the voice.
        """
        if not name or name.lower() == "default" or name.lower() in (v.lower() for v in model.capabilities.voices):
            return None
        key = name.lower()
        precomputed = self.precomputed.get(key)
        if precomputed is not None:
            self._check_usable(name, model, self.cloning_models(precomputed.models))
            audio = precomputed.audio
            return ReferenceAudio(
                samples=audio.samples if audio else np.zeros(0, np.float32),
                sample_rate=audio.sample_rate if audio else 24000,
                text=precomputed.ref_text,
                name=precomputed.name,
                artifacts=dict(precomputed.artifacts),
            )
        try:
            record = self.store.get(name)
            self._check_usable(name, model, self.cloning_models())
            audio = self.store.audio(record) if record.duration_s else None
            embedding = self.store.embedding(record)
        except VoiceNotFound:
            known = [v.name for v in self._builtin().values() if model.name in v.models]
            raise not_found(name, known) from None
        return ReferenceAudio(
            samples=audio.samples if audio else np.zeros(0, np.float32),
            sample_rate=audio.sample_rate if audio else 24000,
            text=record.ref_text,
            name=record.name,
            artifacts={} if embedding is None else {"speaker_embedding": embedding},
        )

    def _check_usable(self, name: str, model: LoadedModel, users: tuple[str, ...]) -> None:
        if model.name not in users:
            presets = ", ".join(model.capabilities.voices)
            raise StatusError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"voice {name!r} is a cloned voice, which model {model.name} cannot use; its voices are: {presets}",
                "VOICE_NOT_SUPPORTED_BY_MODEL",
                "voice",
            )


def _usable_with(voice: CatalogVoice, model: str) -> bool:
    return not model or model.lower() in (m.lower() for m in voice.models)


def build_voice_catalog(engine: Engine, config: VoiceConfig) -> VoiceCatalog:
    """The catalog over the engine's models, the voice store and the precomputed voices of `config`."""
    from vocalis.server.config import default_voice_dir
    from vocalis.server.precomputed_voices import load_precomputed
    from vocalis.server.voice_store_backend import open_voice_store

    store = open_voice_store(config.voice_store or config.voice_dir or default_voice_dir(), config.voice_store_timeout_s)
    precomputed = load_precomputed(config.custom_voice_dir) if config.custom_voice_dir else []
    return VoiceCatalog(list(engine.models.values()), store, precomputed)
