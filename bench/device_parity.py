"""Each family's stages on a device against the CPU in float32 (bench/gpu.py's first section).

Per family, on its tiny checkpoint (the device's kernels are what is checked, and the tiny weights take seconds), one
request is served on the CPU in float32 with the shared sampler's calls recorded (bench/forced_sampling.py), then:
- on the CPU with the generator stage(s) in float64 and the recorded codes forced: float32's own rounding as float64
  sees it, which is how much this checkpoint amplifies a rounding (the floor);
- with every deploy stage on the device in float32 (TF32 off), the codes forced;
- with every stage on the device and the generator stage(s) in `dtype`, the codes forced (reported, not judged: the
  half-precision drift has its own table, bench/half_precision_drift.py).
The comparison is the forced run's largest logit error over the largest logit where codes go through the shared
sampler, else the generator's output (latents: relative L2 error; codes picked by a family's own argmax: how many
agree before the first difference), and the audio's signal-to-error ratio. The device in float32 passes when its
error is within TOLERANCE_OVER_FLOOR times the floor (two float32 runs that sum in different orders each sit about
one floor from the exact result), or, for codes with no logits to compare, when every code agrees (a near-tie in the
tiny random weights may flip one without a fault: the audio's signal-to-error ratio then says how far it went).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from bench.forced_sampling import SamplerTape
from bench.half_precision_drift import CASES, CLONES, Served, _into, generator_drift, ser_db, serve

TOLERANCE_OVER_FLOOR = 8.0
"""How far past the floor (float32 against float64, same checkpoint and request) a device's float32 may be."""


@contextmanager
def float32_means_float32() -> Iterator[None]:
    """TF32 off for CUDA matmuls and convolutions (cuDNN's convolutions use it by default), restored after."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def error_against(base: Served, run: Served, forced: dict | None) -> float | None:
    """The run's error against the CPU float32 run: forced logit error, else latent relative L2; None for codes
    without logits (compared by agreement instead)."""
    if forced is not None:
        return forced["max_rel_logit_error"]
    if base.generator.is_floating_point():
        n = min(len(base.generator), len(run.generator))
        return float((base.generator[:n] - run.generator[:n]).norm() / base.generator[:n].norm().clamp(min=1e-30))
    return None


def family_rows(family: str, work: Path, device: str, dtype: str) -> list[dict]:
    """The floor, the device in float32 (judged) and the device in `dtype` (reported) for one family."""
    checkpoint, fields, generator_stages = CASES[family]
    path, clone = checkpoint(work), family in CLONES
    tape = SamplerTape()
    base = serve(path, fields, generator_stages, {"dtype": "float32"}, tape.record, clone)

    def forced_run(settings: dict, every_stage: dict | None) -> tuple[Served, dict | None]:
        replays: list[SamplerTape] = []
        sampler = (lambda: _into(tape.force(), replays)) if tape.calls else nullcontext
        run = serve(path, fields, generator_stages, settings, sampler, clone, every_stage)
        forced = None
        if replays:
            forced = {**replays[0].summary(), "codes_equal": bool(torch.equal(run.generator, base.generator))}
            forced.pop("per_call")
        return run, forced

    floor, floor_failure = None, None
    try:
        floor_run, floor_forced = forced_run({"dtype": "float64"}, None)
        floor = error_against(base, floor_run, floor_forced)
    except Exception as failure:  # a family that refuses float64: its device run must then equal the CPU's to pass
        floor_failure = repr(failure)
    variants = [("float32", {"dtype": "float32"})] + ([(dtype, {"dtype": dtype})] if dtype != "float32" else [])
    rows = []
    with float32_means_float32():
        for variant, settings in variants:
            run, forced = forced_run(settings, {"device": device})
            err = error_against(base, run, forced)
            if variant != "float32":
                verdict = "reported"
            elif err is None:
                verdict = "ok" if torch.equal(run.generator, base.generator) else "codes differ"
            elif forced is not None and not forced["codes_equal"]:
                verdict = "forcing lost"
            elif err == 0.0:
                verdict = "ok"
            else:
                verdict = "no floor" if floor is None else "ok" if err <= TOLERANCE_OVER_FLOOR * floor else "over the floor"
            rows.append({"family": family, "device": device, "dtype": variant, "error": err, "floor": floor,
                         "floor_failure": floor_failure, "generator": generator_drift(base.generator, run.generator),
                         "forced": forced, "audio_ser_db": ser_db(base.audio, run.audio),
                         "samples": [len(base.audio), len(run.audio)], "verdict": verdict})
    return rows


def parity_line(r: dict) -> str:
    def number(x: float | None) -> str:
        return "-" if x is None else ("inf" if math.isinf(x) else f"{x:.2e}")

    return (f"| {r['family']} | {r['dtype']} | {number(r.get('error'))} | {number(r.get('floor'))} | {r.get('generator', '-')} | "
            f"{r.get('audio_ser_db', float('nan')):.1f} | {r['verdict']} |")


PARITY_HEADER = ("| family | stages on the device in | error vs CPU float32 | floor (float64 vs float32, CPU) | generator output | "
                 "audio SER dB | verdict |\n|---|---|---|---|---|---|---|")
