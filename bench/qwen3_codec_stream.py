"""Codec cost per chunk of Qwen3-TTS's speech-tokenizer decoder: streamed from a carried state (`SpeechDecoder.stream`,
what code2wav runs) against re-decoding each chunk behind 25 frames of left context (qwen-tts's chunked decode, what
code2wav ran before), side by side in one run, on the tiny checkpoint and at the published decoder sizes (random
weights).

    python bench/qwen3_codec_stream.py [--json out.json]

One request: `--ref` reference codes (an ICL clone's clip), then `--frames` generated frames in chunks of `chunk`.
Per chunk size: the codec's CPU ms (one thread; fewest of `--repeats`) of a chunk after the first, averaged, and of the
first (which also decodes the clip: into the state, or as left context), and the emitted audio's largest difference
from the decode of all codes at once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from bench.qwen3_codec_context import decoders
from vocalis.stages.models.qwen3_tts.codec import DecoderStreamState, SpeechDecoder

LEFT_CONTEXT = 25


def chunked(ref: int, frames: int, chunk: int) -> list[tuple[int, int]]:
    """[start, end) of each chunk of the generated frames (absolute, after the clip)."""
    return [(s, min(s + chunk, ref + frames)) for s in range(ref, ref + frames, chunk)]


@torch.inference_mode()
def run(decoder: SpeechDecoder, ref: int, frames: int, chunk: int, repeats: int, seed: int = 0) -> dict:
    c = decoder.config
    hop = c.samples_per_frame
    codes = torch.randint(0, c.codebook_size, (1, c.num_quantizers, ref + frames), generator=torch.Generator().manual_seed(seed))
    whole = decoder(codes)[0, ref * hop :]
    windows = chunked(ref, frames, chunk)
    times: dict[str, list[list[float]]] = {"stateful": [], "redecode": []}
    errors = {}
    for _ in range(repeats):
        for mode in times:  # the two side by side in each repeat
            state, pieces, ms = DecoderStreamState(), [], []
            for i, (start, end) in enumerate(windows):
                t0 = time.process_time()
                if mode == "stateful":
                    first = start if i else 0  # the first call decodes the clip into the state, its audio dropped
                    samples = decoder.stream(codes[:, :, first:end], [state], [end - first], [start - first])[0]
                else:
                    context = max(0, start - LEFT_CONTEXT)
                    samples = decoder(codes[:, :, context:end])[0, (start - context) * hop :]
                ms.append((time.process_time() - t0) * 1e3)
                pieces.append(samples)
            times[mode].append(ms)
            errors[mode] = float((torch.cat(pieces) - whole).abs().max())
    result: dict = {"chunk": chunk, "chunks": len(windows)}
    for mode, runs in times.items():
        result[mode] = {"first_chunk_ms": min(r[0] for r in runs),
                        "chunk_ms": min(statistics.mean(r[1:] or r) for r in runs), "max_abs_error": errors[mode]}
    result["ratio"] = result["redecode"]["chunk_ms"] / result["stateful"]["chunk_ms"]
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ref", type=int, default=60, help="reference codes of the clip (60: 4.8 s)")
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--chunks", default="1,4,25", help="chunk sizes in frames")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--real-frames", type=int, default=8, help="frames at the published sizes (~0.1 s CPU per frame)")
    parser.add_argument("--real-chunks", default="1,4")
    parser.add_argument("--real-repeats", type=int, default=1)
    parser.add_argument("--skip-real", action="store_true", help="the tiny decoder only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result: dict = {"ref": args.ref, "threads": args.threads, "decoders": {}}
    for name, decoder in decoders().items():
        real = "published" in name
        if real and args.skip_real:
            continue
        frames, chunks, repeats = (args.real_frames, args.real_chunks, args.real_repeats) if real else (args.frames, args.chunks, args.repeats)
        rows = [run(decoder, args.ref, frames, int(k), repeats) for k in chunks.split(",")]
        result["decoders"][name] = {"frames": frames, "repeats": repeats, "rows": rows}
        print(f"\n{name}: {frames} frames behind {args.ref} reference codes, {args.threads} thread(s), fewest of {repeats}")
        print("| chunk | stateful ms/chunk | re-decode (25 ctx) ms/chunk | ratio | first chunk ms (stateful / re-decode) "
              "| stateful err | re-decode err |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            s, d = r["stateful"], r["redecode"]
            print(f"| {r['chunk']} | {s['chunk_ms']:.1f} | {d['chunk_ms']:.1f} | {r['ratio']:.2f}x | {s['first_chunk_ms']:.1f} / {d['first_chunk_ms']:.1f} "
                  f"| {s['max_abs_error']:.1e} | {d['max_abs_error']:.1e} |")
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
