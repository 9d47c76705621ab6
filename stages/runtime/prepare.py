"""PrepareStage: a family's heavy per-request conditioning off the event loop and off stage 0.

Encoding a reference clip (a speaker encoder, a codec encoder) takes longer than many generation
steps. Run in the adapter it would stall the server's event loop, and every stream with it; run in
stage 0's `start()` it would stall that stage's running sequences. A family that puts a PrepareStage
first has it done here instead, while stage 0 keeps stepping; the result goes on the request
(`SynthesisRequest.prepared`) for the stages after it.

Only a clip that has to be encoded waits for an encoder: those run one at a time on the stage's
encoder thread, while requests with nothing to encode (no clip, an uploaded voice, a clip already
cached) pass straight on. Otherwise one new clip would hold up every request that arrives during its
encoding, a session's next sentence included.

It may stand anywhere in a pipeline: what comes for a request (the request itself at stage 0, or the outputs of
the stage before) is held until the request is prepared, then passed on as it came, in order.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from vocalis.stages.runtime.openmp_teams import then_release
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import CacheStats, StageItem
from vocalis.stages.runtime.worker import inference_mode_if_torch

POLL_SECONDS = 0.005
"""How long a step waits for an encoding when it has nothing else to pass on: new arrivals wait at most this."""


class Preparer(Protocol):
    def prepare(self, request: SynthesisRequest[Any]) -> Any:
        """What the later stages need from the request's stage input that is costly to compute (None: nothing).
        May raise: that request fails alone."""
        ...

    def costly(self, request: SynthesisRequest[Any]) -> bool:
        """Whether `prepare` has to encode something (False: it returns at once, from the input or a cache)."""
        ...

    def caches(self) -> dict[str, CacheStats]:
        """The preparer's caches of encodings by name, for the metrics; none by default (subclass Preparer for it)."""
        return {}


@dataclass(eq=False)
class _Waiting:
    request: SynthesisRequest[Any]
    held: list[StageItem] = field(default_factory=list)
    """What came for the request and is not passed on yet (all of it until the request is prepared)."""
    encoding: Future[Any] | None = None
    prepared: bool = False


class PrepareStage(RequestTable[_Waiting]):
    def __init__(self, name: str, preparer: Preparer) -> None:
        super().__init__()
        self.name = name
        self.preparer = preparer
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"stage-{name}-encoder")

    def add(self, item: StageItem) -> None:
        entry = self._entry(item.request) or self._put(_Waiting(item.request))
        entry.held.append(item)

    def caches(self) -> dict[str, CacheStats]:
        return self.preparer.caches()

    def has_work(self) -> bool:
        return any(entry.held for entry in self._entries.values())

    def step(self) -> list[StageItem]:
        self.drop_closed()
        self._batch = []
        ready: list[StageItem] = []
        for entry in self._each():
            if entry.prepared:
                ready += self._pass_on(entry)
            elif entry.encoding is None and not self.preparer.costly(entry.request):
                ready += self._prepared(entry, self.preparer.prepare(entry.request))
            elif entry.encoding is None:
                entry.encoding = self._encoder.submit(self._encode, entry.request)
        if ready:
            return ready
        encoding = [entry for entry in self._entries.values() if entry.encoding is not None and not entry.prepared]
        wait([entry.encoding for entry in encoding], timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
        for entry in encoding:
            if not entry.encoding.done():
                continue
            if entry.encoding.exception() is not None:
                if ready:
                    break  # pass the others on first; this one fails on the next step
                self._batch = [entry.request]  # the encoder's error fails this request alone
                entry.encoding.result()
            ready += self._prepared(entry, entry.encoding.result())
        return ready

    def _encode(self, request: SynthesisRequest[Any]) -> Any:
        if request.closed:
            return None
        with inference_mode_if_torch():  # on the encoder's thread, whose OpenMP team then goes (openmp_teams)
            return then_release(self.preparer.prepare, request)

    def _prepared(self, entry: _Waiting, prepared: Any) -> list[StageItem]:
        entry.request.prepared = prepared
        entry.prepared = True
        return self._pass_on(entry)

    def _pass_on(self, entry: _Waiting) -> list[StageItem]:
        """What a prepared request holds; it is forgotten once the last of its input has passed."""
        items, entry.held = entry.held, []
        if any(item.ends_input for item in items):
            self.drop(entry.request)
        return items

    def _release(self, entry: _Waiting) -> None:
        if entry.encoding is not None:
            entry.encoding.cancel()  # a closed request's clip is not encoded if it has not started
