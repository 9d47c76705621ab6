"""The Voices service: list, get, upload and delete voices."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json

import grpc

from vocalis.server.config import VoiceConfig
from vocalis.server.errors import StatusError, abort, invalid_argument
from vocalis.server.voice_catalog import CatalogVoice, VoiceCatalog
from vocalis.server.voice_rules import (
    TEXT_LIMITS,
    check_clip,
    check_consent,
    check_embedding,
    check_name,
    check_text_fields,
    not_found,
)
from vocalis.server.voice_store import StoreFull, VoiceNotFound
from vocalis.tts.v1 import voices_pb2, voices_pb2_grpc

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
"""With every text field bounded, 500 voices stay well under gRPC's default 4 MiB receive limit."""

KINDS = {
    "preset": voices_pb2.VOICE_KIND_PRESET,
    "precomputed": voices_pb2.VOICE_KIND_PRECOMPUTED,
    "uploaded": voices_pb2.VOICE_KIND_UPLOADED,
}


def to_proto(voice: CatalogVoice) -> voices_pb2.Voice:
    record = voice.record
    return voices_pb2.Voice(
        name=voice.name,
        kind=KINDS[voice.kind],
        models=list(voice.models),
        has_ref_text=voice.has_ref_text,
        created_at=int(voice.created_at),
        description=voice.description[: TEXT_LIMITS["speaker_description"]],  # voices stored before the bound
        language=voice.language,
        duration_seconds=record.duration_s if record else 0.0,
        embedding_dim=(record.embedding_dim or 0) if record else 0,
    )


class VoicesService(voices_pb2_grpc.VoicesServicer):
    def __init__(self, catalog: VoiceCatalog, config: VoiceConfig) -> None:
        self.catalog = catalog
        self.config = config

    async def ListVoices(self, request: voices_pb2.ListVoicesRequest, context: grpc.aio.ServicerContext) -> voices_pb2.ListVoicesResponse:
        if request.model and not any(m.name.lower() == request.model.lower() for m in self.catalog.models):
            known = ", ".join(m.name for m in self.catalog.models)
            await abort(context, StatusError(grpc.StatusCode.NOT_FOUND, f"unknown model {request.model!r}; this server has: {known}", "UNKNOWN_MODEL", "model"))
        try:
            size = page_size(request.page_size)
            after = read_page_token(request.page_token, request.model)
            voices, more = await asyncio.to_thread(self.catalog.page, request.model, after, size)
        except StatusError as error:  # the store out of reach (UNAVAILABLE) too
            await abort(context, error)
        token = page_token(voices[-1].name.lower(), request.model) if more and voices else ""
        return voices_pb2.ListVoicesResponse(voices=[to_proto(v) for v in voices], next_page_token=token)

    async def GetVoice(self, request: voices_pb2.GetVoiceRequest, context: grpc.aio.ServicerContext) -> voices_pb2.GetVoiceResponse:
        try:
            voice = await asyncio.to_thread(self.catalog.find, request.name)
        except StatusError as error:
            await abort(context, error)
        return voices_pb2.GetVoiceResponse(voice=to_proto(voice))

    async def CreateVoice(self, request: voices_pb2.CreateVoiceRequest, context: grpc.aio.ServicerContext) -> voices_pb2.CreateVoiceResponse:
        try:
            record = await asyncio.to_thread(self._create, request)
            voice = await asyncio.to_thread(self.catalog.find, record.name)
        except StatusError as error:
            await abort(context, error)
        return voices_pb2.CreateVoiceResponse(voice=to_proto(voice))

    def _create(self, request: voices_pb2.CreateVoiceRequest):
        check_name(request.name, self.catalog.reserved_names())
        check_consent(request.consent)
        check_text_fields(consent=request.consent, ref_text=request.ref_text, speaker_description=request.speaker_description)
        if request.audio and request.speaker_embedding:
            raise StatusError(grpc.StatusCode.INVALID_ARGUMENT, "give audio or speaker_embedding, not both", "CONFLICTING_FIELDS", "speaker_embedding")
        audio = embedding = None
        if request.speaker_embedding:
            embedding = check_embedding(list(request.speaker_embedding))
        else:
            if not request.audio:
                raise StatusError(grpc.StatusCode.INVALID_ARGUMENT, "audio is required: a 1 to 30 s clip of the speaker", "AUDIO_REQUIRED", "audio")
            audio = check_clip(request.audio, self.config, "audio")
        original = request.audio or embedding.tobytes()  # type: ignore[union-attr]
        mime = request.mime_type or ("application/json" if embedding is not None else "application/octet-stream")
        try:
            return self.catalog.store.put(
                request.name,
                original,
                mime,
                audio,
                request.consent,
                ref_text=request.ref_text or None,
                description=request.speaker_description or None,
                embedding=embedding,
                max_voices=self.config.max_voices,
            )
        except StoreFull as error:
            raise StatusError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error), "VOICE_LIMIT", "name") from error

    async def DeleteVoice(self, request: voices_pb2.DeleteVoiceRequest, context: grpc.aio.ServicerContext) -> voices_pb2.DeleteVoiceResponse:
        name = request.name.strip()
        if name.lower() in self.catalog.reserved_names():
            await abort(
                context,
                StatusError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"{name!r} is a preset or precomputed voice; only uploaded voices can be deleted",
                    "VOICE_NOT_DELETABLE",
                    "name",
                ),
            )
        try:
            record = await asyncio.to_thread(self.catalog.store.delete, name)
        except VoiceNotFound:
            await abort(context, not_found(name, [], field="name"))
        except StatusError as error:  # the store out of reach
            await abort(context, error)
        return voices_pb2.DeleteVoiceResponse(name=record.name)


def page_size(requested: int) -> int:
    if requested < 0:
        raise invalid_argument("page_size", "INVALID_PAGE_SIZE", f"page_size must be 0 (the default, {DEFAULT_PAGE_SIZE}) or more")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def page_token(after: str, model: str) -> str:
    """An opaque token: where the next page starts, and the request it continues."""
    return base64.urlsafe_b64encode(json.dumps({"after": after, "model": model.lower()}).encode()).decode()


def read_page_token(token: str, model: str) -> str:
    """The lower-case name after which the page starts ("" for the first page)."""
    if not token:
        return ""
    try:
        fields = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        after, token_model = fields["after"], fields["model"]
        if not isinstance(after, str) or not isinstance(token_model, str):
            raise TypeError
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeError):
        raise invalid_argument("page_token", "INVALID_PAGE_TOKEN", "page_token is not a token this server returned") from None
    if token_model != model.lower():
        raise invalid_argument("page_token", "INVALID_PAGE_TOKEN", "page_token belongs to a listing of another model; keep `model` the same")
    return after
