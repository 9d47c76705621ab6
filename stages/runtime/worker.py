"""A thread that owns one stage: inbox in, steps while there is work, outputs routed on.

Outputs go to the next worker's inbox, or, from the last stage, into each
request's audio stream. The thread blocks on its inbox when the stage has nothing
to do, so an idle pipeline costs no CPU. An exception in a step fails only the
requests of that step's batch; the worker goes on with the others.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext

from vocalis.stages.api.errors import RequestError, SynthesisFailed
from vocalis.stages.runtime.device_share import SteppingClock
from vocalis.stages.runtime.openmp_teams import release_team
from vocalis.stages.runtime.output import batched_delivery
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import Stage, StageItem

log = logging.getLogger(__name__)

_STOP = object()

TEAM_GRACE_S = 0.005
"""Idle this long after a step, a worker lets its OpenMP team go (openmp_teams). Making the team again costs ~0.4 ms,
so a worker that is idle for less (a tiny model between requests) keeps it."""


def inference_mode_if_torch() -> AbstractContextManager[object]:
    """torch.inference_mode() when torch is loaded (a neural family imported it), else nothing:
    the Piper-only install has no torch, and its stages never touch it."""
    torch = sys.modules.get("torch")
    return torch.inference_mode() if torch is not None else nullcontext()


class StageWorker:
    def __init__(self, stage: Stage, next_worker: StageWorker | None = None) -> None:
        self.stage = stage
        self.next = next_worker
        self.observer: Callable[[str, int], None] | None = None
        """Called after every step with the stage name and the step's batch size (metrics)."""
        self.inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=f"stage-{stage.name}", daemon=True)
        self._team_held = False
        """Whether the thread stepped since it last let its OpenMP team go."""
        self.on_free: Callable[[], None] | None = None
        """Called (on this thread) when the stage, whose overlap slowdown is measured, has no work left to step."""
        self.stepping = SteppingClock()
        """The pipeline's: every step of every worker is counted on it (device_share.py)."""
        self._busy = False
        self._busy_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def put(self, items: Iterable[StageItem]) -> None:
        with self._busy_lock:  # busy from here: the stage before may look again before this thread takes them
            self.inbox.put(list(items))
            self._busy = True
        self.stage.input_arrived()

    def busy_slowdown(self) -> float | None:
        """The stage's overlap slowdown while it has work to step (or items not taken yet), else None; any thread."""
        return self.stage.overlap_slowdown() if self._busy else None

    def wake(self) -> None:
        """Run the loop once even with nothing new: it drops the requests closed meanwhile."""
        self.inbox.put([])
        self.stage.input_arrived()

    def stop(self, timeout: float | None = 5.0) -> None:
        self.inbox.put(_STOP)
        self._thread.join(timeout)

    def _loop(self) -> None:
        with inference_mode_if_torch():  # the one place a stage's model runs in inference mode: its add() and step()
            self._serve()

    def _serve(self) -> None:
        while True:
            try:
                if self.stage.has_work():
                    message = self.inbox.get_nowait()
                else:  # idle, or a stage holding work back until more comes or a deadline (ChunkStage.wake_in)
                    message = self._wait(self.stage.wake_in())
            except queue.Empty:
                message = None
            while message is not None:
                if message is _STOP:
                    return
                self._add(message)  # type: ignore[arg-type]
                try:
                    message = self.inbox.get_nowait()
                except queue.Empty:
                    message = None
            self.stage.drop_closed()
            if self.stage.has_work():
                self._step()
                self._team_held = True
            self._note_busy()

    def _note_busy(self) -> None:
        with self._busy_lock:
            freed = self._busy and not self.stage.has_work() and self.inbox.empty()
            if freed:
                self._busy = False
        if freed and self.on_free is not None and self.stage.overlap_slowdown() is not None:
            self.on_free()

    def _wait(self, timeout: float | None) -> object:
        """The next inbox message within `timeout` (None: however long), else queue.Empty. Idle past TEAM_GRACE_S
        after a step, the thread lets its OpenMP team go: it would keep every other stage's parallel ops from
        spinning (openmp_teams)."""
        if self._team_held and (timeout is None or timeout > TEAM_GRACE_S):
            try:
                return self.inbox.get(timeout=TEAM_GRACE_S)
            except queue.Empty:
                release_team()
                self._team_held = False
                timeout = None if timeout is None else timeout - TEAM_GRACE_S
        return self.inbox.get(timeout=timeout)

    def _add(self, items: list[StageItem]) -> None:
        for item in items:
            if item.request.closed:
                continue
            try:
                self.stage.add(item)
            except Exception as exc:  # noqa: BLE001 - bad input fails its own request only
                log.warning("stage %s refused request %s: %s", self.stage.name, item.request.request_id, exc)
                self._fail([item.request], exc)

    def _step(self) -> None:
        self.stepping.begin()
        try:
            outputs = self.stage.step()
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives on
            log.exception("stage %s failed a step", self.stage.name)
            self._fail(self.stage.batch_requests(), exc)
            return
        finally:
            self.stepping.end()
        if self.observer is not None:
            self.observer(self.stage.name, len(self.stage.batch_requests()))
        for item in outputs:
            item.request.mark_stage_output(self.stage.name)
        if self.next is not None:
            if outputs:
                self.next.put(outputs)
            return
        with batched_delivery():
            for item in outputs:
                if item.payload is not None:
                    item.request.emit(item.payload)
                if item.finished:
                    item.request.finish()

    def _fail(self, requests: list[SynthesisRequest], exc: Exception) -> None:
        for request in requests:
            self.stage.drop(request)
            if request.closed:
                continue
            if isinstance(exc, RequestError):  # the request's own input, refused by the stage: the caller can fix it
                request.fail(exc)
            else:
                request.fail(SynthesisFailed(f"{self.stage.name} failed: {type(exc).__name__}: {exc}"))
