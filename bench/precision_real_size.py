"""The precision deploy options at real size on this CPU: speed, memory and weights of one family's generator stage
in float32 (the parity default), bfloat16, int8-dynamic and both (and int4-weight, int4-decode: `--variants`), on
random weights at the published sizes; for Qwen3-TTS also with its decoder stage in bfloat16 (`--variants`, not run
by default).

The checkpoint is bench/real_size_cpu.py's (its builders: the committed tiny checkpoint's files with the published
sizes laid over, stop heads silenced so every request runs to --frames); requests are its greedy ones. Each variant
loads in its own child process (one model in memory at a time, its own peak RSS); the variants run interleaved,
--repeats rounds of them, and the table gives min / median / max. In each child every level runs once untimed
first: a level's first batch pays for oneDNN making its kernels for the batch's shapes (the decoder's first chunks of
four rows ~1 s more), a cost a running server pays once per shape (before 1ab10ed, 2026-12-06, one c = 1 request
warmed up, so a c = 4 figure from before includes it). The children keep freed heap blocks for reuse as the server
does (`keep_freed_heap`, since c25ae8b: without it a request's prompt took either ~0.17 or ~0.24 s).

    python bench/precision_real_size.py                       # Qwen3-TTS 0.6B CustomVoice, c = 1 and 4, 2 rounds
    python bench/precision_real_size.py --tiny --repeats 1    # CI-sized: the tiny checkpoint

Figures per variant and level: frames/s (total over wall time), RTF p50 (end-to-end latency over audio duration),
TTFA p50, the model's weight bytes (every stage, each storage once) and peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import real_size_cpu  # noqa: E402
from bench.report import write_json  # noqa: E402

GENERATOR_VARIANTS: dict[str, dict[str, str]] = {
    "float32": {"dtype": "float32"},
    "bfloat16": {"dtype": "bfloat16"},
    "int8-dynamic": {"quantize": "int8-dynamic"},
    "bfloat16 + int8-dynamic": {"dtype": "bfloat16", "quantize": "int8-dynamic"},
    "int4-weight": {"quantize": "int4-weight"},
    "int4-decode": {"quantize": "int4-decode"},
}
VARIANTS: dict[str, dict[str, str]] = {
    **GENERATOR_VARIANTS,
    **{f"{name} + bfloat16 decoder": {**settings, "decoder_dtype": "bfloat16"}
       for name, settings in GENERATOR_VARIANTS.items() if "quantize" in settings},
}
"""Each variant's settings of the generator stage, and each quantised one's with `decoder_dtype`: the decoder stage's
dtype (Qwen3-TTS's code2wav)."""
DEFAULT_VARIANTS = ("float32", "bfloat16", "int8-dynamic", "bfloat16 + int8-dynamic")


def run_variant(key: str, checkpoint: Path, settings: dict[str, str], levels: list[int], frames: int) -> dict:
    """In the child: load with `settings` on the generator stage (stage 1 of Qwen3-TTS: after its voices stage),
    warm up with one untimed round of every level, then each level's requests at once."""
    from bench.stage_weights import model_weight_bytes
    from vocalis.server.heap_trim import keep_freed_heap
    from vocalis.stages.models.registry import load_model

    keep_freed_heap()  # as `vocalis serve` does before loading: freed large blocks are reused, not faulted in again

    family = real_size_cpu.FAMILIES[key]
    qwen3 = family.reference.startswith("qwen3")
    generator = "talker" if qwen3 else "0"
    decoder_dtype = settings.get("decoder_dtype")
    overrides = {generator: {"device": "cpu", "max_num_seqs": max(levels), **{k: v for k, v in settings.items() if k != "decoder_dtype"}}}
    if decoder_dtype:
        if not qwen3:
            raise SystemExit(f"{key}: the decoder variants name Qwen3-TTS's decoder stage (code2wav) only")
        overrides["code2wav"] = {"dtype": decoder_dtype}
    start = time.perf_counter()
    model = load_model(str(checkpoint), stage_overrides=json.dumps(overrides))
    load_s = time.perf_counter() - start
    try:
        weights = model_weight_bytes(model)

        async def level(clients: int) -> dict:
            start = time.perf_counter()
            requests = await asyncio.gather(*(real_size_cpu.one(model, family, frames, 0) for _ in range(clients)))
            return {"concurrency": clients, "wall_s": time.perf_counter() - start, "requests": [list(r) for r in requests]}

        for clients in levels:  # untimed: a level's first batch makes oneDNN's kernels for its shapes
            asyncio.run(level(clients))
        out = [asyncio.run(level(c)) for c in levels]
    finally:
        model.close()
    return {"load_s": load_s, "levels": out, "weight_bytes": weights,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def child(argv: list[str]) -> dict:
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        raise RuntimeError(f"{argv[2:6]} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def spread(values: list[float], digits: int) -> str:
    """min / median / max (one value alone when there is one)."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3-0.6b-customvoice", choices=[k for k, f in real_size_cpu.FAMILIES.items()
                                                                                 if not f.length_from_text])
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=24, help="frames (max_new_tokens) per request")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every variant, interleaved")
    parser.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS of the children (0: torch's default)")
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoint instead of real-size random weights")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "precision_real_size.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if args.child:
        print(json.dumps(run_variant(args.family, args.checkpoint, VARIANTS[args.child], levels, args.frames)))
        return {}

    family = real_size_cpu.FAMILIES[args.family]
    checkpoint = family.tiny
    if not args.tiny:
        checkpoint = args.work_dir / args.family
        child([sys.executable, str(ROOT / "bench" / "real_size_cpu.py"), "--child", "build", "--families", args.family,
               "--checkpoint", str(checkpoint)])
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    variants = args.variants.split(",")
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for round_ in range(args.repeats):
        for variant in variants:
            raw = child([sys.executable, str(Path(__file__).resolve()), "--child", variant, "--family", args.family,
                         "--checkpoint", str(checkpoint), "--levels", args.levels, "--frames", str(args.frames)])
            runs[variant].append(raw)
            print(f"round {round_ + 1} {variant}: " + ", ".join(
                f"c={lv['concurrency']} {sum(r[2] for r in lv['requests']) / lv['wall_s']:.3f} audio-s/s" for lv in raw["levels"]),
                flush=True)
    rows = []
    for variant in variants:
        for index, clients in enumerate(levels):
            levels_run = [raw["levels"][index] for raw in runs[variant]]
            rows.append({
                "variant": variant, "settings": VARIANTS[variant], "concurrency": clients,
                "frames_per_s": [sum(r[2] for r in lv["requests"]) * family.frame_rate / lv["wall_s"] for lv in levels_run],
                "rtf_p50": [statistics.median(r[1] / r[2] for r in lv["requests"]) for lv in levels_run],
                "ttfa_p50_s": [statistics.median(r[0] for r in lv["requests"]) for lv in levels_run],
                "weight_bytes": runs[variant][0]["weight_bytes"],
                "peak_rss_bytes": [raw["peak_rss_bytes"] for raw in runs[variant]],
            })
    base = {r["concurrency"]: statistics.median(r["frames_per_s"]) for r in rows if r["variant"] == "float32"}
    print(f"\n{args.family} ({'tiny' if args.tiny else 'real-size random'} weights), {args.frames} frames per request, greedy, "
          f"{os.cpu_count()} cores, {args.repeats} interleaved rounds (min / median / max)")
    print("| generator stage | c | frames/s | × float32 | RTF p50 | TTFA p50 ms | weights GiB | peak RSS GiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        speedup = statistics.median(r["frames_per_s"]) / base[r["concurrency"]] if r["concurrency"] in base else float("nan")
        print(f"| {r['variant']} | {r['concurrency']} | {spread(r['frames_per_s'], 2)} | {speedup:.2f} | {spread(r['rtf_p50'], 2)} | "
              f"{spread([1000 * t for t in r['ttfa_p50_s']], 0)} | {r['weight_bytes'] / 2**30:.2f} | "
              f"{spread([b / 2**30 for b in r['peak_rss_bytes']], 2)} |")
    result = {"family": args.family, "tiny": args.tiny, "frames": args.frames, "repeats": args.repeats, "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
