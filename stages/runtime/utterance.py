"""UtteranceStage: a whole unit of text in, its audio out piece by piece (Piper, diffusion models).

Requests are served one piece (e.g. one sentence) per step, earliest due first: a request that has
produced nothing yet is due when it arrived, a started one when its listener will have heard all the
audio it got so far (with the model's `sample_rate`; without it, when its last piece came back). So a
fresh request goes ahead of one whose audio is still playing, and a long text does not hold up the
short ones behind it; but under load a started request is not starved either: it is served before its
audio runs out, and never later than the requests that arrive after that moment.

With `lanes` > 1 the stage advances up to that many requests at once, each on its
own lane thread, whenever more than one request is active: a model with
single-threaded compute per lane (Piper: one single-thread ONNX session run from
each lane) then uses every core without its runs fighting over one thread pool.
A lone session (every request held has one request_id: one request, or the units of one
text) runs alone ("solo"), its units one after another, so that the model can give
each all the cores: its first audio comes soonest, and its last unit does not end
alone on one core while the other idles (Piper: a one-thread run takes ~1.7x a
two-thread one, so two units of unequal size side by side end no sooner, and a
text's units reach the stage a few at a time, the longest often last). Models read
which case they are in with solo(). A solo piece holds one lane: a request of
another session that arrives while it runs starts on a free lane at once, beside
it, rather than waiting for the rest of the piece; the two share the cores for the
rest of the solo piece.

When the stage holds one session alone while pieces of it run side by side (the other session that shared the lanes
has left), that session's later units (those that arrived while another of its units was held) go to the free lanes
longest first among themselves, all due when the first of them arrived: the session's response ends with its last
unit, so the longest should not start last and end alone on one core. With several sessions, every unit keeps its
own due time: the other sessions' units keep the lanes busy, and a session's long text must not go ahead of theirs.

A model that knows which piece is its last says so (yields it as a LastPiece): the request then
ends with that piece's audio. Otherwise it ends a step later, when its generator is found empty, and
that step waits its turn behind every fresh request's first piece: a whole piece's time or more, in
which its session can neither move on to its next unit nor admit another.

It takes a request at any place in a pipeline: the model gets the request with the payload of its first item,
the output of the stage before (None for stage 0; Piper stands there and reads only the request). The unit is
whole, so a later payload for a request it holds fails that request, as an IterativeModel without `feed` does;
an item that only ends the input (no payload) is taken as it comes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vocalis.stages.api.errors import SynthesisFailed
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import Stage, StageItem

log = logging.getLogger(__name__)

_lane = threading.local()
_DONE = object()
_POLL_S = 0.05
"""With a lane free, how long a step waits on its running pieces at most before it looks up; new input (a request,
a cancellation) wakes it at once (input_arrived), so a new request starts on a free lane without waiting."""


def solo() -> bool:
    """Whether the piece being computed on this thread is the only one running (it may use every core)."""
    return getattr(_lane, "solo", True)


@contextmanager
def on_lane(alone: bool) -> Iterator[None]:
    """Pieces computed on this thread inside the block run alone (solo() is True) or beside others."""
    _lane.solo = alone
    try:
        yield
    finally:
        _lane.solo = True


@dataclass(frozen=True)
class LastPiece:
    """A request's last piece, yielded by a model that knows it is the last: the request ends with its audio."""

    samples: np.ndarray


def piece_samples(piece: np.ndarray | LastPiece) -> np.ndarray:
    """The audio of a piece a model yielded, last or not."""
    return piece.samples if isinstance(piece, LastPiece) else piece


class UtteranceModel(Protocol):
    def synthesize(self, request: SynthesisRequest, payload: Any) -> Iterator[np.ndarray | LastPiece]:
        """Mono float32 pieces at the model's rate, each as soon as it exists, the last one as a LastPiece where the
        model knows it (nothing may follow it). `payload` is the output of the stage before (None for stage 0)."""
        ...


class UtteranceStage(Stage):
    def __init__(
        self, name: str, model: UtteranceModel, max_num_seqs: int = 16, lanes: int = 1, sample_rate: int | None = None
    ) -> None:
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.lanes = lanes
        self._waiting: OrderedDict[int, tuple[SynthesisRequest, Any]] = OrderedDict()
        """Requests not started yet, with the payload of their first item."""
        self._active: OrderedDict[int, tuple[SynthesisRequest, Iterator[np.ndarray | LastPiece]]] = OrderedDict()
        self._batch: list[SynthesisRequest] = []
        self._due: dict[int, float] = {}
        """When each request's next piece is due (monotonic seconds): see the module docstring."""
        self._heard_from: dict[int, tuple[float, int]] = {}
        """Of each started request: when its first piece came back, and the samples it got since."""
        self.sample_rate = sample_rate
        self._running: dict[Future, tuple[int, bool]] = {}
        """Pieces being computed on lane threads: future -> (request key, solo)."""
        self._closing: dict[int, Iterator[np.ndarray | LastPiece]] = {}
        """Pieces of requests dropped while a piece of theirs was running: closed once it is back."""
        self._executor = ThreadPoolExecutor(lanes, thread_name_prefix=f"stage-{name}-lane") if lanes > 1 else None
        self._look_up = threading.Event()
        """Set when a piece is back or new input came: a waiting step returns to let it in."""
        self._followers: set[int] = set()
        """Requests that arrived while another of their session (request_id) was in the stage: a session's later units."""

    def add(self, item: StageItem) -> None:
        key = id(item.request)
        if key not in self._waiting and key not in self._active:
            if any(request.request_id == item.request.request_id for _, request in self._held()):
                self._followers.add(key)
            self._waiting[key] = (item.request, item.payload)
            self._due[key] = time.monotonic()
        elif item.payload is not None:
            raise ValueError(f"stage {self.name} takes one input per request (a whole unit)")

    def has_work(self) -> bool:
        # A piece still running counts, even of a request dropped meanwhile: until it is back its lane is taken, and
        # an idle worker would leave it in _running, where the next request would find a lane busy (and not run solo).
        return bool(self._waiting or self._active or self._running)

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [request for _, request in self._held()]

    def _held(self) -> list[tuple[int, SynthesisRequest]]:
        return [*((key, entry[0]) for key, entry in self._waiting.items()), *((key, entry[0]) for key, entry in self._active.items())]

    def drop(self, request: SynthesisRequest) -> None:
        key = id(request)
        self._waiting.pop(key, None)
        self._due.pop(key, None)
        self._heard_from.pop(key, None)
        self._followers.discard(key)
        entry = self._active.pop(key, None)
        if entry is None:
            return
        if any(running_key == key for running_key, _ in self._running.values()):
            self._closing[key] = entry[1]  # its generator is executing on a lane; closed when the piece is back
        else:
            entry[1].close()

    def drop_closed(self) -> None:
        for request in [r for r in self.active_requests() if r.closed]:
            self.drop(request)

    def input_arrived(self) -> None:
        self._look_up.set()

    def step(self) -> list[StageItem]:
        self.drop_closed()
        while self._waiting and len(self._active) < self.max_num_seqs:
            key, (request, payload) = self._waiting.popitem(last=False)
            self._active[key] = (request, self.model.synthesize(request, payload))
        if self._executor is None:
            return self._step_inline()
        return self._step_lanes()

    # -- one piece at a time, on the worker thread --------------------------------------

    def _step_inline(self) -> list[StageItem]:
        if not self._active:
            return []
        key = self._next_keys(1)[0]
        request, pieces = self._active[key]
        self._active.move_to_end(key)
        self._batch = [request]
        try:
            samples = next(pieces)
        except StopIteration:
            self.drop(request)
            return [StageItem(request, None, finished=True)]
        except Exception as exc:  # noqa: BLE001 - one request's fault fails that request only
            self._fail(request, exc)
            return []
        return [self._output(request, samples)]

    # -- up to `lanes` pieces at once ----------------------------------------------------

    def _step_lanes(self) -> list[StageItem]:
        self._launch()
        if not self._running:
            return []
        # With a solo piece running only new input can start another piece (beside it), and new input wakes the wait.
        lanes_full = len(self._running) >= self.lanes or any(alone for _, alone in self._running.values())
        # The step's batch: the requests advancing side by side now (what the batch-size metric should show).
        self._batch = [self._active[key][0] for key, _ in self._running.values() if key in self._active]
        # Until a piece is back or new input comes: the input is added even with every lane busy (a session's later
        # units are then there to order when a lane frees), and with a lane free it may start on it.
        self._look_up.wait(None if lanes_full else _POLL_S)
        self._look_up.clear()
        done = {future for future in self._running if future.done()}
        outputs: list[StageItem] = []
        for future in done:
            key, _ = self._running.pop(future)
            if key in self._closing:
                self._closing.pop(key).close()
                continue
            request = self._active[key][0]
            try:
                samples = future.result()
            except Exception as exc:  # noqa: BLE001 - one request's fault fails that request only
                self._fail(request, exc)
                continue
            if samples is _DONE:
                self.drop(request)
                outputs.append(StageItem(request, None, finished=True))
            else:
                outputs.append(self._output(request, samples))
        return outputs

    def _output(self, request: SynthesisRequest, samples: np.ndarray | LastPiece) -> StageItem:
        """The item for a piece the model made; a LastPiece ends its request (its generator is closed)."""
        if isinstance(samples, LastPiece):
            self.drop(request)
            return StageItem(request, piece_samples(samples), finished=True)
        self._note_piece(id(request), len(samples))
        return StageItem(request, samples)

    def _note_piece(self, key: int, samples: int) -> None:
        """A piece of `samples` came back: the request is next due when that audio will have played."""
        now = time.monotonic()
        if self.sample_rate is None:
            self._due[key] = now
            return
        first_at, heard = self._heard_from.get(key, (now, 0))
        self._heard_from[key] = (first_at, heard + samples)
        self._due[key] = first_at + (heard + samples) / self.sample_rate

    def _launch(self) -> None:
        """Start pieces on free lanes: alone, one at a time, for a lone session; else one per lane. A solo piece holds
        one lane: a request of another session that comes meanwhile starts beside it at once (its first audio does
        not wait for the rest of the solo piece; the cores are shared meanwhile), one of its own session after it."""
        assert self._executor is not None
        running = {key for key, _ in self._running.values()}
        solo_sessions = {self._active[key][0].request_id for key, alone in self._running.values() if alone and key in self._active}
        idle = [key for key in self._active if key not in running and self._active[key][0].request_id not in solo_sessions]
        if not idle:
            return
        sessions = {request.request_id for _, request in self._held()}
        alone = not running and len(sessions) == 1
        # The session's earliest unit: the one its listener hears first.
        keys = [min(idle, key=self._due.__getitem__)] if alone else self._next_keys(self.lanes - len(running), among=idle)
        for key in keys:
            request, pieces = self._active[key]
            self._active.move_to_end(key)
            future = self._executor.submit(_advance, pieces, alone)
            future.add_done_callback(lambda _: self._look_up.set())
            self._running[future] = (key, alone)

    def _fail(self, request: SynthesisRequest, exc: Exception) -> None:
        """Fail one request; a fault the model reports (SynthesisFailed) is logged without a traceback."""
        if isinstance(exc, SynthesisFailed):
            log.warning("stage %s failed request %s: %s: %s", self.name, request.request_id, type(exc).__name__, exc)
        else:
            log.exception("stage %s failed request %s", self.name, request.request_id)
        self.drop(request)
        if not request.closed:
            request.fail(SynthesisFailed(f"{self.name} failed: {type(exc).__name__}: {exc}"))

    def _next_keys(self, count: int, among: list[int] | None = None) -> list[int]:
        """Up to `count` requests to advance, earliest due first (in turn among equals). When the stage holds one
        session alone, its later units not started yet are due with the first of them, longest text first."""
        keys = list(self._active) if among is None else among
        order = {key: (self._due.get(key, 0.0), 0) for key in keys}
        later = [key for key in keys if key in self._followers and key not in self._heard_from]
        if later and len({request.request_id for _, request in self._held()}) == 1:
            due = min(self._due[key] for key in later)
            order.update({key: (due, -len(self._active[key][0].text)) for key in later})
        return sorted(keys, key=order.__getitem__)[: max(0, count)]


def _advance(pieces: Iterator[np.ndarray | LastPiece], alone: bool) -> object:
    """The next piece of a request, computed on a lane thread (_DONE when it has no more)."""
    with on_lane(alone):
        return next(pieces, _DONE)
