"""One request's generation state inside an autoregressive stage."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    """Admitted to the stage, no cache slot yet."""
    RUNNING = "running"
    """Holds a slot; prefilling or decoding."""
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """Bookkeeping of one sequence: how much of it is in the cache, how much it generated.

    No tensors here: the stage keeps them beside the sequence (`data`), so the
    scheduling policy can be tested without a model.
    """

    seq_id: int
    prompt_len: int
    max_new_tokens: int
    request: Any = None
    status: SequenceStatus = SequenceStatus.WAITING
    slot: int | None = None
    num_computed: int = 0
    """Positions whose keys/values are in the cache."""
    num_generated: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    """Model-side state: prompt embeddings, generated frames, sampler."""

    @property
    def length(self) -> int:
        """Positions the sequence has once its pending input is computed."""
        return self.prompt_len + self.num_generated

    @property
    def pending(self) -> int:
        """Input positions not yet in the cache (prompt remainder, or the last generated frame)."""
        return self.length - self.num_computed

    @property
    def in_prefill(self) -> bool:
        return self.num_computed < self.prompt_len
