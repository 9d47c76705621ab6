"""PrepareStage: a family's heavy per-request conditioning on a thread of its own, ahead of stage 0.

Encoding a reference clip (a speaker encoder, a codec encoder) takes longer than many generation
steps. Run in the adapter it would stall the server's event loop, and every stream with it; run in
stage 0's `start()` it would stall that stage's running sequences. A family that puts a PrepareStage
first has it done here instead, one request at a time, while stage 0 keeps stepping; the result goes
on the request (`SynthesisRequest.prepared`) for the stages after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from vocalis.stages.request import SynthesisRequest
from vocalis.stages.request_table import RequestTable
from vocalis.stages.stage import StageItem


class Preparer(Protocol):
    def prepare(self, request: SynthesisRequest[Any]) -> Any:
        """What the later stages need from the request's stage input that is costly to compute (None: nothing).
        May raise: that request fails alone."""
        ...


@dataclass(eq=False)
class _Waiting:
    request: SynthesisRequest[Any]


class PrepareStage(RequestTable[_Waiting]):
    def __init__(self, name: str, preparer: Preparer) -> None:
        super().__init__()
        self.name = name
        self.preparer = preparer

    def add(self, item: StageItem) -> None:
        if item.payload is not None:
            raise ValueError(f"stage {self.name} takes new requests only")
        self._put(_Waiting(item.request))

    def has_work(self) -> bool:
        return bool(self._entries)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        entry = next(self._each(), None)
        if entry is None:
            self._batch = []
            return []
        request = entry.request
        self._batch = [request]
        request.prepared = self.preparer.prepare(request)
        self.drop(request)
        return [StageItem(request)]
