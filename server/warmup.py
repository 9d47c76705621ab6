"""Warm a freshly loaded model up with one short utterance before the server reports SERVING."""

from __future__ import annotations

import logging
import time

from vocalis.server.engine import Engine
from vocalis.stages.api.errors import RequestError
from vocalis.stages.runtime.request import RequestParams

log = logging.getLogger(__name__)
WARMUP_TEXT = "Hello."


async def warm_up(engine: Engine) -> None:
    """Run WARMUP_TEXT through every model with its default settings and the fields it declares for warm-up
    (`Capabilities.warmup_fields`); a model that still refuses the request is skipped."""
    for model in engine.models.values():
        try:
            voice = model.adapter.resolve_voice("")
            params = RequestParams(model=model.name, voice=voice, fields=dict(model.capabilities.warmup_fields))
            stage_input = model.adapter.stage_input(params)
        except RequestError as error:
            log.info("no warm-up for %s: %s", model.name, error)
            continue
        started = time.monotonic()
        job = engine.submit(model, WARMUP_TEXT, stage_input, "warm-up")
        try:
            async for _ in job.audio():
                pass
        except Exception as error:  # noqa: BLE001 - a warm-up failure is logged, not fatal
            log.warning("warm-up of %s failed: %s", model.name, error)
            continue
        log.info("warmed up %s in %.2f s", model.name, time.monotonic() - started)
