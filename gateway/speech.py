"""POST /v1/audio/speech: one text in, one audio file or stream out."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Send

from vocalis.clients.errors import VocalisError
from vocalis.gateway.dependencies import Config, Upstream
from vocalis.gateway.disconnect import ClientGone, unless_disconnected
from vocalis.gateway.errors import error_body, http_field, http_status
from vocalis.gateway.schemas import SpeechRequest
from vocalis.gateway.translate import session_config
from vocalis.gateway.word_timestamps import word_dicts, word_timestamp_headers
from vocalis.tts.v1 import synthesizer_pb2 as pb

log = logging.getLogger(__name__)
router = APIRouter(tags=["speech"])

AUDIO_RESPONSES = {
    200: {
        "description": "Audio in the requested format; `X-Sample-Rate` gives its rate.",
        "content": {t: {} for t in ("audio/wav", "audio/pcm", "audio/flac", "audio/mpeg", "audio/ogg", "audio/aac", "text/event-stream")},
    },
}


MIN_DEADLINE_S = 0.01


@router.post("/v1/audio/speech", responses=AUDIO_RESPONSES, response_class=Response)
async def create_speech(
    body: SpeechRequest,
    client: Upstream,
    config: Config,
    request: Request,
    x_request_timeout: Annotated[float | None, Header(gt=0, le=3600, description="Deadline in seconds; past it: 504.")] = None,
) -> Response:
    if body.word_timestamps and body.streaming and not body.sse:
        message = "word_timestamps needs stream_format sse or a non-streamed response: a raw audio stream has no room for them"
        return JSONResponse(error_body(400, message, "word_timestamps", "FIELD_NOT_SUPPORTED"), status_code=400)
    request_id = getattr(request.state, "request_id", None) or f"speech-{uuid.uuid4().hex}"
    # A deadline already past when the call starts can come back from gRPC's core as INTERNAL, not
    # DEADLINE_EXCEEDED; 10 ms is still far too short for any synthesis, so the caller gets its 504.
    timeout = max(x_request_timeout or config.request_timeout_s, MIN_DEADLINE_S)
    responses = client.synthesize(session_config(body, request_id), body.input, timeout=timeout)
    try:
        return await unless_disconnected(request, _answer(body, responses))
    except ClientGone:
        await responses.aclose()  # cancels the call: the server stops synthesizing for nobody
        return Response(status_code=499)


async def _answer(body: SpeechRequest, responses: AsyncIterator[pb.SynthesizeResponse]) -> Response:
    started = (await anext(responses)).session_started
    headers = {"X-Sample-Rate": str(started.sample_rate), "X-Request-Id": started.request_id}
    if not body.progressive or (body.word_timestamps and not body.streaming):  # the times go in a header: all at once
        audio = bytearray()
        warnings = []
        words: list[dict] = []
        async for response in responses:
            if response.WhichOneof("response") == "audio":
                audio += response.audio.audio
            elif response.WhichOneof("response") == "warning":
                warnings.append(response.warning)
            elif response.WhichOneof("response") == "word_timings":
                words += word_dicts(response.word_timings)
        if body.word_timestamps:
            headers.update(word_timestamp_headers(words))
        return _with_warnings(Response(bytes(audio), media_type=started.media_type, headers=headers), warnings)
    # Hold the status line until the first audio, so that early failures are ordinary JSON errors.
    # The server's warnings come before any audio, so they are all here, in time for the headers.
    prefetched = []
    async for response in responses:
        prefetched.append(response)
        if response.WhichOneof("response") in ("audio", "session_done"):
            break
    warnings = [r.warning for r in prefetched if r.WhichOneof("response") == "warning"]
    if not body.sse:  # raw bytes in chunked transfer: OpenAI's SDK reads them as they come
        return _with_warnings(CutStream(_raw(prefetched, responses), media_type=started.media_type, headers=headers), warnings)
    return _with_warnings(
        StreamingResponse(_sse(prefetched, responses, body.response_format), media_type="text/event-stream", headers=headers), warnings
    )


class CutStream(StreamingResponse):
    """A raw audio body that a failure after its first bytes (the deadline, the audio cap, a model fault) cuts:
    it ends without its last chunk, so the connection closes and every HTTP client reports an incomplete body
    rather than a complete-looking 200 of truncated audio; the gateway logs one line, no traceback. (A raw body
    has no room for an error event: SSE ends with speech.audio.error instead, and a whole file, which waits
    for its end, gets a proper status.)"""

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except VocalisError as error:
            log.warning("audio response cut after its first bytes, the connection closed: %s (%s)",
                        error.message, error.reason or error.code.name)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


WARNING_HEADER = "X-Vocalis-Warning"


def _with_warnings(response: Response, warnings: list[pb.Warning]) -> Response:
    """One X-Vocalis-Warning header per warning: "CODE field: message"."""
    for warning in warnings:
        value = f"{warning.code} {warning.field}: {warning.message}" if warning.field else f"{warning.code}: {warning.message}"
        response.headers.append(WARNING_HEADER, "".join(c if " " <= c <= "~" else "?" for c in value))
    return response


async def _chain(prefetched: list[pb.SynthesizeResponse], rest: AsyncIterator[pb.SynthesizeResponse]) -> AsyncIterator[pb.SynthesizeResponse]:
    try:
        for response in prefetched:
            yield response
        async for response in rest:
            yield response
    finally:
        await rest.aclose()  # cancels the gRPC call when the HTTP client goes away


async def _raw(prefetched: list[pb.SynthesizeResponse], rest: AsyncIterator[pb.SynthesizeResponse]) -> AsyncIterator[bytes]:
    async for response in _chain(prefetched, rest):
        if response.WhichOneof("response") == "audio":
            yield response.audio.audio


async def _sse(
    prefetched: list[pb.SynthesizeResponse], rest: AsyncIterator[pb.SynthesizeResponse], response_format: str
) -> AsyncIterator[str]:
    sent_audio = False
    try:
        async for response in _chain(prefetched, rest):
            kind = response.WhichOneof("response")
            if kind == "warning":
                warning = response.warning
                yield _event("warning", {"code": warning.code, "message": warning.message, "param": http_field(warning.field)})
            elif kind == "word_timings":
                yield _event(
                    "speech.audio.timestamps",
                    {"utterance_index": response.word_timings.utterance_index, "words": word_dicts(response.word_timings)},
                )
            elif kind == "audio" and response.audio.audio:
                sent_audio = True
                audio = base64.b64encode(response.audio.audio).decode()
                yield _event("speech.audio.delta", {"audio": audio, "response_format": response_format})
            elif kind == "session_done":
                usage = response.session_done.usage
                yield _event(
                    "speech.audio.done",
                    {
                        "usage": {
                            "input_tokens": usage.input_tokens,
                            "output_tokens": usage.output_tokens,
                            "total_tokens": usage.input_tokens + usage.output_tokens,
                        },
                        "audio_seconds": response.session_done.audio_seconds,
                    },
                )
    except VocalisError as error:
        body = error_body(http_status(error), error.message, http_field(error.field), error.reason or None)
        if sent_audio:
            body["error"].update(partial_audio=True, action="discard")
        yield _event("speech.audio.error", body)


def _event(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
