"""Float tolerances derived from the arithmetic, not measured on one machine.

Why this exists: float addition is not associative, so the same computation run with other kernels sums its
terms in another order and rounds differently. Which kernels run depends on the CPU (AVX-512, AVX2 or scalar
code in ATen; oneDNN's and MKL's blocking for the ISA they find) and on the thread count (how a reduction is
split). A bound set just above the difference measured on one machine fails on the next: issue 30 found three
tests tuned on an AVX-512 CPU failing on an AVX2-only EPYC by 12%, 0.1% and 180%.

So a test states what its difference is made of, and the bound follows from the floating-point error model
(Higham, Accuracy and Stability of Numerical Algorithms, ch. 3): with machine epsilon eps (unit roundoff
u = eps / 2), a computed K-term sum is off by at most K * u * sum|terms| (every rounding the same way), and
typically by about sqrt(K) * u * sum|terms| (the roundings are independent and of either sign: a random walk).
The inputs to `rounding_bound` are read off the test's own tensors: the dtype, a magnitude, and a count of the
roundings chained on the way to one output (a reduction's length, summed over the layers or solver steps it
passes through); `traced` records both along a run.

The magnitude is the largest value on the path (`Trace.peak`) unless the test shows the path well-conditioned,
an error growing no faster than the values carrying it: then the largest value compared will do (a float64 run
of the same path landing well within that bound is the evidence; the test says what it measured). The peak is
the safe choice, and a loose one where a network's inner values dwarf its outputs.

Neither covers an ill-conditioned step, which amplifies a rounding: a sine of a large argument (a phase
integrated over many samples, a time embedding of 1000 t), an exponential of a large cumsum (decays), the log of
a value far below its neighbours (`log_power_bound` covers spectra), an argmax or a top-k with near ties. A test
through one says what it adds for it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.overrides import TorchFunctionMode


def rounding_bound(dtype: torch.dtype | np.dtype | type, magnitude: float, steps: int) -> float:
    """Absolute bound on |a - b| for two evaluations of one computation that round differently (another
    summation order, another kernel, another thread split), or for one evaluation against an exact reference.

    magnitude: the largest |value| on the path, which bounds every partial sum that is rounded (the max
    |activation| along a network, or max |term| of a single sum). steps: how many roundings of that size one
    output's difference can accumulate (a reduction's length, summed over chained layers or steps; counting
    parallel branches as chained only overestimates).

    Model, per evaluation, with u = eps / 2: worst case K * u * magnitude (Higham's gamma_K); as a random
    walk of K independent roundings, each uniform in [-u, u] * magnitude, the standard deviation is
    u * magnitude * sqrt(K / 3). The difference of two evaluations doubles the worst case (K * eps * magnitude)
    and has sigma <= u * magnitude * sqrt(2K / 3) = eps * magnitude * sqrt(K / 6). The typical bound is
    3 * sqrt(K) * eps * magnitude: 7.3 sigma, which the largest of 10^7 compared values exceeds with
    probability < 10^-4 (union bound on the Gaussian tail, N * exp(-7.3^2 / 2)). The bound is the smaller of
    the two, both hold, and the worst case is the smaller for K < 9.
    """
    eps = float(torch.finfo(dtype).eps) if isinstance(dtype, torch.dtype) else float(np.finfo(dtype).eps)
    if steps < 1 or magnitude < 0:
        raise ValueError(f"steps must be >= 1 and magnitude >= 0, got {steps}, {magnitude}")
    return eps * magnitude * min(steps, 3 * math.sqrt(steps))


def log_power_bound(power: torch.Tensor, frame_dim: int, terms: int) -> torch.Tensor:
    """Elementwise bound on |log a - log b| (natural log) of float32 power spectra or mel energies `power` (either
    side's values, any shape, frames along `frame_dim`), each bin a sum over `terms` (the FFT size plus the
    filters' length).

    Model: a transform's rounding error is absolute, of the size of its frame's largest amplitude (an FFT's is
    normwise), so a bin's amplitude is off relatively by rounding_bound(float32, 1, terms) times how far it sits
    below its frame's peak, sqrt(max power / power), and its power and its log (which turns a relative error into
    an absolute one) by twice that. Loud bins are held to a few eps; bins near a floor far below their frame's
    peak get the loose bound their rounding deserves."""
    power = power.double().clamp_min(torch.finfo(torch.float64).tiny)  # an exact zero: no bound
    below_peak = (power.amax(frame_dim, keepdim=True) / power).sqrt()
    return 2 * rounding_bound(torch.float32, 1.0, terms) * below_peak


@dataclass
class Trace:
    peak: float = 0.0
    """max |value| over the operands and results of every linear map seen (see LINEAR_MAPS)."""
    steps: int = 0
    """Sum, over every reduction call seen, of the terms one output element sums."""
    cumulated: float = 0.0
    """max |value| of every cumsum seen: a decay exp(c_i - c_j) of such values is off relatively by their rounding."""
    threads: dict[str, Trace] = field(default_factory=dict)
    """The threads started while tracing with threads=True, by name."""


def _terms(name: str, args: tuple, kwargs: dict) -> int:
    """How many terms one output element of torch function `name` sums (0: not a reduction counted here)."""
    if name == "linear":
        return args[1].shape[-1]
    if name in ("conv1d", "conv2d", "conv3d"):  # weight [out, in / groups, *kernel]
        return args[1][0].numel()
    if name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):  # weight [in, out / groups, *kernel]
        weight, dims = args[1], args[1].dim() - 2
        stride = kwargs.get("stride", args[3] if len(args) > 3 else 1)
        groups = kwargs.get("groups", args[6] if len(args) > 6 else 1)
        strides = (stride,) * dims if isinstance(stride, int) else tuple(stride)
        taps = math.prod(-(-k // s) for k, s in zip(weight.shape[2:], strides, strict=True))  # ceil(k / stride) per input
        return weight.shape[0] // groups * taps
    if name in ("matmul", "mm", "bmm"):
        return args[0].shape[-1]
    if name in ("addmm", "baddbmm", "addbmm"):
        return args[1].shape[-1]
    if name == "scaled_dot_product_attention":  # q . k over the head dim, then the softmax-weighted sum over keys
        return args[0].shape[-1] + 2 * args[1].shape[-2]
    if name in ("layer_norm", "rms_norm"):  # mean (and variance) over the normalised shape
        return 2 * math.prod(args[1])
    if name == "group_norm":  # mean and variance over a group: its channels and every position
        return 2 * args[0][0].numel() // args[1]
    if name in ("sum", "mean", "var", "std", "cumsum", "softmax", "log_softmax"):  # over `dim` (all when None)
        dim = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], torch.dtype) else None)
        dims = range(args[0].dim()) if dim is None else (dim,) if isinstance(dim, int) else dim
        return (2 if name in ("var", "std") else 1) * math.prod(args[0].shape[d] for d in dims)
    if name == "einsum":  # the product of the contracted sizes
        equation = args[0].replace(" ", "")
        operands = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
        if "->" not in equation or "." in equation:
            return 0
        inputs, output = equation.split("->")
        sizes = {c: n for spec, op in zip(inputs.split(","), operands, strict=True) for c, n in zip(spec, op.shape, strict=True)}
        return math.prod(n for c, n in sizes.items() if c not in output)
    return 0


LINEAR_MAPS = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
               "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "scaled_dot_product_attention"}
"""The reductions whose operands and results are the path's values (activations, states, weights): their peak is
the magnitude. The others (norms, sums, means, variances, cumsums, softmaxes) are statistics: their rounding is
relative to the values they scale or normalise, which the linear maps around them carry; they add steps only."""


class _Reductions(TorchFunctionMode):
    def __init__(self, trace: Trace, lock: threading.Lock) -> None:
        super().__init__()
        self.trace, self.lock = trace, lock

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (torch's protocol)
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        terms = _terms(name, args, kwargs) if isinstance(result, torch.Tensor) and result.is_floating_point() else 0
        peak = 0.0
        if terms and name in LINEAR_MAPS:
            operands = args[:3] if name == "scaled_dot_product_attention" else args  # not its mask: -inf or finfo.min
            if name == "einsum" and len(args) == 2 and isinstance(args[1], (list, tuple)):
                operands = tuple(args[1])
            for value in (*operands, result):
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                    peak = max(peak, float(value.detach().abs().max()))
        cumulated = float(result.detach().abs().max()) if terms and name == "cumsum" and result.numel() else 0.0
        with self.lock:
            self.trace.steps += terms  # integer sums are exact: not counted
            self.trace.peak = max(self.trace.peak, peak)
            self.trace.cumulated = max(self.trace.cumulated, cumulated)
        return result


@contextmanager
def traced(threads: bool = False) -> Iterator[Trace]:
    """While open, records every reduction torch runs (Linear and convolutions, matmuls, attention, einsum,
    layer, RMS and group norms, sums, means, variances, cumsums and softmaxes, whether called through modules,
    functions or tensor methods) into the yielded Trace: the largest |operand| or |result| of the linear maps
    (the magnitude along the path) and the sum of all their lengths (the rounding steps chained to one output;
    every call counts, so parallel branches and per-row loops count as chained: an overestimate). Trace one
    evaluation, not both. Not seen: numpy, FFTs and torch ops this does not name (add those by hand), and
    ill-conditioned steps (see the module's docstring).

    threads: also trace each thread started while open (a pipeline's stage workers) into a Trace of its own,
    `Trace.threads[name]`."""
    trace, lock = Trace(), threading.Lock()
    if not threads:
        with _Reductions(trace, lock):
            yield trace
        return
    run = threading.Thread.run

    def traced_run(thread: threading.Thread) -> None:
        with _Reductions(trace.threads.setdefault(thread.name, Trace()), lock):
            run(thread)

    threading.Thread.run = traced_run
    try:
        with _Reductions(trace, lock):
            yield trace
    finally:
        threading.Thread.run = run
