"""GET/POST /v1/audio/voices and DELETE /v1/audio/voices/{name}: the voices resource."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Query, UploadFile
from google.protobuf import json_format

from vocalis.clients.errors import VocalisError
from vocalis.gateway.dependencies import Config, Upstream
from vocalis.gateway.errors import renamed_field
from vocalis.gateway.pools import UpstreamPools
from vocalis.tts.v1 import voices_pb2

router = APIRouter(tags=["voices"])


def voice_json(voice: voices_pb2.Voice) -> dict:
    return json_format.MessageToDict(voice, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


@router.get("/v1/audio/voices")
async def list_voices(
    client: Upstream,
    model: str = "",
    limit: Annotated[int | None, Query(ge=1, le=500, description="Voices per page; with it (or page_token) one page is returned.")] = None,
    page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
) -> dict:
    """Without `limit` and `page_token`, every voice (the gateway walks the server's pages; the store's
    --max-voices bounds them); with either, one page and the `next_page_token` of the next ("" after the last)."""
    paged = limit is not None or bool(page_token)
    if paged:
        voices, next_token = await client.list_voices_page(model, page_size=limit or 0, page_token=page_token)
    else:
        voices, next_token = await client.list_voices(model), ""
    details = [voice_json(v) for v in voices]
    body = {
        "voices": [v.name for v in voices],
        "voice_details": details,
        "uploaded_voices": [d for d, v in zip(details, voices, strict=True) if v.kind == voices_pb2.VOICE_KIND_UPLOADED],
    }
    if paged:
        body.update(next_page_token=next_token, has_more=bool(next_token))
    return body


@router.post("/v1/audio/voices")
async def create_voice(
    client: Upstream,
    config: Config,
    name: Annotated[str, Form(description="Voice name: 1 to 64 of A-Z a-z 0-9 _ -.")],
    consent: Annotated[str, Form(description="Id of the speaker's recorded consent.")],
    audio_sample: Annotated[UploadFile | None, File(description="A 1 to 30 s clip of the speaker (at most 10 MiB).")] = None,
    speaker_embedding: Annotated[str | None, Form(description="A JSON array of numbers, instead of a clip.")] = None,
    ref_text: Annotated[str | None, Form(description="Transcript of the clip.")] = None,
    speaker_description: Annotated[str | None, Form(description="Description of the speaker.")] = None,
) -> dict:
    request = voices_pb2.CreateVoiceRequest(
        name=name.strip(), consent=consent, ref_text=(ref_text or "").strip(), speaker_description=speaker_description or ""
    )
    if (audio_sample is None) == (speaker_embedding is None):
        raise HTTPException(400, "give exactly one of audio_sample (a file) and speaker_embedding (a JSON array)")
    if audio_sample is not None:
        limit = config.max_upload_bytes
        data = await audio_sample.read(limit + 1)
        if len(data) > limit:
            raise HTTPException(413, f"audio_sample is larger than {limit // 2**20} MiB")
        request.audio = data
        request.mime_type = audio_sample.content_type or ""
    else:
        try:
            values = json.loads(speaker_embedding or "")
        except json.JSONDecodeError as error:
            raise HTTPException(400, f"speaker_embedding must be a JSON array of numbers: {error}") from None
        if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise HTTPException(400, "speaker_embedding must be a JSON array of numbers")
        request.speaker_embedding.extend(values)
    try:
        if isinstance(client, UpstreamPools) and len(client.pools) > 1:  # several stores: say which took the voice
            voice, outcomes = await client.upload(request)
            return {"success": True, "voice": voice_json(voice), "pools": outcomes}
        voice = await client.create_voice(request)
    except VocalisError as error:
        raise renamed_field(error, "audio", "audio_sample") from None  # the form field of the proto's `audio`
    return {"success": True, "voice": voice_json(voice)}


@router.delete("/v1/audio/voices/{name}")
async def delete_voice(name: str, client: Upstream) -> dict:
    deleted = await client.delete_voice(name)
    return {"success": True, "message": f"Voice {deleted!r} deleted"}
