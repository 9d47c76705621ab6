"""The Piper stage against its ceiling in one process, no server: lanes vs one all-core session vs N bare sessions.

The same texts (the first --texts bundled prompts) are synthesized, rep by rep and in
alternating order, by:
  ceiling   N threads (N = cores), each with its own one-thread onnxruntime session,
            on the texts' sentences phonemized beforehand (side_by_side's ceiling);
  lanes     the UtteranceStage as served (one-thread lanes when several requests are
            active), fed closed-loop at concurrency c;
  one-session  the same stage with a single lane: every piece on the all-core session
            (the behaviour before issue 16).
Each run reports audio seconds per wall second and per CPU second of this process
(time.process_time, every thread): the second figure holds still when other jobs
take part of the machine. Prints a table and writes JSON.

    python bench/piper_lanes.py --concurrency 2,4 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalis.clients import prompts  # noqa: E402
from vocalis.stages.models.piper import voice as piper_voice  # noqa: E402
from vocalis.stages.models.piper.adapter import PiperAdapter  # noqa: E402
from vocalis.stages.models.piper.loader import default_voice_path  # noqa: E402
from vocalis.stages.models.piper.runtime import PiperSynthesizer  # noqa: E402
from vocalis.stages.runtime.output import AudioOutput  # noqa: E402
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest  # noqa: E402
from vocalis.stages.runtime.stage import StageItem  # noqa: E402
from vocalis.stages.runtime.utterance import UtteranceStage  # noqa: E402


def measured(work) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    audio_s = work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"audio_s": audio_s, "wall_s": wall, "cpu_s": cpu, "per_wall_s": audio_s / wall, "per_cpu_s": audio_s / cpu}


def run_ceiling(sessions: list, units: list[list[int]], rate: int) -> float:
    work: queue.Queue[list[int]] = queue.Queue()
    for ids in units:
        work.put(ids)
    samples = [0] * len(sessions)

    def lane(i: int) -> None:
        while True:
            try:
                ids = work.get_nowait()
            except queue.Empty:
                return
            samples[i] += _run(sessions[i], ids).size

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(len(sessions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(samples) / rate


def _run(session, ids: list[int]):
    import numpy as np

    return session.run(None, {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": np.array([0.667, 1.0, 0.8], dtype=np.float32),
    })[0]


def run_stage(stage: UtteranceStage, stage_input, texts: list[str], concurrency: int, rate: int) -> float:
    async def go() -> float:
        pending = list(texts)
        active = 0
        samples = 0
        while pending or active:
            while pending and active < concurrency:
                stage.add(StageItem(SynthesisRequest(text=pending.pop(0), stage_input=stage_input, output=AudioOutput())))
                active += 1
            for item in stage.step():
                if item.payload is not None:
                    samples += len(item.payload)
                if item.finished:
                    active -= 1
        return samples / rate

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="2,4")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--texts", type=int, default=6)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_lanes.json")
    args = parser.parse_args()
    import onnxruntime as ort

    levels = [int(c) for c in args.concurrency.split(",")]
    cores = len(os.sched_getaffinity(0))
    voice = piper_voice.load(default_voice_path())
    rate = voice.sample_rate
    piper = voice.voice
    stage_input = PiperAdapter(voice).stage_input(RequestParams(model="m", voice="", fields={}))
    texts = [p.text for p in prompts.bundled()[: args.texts]]
    units = [piper.phonemes_to_ids(s) for t in texts for s in piper.phonemize(t)]
    options = piper_voice.session_options(1)
    sessions = [
        ort.InferenceSession(str(voice.model_path), sess_options=options, providers=["CPUExecutionProvider"])
        for _ in range(cores)
    ]
    lanes = UtteranceStage("piper", PiperSynthesizer(voice), lanes=cores)
    one = UtteranceStage("piper", PiperSynthesizer(voice), lanes=1)
    run_stage(lanes, stage_input, texts[:2], 2, rate)  # warm-up
    modes: dict[str, Callable[[], float]] = {"ceiling": lambda: run_ceiling(sessions, units, rate)}
    for c in levels:
        modes[f"lanes c={c}"] = functools.partial(run_stage, lanes, stage_input, texts, c, rate)
    for c in levels:
        modes[f"one-session c={c}"] = functools.partial(run_stage, one, stage_input, texts, c, rate)
    runs: list[dict] = []
    for rep in range(args.reps):
        order = list(modes) if rep % 2 == 0 else list(reversed(modes))
        for name in order:
            result = measured(modes[name])
            runs.append({"mode": name, "rep": rep, **result})
            print(f"  rep {rep} {name:<16} {result['per_wall_s']:6.2f} audio s/wall s  {result['per_cpu_s']:6.2f} audio s/CPU s",
                  file=sys.stderr, flush=True)
    voice.phonemizer.close()

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs if r["mode"] == mode)

    print(f"\n{cores} cores, {len(texts)} texts, {args.reps} reps (medians)")
    print("| mode | audio s / wall s | / ceiling | audio s / CPU s | / ceiling |\n|---|---|---|---|---|")
    for name in modes:
        print(f"| {name} | {med(name, 'per_wall_s'):.2f} | {med(name, 'per_wall_s') / med('ceiling', 'per_wall_s'):.2f} "
              f"| {med(name, 'per_cpu_s'):.2f} | {med(name, 'per_cpu_s') / med('ceiling', 'per_cpu_s'):.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": platform.platform(), "cores": cores, "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "runs": runs,
    }, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
