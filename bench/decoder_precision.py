"""Qwen3-TTS's decoder stage (code2wav: the speech tokenizer's decoder) in bfloat16 against float32 on this CPU: the
time to decode the same codes and how far the audio moves (signal-to-error ratio of the bfloat16 samples against the
float32 ones).

Why: at real size on two cores the decoder takes about half of a c = 4 level's compute in float32 (its convolutions
run near this CPU's float32 rate), and README documents a decoder's `dtype` as a deploy setting. The generator's
drift is bench/half_precision_drift.py's; this is the decoder's, on random codes (every codebook entry equally
likely), decoded whole. The two decoders alternate within each of --repeats rounds and the best round is kept.

    python bench/decoder_precision.py                       # bench/real_size_cpu.py's Qwen3-TTS 0.6B checkpoint
    python bench/decoder_precision.py --tiny --repeats 1    # CI-sized: the committed tiny checkpoint
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import real_size_cpu  # noqa: E402
from bench.half_precision_drift import ser_db  # noqa: E402
from bench.report import write_json  # noqa: E402

FAMILY = "qwen3-0.6b-customvoice"


def measure(checkpoint: Path, frames: int, batch: int, repeats: int, seed: int = 0) -> dict:
    from vocalis.stages.models.qwen3_tts.weights import load_modules

    decoder = load_modules(checkpoint).decoder.eval()
    half = copy.deepcopy(decoder).to(torch.bfloat16)
    config = decoder.config
    codes = torch.randint(0, config.codebook_size, (batch, config.num_quantizers, frames), generator=torch.Generator().manual_seed(seed))
    best = {"float32": float("inf"), "bfloat16": float("inf")}
    with torch.inference_mode():
        reference, other = decoder(codes), half(codes).float()  # also the warm-up
        for _ in range(repeats):
            for name, module in (("float32", decoder), ("bfloat16", half)):
                start = time.perf_counter()
                module(codes)
                best[name] = min(best[name], time.perf_counter() - start)
    return {"frames": frames, "batch": batch, "samples": reference.shape[-1], "float32_s": best["float32"],
            "bfloat16_s": best["bfloat16"], "bfloat16_over_float32": best["bfloat16"] / best["float32"],
            "ms_per_frame": {k: 1000 * v / (frames * batch) for k, v in best.items()},
            "snr_db": ser_db(reference.flatten().numpy(), other.flatten().numpy()),
            "max_abs_error": float((reference - other).abs().max()), "peak": float(reference.abs().max())}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=24, help="frames per row (12.5 per second of audio)")
    parser.add_argument("--batch", type=int, default=4, help="rows decoded at once (a c = 4 level's chunk)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoint instead of real-size random weights")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "decoder_precision.json")
    args = parser.parse_args(argv)
    family = real_size_cpu.FAMILIES[FAMILY]
    checkpoint = family.tiny if args.tiny else args.work_dir / FAMILY
    if not args.tiny and not (checkpoint / "config.json").is_file():
        real_size_cpu.build(FAMILY, checkpoint)
    result = {"checkpoint": str(checkpoint), "threads": torch.get_num_threads(), "repeats": args.repeats,
              **measure(checkpoint, args.frames, args.batch, args.repeats)}
    print(f"Qwen3-TTS decoder ({'tiny' if args.tiny else 'real-size random'} weights), {args.batch} x {args.frames} frames, "
          f"{result['threads']} threads, best of {args.repeats}")
    print("| decoder dtype | s | ms per frame | × float32 | SNR against float32 dB |")
    print("|---|---|---|---|---|")
    print(f"| float32 | {result['float32_s']:.3f} | {result['ms_per_frame']['float32']:.1f} | 1.00 | - |")
    print(f"| bfloat16 | {result['bfloat16_s']:.3f} | {result['ms_per_frame']['bfloat16']:.1f} | "
          f"{result['bfloat16_over_float32']:.2f} | {result['snr_db']:.1f} |")
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
