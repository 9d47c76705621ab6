"""Whether this CPU computes in half precision natively (avx512_bf16 / amx_bf16 for bfloat16; avx512_fp16 / amx_fp16
for float16).

Without them torch still runs a bfloat16 or float16 stage (its kernels convert to float32 and back), with the same
results but slower than float32; the weights' memory is halved all the same. So a half-precision stage on such a CPU
is served with a warning naming the stage, not refused. Torch-free: it reads /proc/cpuinfo (Linux); elsewhere the
support is unknown and nothing is warned.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

NATIVE_FLAGS = {"bfloat16": ("avx512_bf16", "amx_bf16", "bf16"), "float16": ("avx512_fp16", "amx_fp16", "asimdhp")}
"""x86 flags, then Arm's (/proc/cpuinfo "Features")."""


@cache
def cpu_flags() -> frozenset[str] | None:
    """The flags of the first processor in /proc/cpuinfo; None where there is no such file."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def lacks_native(dtype: str, flags: frozenset[str] | None = None) -> bool:
    """True when `dtype` is a half precision this CPU is known to compute without native instructions."""
    flags = cpu_flags() if flags is None else flags
    wanted = NATIVE_FLAGS.get(dtype)
    return wanted is not None and flags is not None and not any(flag in flags for flag in wanted)
