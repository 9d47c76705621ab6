"""One request's generation state inside an autoregressive stage. No tensors, no torch."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

D = TypeVar("D")


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    """Admitted to the stage, holding no cache blocks (new, or preempted to be recomputed)."""
    RUNNING = "running"
    """Holds cache blocks; prefilling or decoding."""
    FINISHED = "finished"


class FinishReason(enum.Enum):
    EOS = "eos"
    """The model ended the sequence."""
    LENGTH = "length"
    """max_new_tokens reached."""
    CACHE_FULL = "cache_full"
    """The KV-cache budget cannot hold the sequence's next position even with the whole cache to itself."""
    ABORTED = "aborted"
    """Cancelled, failed or dropped by the stage."""


@dataclass(eq=False)
class Sequence(Generic[D]):
    """Bookkeeping of one sequence: how much of it is in the cache, how much it generated, where its blocks are.

    The stage keeps its tensors in `data` (a type of its own), so the scheduling
    policy runs, and is tested, without torch.
    """

    seq_id: int
    prompt_len: int
    max_new_tokens: int
    request: Any = None
    data: D | None = None
    status: SequenceStatus = SequenceStatus.WAITING
    block_table: list[int] = field(default_factory=list)
    """Cache blocks holding positions 0..num_computed-1 (and room for this step's chunk), in order."""
    num_computed: int = 0
    """Positions whose keys/values are in the cache."""
    state_slot: int | None = None
    """Recurrent-state slot held while running, for a model with linear-attention layers (None otherwise)."""
    num_generated: int = 0
    num_preemptions: int = 0
    finish_reason: FinishReason | None = None

    @property
    def length(self) -> int:
        """Positions the sequence has once its pending input is computed."""
        return self.prompt_len + self.num_generated

    @property
    def pending(self) -> int:
        """Input positions not yet in the cache (prompt remainder, the last generated frame, or all after a preemption)."""
        return self.length - self.num_computed

    @property
    def in_prefill(self) -> bool:
        """More than one position to compute: a prompt, or a recompute after preemption."""
        return self.pending > 1
