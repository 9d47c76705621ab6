"""RequestTable: the bookkeeping every stage repeats, written once.

A stage keeps one entry per request it holds (a sequence, a stream of frames, a job), in arrival
order; the worker asks it which requests the step in progress covers (to fail them if the step
raises), which it holds (metrics), and tells it to drop one or every closed one. Stages subclass it
and override `_release` when an entry holds something to free (a cache slot, a generator).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import Stage


class HasRequest(Protocol):
    @property
    def request(self) -> SynthesisRequest: ...


EntryT = TypeVar("EntryT", bound=HasRequest)


class RequestTable(Stage, Generic[EntryT]):
    """Entries by request, in arrival order, plus the requests of the current step."""

    def __init__(self) -> None:
        self._entries: OrderedDict[int, EntryT] = OrderedDict()
        self._batch: list[SynthesisRequest] = []

    # -- for subclasses --------------------------------------------------------------------------

    def _entry(self, request: SynthesisRequest) -> EntryT | None:
        return self._entries.get(id(request))

    def _put(self, entry: EntryT) -> EntryT:
        self._entries[id(entry.request)] = entry
        return entry

    def _each(self) -> Iterator[EntryT]:
        """The entries in order, safe to drop from while iterating."""
        return iter(list(self._entries.values()))

    def _release(self, entry: EntryT) -> None:
        """Free what `entry` holds; called once when it is dropped."""

    # -- the Stage protocol's bookkeeping ----------------------------------------------------------

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [entry.request for entry in self._entries.values()]

    def drop(self, request: SynthesisRequest) -> None:
        entry = self._entries.pop(id(request), None)
        if entry is not None:
            self._release(entry)

    def drop_closed(self) -> None:
        for entry in self._each():
            if entry.request.closed:
                self.drop(entry.request)
