"""What every stage is to its worker: items in, a step, items out.

A stage is pure compute over a batch; its worker thread owns it, feeds it what
arrives in the inbox, calls `step()` while it has work, and routes the outputs.
Four runtimes implement it: AutoregressiveStage (persistent sequences, KV
cache, continuous batching), ChunkStage (decodes frames in chunks as they come),
UtteranceStage (a whole unit of text in, its audio out) and IterativeStage
(every running request refined by one batched pass per step: masked diffusion);
a PrepareStage may go first, for a family's heavy per-request conditioning.
Every kind takes the same entry, a StageItem: a request and the output of the stage before (None for stage 0,
whose item is the request itself), so kinds compose in any order. Their add/drop bookkeeping is RequestTable's (request_table.py). How a family
plugs into them: stages/models/README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vocalis.stages.runtime.device_share import SteppingClock
from vocalis.stages.runtime.request import SynthesisRequest


@dataclass(frozen=True)
class CacheStats:
    """What a stage's cache of reusable work (a voice's primed prompt, a reference clip's encoding) has done so far,
    for the metrics."""

    hits: int
    """Lookups that found a kept entry: one per request, or one per piece where a family keeps a clip's pieces apart
    (Qwen3-TTS: its speaker vector and its codes)."""
    misses: int
    """Lookups that computed the work (and kept it where it fits)."""
    entries: int
    nbytes: int


@dataclass
class StageItem:
    """Something for a stage about one request: a new request, or output of the stage before."""

    request: SynthesisRequest
    payload: Any = None
    """None for a new request (stage 0's one item); frames (or another stage's output) otherwise."""
    finished: bool = False
    """No more payload will come for this request."""

    @property
    def ends_input(self) -> bool:
        """No more items will come for this request: the last output of the stage before, or a new request (stage 0
        gets one item per request, the request itself)."""
        return self.finished or self.payload is None


class Stage(Protocol):
    name: str

    def add(self, item: StageItem) -> None:
        """Take a new request (payload None at stage 0, else the stage before's first output) or more input for one
        it has; may raise for bad input (fails that request only)."""
        ...

    def has_work(self) -> bool:
        """Whether step() can make progress now (without waiting for more input). A stage may also hold work back
        for a moment to batch it: it then says no and gives `wake_in()`, the seconds after which to ask again."""
        ...

    def wake_in(self) -> float | None:
        """Seconds after which to ask `has_work()` again while the stage holds work back (ChunkStage's); None: not
        until more input comes."""
        return None

    def input_arrived(self) -> None:
        """Called from any thread when items are put in the stage's inbox (or a cancellation wakes it), so that a
        step waiting on work of its own (UtteranceStage's lanes) can look up at once; nothing by default."""
        return None

    def step(self) -> list[StageItem]:
        """One step over a batch; returns what it produced, per request."""
        ...

    def overlap_slowdown(self) -> float | None:
        """How many times longer this stage's steps take while another stage steps beside them, as measured
        (device_share.OverlapCost); None: not measured. Read from other stages' threads."""
        return None

    def share_device(self, stepping: SteppingClock, later_slowdown: Callable[[], float | None]) -> None:
        """Told by the pipeline: the clock that says how much of a step other stages spent stepping beside it, and
        `later_slowdown()`, the largest overlap slowdown among the later stages that have work now (None: none
        measured). A stage that can hold a request it has not started yet (IterativeStage) holds it while starting
        it would cost the requests ahead more than it gains (device_share.should_wait); by default both are
        ignored."""
        return None

    def caches(self) -> dict[str, CacheStats]:
        """The stage's caches of reusable work by name, as they stand (read from the metrics' thread); none by default."""
        return {}

    def batch_requests(self) -> list[SynthesisRequest]:
        """The requests of the step in progress (those to fail when step() raises)."""
        ...

    def active_requests(self) -> list[SynthesisRequest]:
        """Every request the stage holds (for metrics)."""
        ...

    def drop(self, request: SynthesisRequest) -> None:
        """Forget `request` and free what it holds (cache slot, buffers)."""
        ...

    def drop_closed(self) -> None:
        """Drop every request that was cancelled or failed elsewhere."""
        ...
