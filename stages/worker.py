"""A thread that owns one stage and serves the requests in its inbox one at a time."""

from __future__ import annotations

import logging
import queue
import threading
import time

from vocalis.stages.errors import SynthesisFailed
from vocalis.stages.request import SynthesisRequest
from vocalis.stages.stage import UtteranceStage

log = logging.getLogger(__name__)


class StageWorker:
    """Runs `stage` on its own thread over requests taken from a shared inbox.

    Several workers may share one inbox (and one stage object, when the stage is
    thread-safe) to serve requests in parallel. An exception fails only the request
    being served; the worker goes on with the next.
    """

    def __init__(self, stage: UtteranceStage, inbox: queue.Queue[SynthesisRequest | None], name: str) -> None:
        self.stage = stage
        self.inbox = inbox
        self.busy = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _loop(self) -> None:
        while (request := self.inbox.get()) is not None:
            self.busy = True
            try:
                self._serve(request)
            finally:
                self.busy = False

    def _serve(self, request: SynthesisRequest) -> None:
        request.started_at = time.monotonic()
        if request.cancelled:
            request.finish()
            return
        try:
            for samples in self.stage.synthesize(request):
                if request.cancelled:
                    break
                request.emit(samples)
        except Exception as exc:  # noqa: BLE001 - one request fails, the worker lives on
            log.exception("stage %s failed on request %s", self.stage.name, request.request_id)
            request.fail(SynthesisFailed(f"{self.stage.name} failed: {exc}"))
            return
        request.finish()
