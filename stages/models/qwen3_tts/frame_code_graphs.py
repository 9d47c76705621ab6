"""The per-frame sub-step loop (frame_codes.py) on static buffers padded to a few batch sizes: CUDA graphs on a GPU.

Each sub-step (the first over the backbone's hidden state and first code, then one per codebook) is one fixed-shape
body per padded batch size: its inputs (the first inputs, or the code just chosen) and the small decoder's keys and
values live in buffers shared by the sub-steps of that size, so every sub-step can be captured as a graph and
replayed. Choosing each code stays outside, on the host, between replays (per-request sampling and seeds are the
caller's, as in the eager loop). Padding rows are rows of their own in every buffer: they never mix with real ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from vocalis.stages.runtime.graph_runner import Buffers, PaddedGraphRunner

StaticStep = Callable[[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], int], torch.Tensor]
"""static_step(inputs [B, T, H], per-layer (k, v) buffers [B, Hkv, positions, D], start) -> hidden [B, T, H']."""


class FrameCodeGraphs:
    def __init__(
        self,
        static_step: StaticStep,
        layers: int,
        groups: int,
        head: Callable[[int, torch.Tensor], torch.Tensor],
        embed: Callable[[int, torch.Tensor], torch.Tensor],
        kv_heads: int,
        head_dim: int,
        input_width: int,
        dtype: torch.dtype,
        device: torch.device | str,
        sizes: Sequence[int],
        capture: bool | None = None,
    ) -> None:
        self.static_step, self.layers, self.groups, self.head, self.embed = static_step, layers, groups, head, embed
        self.kv_heads, self.head_dim, self.input_width, self.dtype = kv_heads, head_dim, input_width, dtype
        self.device = torch.device(device)
        self._buffers: dict[int, Buffers] = {}
        # sub-step g computes codebook g's logits: g = 0 from the first inputs, g > 0 from codebook g-1's code
        self.runners = [
            PaddedGraphRunner(sizes, self._shared, lambda inputs, g=g: self._body(inputs, g), self.device, capture)
            for g in range(groups)
        ]

    def _shared(self, size: int) -> Buffers:
        """The buffers of one padded size, shared by its sub-steps."""
        buffers = self._buffers.get(size)
        if buffers is None:
            positions = self.groups + 1
            kv = torch.zeros(self.layers, 2, size, self.kv_heads, positions, self.head_dim, dtype=self.dtype, device=self.device)
            buffers = {
                "first": torch.zeros(size, 2, self.input_width, dtype=self.dtype, device=self.device),
                "code": torch.zeros(size, dtype=torch.long, device=self.device),
                "kv": kv,
            }
            self._buffers[size] = buffers
        return buffers

    def _body(self, inputs: Buffers, group: int) -> torch.Tensor:
        kv = [(inputs["kv"][layer, 0], inputs["kv"][layer, 1]) for layer in range(self.layers)]
        if group == 0:
            hidden = self.static_step(inputs["first"], kv, 0)[:, -1]
        else:
            hidden = self.static_step(self.embed(group - 1, inputs["code"])[:, None], kv, group + 1)[:, -1]
        return self.head(group, hidden)

    def generate(self, first_inputs: torch.Tensor, choose: Callable[[int, torch.Tensor], torch.Tensor]
                 ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Codes [B, groups] and logits [B, groups, V], as `generate_frame_codes` (no teacher forcing), or None when
        B is above the largest size."""
        rows = first_inputs.shape[0]

        def fill_first(inputs: Buffers, rows: int) -> None:
            inputs["first"][:rows].copy_(first_inputs)

        logits = self.runners[0](rows, fill_first)
        if logits is None:
            return None
        codes, all_logits = [], []
        for group in range(self.groups):
            logits = logits.clone()  # the static output is overwritten by the next replay
            all_logits.append(logits)
            code = choose(group, logits)
            codes.append(code)
            if group + 1 < self.groups:

                def fill_code(inputs: Buffers, rows: int, code: torch.Tensor = code) -> None:
                    inputs["code"][:rows].copy_(code)

                logits = self.runners[group + 1](rows, fill_code)
                assert logits is not None
        return torch.stack(codes, dim=1), torch.stack(all_logits, dim=1)
