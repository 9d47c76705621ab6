"""Run a fixed-shape computation at a few batch sizes, padding each batch up to the next one: the CUDA-graph pattern.

A decode step's shapes change with the number of sequences. A CUDA graph replays one captured launch sequence on
fixed buffers, so the runner keeps, per batch size, static input buffers, the body's output, and (on CUDA) the
graph captured from one run of the body. A call writes its rows into the inputs of the smallest size that fits
(the caller pads the rest), replays, and returns the first rows of the output. On a CPU, or with `capture=False`,
the same buffers and padding run eagerly, so the padding logic is tested without a GPU. Batches larger than the
largest size return None: the caller runs its ordinary eager path.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Buffers = dict[str, torch.Tensor]


@dataclass
class _Static:
    inputs: Buffers
    output: torch.Tensor | None = None
    graph: torch.cuda.CUDAGraph | None = None


class PaddedGraphRunner:
    """`make_inputs(size)` builds the static input buffers of one size, filled as padding; `body(inputs)` computes the
    output (leading dimension = size) from them only, with no host synchronisation, so that it can be captured."""

    def __init__(
        self,
        sizes: Sequence[int],
        make_inputs: Callable[[int], Buffers],
        body: Callable[[Buffers], torch.Tensor],
        device: torch.device | str,
        capture: bool | None = None,
    ) -> None:
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError(f"graph batch sizes must be positive, got {list(sizes)}")
        self.sizes = sorted(set(sizes))
        self.device = torch.device(device)
        self.capture = self.device.type == "cuda" if capture is None else capture
        if self.capture and self.device.type != "cuda":
            raise ValueError("CUDA graphs are captured on a CUDA device only")
        self._make_inputs = make_inputs
        self._body = body
        self._static: dict[int, _Static] = {}
        self._pool = None
        self.replays = 0
        """Calls served from the static buffers (captured or eager)."""
        self.fallbacks = 0
        """Calls larger than the largest size, left to the caller's eager path."""

    def size_for(self, rows: int) -> int | None:
        """The smallest size holding `rows`, or None above the largest."""
        index = bisect.bisect_left(self.sizes, rows)
        return self.sizes[index] if index < len(self.sizes) else None

    def prepare(self) -> None:
        """Build (and on CUDA capture) every size now, largest first so that smaller graphs share its memory pool."""
        for size in reversed(self.sizes):
            self._get(size)

    def __call__(self, rows: int, fill: Callable[[Buffers, int], None]) -> torch.Tensor | None:
        """`fill(inputs, rows)` writes the batch into the inputs of its padded size (rows beyond `rows` as padding);
        returns the output's first `rows` rows (a view of a static buffer: read it before the next call), or None when
        `rows` is above the largest size."""
        size = self.size_for(rows)
        if size is None:
            self.fallbacks += 1
            return None
        static = self._get(size)
        fill(static.inputs, rows)
        if static.graph is not None:
            static.graph.replay()
            output = static.output
        else:
            output = self._body(static.inputs)
        self.replays += 1
        assert output is not None
        return output[:rows]

    def _get(self, size: int) -> _Static:
        static = self._static.get(size)
        if static is None:
            static = _Static(self._make_inputs(size))
            if self.capture:
                self._capture(static)
            self._static[size] = static
        return static

    def _capture(self, static: _Static) -> None:
        # warm up on a side stream (lazy initialisations must not be captured), then capture one run of the body
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._body(static.inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            static.output = self._body(static.inputs)
        self._pool = graph.pool()
        static.graph = graph
