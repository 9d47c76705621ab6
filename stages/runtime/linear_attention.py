"""Gated DeltaNet linear attention over per-sequence recurrent state, for a batch that mixes prefill chunks and decodes.

A linear-attention layer keeps, per sequence, a fixed-size state instead of keys and values: the last
`kernel - 1` inputs of its short causal convolution and a [heads, key_dim, value_dim] matrix updated by the gated
delta rule at every position. The runtime holds these in `RecurrentStates`, one slot per running sequence (slots
are bookkept by block_manager.SlotManager beside the KV blocks); a step reads each sequence's slot, runs its tokens
and writes the slot back in place, so a prompt prefilled in chunks carries its state from one chunk to the next.

The flattened tokens of a step are laid out as rows [B, L] (one per sequence, right-padded): padded positions get
beta = 0 and no decay, so they change neither the outputs before them nor the state. A step of decodes only (one
token each) uses the per-token recurrence; anything longer the chunked (WY) form, both batched over sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vocalis.stages.runtime.block_manager import StateShape

CHUNK = 64
"""Positions per block of the chunked form (its triangular solves are CHUNK x CHUNK)."""


class RecurrentStates:
    """conv: [num_layers, num_slots, conv_channels, conv_width] in the model's dtype; recurrent:
    [num_layers, num_slots, heads, key_dim, value_dim] in float32 (the recurrence accumulates over the whole
    sequence). Allocated once at start-up, one slot per seat of the stage."""

    def __init__(self, shape: StateShape, num_slots: int, dtype: torch.dtype = torch.float32,
                 device: str | torch.device = "cpu") -> None:
        self.shape = shape
        self.num_slots = num_slots
        self.device = torch.device(device)
        self.conv = torch.zeros((shape.num_layers, num_slots, shape.conv_channels, shape.conv_width), dtype=dtype, device=self.device)
        self.recurrent = torch.zeros(
            (shape.num_layers, num_slots, shape.num_heads, shape.key_dim, shape.value_dim), dtype=torch.float32, device=self.device
        )

    @property
    def bytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + self.recurrent.numel() * self.recurrent.element_size()

    def reset(self, slots: torch.Tensor) -> None:
        """Zero the slots [n] of sequences that start (or restart after preemption) at position 0."""
        self.conv[:, slots] = 0
        self.recurrent[:, slots] = 0


@dataclass
class RecurrentBatch:
    """Where the flattened tokens of a step sit in rows [B, L], one row per sequence."""

    slots: torch.Tensor
    """[B] each sequence's state slot."""
    lengths: torch.Tensor
    """[B] its tokens in this step."""
    index: torch.Tensor
    """[B, L] step token at each row position (padding repeats the row's first token)."""
    valid: torch.Tensor
    """[B, L] real (True) or padding."""
    decode_only: bool
    """Every sequence has one token: the per-token recurrence applies."""

    @classmethod
    def build(cls, slots: list[int], query_lens: list[int], device: str | torch.device = "cpu") -> RecurrentBatch:
        width = max(query_lens)
        index, valid, first = [], [], 0
        for n in query_lens:
            index.extend(first + (j if j < n else 0) for j in range(width))
            valid.extend(j < n for j in range(width))
            first += n
        rows = len(query_lens)
        return cls(
            slots=torch.tensor(slots, dtype=torch.long, device=device),
            lengths=torch.tensor(query_lens, dtype=torch.long, device=device),
            index=torch.tensor(index, dtype=torch.long, device=device).view(rows, width),
            valid=torch.tensor(valid, dtype=torch.bool, device=device).view(rows, width),
            decode_only=width == 1,
        )

    @classmethod
    def decodes(cls, slots: torch.Tensor, order: torch.Tensor) -> RecurrentBatch:
        """One token per sequence: `slots` [B] on the device, `order` = arange(B) there."""
        ones = torch.ones_like(order)
        return cls(slots=slots, lengths=ones, index=order.view(-1, 1), valid=ones.bool().view(-1, 1), decode_only=True)

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L, ...] of step tokens x [T, ...]."""
        return x[self.index]

    def flatten(self, rows: torch.Tensor) -> torch.Tensor:
        """[T, ...] of rows [B, L, ...], in step order (padding dropped)."""
        return rows[self.valid] if not self.decode_only else rows[:, 0]


def causal_conv(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor, lengths: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal convolution of rows x [B, C, L] continuing from state [B, C, K-1] (the inputs before them),
    weight [C, K]. Returns SiLU(conv) [B, C, L] and the new state: the K-1 inputs before position `lengths[b]` of
    each row (the row's real length; None: all L are real)."""
    width = weight.shape[1] - 1
    joined = torch.cat([state.to(x.dtype), x], dim=-1)  # [B, C, K-1+L]
    out = F.silu(F.conv1d(joined, weight[:, None].to(x.dtype), groups=x.shape[1]))
    if lengths is None:
        new_state = joined[..., joined.shape[-1] - width:]
    else:
        take = lengths[:, None] + torch.arange(width, device=x.device)[None]  # [B, K-1]
        new_state = joined.gather(2, take[:, None].expand(-1, x.shape[1], -1))
    return out, new_state


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def gated_delta_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, beta: torch.Tensor,
                     state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One position per row: q/k [B, H, Dk] (normalised, q scaled), v [B, H, Dv], log_decay/beta [B, H], state
    [B, H, Dk, Dv] (float32). The state decays, the value it predicts for k is corrected toward v by beta, and q
    reads it. Returns out [B, H, Dv] and the new state."""
    state = state * log_decay.exp()[..., None, None]
    predicted = (k[..., None, :] @ state)[..., 0, :]  # batched matmuls: several times faster than einsum on CPU
    delta = (v - predicted) * beta[..., None]
    state = state + k[..., :, None] * delta[..., None, :]
    return (q[..., None, :] @ state)[..., 0, :], state


def gated_delta_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, beta: torch.Tensor,
                        state: torch.Tensor, chunk: int = CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """The same recurrence over whole rows at once: q/k [B, H, L, Dk], v [B, H, L, Dv], log_decay/beta [B, H, L],
    state [B, H, Dk, Dv]; all float32. Returns out [B, H, L, Dv] and the state after position L-1.

    Within a block of `chunk` positions the corrections d_i = beta_i (v_i - S_{i-1}^T k_i) solve one unit lower
    triangular system (each depends on the earlier ones through k_i . k_j and the decay between them); the output
    and the state at the block's end then follow by matrix products, and blocks are scanned in order."""
    b, h, length, dk = k.shape
    pad = (-length) % chunk
    if pad:  # padded positions: no decay, beta 0 (no write); their outputs are dropped
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        log_decay, beta = F.pad(log_decay, (0, pad)), F.pad(beta, (0, pad))
    n = (length + pad) // chunk
    q, k, v = (t.reshape(b, h, n, chunk, t.shape[-1]) for t in (q, k, v))
    log_decay, beta = log_decay.reshape(b, h, n, chunk), beta.reshape(b, h, n, chunk)
    cum = log_decay.cumsum(-1)  # [B, H, N, C] log of the decay from the block's start through position i
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    between = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()  # decay from j to i
    strict = ~lower | torch.eye(chunk, dtype=torch.bool, device=q.device)
    system = (beta[..., :, None] * (k @ k.transpose(-1, -2)) * between).masked_fill(strict, 0)
    system = system + torch.eye(chunk, device=q.device)
    # d = system^-1 (beta v) - system^-1 (beta exp(cum) k) S0, per block, with S0 the state at the block's start
    from_values = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False, unitriangular=True)
    from_state = torch.linalg.solve_triangular(system, (beta * cum.exp())[..., None] * k, upper=False, unitriangular=True)
    scores = (q @ k.transpose(-1, -2)) * between  # q_i . k_j decayed from j to i, j <= i
    q_decayed = q * cum.exp()[..., None]
    k_to_end = k * (cum[..., -1:] - cum).exp()[..., None]
    end_decay = cum[..., -1].exp()[..., None, None]
    out = torch.empty_like(v)
    for i in range(n):
        delta = from_values[:, :, i] - from_state[:, :, i] @ state
        out[:, :, i] = q_decayed[:, :, i] @ state + scores[:, :, i] @ delta
        state = state * end_decay[:, :, i] + k_to_end[:, :, i].transpose(-1, -2) @ delta
    return out.reshape(b, h, n * chunk, -1)[:, :, :length], state


def cached_linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, beta: torch.Tensor,
                            states: RecurrentStates, layer: int, batch: RecurrentBatch) -> torch.Tensor:
    """The gated delta rule of a step's rows, continuing each sequence's recurrent state at `layer` and writing it back.

    q/k [B, L, H, Dk] (normalised, q scaled), v [B, L, H, Dv], log_decay/beta [B, L, H]; padding positions must carry
    log_decay 0 and beta 0. Returns out [B, L, H, Dv] in float32."""
    initial = states.recurrent[layer].index_select(0, batch.slots)
    if batch.decode_only:
        out, final = gated_delta_step(q[:, 0], k[:, 0], v[:, 0], log_decay[:, 0], beta[:, 0], initial)
        out = out[:, None]
    else:
        heads_first = [t.transpose(1, 2) for t in (q, k, v, log_decay, beta)]
        out, final = gated_delta_chunked(*heads_first, initial)
        out = out.transpose(1, 2)
    states.recurrent[layer].index_copy_(0, batch.slots, final)
    return out
