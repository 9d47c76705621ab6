"""UtteranceStage: a whole unit of text in, its audio out piece by piece (Piper, diffusion models).

Requests are served one piece (e.g. one sentence) per step: a request that has
produced nothing yet first, then the others round-robin, so a long text does not
hold up the short ones that arrive behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from vocalis.stages.request import SynthesisRequest
from vocalis.stages.request_table import RequestTable
from vocalis.stages.stage import StageItem


class UtteranceModel(Protocol):
    def synthesize(self, request: SynthesisRequest) -> Iterator[np.ndarray]:
        """Mono float32 pieces at the model's rate, each as soon as it exists."""
        ...


@dataclass(eq=False)
class _Utterance:
    request: SynthesisRequest
    pieces: Iterator[np.ndarray] | None = None
    """The model's generator once the request runs; None while it waits."""
    started: bool = False


class UtteranceStage(RequestTable[_Utterance]):
    def __init__(self, name: str, model: UtteranceModel, max_num_seqs: int = 16) -> None:
        super().__init__()
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs

    def add(self, item: StageItem) -> None:
        if self._entry(item.request) is None:
            self._put(_Utterance(item.request))

    def has_work(self) -> bool:
        return bool(self._entries)

    def _release(self, entry: _Utterance) -> None:
        if entry.pieces is not None:
            entry.pieces.close()

    def step(self) -> list[StageItem]:
        self.drop_closed()
        running = [entry for entry in self._entries.values() if entry.pieces is not None]
        for entry in self._each():
            if len(running) >= self.max_num_seqs:
                break
            if entry.pieces is None:
                entry.pieces = self.model.synthesize(entry.request)
                running.append(entry)
        if not running:
            return []
        # A request that has produced nothing yet goes first (time to first audio); the rest take turns.
        entry = next((e for e in running if not e.started), running[0])
        self._entries.move_to_end(id(entry.request))
        entry.started = True
        self._batch = [entry.request]
        try:
            samples = next(entry.pieces)  # type: ignore[arg-type]
        except StopIteration:
            self.drop(entry.request)
            return [StageItem(entry.request, None, finished=True)]
        return [StageItem(entry.request, samples)]
