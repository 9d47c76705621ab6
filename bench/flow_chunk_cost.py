"""Cost of one streamed chunk of the flow + HiFT decoder (CosyVoice3's) against the position of the chunk in
its utterance: the incremental decoder (`FlowVocoderDecoder.decode_window`: held keys/values, a vocoder window)
against the previous one (every chunk re-decodes the utterance from its first token: `decode_one` of the prefix).

Random weights in the published shapes (`--size real`: DiT 1024 x 22 blocks, HiFT 512 channels; `--size small` for a
CPU run: DiT 256 x 4, HiFT 64), a 3 s voice prompt, chunks of 25 tokens (1 s) with the exact 31-token lookahead.
Prints a table (ms per chunk at each position, before and after, and the held keys/values) and writes JSON.

    python bench/flow_chunk_cost.py --size small --seconds 40 --at 1,10,20,40
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalis.stages.components.flow_dit import DiT  # noqa: E402
from vocalis.stages.components.flow_matching import CausalConditionalCFM, CausalMaskedDiffWithDiT, PreLookaheadLayer  # noqa: E402
from vocalis.stages.components.hift import CausalConvRNNF0Predictor, CausalHiFTGenerator  # noqa: E402
from vocalis.stages.models.cosyvoice_common.flow_vocoder import FlowConditioning, FlowVocoderDecoder  # noqa: E402
from vocalis.stages.runtime.chunk_stage import DecodeStream  # noqa: E402
from vocalis.stages.runtime.chunking import Window  # noqa: E402

SIZES = {"real": (1024, 22, 16, 512), "small": (256, 4, 4, 64)}
TOKENS_PER_SECOND = 25
CHUNK = 25


def build(size: str, device: str) -> FlowVocoderDecoder:
    dim, depth, heads, channels = SIZES[size]
    torch.manual_seed(0)
    dit = DiT(dim=dim, depth=depth, heads=heads, dim_head=64, ff_mult=2, mel_dim=80, mu_dim=80, spk_dim=80, static_chunk_size=50)
    flow = CausalMaskedDiffWithDiT(vocab_size=6561, input_size=80, output_size=80, spk_embed_dim=192, token_mel_ratio=2,
                                   pre_lookahead_layer=PreLookaheadLayer(80, 1024, 3), decoder=CausalConditionalCFM(dit))
    hift = CausalHiFTGenerator(base_channels=channels, upsample_rates=[8, 5, 3], upsample_kernel_sizes=[16, 11, 7],
                               istft_params={"n_fft": 16, "hop_len": 4}, resblock_kernel_sizes=[3, 7, 11],
                               resblock_dilation_sizes=[[1, 3, 5]] * 3, source_resblock_kernel_sizes=[7, 7, 11],
                               source_resblock_dilation_sizes=[[1, 3, 5]] * 3,
                               f0_predictor=CausalConvRNNF0Predictor(1, 80, channels))
    return FlowVocoderDecoder(flow.to(device).eval(), hift.to(device).eval(), lambda request: request, n_timesteps=10)


def timed(device: str, decoder: FlowVocoderDecoder, frames: torch.Tensor, stream: DecodeStream) -> float:
    """Milliseconds of one decode call."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        decoder.decode(frames, [stream])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000


def run(size: str, seconds: int, at: list[int], device: str, repeats: int) -> list[dict]:
    decoder = build(size, device)
    generator = torch.Generator().manual_seed(1)
    total = seconds * TOKENS_PER_SECOND
    tokens = torch.randint(0, 6561, (total,), generator=generator)
    prompt = 3 * TOKENS_PER_SECOND
    cond = FlowConditioning(torch.randint(0, 6561, (prompt,), generator=generator), torch.randn(2 * prompt, 80, generator=generator) - 4,
                            torch.randn(192, generator=generator))
    lookahead = decoder.exact_lookahead_tokens
    wanted = {second * TOKENS_PER_SECOND - CHUNK for second in at}  # the chunk that ends at that second
    rows = []
    streams = [DecodeStream(conditioning=cond) for _ in range(repeats)]
    for start in range(0, total, CHUNK):
        window = Window(start, start, min(total, start + CHUNK), min(total, start + CHUNK + lookahead))
        after = []
        for stream in streams:  # each repeat is its own stream, at the same position
            stream.window = window
            after.append(timed(device, decoder, tokens[None, window.context_start : window.lookahead_end], stream))
        if start not in wanted:
            continue
        prefix = tokens[None, : window.lookahead_end]
        before = [timed(device, decoder, prefix, DecodeStream(conditioning=cond)) for _ in range(repeats)]
        held = sum(past.nbytes for past in streams[0].state.flow.pasts)
        rows.append({"second": window.end / TOKENS_PER_SECOND, "before_ms": statistics.median(before), "after_ms": statistics.median(after),
                     "held_frames": streams[0].state.flow.held, "held_mb": held / 2**20})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--at", default="1,10,20,40", help="seconds (chunk ends) to time the previous decoder at")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "flow_chunk_cost.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = run(args.size, args.seconds, [int(s) for s in args.at.split(",")], args.device, args.repeats)
    print(f"flow + HiFT, {args.size} size, {args.device}: ms per 1 s chunk (25 tokens, lookahead 31) at its position")
    print(f"{'chunk ends at':>14} {'before ms':>10} {'after ms':>9} {'before/after':>13} {'held frames':>12} {'held MB':>8}")
    for row in rows:
        print(f"{row['second']:>13.0f}s {row['before_ms']:>10.0f} {row['after_ms']:>9.0f} {row['before_ms'] / row['after_ms']:>12.1f}x "
              f"{row['held_frames']:>12} {row['held_mb']:>8.0f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size": args.size, "device": args.device, "repeats": args.repeats, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
