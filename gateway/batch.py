"""POST /v1/audio/speech/batch: many texts in one request, each answered as base64 audio in one JSON body.

The request and response have vLLM-Omni's shape: batch-level fields are defaults that an
item's own fields override, and every item gets a result (success with its audio, or error
with the reason) in request order, so one bad item never fails the others. Items run
concurrently, at most BatchLimits.max_concurrency of one batch at a time; each is an ordinary
session on the server, so the server's admission bounds them like any other request. An item
refused because the queue is full waits for another item of its batch to finish and tries
again; only when none of its batch is left running does it fail with the server's 'busy'.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import ResourceExhausted, VocalisError
from vocalis.gateway.dependencies import Config, Upstream
from vocalis.gateway.disconnect import ClientGone, unless_disconnected
from vocalis.gateway.errors import TOO_LARGE_REASONS, error_body, renamed_field, validation_message
from vocalis.gateway.schemas import BatchItemResult, BatchSpeechRequest, BatchSpeechResponse, SpeechRequest
from vocalis.gateway.translate import session_config

router = APIRouter(tags=["speech"])


@router.post("/v1/audio/speech/batch", response_model=BatchSpeechResponse)
async def create_speech_batch(
    body: BatchSpeechRequest, client: Upstream, config: Config, request: Request
) -> BatchSpeechResponse | Response:
    limits = config.batch
    if len(body.items) > limits.max_items:
        message = f"items: a batch holds at most {limits.max_items} items, got {len(body.items)}; split it"
        return JSONResponse(error_body(400, message, "items", "TOO_MANY_ITEMS"), 400)
    if body.model:
        try:
            await client.get_model(body.model)  # an unknown model fails the batch as a whole: 404
        except VocalisError as error:
            raise renamed_field(error, "name", "model") from None  # GetModel's `name` is this body's `model`
    batch_id = f"speech-batch-{uuid.uuid4().hex}"
    timeout = config.request_timeout_s
    slots = asyncio.Semaphore(limits.max_concurrency)
    progress = asyncio.Condition()
    running = finished = 0

    def moved(since: int) -> bool:
        """An item of this batch finished since `since`, or none is running."""
        return finished != since or running == 0

    async def run(index: int) -> BatchItemResult:
        """One item; refused for a full queue while items of this batch still run, it waits for one of them and retries."""
        nonlocal running, finished
        async with slots:
            while True:
                running += 1
                try:
                    result = await _synthesize_item(client, index, body.merged(body.items[index]), f"{batch_id}-{index}", timeout)
                finally:
                    running -= 1
                    finished += 1
                    seen = finished
                    async with progress:
                        progress.notify_all()
                if result.status == "success" or not result.busy:
                    return result
                async with progress:
                    await progress.wait_for(functools.partial(moved, seen))
                    if finished == seen:
                        return result  # nothing of this batch is left to make room: the server is busy with others

    try:  # a client that leaves cancels every item still running or waiting, as the speech route does
        results = await unless_disconnected(request, asyncio.gather(*(run(i) for i in range(len(body.items)))))
    except ClientGone:
        return Response(status_code=499)
    succeeded = sum(result.status == "success" for result in results)
    return BatchSpeechResponse(id=batch_id, results=results, total=len(results), succeeded=succeeded, failed=len(results) - succeeded)


async def _synthesize_item(client: AsyncClient, index: int, fields: dict, request_id: str, timeout: float) -> BatchItemResult:
    try:
        speech = SpeechRequest.model_validate(fields)
        responses = client.synthesize(session_config(speech, request_id), speech.input, timeout=timeout)
        media_type = (await anext(responses)).session_started.media_type
        audio = bytearray()
        async for response in responses:
            if response.WhichOneof("response") == "audio":
                audio += response.audio.audio
    except ValidationError as error:
        return BatchItemResult(index=index, status="error", error=validation_message(error.errors())[0])
    except VocalisError as error:
        result = BatchItemResult(index=index, status="error", error=error.message)
        result.busy = isinstance(error, ResourceExhausted) and error.reason not in TOO_LARGE_REASONS
        return result
    return BatchItemResult(index=index, status="success", audio_data=base64.b64encode(audio).decode(), media_type=media_type)
