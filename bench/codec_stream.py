"""Codec cost per chunk of the streamed causal codec decoders: decoded from a carried state (each family's `stream`,
what its codec stage runs) against re-decoding each chunk behind 25 frames of left context (what the stages ran
before), side by side in one run.

    python bench/codec_stream.py [--families qwen3_tts,fish_speech,gepard,voxtral] [--json out.json]

Decoders, each tiny and (but with `--skip-real`) at its published sizes with random weights: Qwen3-TTS's speech
tokenizer (base-1b7), Fish Audio's DAC (S2 Pro / Drama 3; tests/goldens/fish_speech), NeMo's NanoCodec (Gepard; the
tiny `.nemo`, the published yaml of tests/goldens/gepard); Voxtral's audio tokenizer decoder (tiny only).
One request of `--frames` frames in chunks of `chunk`, behind `--ref` reference codes of an ICL clone's clip for Qwen3
and `--lead-in` frames for the others, which the first call decodes (into the state, or as left context) and does
not emit: every later re-decode has its whole 25 frames of context. Per chunk size: the codec's CPU ms (one
thread; fewest of `--repeats`) of a chunk after the first, averaged, and of the first, and the emitted audio's largest
difference from the decode of all frames at once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

LEFT_CONTEXT = 25
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tiny checkpoints' builders under tests/


@dataclass
class Codec:
    """One decoder as the bench drives it: codes hold the time axis `axis` (frames)."""

    name: str
    hop: int
    axis: int
    make_codes: Callable[[int, torch.Generator], torch.Tensor]
    """(frames, generator) to one request's codes [1, ...] with `frames` along `axis`."""
    decode: Callable[[torch.Tensor], torch.Tensor]
    """Codes to the samples [N] of all of them at once."""
    new_state: Callable[[], Any]
    stream: Callable[[torch.Tensor, Any, int, int], torch.Tensor]
    """(codes of the next frames, state, their count, the first `skip` of them not emitted) to the emitted samples."""
    ref: int = 0
    """Frames before the timed ones, decoded by the first call and not emitted: a Qwen3 clone's clip, or a lead-in."""
    frames: int | None = None
    chunks: str | None = None
    repeats: int | None = None


def qwen3(ref: int, real_frames: int, real_chunks: str, real_repeats: int, skip_real: bool) -> list[Codec]:
    from bench.qwen3_codec_context import decoders
    from vocalis.stages.components.causal_stream import StreamState

    out = []
    for name, decoder in decoders().items():
        real = "published" in name
        if real and skip_real:
            continue
        c = decoder.config
        out.append(Codec(
            f"qwen3_tts {name}", c.samples_per_frame, 2,
            lambda n, g, c=c: torch.randint(0, c.codebook_size, (1, c.num_quantizers, n), generator=g),
            lambda codes, d=decoder: d(codes)[0], StreamState,
            lambda codes, state, n, skip, d=decoder: d.stream(codes, [state], [n], [skip])[0], ref=ref,
            **({"frames": real_frames, "chunks": real_chunks, "repeats": real_repeats} if real else {}),
        ))
    return out


def fish_speech(real: bool, real_frames: int, real_chunks: str, real_repeats: int, lead_in: int) -> list[Codec]:
    from vocalis.stages.components.causal_stream import StreamState
    from vocalis.stages.models.fish_common.fish_dac import FishDAC, load_fish_dac
    from vocalis.stages.models.fish_common.fish_dac_config import FishDACConfig

    dacs = {"tiny": load_fish_dac(ROOT / "tests" / "goldens" / "fish_speech" / "tiny")}
    if real:
        torch.manual_seed(0)
        dacs["published sizes, random weights"] = FishDAC(FishDACConfig()).eval()
    out = []
    for name, dac in dacs.items():
        c = dac.config

        def make(n: int, g: torch.Generator, c=c) -> torch.Tensor:
            semantic = torch.randint(0, c.semantic_codebook_size, (1, 1, n), generator=g)
            return torch.cat([semantic, torch.randint(0, c.codebook_size, (1, c.n_codebooks, n), generator=g)], dim=1)

        out.append(Codec(f"fish_speech DAC {name}", dac.samples_per_frame, 2, make, lambda codes, d=dac: d.decode(codes)[0],
                         StreamState, lambda codes, state, n, skip, d=dac: d.stream(codes, [state], [n])[0][skip * d.samples_per_frame :], ref=lead_in,
                         **({"frames": real_frames, "chunks": real_chunks, "repeats": real_repeats} if "published" in name else {})))
    return out


def gepard(real: bool, real_frames: int, real_chunks: str, real_repeats: int, lead_in: int) -> list[Codec]:
    from tests.tiny_gepard.build import build_nemo
    from vocalis.stages.components.causal_stream import StreamState
    from vocalis.stages.models.gepard.nanocodec import NanoCodec, NanoCodecConfig, load_nanocodec

    codecs = {"tiny": load_nanocodec(build_nemo(Path(tempfile.mkdtemp()) / "tiny.nemo"))}
    if real:
        torch.manual_seed(0)
        published = json.loads((ROOT / "tests" / "goldens" / "gepard" / "real_nanocodec_keys.json").read_text())["config"]
        codecs["published sizes, random weights"] = NanoCodec(NanoCodecConfig.from_yaml(published)).eval()
    out = []
    for name, codec in codecs.items():
        levels = list(codec.config.levels_per_group) * codec.config.num_groups

        def make(n: int, g: torch.Generator, levels=levels) -> torch.Tensor:
            return torch.stack([torch.randint(0, k, (n,), generator=g) for k in levels], dim=-1)[None]

        out.append(Codec(f"gepard NanoCodec {name}", codec.samples_per_frame, 1, make, lambda codes, c=codec: c(codes)[0],
                         StreamState, lambda codes, state, n, skip, c=codec: c.stream(codes, [state], [n])[0][skip * c.samples_per_frame :], ref=lead_in,
                         **({"frames": real_frames, "chunks": real_chunks, "repeats": real_repeats} if "published" in name else {})))
    return out


def voxtral(lead_in: int) -> list[Codec]:
    from tests.goldens.voxtral.build_tiny import build
    from vocalis.stages.components.causal_stream import StreamState
    from vocalis.stages.models.voxtral.weights import load_modules

    codec = load_modules(build(Path(tempfile.mkdtemp()) / "tiny")).codec

    def make(n: int, g: torch.Generator) -> torch.Tensor:
        frames = torch.randint(2, 2 + codec.args.acoustic_levels, (n, 1 + codec.args.acoustic_dim), generator=g)
        frames[:, 0] = torch.randint(2, 2 + codec.args.semantic_codebook_size, (n,), generator=g)
        return frames[None]

    return [Codec("voxtral audio tokenizer tiny", codec.args.samples_per_frame, 1, make, lambda codes: codec(codes)[0],
                  StreamState, lambda codes, state, n, skip: codec.stream(codes, [state], [n])[0][skip * codec.args.samples_per_frame :],
                  ref=lead_in)]


@torch.inference_mode()
def run(codec: Codec, frames: int, chunk: int, repeats: int, seed: int = 0) -> dict:
    ref, hop = codec.ref, codec.hop
    codes = codec.make_codes(ref + frames, torch.Generator().manual_seed(seed))

    def span(start: int, end: int) -> torch.Tensor:
        return codes.narrow(codec.axis, start, end - start)

    whole = codec.decode(codes)[ref * hop :]
    windows = [(s, min(s + chunk, ref + frames)) for s in range(ref, ref + frames, chunk)]
    times: dict[str, list[list[float]]] = {"stateful": [], "redecode": []}
    errors = {}
    for _ in range(repeats):
        for mode in times:  # the two side by side in each repeat
            state, pieces, ms = codec.new_state(), [], []
            for i, (start, end) in enumerate(windows):
                t0 = time.process_time()
                if mode == "stateful":
                    first = start if i else 0  # the first call decodes the clip into the state, its audio dropped
                    samples = codec.stream(span(first, end), state, end - first, start - first)
                else:
                    context = max(0, start - LEFT_CONTEXT)
                    samples = codec.decode(span(context, end))[(start - context) * hop :]
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
    parser.add_argument("--families", default="qwen3_tts,fish_speech,gepard,voxtral")
    parser.add_argument("--ref", type=int, default=60, help="Qwen3: reference codes of the clip (60: 4.8 s)")
    parser.add_argument("--lead-in", type=int, default=LEFT_CONTEXT,
                        help="the other codecs: frames before the timed ones (decoded by the first call, not emitted), so "
                             "that every timed re-decode has its whole left context")
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--chunks", default="1,4,25", help="chunk sizes in frames")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--real-frames", type=int, default=8, help="frames at the published sizes (~0.1 s CPU per frame)")
    parser.add_argument("--real-chunks", default="1,4")
    parser.add_argument("--real-repeats", type=int, default=1)
    parser.add_argument("--skip-real", action="store_true", help="the tiny decoders only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    makers: dict[str, Callable[[], list[Codec]]] = {
        "qwen3_tts": lambda: qwen3(args.ref, args.real_frames, args.real_chunks, args.real_repeats, args.skip_real),
        "fish_speech": lambda: fish_speech(not args.skip_real, args.real_frames, args.real_chunks, args.real_repeats, args.lead_in),
        "gepard": lambda: gepard(not args.skip_real, args.real_frames, args.real_chunks, args.real_repeats, args.lead_in),
        "voxtral": lambda: voxtral(args.lead_in),
    }
    result: dict = {"ref": args.ref, "threads": args.threads, "left_context": LEFT_CONTEXT, "decoders": {}}
    print("| decoder | frames | chunk | stateful ms/chunk | re-decode (25 ctx) ms/chunk | ratio | first chunk ms (stateful / re-decode) "
          "| stateful err | re-decode err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for family in args.families.split(","):
        for codec in makers[family]():
            frames, repeats = codec.frames or args.frames, codec.repeats or args.repeats
            rows = [run(codec, frames, int(k), repeats) for k in (codec.chunks or args.chunks).split(",")]
            result["decoders"][codec.name] = {"frames": frames, "ref": codec.ref, "repeats": repeats, "rows": rows}
            for r in rows:
                s, d = r["stateful"], r["redecode"]
                print(f"| {codec.name} | {frames}{f' after {codec.ref} ref' if codec.ref else ''} | {r['chunk']} | {s['chunk_ms']:.1f} "
                      f"| {d['chunk_ms']:.1f} | {r['ratio']:.2f}x | {s['first_chunk_ms']:.1f} / {d['first_chunk_ms']:.1f} "
                      f"| {s['max_abs_error']:.1e} | {d['max_abs_error']:.1e} |", flush=True)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
