"""Piper's ONNX session by thread layout, in one process: one run at a time, and two callers at once on one session.

What a lane layout can get from this CPU (issue 32): the medium bundled prompts' sentences (phonemized beforehand)
are synthesized by sessions of 1 intra-op thread, every core with spinning (onnxruntime's default, the session a lone
request gets), and 2 threads with spinning off or on; "seq" runs them one after another on one thread, "par2" from
two threads sharing the one session (as the stage's lanes share the lane session). Reps alternate the order of the
modes. Prints audio seconds per wall second, median [min-max].

    python bench/piper_session_threads.py --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.piper_lanes import run_ceiling  # noqa: E402
from vocalis.clients import prompts  # noqa: E402
from vocalis.stages.models.piper import voice as piper_voice  # noqa: E402
from vocalis.stages.models.piper.graph_cache import voice_graphs  # noqa: E402
from vocalis.stages.models.piper.loader import default_voice_path  # noqa: E402


def session(model: str | bytes, threads: int, spinning: str | None = None) -> ort.InferenceSession:
    options = piper_voice.session_options(threads)
    if spinning is not None:
        options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def run(s: ort.InferenceSession, ids: list[int]) -> int:
    return s.run(
        None,
        {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": np.array([0.667, 1.0, 0.8], dtype=np.float32),
        },
    )[0].size


def sequential(s: ort.InferenceSession, units: list[list[int]], rate: int) -> float:
    start = time.perf_counter()
    samples = sum(run(s, ids) for ids in units)
    return samples / rate / (time.perf_counter() - start)


def two_callers(s: ort.InferenceSession, units: list[list[int]], rate: int) -> float:
    start = time.perf_counter()
    audio_s = run_ceiling([s, s], units, rate)  # two lane threads taking units from one queue, on the one session
    return audio_s / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    voice = piper_voice.load(default_voice_path())
    piper, rate = voice.voice, voice.sample_rate
    model = voice_graphs(voice.model_path).model  # the graph the server runs (with phoneme durations)
    units = [piper.phonemes_to_ids(s) for p in prompts.bundled(("medium",)) for s in piper.phonemize(p.text)]
    sessions = {
        "1t": session(model, 1),
        "all-spin": session(model, 0),
        "2t-nospin": session(model, 2, "0"),
        "2t-spin": session(model, 2, "1"),
    }
    for s in sessions.values():
        run(s, units[0])  # warm-up
    modes = {f"seq {name}": (lambda s=s: sequential(s, units, rate)) for name, s in sessions.items()}
    for name in ("1t", "2t-nospin", "2t-spin"):
        modes[f"par2 {name}"] = lambda s=sessions[name]: two_callers(s, units, rate)
    results: dict[str, list[float]] = {mode: [] for mode in modes}
    for rep in range(args.reps):
        for mode in list(modes) if rep % 2 == 0 else list(reversed(modes)):
            results[mode].append(modes[mode]())
    print(f"{len(units)} sentences, {args.reps} reps")
    for mode, values in results.items():
        print(f"{mode:<18} audio s/s {statistics.median(values):6.2f} [{min(values):.2f}-{max(values):.2f}]")
    voice.phonemizer.close()


if __name__ == "__main__":
    main()
