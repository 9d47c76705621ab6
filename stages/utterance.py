"""UtteranceStage: a whole unit of text in, its audio out piece by piece (Piper, diffusion models).

Requests are served one piece (e.g. one sentence) per step: a request that has
produced nothing yet first, then the others round-robin, so a long text does not
hold up the short ones that arrive behind it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from vocalis.stages.request import SynthesisRequest
from vocalis.stages.stage import StageItem


class UtteranceModel(Protocol):
    def synthesize(self, request: SynthesisRequest) -> Iterator[np.ndarray]:
        """Mono float32 pieces at the model's rate, each as soon as it exists."""
        ...


class UtteranceStage:
    def __init__(self, name: str, model: UtteranceModel, max_num_seqs: int = 16) -> None:
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs
        self._waiting: OrderedDict[int, SynthesisRequest] = OrderedDict()
        self._active: OrderedDict[int, tuple[SynthesisRequest, Iterator[np.ndarray]]] = OrderedDict()
        self._batch: list[SynthesisRequest] = []
        self._started: set[int] = set()

    def add(self, item: StageItem) -> None:
        self._waiting[id(item.request)] = item.request

    def has_work(self) -> bool:
        return bool(self._waiting or self._active)

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [*self._waiting.values(), *(request for request, _ in self._active.values())]

    def drop(self, request: SynthesisRequest) -> None:
        self._waiting.pop(id(request), None)
        self._started.discard(id(request))
        entry = self._active.pop(id(request), None)
        if entry is not None:
            entry[1].close()

    def drop_closed(self) -> None:
        for request in [r for r in self._waiting.values() if r.closed] + [r for r, _ in self._active.values() if r.closed]:
            self.drop(request)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        while self._waiting and len(self._active) < self.max_num_seqs:
            key, request = self._waiting.popitem(last=False)
            self._active[key] = (request, self.model.synthesize(request))
        if not self._active:
            return []
        # A request that has produced nothing yet goes first (time to first audio); the rest take turns.
        key = next((k for k in self._active if k not in self._started), next(iter(self._active)))
        request, pieces = self._active[key]
        self._active.move_to_end(key)
        self._started.add(key)
        self._batch = [request]
        try:
            samples = next(pieces)
        except StopIteration:
            self.drop(request)
            return [StageItem(request, None, finished=True)]
        return [StageItem(request, samples)]
