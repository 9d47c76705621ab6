"""Drift of the precision deploy options (bfloat16, float16, int8-dynamic weights) against float32 (the parity
path), per family, on the tiny checkpoints; with the generator's step time and the model's weight bytes beside it.

Each family's tiny checkpoint (committed, or built as bench/gpu.py's CASES build it;
Gepard's by tests/tiny_gepard) is served greedy or seeded (stage by stage, in
process) with its generator stage(s) in float32, then with each of VARIANTS; the
other runs are compared with the float32 one (which matches the
reference packages' goldens within the golden tests' tolerances): how many of the
generator's output values (codes, or latent frames) agree before the first
divergence, and the audio's signal-to-error ratio. Where the codes go through the shared
sampler the same request is replayed teacher-forced (bench/forced_sampling.py): the
largest logit error over the largest logit, the argmax agreement, each call's error,
and whether the replay emitted the float32 run's codes (the forcing held). Qwen3-TTS is
also run teacher-forced against its goldens, so a flipped code cannot cascade: the
talker's logit error and its argmax agreement per step.

The "float64" variant is float32's own rounding seen from float64: how much the
tiny checkpoint's random weights amplify a rounding along the path (its conditioning).
A variant's drift is as small as its dtype allows when it is about that floor times
the ratio of the unit roundoffs (2^13 for float16, 2^16 for bfloat16): a ratio well above 1
points at an op run below the precision it needs, a large floor at the weights
(bench/drama3_tower_drift.py takes Drama 3's apart). The tiny checkpoints' step times are
overhead-bound (the speed of the options at real size: bench/precision_real_size.py).

    python bench/half_precision_drift.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.forced_sampling import SamplerTape  # noqa: E402
from bench.report import write_json  # noqa: E402
from bench.stage_weights import model_weight_bytes  # noqa: E402
from bench.voice_clip import bench_voice, reference_audio  # noqa: E402
from vocalis.stages.models.registry import load_model  # noqa: E402
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest  # noqa: E402
from vocalis.stages.runtime.stage import StageItem  # noqa: E402

GOLDENS = ROOT / "tests" / "goldens"


def _bench_gpu():
    """bench/gpu.py, whose CASES say how each family's tiny checkpoint is had."""
    from bench import gpu

    return gpu


def _tiny(key: str) -> Callable[[Path], Path]:
    return lambda work: _bench_gpu().tiny_checkpoint(key, work)


def _gepard(work: Path) -> Path:
    from tests.tiny_gepard.build import build_checkpoint

    return build_checkpoint(work / "gepard-tiny")


SEEDED = {"max_new_tokens": 12, "seed": 3}
CASES: dict[str, tuple[Callable[[Path], Path], dict, tuple[str, ...]]] = {
    # family: (its tiny checkpoint given a work dir, request fields, deploy stages run in the dtype under test)
    "qwen3_tts": (lambda work: GOLDENS / "qwen3_tts" / "cv-1b7", {"max_new_tokens": 24, "seed": 3, "extra_params": {"temperature": 0.0}}, ("0",)),
    "voxcpm2": (lambda work: GOLDENS / "voxcpm2" / "tiny", SEEDED, ("0",)),
    "omnivoice": (lambda work: GOLDENS / "omnivoice" / "tiny", {"seed": 3}, ("0",)),
    "higgs_audio_v2": (_tiny("higgs-audio-v2"), {"max_new_tokens": 20, "seed": 3}, ("0",)),  # 12 frames after the BOS frame and 7 delay rows
    "fish_speech": (_tiny("fish-speech-s2-pro"), SEEDED, ("0",)),
    "voxtral": (_tiny("voxtral"), SEEDED, ("0",)),
    "auk": (_tiny("auk"), {"seed": 3, "duration_seconds": 0.5}, ("0", "1")),  # the text condition and the flow
    "gepard": (_gepard, SEEDED, ("0",)),
    "drama3": (_tiny("drama-3"), SEEDED, ("0",)),
    "cosyvoice3": (_tiny("cosyvoice3"), SEEDED, ("llm",)),  # these two clone a reference clip (CLONES)
    "glm_tts": (_tiny("glm-tts"), SEEDED, ("llm",)),
}
CLONES = {"cosyvoice3", "glm_tts"}
"""Families that need a reference clip with its transcript: bench/gpu.py's synthetic one."""
TEXT = "Hello world, this is a tiny voice."
VARIANTS: dict[str, dict[str, str]] = {
    # name: the deploy settings of the generator stage(s); "float32 again" shows the run-to-run floor
    "float32 again": {"dtype": "float32"},
    # float32's own rounding seen from float64: the checkpoint's conditioning, which every dtype's drift scales from
    "float64": {"dtype": "float64"},
    "bfloat16": {"dtype": "bfloat16"},
    "float16": {"dtype": "float16"},
    "int8-dynamic": {"quantize": "int8-dynamic"},
    "bfloat16 + int8-dynamic": {"dtype": "bfloat16", "quantize": "int8-dynamic"},
    "int4-weight": {"quantize": "int4-weight"},
    "int4-decode": {"quantize": "int4-decode"},
}


class Collect:
    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []

    def put_audio(self, samples) -> None:
        self.pieces.append(np.asarray(samples, dtype=np.float32))

    def close(self, error=None) -> None: ...


def as_tensor(payload) -> torch.Tensor:
    """A generator stage's payload as a tensor: codes or latents, bare or held by a unit (OmniVoice's)."""
    payload = getattr(payload, "codes", payload)
    return payload if torch.is_tensor(payload) else torch.as_tensor(np.asarray(payload))


@dataclass
class Served:
    generator: torch.Tensor
    """The generator's output (the stage feeding the decoder), flattened."""
    audio: np.ndarray
    generator_s: float
    """Wall time in the generator stage's steps."""
    weight_bytes: int


def serve(path: Path, fields: dict, stages_in_dtype: tuple[str, ...], settings: dict[str, str],
          sampler: Callable[[], AbstractContextManager] = nullcontext, clone: bool = False,
          every_stage: dict[str, str] | None = None) -> Served:
    """One request through the model loaded with `settings` on the generator stage(s) (and `every_stage` on each of
    its deploy stages, under them: a device), its steps run inside `sampler()` (a SamplerTape's record or force)."""
    overrides = {name: dict(every_stage) for name in deploy_stage_names(path)} if every_stage else {}
    for key in stages_in_dtype:
        overrides.setdefault(key, {}).update(settings)
    model = load_model(str(path), stage_overrides=json.dumps(overrides))
    try:
        weights = model_weight_bytes(model)
        params = RequestParams(model=model.name, voice=bench_voice(model, clone), fields=fields,
                               reference=reference_audio() if clone else None)
        request = SynthesisRequest(text=TEXT, stage_input=model.adapter.stage_input(params), output=Collect())
        stages = model.pipeline.stages
        generator = len(stages) - 2  # a PrepareStage may come first; the decoder comes last
        stages[0].add(StageItem(request))
        first: list[torch.Tensor] = []
        generator_s = 0.0
        with torch.inference_mode(), sampler():
            while any(stage.has_work() for stage in stages):
                for index, stage in enumerate(stages):
                    if not stage.has_work():
                        continue
                    started = time.perf_counter()
                    items = stage.step()
                    if index == generator:
                        generator_s += time.perf_counter() - started
                    for item in items:
                        if index == generator and item.payload is not None:
                            first.append(as_tensor(item.payload))
                        if index + 1 < len(stages):
                            stages[index + 1].add(item)
                        elif item.payload is not None:
                            request.emit(item.payload)
        if request.error:
            raise request.error
        flat = torch.cat([f.detach().cpu().flatten().to(torch.float64 if f.is_floating_point() else torch.long) for f in first])
        audio = np.concatenate(request.output.pieces) if request.output.pieces else np.zeros(0, np.float32)
        return Served(flat, audio, generator_s, weights)
    finally:
        model.close()


def deploy_stage_names(path: Path) -> list[str]:
    """The names of the deploy stages of the checkpoint's family, in order."""
    from vocalis.stages.api import family as families
    from vocalis.stages.runtime.deploy import load_deploy

    families.discover()
    return [stage.name for stage in load_deploy(families.family_for_checkpoint(path).deploy_defaults).stages]


def generator_drift(a: torch.Tensor, b: torch.Tensor) -> str:
    """Codes: the share of them equal up to the first difference. Latents: relative L2 error."""
    n = min(len(a), len(b))
    if n == 0:
        return "-"
    if not a.is_floating_point():
        bad = a[:n] != b[:n]
        first = int(bad.nonzero()[0]) if bad.any() else n
        return f"codes equal up to the first difference: {first}/{n}"
    return f"latent relative L2 error {float((a[:n] - b[:n]).norm() / a[:n].norm()):.2e}"


def ser_db(reference: np.ndarray, other: np.ndarray) -> float:
    """Signal-to-error ratio of `other` against `reference` over their common length, in float64: inf where they are
    equal (so that a variant that did not change anything shows as such), nan where there is nothing to compare."""
    n = min(len(reference), len(other))
    if n == 0:
        return float("nan")
    reference, other = np.asarray(reference[:n], np.float64), np.asarray(other[:n], np.float64)
    error = float(np.sum((reference - other) ** 2))
    return float("inf") if error == 0 else float(10 * np.log10(float(np.sum(reference**2)) / error))


def qwen3_teacher_forced(settings: dict[str, str]) -> dict:
    from tests.stages.models.qwen3_tts.goldens import META, NAMES, golden, teacher_forced
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.models.qwen3_tts.weights import load_modules
    from vocalis.stages.runtime.deploy import DeployConfig, StageDeploy

    errors, agree = [], []
    for name in NAMES:
        deploy = StageDeploy(name="talker", **settings)
        mods = load_modules(GOLDENS / "qwen3_tts" / META[name]["variant"], dtype=deploy.torch_dtype)
        quantize_stages(DeployConfig([deploy]), Quantizable("talker", (mods.talker,)))  # as the family's loader does
        ours = teacher_forced(mods, name).talker_logits.float()
        reference = golden(name)["talker_logits"].float()
        n = min(len(ours), len(reference))
        errors.append(float((ours[:n] - reference[:n]).abs().max() / reference[:n].abs().max()))
        agree.append(float((ours[:n].argmax(-1) == reference[:n].argmax(-1)).float().mean()))
    return {"max_rel_logit_error": max(errors) if errors else None, "argmax_agreement": min(agree) if agree else None, "cases": len(errors)}


@contextmanager
def _into(context: AbstractContextManager, sink: list):
    """Enter `context` and keep what it yields in `sink`."""
    with context as value:
        sink.append(value)
        yield value


def _forced(summary: dict | None, continuous: bool) -> str:
    if summary is None:
        return "- (continuous: no codes)" if continuous else "- (codes picked outside the shared sampler)"
    return f"{summary['max_rel_logit_error']:.2e}, {summary['argmax_agreement']:.3f} of {summary['picks']}" + (
        f" ({summary['mismatched_calls']} calls unforced)" if summary["mismatched_calls"] else "") + (
        "" if summary["codes_equal"] else " (forced codes differ from float32's)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "half_precision_drift.json")
    parser.add_argument("--families", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    parser.add_argument("--no-teacher-forced", action="store_true", help="skip Qwen3-TTS teacher-forced against its goldens")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="half-precision-drift-"))
    rows = []
    print("| family | generator stage | generator output vs float32 | audio signal-to-error dB vs float32 "
          "| teacher-forced: max logit error / max logit, argmax agreement | generator s | weights MiB |")
    print("|---|---|---|---|---|---|---|")
    for family in args.families.split(","):
        checkpoint, fields, stages_in_dtype = CASES[family]
        path = checkpoint(work)
        tape, clone = SamplerTape(), family in CLONES
        base = serve(path, fields, stages_in_dtype, {"dtype": "float32"}, tape.record, clone)
        for variant in variants:
            try:
                run = serve(path, fields, stages_in_dtype, VARIANTS[variant], clone=clone)
            except Exception as error:  # an option that fails on a family is a row of the table, not the end of the run
                rows.append({"family": family, "variant": variant, "settings": VARIANTS[variant], "error": repr(error)})
                print(f"| {family} | {variant} | failed: {error!r} | | | | |", flush=True)
                continue
            replays: list[SamplerTape] = []
            forced_row = None
            if tape.calls:
                replayed = serve(path, fields, stages_in_dtype, VARIANTS[variant],
                                 lambda tape=tape, replays=replays: _into(tape.force(), replays), clone)
                # the forcing held only if the replay emitted the float32 run's codes: else its logits compare other inputs
                forced_row = {**replays[0].summary(), "codes_equal": bool(torch.equal(replayed.generator, base.generator))}
            row = {"family": family, "variant": variant, "settings": VARIANTS[variant],
                   "generator": generator_drift(base.generator, run.generator), "audio_ser_db": ser_db(base.audio, run.audio),
                   "samples": [len(base.audio), len(run.audio)], "generator_s": run.generator_s, "float32_generator_s": base.generator_s,
                   "weight_bytes": run.weight_bytes, "float32_weight_bytes": base.weight_bytes, "teacher_forced": forced_row}
            rows.append(row)
            print(f"| {family} | {variant} | {row['generator']} | {row['audio_ser_db']:.1f} | {_forced(forced_row, base.generator.is_floating_point())} "
                  f"| {run.generator_s:.2f} (float32 {base.generator_s:.2f}) "
                  f"| {run.weight_bytes / 2**20:.2f} (float32 {base.weight_bytes / 2**20:.2f}) |", flush=True)
    forced = {}
    if not args.no_teacher_forced:
        forced = {variant: qwen3_teacher_forced({"dtype": "float32"} if variant == "float32 again" else VARIANTS[variant])
                  for variant in variants}
    print("\nQwen3-TTS teacher-forced against the reference goldens (every golden case):")
    print("| generator stage | max talker-logit error / max logit | worst case's codebook-0 argmax agreement |")
    print("|---|---|---|")
    for variant, f in forced.items():
        print(f"| {variant} | {f['max_rel_logit_error']:.2e} | {f['argmax_agreement']:.3f} |")
    write_json(args.out, {"end_to_end": rows, "qwen3_teacher_forced": forced})


if __name__ == "__main__":
    main()
