"""Why Drama 3's teacher-forced logit drift grows along the codebooks of a frame (BENCHMARKS.md, "Precision deploy
options"): the drift per sampler call of a frame, taken apart.

The tiny checkpoint is served as bench/half_precision_drift.py serves it, teacher-forced (bench/forced_sampling.py).
A frame makes 2 + (K - 1) sampler calls: its main token, the repeat redraw (the same logits), and codes 1..K-1 from
the tower's heads, code k after the shared layers and k residual layers. For each call: the error over the largest
logit, median over the request's frames (the JSON also keeps the max), in these settings:

- float32 against float64: float32's own rounding as this path carries it (the checkpoint's conditioning);
- float16 and bfloat16 against float32 (the deploy options);
- float16 with the tower fed float32's backbone states: the tower's own rounding alone;
- float32 with the tower fed float16's backbone states: the backbone's rounding as the tower carries it;
- the first two again with the tower layers' random matrices scaled by 2/3 (the tiny builder draws them with gain
  1.5: tests/tiny_drama3/build.py), which shows how much of the growth is the random weights' gain.

And whether each forced run emitted the recorded run's codes: if it did, the tower's inputs within a frame were the
same codes in both runs, and the logits compare the same computation.

    python bench/drama3_tower_drift.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.forced_sampling import SamplerTape  # noqa: E402
from bench.half_precision_drift import CASES, _into, serve  # noqa: E402
from bench.report import write_json  # noqa: E402
from vocalis.stages.models.drama3 import tower as tower_module  # noqa: E402
from vocalis.stages.models.drama3 import weights as weights_module  # noqa: E402

GAIN_SCALE = 2 / 3
"""Brings the tiny tower's matrices from the builder's gain 1.5 to gain 1 (variance-preserving)."""


@dataclass
class TowerInputs:
    """The tower's input hidden states, call by call: recorded from one run, or fed into another."""

    recorded: list[torch.Tensor]
    feed: list[torch.Tensor] | None = None


@contextmanager
def tower_inputs(record: list[torch.Tensor], feed: list[torch.Tensor] | None = None) -> Iterator[None]:
    """Every `CodebookTower.run` call appends its input hidden states to `record`; with `feed`, call i runs on
    feed[i] (cast to the run's dtype) instead of its own."""
    original = tower_module.CodebookTower.run

    def run(self, hidden, *args, **kwargs):
        if feed is not None:
            hidden = feed[len(record)].to(hidden.dtype)
        record.append(hidden.detach().clone())
        return original(self, hidden, *args, **kwargs)

    tower_module.CodebookTower.run = run
    try:
        yield
    finally:
        tower_module.CodebookTower.run = original


@contextmanager
def tower_gain(scale: float) -> Iterator[None]:
    """The loader's model with every tower layer's matrices (not its code embeddings nor the heads) times `scale`,
    scaled in float64 and then rounded to the deploy dtype, so every run holds the same weights."""
    original = weights_module.load_drama3

    def load(directory, config, device="cpu", dtype=torch.float32):
        model = original(directory, config, device, torch.float64)
        with torch.no_grad():
            for layer in [*model.tower.shared_layers, *model.tower.residual_layers]:
                for name, parameter in layer.named_parameters():
                    if parameter.dim() == 2 and "embedding" not in name:
                        parameter.mul_(scale)
        return model.to(dtype)

    weights_module.load_drama3 = load
    try:
        yield
    finally:
        weights_module.load_drama3 = original


@dataclass
class Forced:
    per_call: list[float]
    codes_equal: bool
    tower_inputs: list[torch.Tensor]


def forced(path: Path, fields: dict, stages: tuple[str, ...], tape: SamplerTape, reference_codes: torch.Tensor, dtype: str,
           feed: list[torch.Tensor] | None = None) -> Forced:
    replays: list[SamplerTape] = []
    inputs: list[torch.Tensor] = []
    with tower_inputs(inputs, feed):
        run = serve(path, fields, stages, {"dtype": dtype}, lambda: _into(tape.force(), replays))
    summary = replays[0].summary()
    assert summary["mismatched_calls"] == 0, "the replay lost step with the recording"
    return Forced(summary["per_call"], bool(torch.equal(run.generator, reference_codes)), inputs)


def recorded(path: Path, fields: dict, stages: tuple[str, ...], dtype: str) -> tuple[SamplerTape, torch.Tensor, list[torch.Tensor]]:
    tape, inputs = SamplerTape(), []
    with tower_inputs(inputs):
        run = serve(path, fields, stages, {"dtype": dtype}, tape.record)
    return tape, run.generator, inputs


def by_position(per_call: list[float], per_frame: int) -> dict[str, list[float]]:
    """Median and max over the frames of each call position (main token, codes 1..K-1; the redraw repeats the main
    token's logits and is left out)."""
    assert len(per_call) % per_frame == 0, f"{len(per_call)} calls are not whole frames of {per_frame}"
    frames = torch.tensor(per_call).view(-1, per_frame)
    columns = [0, *range(2, per_frame)]
    names = ["main", *(f"code {k}" for k in range(1, per_frame - 1))]
    return {name: [float(frames[:, c].median()), float(frames[:, c].max())] for name, c in zip(names, columns, strict=True)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "drama3_tower_drift.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    checkpoint, fields, stages = CASES["drama3"]
    path = checkpoint(Path(tempfile.mkdtemp(prefix="drama3-tower-drift-")))
    from vocalis.stages.models.drama3.config import Drama3Config

    per_frame = 2 + Drama3Config.from_dir(path).decoder.num_codebooks - 1
    rows: dict[str, Forced] = {}
    tape32, codes32, states32 = recorded(path, fields, stages, "float32")
    tape64, codes64, _ = recorded(path, fields, stages, "float64")
    rows["float32 vs float64"] = forced(path, fields, stages, tape64, codes64, "float32")
    rows["float16 vs float32"] = forced(path, fields, stages, tape32, codes32, "float16")
    rows["bfloat16 vs float32"] = forced(path, fields, stages, tape32, codes32, "bfloat16")
    rows["float16, tower fed float32's backbone states"] = forced(path, fields, stages, tape32, codes32, "float16", feed=states32)
    rows["float32, tower fed float16's backbone states"] = forced(path, fields, stages, tape32, codes32, "float32",
                                                                  feed=rows["float16 vs float32"].tower_inputs)
    with tower_gain(GAIN_SCALE):
        tape32, codes32, _ = recorded(path, fields, stages, "float32")
        tape64, codes64, _ = recorded(path, fields, stages, "float64")
        rows["tower x2/3: float32 vs float64"] = forced(path, fields, stages, tape64, codes64, "float32")
        rows["tower x2/3: float16 vs float32"] = forced(path, fields, stages, tape32, codes32, "float16")
    table = {name: by_position(row.per_call, per_frame) for name, row in rows.items()}
    columns = list(next(iter(table.values())))
    print("Drama 3 (tiny), teacher-forced: logit error / largest logit per call of a frame, median over the frames")
    print("| setting | forced codes = recorded | " + " | ".join(columns) + " | max |")
    print("|---|---|" + "---|" * (len(columns) + 1))
    for name, row in rows.items():
        cells = " | ".join(f"{table[name][c][0]:.1e}" for c in columns)
        print(f"| {name} | {'yes' if row.codes_equal else 'NO'} | {cells} | {max(row.per_call):.1e} |")
    write_json(args.out, {"per_position": table, "codes_equal": {name: row.codes_equal for name, row in rows.items()},
                          "per_call": {name: row.per_call for name, row in rows.items()}, "gain_scale": GAIN_SCALE})


if __name__ == "__main__":
    main()
