"""Time to first audio per request at c requests at once, with the IterativeStage's measured batching off and on.

OmniVoice through its family loader and staged pipeline (in process, no server). Its generator is an IterativeStage:
a request's audio comes when its last unmasking step is done. With batching off (every ready request in every step,
as before step_cost.py) c requests at once share every step and get their audio together; with it on the stage
measures its step cost per batch size and, where a step is compute-bound, serves them one after another.

    python bench/adaptive_batching.py --layers 2            # the published widths (hidden 1024, MLP 3072, 16 heads), 2 layers
    python bench/adaptive_batching.py --tiny                # the committed tiny checkpoint
    python bench/adaptive_batching.py --synthetic           # a one-stage pipeline whose step is float32 matmuls only

`--synthetic` is the compute-bound case without a family around it: an IterativeModel whose step runs, per request,
360 rows (OmniVoice's two guidance rows of ~180 positions) through 1024 -> 3072 -> 1024 float32 matmuls, the
dominant shape of OmniVoice's step, `--steps` times per request; on a few CPU cores its cost grows with the batch.

Each repeat runs c = 1 once (a lone request's TTFA: what sequential service gives request k is about k times it),
then the two modes at c, interleaved, in alternating order. Every run starts the policy afresh (no measurements:
its first steps measure one request, then two), as a freshly started server would. Random weights; the text and
settings of bench/real_size_cpu.py (145 frames, `--steps` unmasking passes, deterministic positions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import gpu  # noqa: E402
from bench.real_size_cpu import FAMILIES, make_request  # noqa: E402
from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage  # noqa: E402
from vocalis.stages.runtime.pipeline import Pipeline  # noqa: E402
from vocalis.stages.runtime.request import SynthesisRequest  # noqa: E402
from vocalis.stages.runtime.step_cost import StepCost  # noqa: E402

TINY = ROOT / "tests" / "goldens" / "omnivoice" / "tiny"
PUBLISHED_WIDTHS = {"hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
                    "num_key_value_heads": 8, "head_dim": 128}
"""Qwen3-0.6B's (bench/configs/omnivoice_real_sizes.json); the vocabulary stays the tiny tokenizer's."""


def build(out: Path, layers: int) -> Path:
    """The tiny checkpoint with the published backbone widths and `layers` layers, random weights."""
    from vocalis.stages.models.omnivoice.backbone import OmniVoiceLM
    from vocalis.stages.models.omnivoice.config import OmniVoiceConfig

    shutil.copytree(TINY, out)  # its model.safetensors is replaced below
    config = json.loads((out / "config.json").read_text())
    config["llm_config"] |= PUBLISHED_WIDTHS | {"num_hidden_layers": layers}
    if "layer_types" in config["llm_config"]:
        config["llm_config"]["layer_types"] = ["full_attention"] * layers
    (out / "config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(0)
    with torch.no_grad():
        gpu._save(OmniVoiceLM(OmniVoiceConfig.from_dir(out)), out / "model.safetensors")
    return out


@dataclass(eq=False)
class MatmulJob:
    request: SynthesisRequest
    left: int

    @property
    def done(self) -> bool:
        return self.left == 0


class Matmuls(IterativeModel):
    """The synthetic compute-bound stage: a step is [360·b, 1024] @ [1024, 3072] @ [3072, 1024] in float32."""

    ROWS = 360

    def __init__(self, steps: int) -> None:
        self.steps = steps
        generator = torch.Generator().manual_seed(0)
        self.up = torch.randn(1024, 3072, generator=generator) / 32
        self.down = torch.randn(3072, 1024, generator=generator) / 55
        self.x = torch.randn(self.ROWS, 1024, generator=generator)

    def start(self, request, payload):
        return MatmulJob(request, self.steps)

    def step(self, jobs):
        torch.nn.functional.silu(self.x.repeat(len(jobs), 1) @ self.up) @ self.down
        for job in jobs:
            job.left -= 1
        return [[np.zeros(2400, dtype=np.float32)] if job.done else [] for job in jobs]


class Closed:
    """An output that says when its request ended (the synthetic pipeline's; no event loop)."""

    def __init__(self) -> None:
        self.ended = threading.Event()

    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None:
        self.ended.set()


@dataclass
class Synthetic:
    """What the runs need of a loaded model: its pipeline."""

    pipeline: Pipeline


def synthetic_at_once(model: Synthetic, clients: int) -> dict:
    requests = [SynthesisRequest(text="", stage_input=None, output=Closed()) for _ in range(clients)]
    start = time.monotonic()
    for request in requests:
        model.pipeline.submit(request)
    for request in requests:
        request.output.ended.wait()
    wall = time.monotonic() - start
    return {"ttfa_s": [r.first_audio_at - start for r in requests], "wall_s": wall,
            "audio_s_per_s": clients * 0.1 / wall}


def ratios(model) -> dict[str, float | None]:
    """Each IterativeStage's measured r = c / t(1) (None: policy off or not measured)."""
    return {stage.name: stage.step_cost.marginal_ratio() if stage.step_cost else None
            for stage in model.pipeline.stages if isinstance(stage, IterativeStage)}


def set_adaptive(model, on: bool) -> None:
    for stage in model.pipeline.stages:
        if isinstance(stage, IterativeStage):
            stage.step_cost = StepCost() if on else None


async def at_once(model, clients: int, steps: int) -> dict:
    family = FAMILIES["omnivoice"]
    start = time.perf_counter()
    results = await asyncio.gather(*(gpu.timed(model, make_request(model, family, 0, steps)) for _ in range(clients)))
    wall = time.perf_counter() - start
    return {"ttfa_s": [r[0] for r in results], "wall_s": wall, "audio_s_per_s": sum(r[2] for r in results) / wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoint as it is")
    parser.add_argument("--synthetic", action="store_true", help="the matmul-only stage instead of OmniVoice")
    parser.add_argument("--layers", type=int, default=2, help="backbone layers at the published widths")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4, help="unmasking passes per request (num_step)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, help="write the runs as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from vocalis.stages.models.registry import load_model

    with tempfile.TemporaryDirectory() as tmp:
        if args.synthetic:
            model = Synthetic(Pipeline([IterativeStage("matmuls", Matmuls(args.steps), max_num_seqs=args.clients)]))

            def serve(clients: int) -> dict:
                return synthetic_at_once(model, clients)
        else:
            path = TINY if args.tiny else build(Path(tmp) / "omnivoice", args.layers)
            stages = {"0": {"max_num_seqs": args.clients}, "1": {"max_num_seqs": args.clients}}
            model = load_model(str(path), stage_overrides=json.dumps(stages))

            def serve(clients: int) -> dict:
                return asyncio.run(at_once(model, clients, args.steps))
        try:
            serve(1)  # warm-up
            runs = []
            for repeat in range(args.repeats):
                set_adaptive(model, False)
                alone = serve(1)["ttfa_s"][0]
                for on in ((False, True) if repeat % 2 == 0 else (True, False)):
                    set_adaptive(model, on)
                    run = serve(args.clients)
                    runs.append({"repeat": repeat, "adaptive": on, "alone_s": alone, **run, "ratio": ratios(model)})
                    print(json.dumps(runs[-1]), file=sys.stderr)
        finally:
            model.pipeline.close()
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=2))
    print("\n| mode | alone s | TTFA per request (s, in order of submission) | wall s | audio-s/s | measured r |\n|---|---|---|---|---|---|")
    for run in runs:
        ttfa = ", ".join(f"{t:.2f}" for t in run["ttfa_s"])
        r = ", ".join(f"{name} {value:.2f}" for name, value in run["ratio"].items() if value is not None) or "-"
        print(f"| {'on' if run['adaptive'] else 'off'} | {run['alone_s']:.2f} | {ttfa} | {run['wall_s']:.2f} | "
              f"{run['audio_s_per_s']:.3f} | {r} |")
    for on in (False, True):
        mine = [r for r in runs if r["adaptive"] is on]
        first = statistics.median(min(r["ttfa_s"]) / r["alone_s"] for r in mine)
        mean = statistics.median(statistics.mean(r["ttfa_s"]) / r["alone_s"] for r in mine)
        rate = statistics.median(r["audio_s_per_s"] for r in mine)
        print(f"adaptive {'on ' if on else 'off'}: first TTFA {first:.2f}x alone, mean TTFA {mean:.2f}x alone, "
              f"{rate:.3f} audio-s/s (medians over {len(mine)} runs)")


if __name__ == "__main__":
    main()
