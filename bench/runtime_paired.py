"""This tree's runtime against another checkout's, decode by decode: bench/runtime_vs_vllm.py's Vocalis side, paired.

Two worker processes, one per tree, each holding AutoregressiveStage over the same Qwen3 checkpoint, decode the
same batch in turn (A B, then B A, ...); the ratio is taken pair by pair and its median printed, so a drift in the
machine's speed between runs (other jobs) cancels out. The other tree is imported through a temporary package
directory mapping `vocalis.*` onto it, as its own editable install would.

    git worktree add /tmp/before main   # or any checkout of the code to compare with
    python bench/runtime_paired.py --before /tmp/before --checkpoint /tmp/vocalis-runtime-vs-vllm/qwen3-h256-l4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"stages": "stages", "server": "server", "gateway": "gateway", "clients": "clients"}


def worker(root: Path, checkpoint: Path, batches: list[int], prompt_len: int, new_tokens: int, threads: int) -> None:
    sys.path.insert(0, str(root / "bench"))
    import runtime_vs_vllm as bench
    import torch

    torch.set_num_threads(threads)
    lm = bench.load_lm(checkpoint)
    with torch.inference_mode():
        stages = {b: bench.AutoregressiveStage("lm", bench.LMModel(lm, prompt_len + new_tokens + 16), max_num_seqs=b) for b in batches}
        for b, stage in stages.items():
            bench.decode(stage, b, prompt_len, new_tokens)  # warm-up
        print("ready", flush=True)
        for line in sys.stdin:
            b = int(line)
            wall, cpu = time.perf_counter(), time.process_time()
            bench.decode(stages[b], b, prompt_len, new_tokens)
            print(f"{time.perf_counter() - wall} {time.process_time() - cpu}", flush=True)


def package_dir(tree: Path) -> Path:
    """A directory whose `vocalis` package is `tree`'s (proto/vocalis plus the mapped sub-packages)."""
    out = Path(tempfile.mkdtemp(prefix="vocalis-before-"))
    shutil.copytree(tree / "proto" / "vocalis", out / "vocalis")
    for name, folder in PACKAGES.items():
        if (tree / folder).is_dir():
            (out / "vocalis" / name).symlink_to(tree / folder)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the code to compare with")
    parser.add_argument("--checkpoint", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-runtime-vs-vllm" / "qwen3-h256-l4",
                        help="made by bench/runtime_vs_vllm.py")
    parser.add_argument("--batches", default="16,1")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "runtime_paired.json")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.worker:
        worker(args.worker, args.checkpoint, batches, args.prompt_len, args.new_tokens, args.threads)
        return
    common = ["--checkpoint", str(args.checkpoint), "--batches", args.batches, "--prompt-len", str(args.prompt_len),
              "--new-tokens", str(args.new_tokens), "--threads", str(args.threads), "--before", str(args.before)]
    shim = package_dir(args.before.resolve())
    trees = {"before": (args.before.resolve(), dict(os.environ, PYTHONPATH=str(shim))), "after": (ROOT, dict(os.environ))}
    procs = {}
    for name, (tree, env) in trees.items():
        procs[name] = subprocess.Popen([sys.executable, __file__, "--worker", str(tree), *common], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=env)
        if procs[name].stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {name} worker did not start")
    rows = []
    for b in batches:
        pairs = []
        for i in range(args.pairs):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            pair = {}
            for name in order:
                procs[name].stdin.write(f"{b}\n")
                procs[name].stdin.flush()
                wall, cpu = map(float, procs[name].stdout.readline().split())
                pair[name] = (b * args.new_tokens / wall, b * args.new_tokens / cpu)
            pairs.append(pair)
        rows.append({
            "batch": b,
            "before_tokens_per_s": statistics.median(p["before"][0] for p in pairs),
            "after_tokens_per_s": statistics.median(p["after"][0] for p in pairs),
            "ratio_wall": statistics.median(p["after"][0] / p["before"][0] for p in pairs),
            "ratio_cpu": statistics.median(p["after"][1] / p["before"][1] for p in pairs),
        })
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    shutil.rmtree(shim)
    print(f"{args.pairs} pairs per batch, {args.new_tokens} new tokens, {args.threads} torch thread(s); medians")
    print("| batch | before tok/s | after tok/s | after/before (wall) | after/before (CPU) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['before_tokens_per_s']:.0f} | {r['after_tokens_per_s']:.0f} | {r['ratio_wall']:.2f}x | {r['ratio_cpu']:.2f}x |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"pairs": args.pairs, "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
