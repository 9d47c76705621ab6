"""How much left context the Qwen3-TTS speech-tokenizer decoder needs: a chunk decoded behind k frames against
the same samples of the whole decode, on the tiny checkpoint and at the published decoder sizes (random weights).

    python bench/qwen3_codec_context.py [--json out.json]

A chunk of `chunk` frames starts `start` frames into a random code sequence (the reference clip's codes stand before
it in an ICL clone); the table gives the largest sample difference for each k. Zero up to float noise means k covers
what the decoder's output depends on.

Then the codec's CPU time for one Base (ICL) clone request: `--frames` generated frames behind `--ref` reference
codes, decoded in the windows the deploy's chunk policy makes (first chunk 1 frame, then 25) with left context k,
against the emitted audio's largest difference from the whole decode (reference codes + frames, as qwen-tts decodes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder
from vocalis.stages.models.qwen3_tts.config import DecoderConfig
from vocalis.stages.runtime.chunking import ChunkPolicy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the receptive-field bound, derived next to its test under tests/
TINY = ROOT / "tests" / "goldens" / "qwen3_tts" / "base-1b7"
REAL = ROOT / "tests" / "stages" / "models" / "qwen3_tts" / "real_key_sets.json"


def decoders() -> dict[str, SpeechDecoder]:
    from vocalis.stages.models.qwen3_tts.weights import load_modules

    tiny = load_modules(TINY).decoder
    real_config = json.loads(REAL.read_text())["speech_tokenizer"]["config"]["decoder_config"]
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in real_config.items()}
    torch.manual_seed(0)
    return {"tiny (base-1b7)": tiny, "published sizes, random weights": SpeechDecoder(DecoderConfig(**fields)).eval()}


@torch.inference_mode()
def errors(decoder: SpeechDecoder, start: int, chunk: int, ks: list[int], seed: int = 0) -> tuple[dict[int, float], float]:
    c = decoder.config
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, c.codebook_size, (1, c.num_quantizers, start + chunk), generator=g)
    hop = c.samples_per_frame
    t0 = time.perf_counter()
    whole = decoder(codes)[0, start * hop:]
    seconds = time.perf_counter() - t0
    out = {}
    for k in ks:
        k = min(k, start)
        part = decoder(codes[:, :, start - k:])[0, k * hop:]
        out[k] = float((part - whole).abs().max())
    return out, seconds


@torch.inference_mode()
def clone_cost(decoder: SpeechDecoder, ref: int, frames: int, k: int, repeats: int = 3, seed: int = 1) -> dict:
    """CPU seconds (fewest of `repeats`) and frames decoded for one clone request's chunks at left context k, and
    the emitted audio's error."""
    c = decoder.config
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, c.codebook_size, (1, c.num_quantizers, ref + frames), generator=g)
    hop = c.samples_per_frame
    whole = decoder(codes)[0, ref * hop:]
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=25, left_context_frames=k, max_chunk_frames=25)
    times = []
    for _ in range(repeats):
        emitted, index, decoded, pieces = ref, 0, 0, []
        cpu = time.process_time()
        while emitted < ref + frames:
            w = policy.next_window(emitted, ref + frames, True, index)
            assert w is not None
            samples = decoder(codes[:, :, w.context_start:w.lookahead_end])[0]
            pieces.append(samples[(w.start - w.context_start) * hop:(w.end - w.context_start) * hop])
            decoded += w.length
            emitted, index = w.end, index + 1
        times.append(time.process_time() - cpu)
    cpu = min(times)
    error = float((torch.cat(pieces) - whole).abs().max())
    return {"k": k, "frames_decoded": decoded, "cpu_s": cpu, "max_abs_error": error, "peak": float(whole.abs().max())}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", type=int, default=40, help="frames before the chunk (a clip's codes)")
    parser.add_argument("--chunk", type=int, default=1)
    parser.add_argument("--ks", default="0,1,2,4,6,8,10,12,16,25,40")
    parser.add_argument("--ref", type=int, default=38, help="reference codes of the clip (3 s at 12.5 Hz)")
    parser.add_argument("--frames", type=int, default=24, help="generated frames of the clone request")
    parser.add_argument("--cost-ks", default="25,10,0", help="left contexts whose clone cost is measured")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: CPU time not inflated by spinning)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    torch.set_num_threads(args.threads)
    result = {}
    from tests.stages.models.qwen3_tts.test_codec_context import receptive_field_frames

    for name, decoder in decoders().items():
        errs, seconds = errors(decoder, args.start, args.chunk, ks)
        result[name] = {"receptive_field_frames": receptive_field_frames(decoder.config), "errors": errs}
        print(f"{name}: rf {receptive_field_frames(decoder.config)} frames; whole decode {seconds:.2f} s")
        print("| k | max abs error |\n|---|---|")
        for k, e in errs.items():
            print(f"| {k} | {e:.2e} |")
        costs = [clone_cost(decoder, args.ref, args.frames, int(k), args.repeats) for k in args.cost_ks.split(",")]
        result[name]["clone"] = costs
        print(f"clone of {args.frames} frames behind {args.ref} reference codes (whole-decode peak {costs[0]['peak']:.3f}):")
        print("| left context | frames decoded | codec CPU s | max abs error |\n|---|---|---|---|")
        for r in costs:
            print(f"| {r['k']} | {r['frames_decoded']} | {r['cpu_s']:.2f} | {r['max_abs_error']:.2e} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
