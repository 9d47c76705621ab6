"""Peak RSS at real size, in three parts: the weights in their loaded dtype, the KV/state budget, and the rest.

Issue 32 asks that a family's peak memory be its weights plus the KV/state memory the runtime preallocates plus a
stated constant. For each family, in a fresh child process (one model in memory at a time; the checkpoint is built
in a child of its own first, so that its memory is not counted): load the model as the server does (the family
loader, its deploy defaults, bench/gpu.py's stage overrides: device cpu, --dtype on the generator stage), record the
RSS, run one short request (--frames frames), record the RSS again, and report
- weights: the bytes of every parameter and buffer the loaded model holds, each storage once (bench/stage_weights.py);
- budget: the bytes the stages allocate at start-up for KV caches and recurrent states (an autoregressive stage's
  PagedKVCache `.bytes`, plus its RecurrentStates `.bytes` where the model has linear-attention layers);
- peak: the child's peak RSS (VmHWM, ru_maxrss), with the peak as the load ended, the RSS after the load and after the request, and the
  RSS of the process before the load (Python, torch and the imports: part of the rest);
- rest = peak - weights - budget.

    python bench/memory_parts.py                                  # every family with real sizes, float32
    python bench/memory_parts.py --families voxtral --dtype bfloat16
    python bench/memory_parts.py --tiny --families voxcpm2,omnivoice  # CI-sized: the committed tiny checkpoints
    python bench/memory_parts.py --families drama-3 --layers 8 --dtype bfloat16   # Drama 3: assumed sizes, 8 of 40 layers

Checkpoints are random weights at the published sizes (bench/gpu.py's builders; Qwen3-TTS 0.6B from
bench/real_size_cpu.py's), built once into --work-dir and reused. Drama 3's are assumed sizes (bench/drama3_build.py),
only when named, and with --layers only that many of its 40 backbone layers: its FP8 experts alone are ~30 GiB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import gpu, real_size_cpu  # noqa: E402
from bench.proc_status import status_fields  # noqa: E402
from bench.report import write_json  # noqa: E402

EXTRA = {"qwen3-0.6b-customvoice": gpu.Case("Qwen3-TTS-12Hz-0.6B-CustomVoice", gpu._committed(gpu.GOLDENS / "qwen3_tts" / "cv-0b6"))}
"""Built by bench/real_size_cpu.py (its 0.6B layout), served as bench/gpu.py serves the others."""
ALL = {**EXTRA, **gpu.CASES}
CASES = {k: v for k, v in ALL.items() if k not in gpu.NO_REAL_SIZES}
"""Families in a real-size run by default (gpu.NO_REAL_SIZES run only when named)."""
GiB = 2**30
OMNIVOICE_STEPS = 4
"""OmniVoice's unmasking passes in the one request: its length comes from the text, and its memory not from the passes."""


def rss_bytes() -> tuple[int, int]:
    """(resident set now, its peak so far): VmRSS and VmHWM, read together (the peak is ru_maxrss; read apart, the
    two can disagree by the kernel's lagging per-thread counters)."""
    fields = status_fields()
    return fields["VmRSS"] * 1024, fields["VmHWM"] * 1024


def state_budget_bytes(model) -> int:
    """The KV caches and recurrent states the stages allocated at start-up."""
    from vocalis.stages.runtime.kv_cache import PagedKVCache

    total = 0
    for stage in model.pipeline.stages:
        cache = getattr(stage, "cache", None)
        if isinstance(cache, PagedKVCache):
            total += cache.bytes + (cache.states.bytes if cache.states is not None else 0)
    return total


def overrides(key: str, dtype: str, max_num_seqs: int, kv_cache_bytes: int = 0) -> dict:
    """bench/gpu.py's: the generator stage (the first; AuK's flow) in `dtype`, every stage on the CPU; with
    `kv_cache_bytes`, that budget instead of the deploy's on the generator stage. AuK's condition stage too takes
    `dtype`: it holds the Qwen2.5-Omni thinker and audio tower, 3.7 B of its 5.4 B parameters (13.9 GiB in float32)."""
    generator = {"device": "cpu", "dtype": dtype, "max_num_seqs": max_num_seqs} | ({"kv_cache_bytes": kv_cache_bytes} if kv_cache_bytes else {})
    if key == "auk":
        return {"0": {"device": "cpu", "dtype": dtype}, "1": generator, "2": {"device": "cpu"}}
    return {"0": generator, "1": {"device": "cpu", "max_num_seqs": max_num_seqs}}


def measure(key: str, checkpoint: Path, dtype: str, frames: int, max_num_seqs: int, kv_cache_bytes: int = 0) -> dict:
    """In the child: load, one request, the parts."""
    from bench.stage_weights import model_weight_bytes
    from vocalis.stages.models.registry import load_model

    before, _ = rss_bytes()
    model = load_model(str(checkpoint), stage_overrides=json.dumps(overrides(key, dtype, max_num_seqs, kv_cache_bytes)))
    try:
        after_load, peak_load = rss_bytes()
        if key == "omnivoice":
            asyncio.run(real_size_cpu.one(model, real_size_cpu.FAMILIES[key], frames, OMNIVOICE_STEPS))
        else:
            asyncio.run(gpu.one(model, ALL[key], frames))
        after_request, _ = rss_bytes()
        weights, budget = model_weight_bytes(model), state_budget_bytes(model)
    finally:
        model.close()
    peak = max(rss_bytes()[1], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"family": key, "dtype": dtype, "weights_bytes": weights, "budget_bytes": budget, "peak_rss_bytes": peak,
            "rest_bytes": peak - weights - budget, "before_load_rss_bytes": before, "after_load_rss_bytes": after_load,
            "load_peak_rss_bytes": peak_load, "after_request_rss_bytes": after_request}


def build(key: str, work: Path, layers: int | None = None) -> Path:
    """The real-size checkpoint of `key` under `work` (reused when complete); `layers`: Drama 3's shallower one."""
    if key in EXTRA:
        out = work / key
        real_size_cpu.build(key, out)
        return out
    return gpu.build_real(key, work, "cpu", layers)


def child(argv: list[str]) -> dict:
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        raise RuntimeError(f"{argv[:4]} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def line(r: dict) -> str:
    g = {k: r[k] / GiB for k in r if k.endswith("_bytes")}
    return (f"| {r['family']} | {r['dtype']} | {g['weights_bytes']:.2f} | {g['budget_bytes']:.2f} | {g['peak_rss_bytes']:.2f} | "
            f"{g['rest_bytes']:.2f} | {g['before_load_rss_bytes']:.2f} | {g['load_peak_rss_bytes']:.2f} | "
            f"{g['after_load_rss_bytes']:.2f} | {g['after_request_rss_bytes']:.2f} |")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=None, help="comma-separated; default every family with a real-size build "
                        "(with --tiny: every family of bench/gpu.py)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="dtype of the generator stage")
    parser.add_argument("--frames", type=int, default=4, help="frames (max_new_tokens) of the one request")
    parser.add_argument("--max-num-seqs", type=int, default=4, help="seats of the first two stages (the KV budget is the deploy's)")
    parser.add_argument("--kv-cache-bytes", type=int, default=0, help="the generator stage's KV budget (0: the deploy's)")
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoints instead of real-size random ones")
    parser.add_argument("--layers", type=int, default=None, help="Drama 3: build only this many of its backbone layers "
                        "(every part at full size but their count; the whole model is ~33 GiB of FP8 experts)")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "memory_parts.json")
    parser.add_argument("--child", choices=("build", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child == "build":
        print(json.dumps({"built": str(build(args.families, args.work_dir, args.layers))}))
        return []
    if args.child == "measure":
        print(json.dumps(measure(args.families, args.checkpoint, args.dtype, args.frames, args.max_num_seqs,
                                 args.kv_cache_bytes)))
        return []

    cases = ALL if args.tiny else CASES
    keys = (args.families or ",".join(k for k in cases if not args.tiny or k not in EXTRA)).split(",")
    for key in keys:
        if key not in cases and (args.tiny or key not in gpu.NO_REAL_SIZES):
            raise SystemExit(f"{key}: no {'tiny' if args.tiny else 'real-size'} checkpoint here; known: {', '.join(cases)}")
    print(f"{'tiny' if args.tiny else 'real-size random'} checkpoints, generator stage in {args.dtype}, one request of "
          f"{args.frames} frames, max_num_seqs {args.max_num_seqs} (GiB)")
    print("| family | dtype | weights | KV/state budget | peak RSS | rest | RSS before load | peak at end of load | "
          "RSS after load | RSS after request |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for key in keys:
        if args.tiny:
            checkpoint = ALL[key].tiny(args.work_dir)
        else:
            layers = ["--layers", str(args.layers)] if args.layers and key == "drama-3" else []
            checkpoint = Path(child(["--child", "build", "--families", key, "--work-dir", str(args.work_dir), *layers])["built"])
        row = child(["--child", "measure", "--families", key, "--checkpoint", str(checkpoint), "--dtype", args.dtype,
                     "--frames", str(args.frames), "--max-num-seqs", str(args.max_num_seqs),
                     "--kv-cache-bytes", str(args.kv_cache_bytes)])
        rows.append(row)
        print(line(row), flush=True)
    write_json(args.out, {"tiny": args.tiny, "dtype": args.dtype, "frames": args.frames, "max_num_seqs": args.max_num_seqs,
                          "kv_cache_bytes": args.kv_cache_bytes or "deploy", "rows": rows})
    return rows


if __name__ == "__main__":
    main()
