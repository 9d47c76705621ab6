"""An LLM-like text stream into the Piper voice: first-audio latency and underruns of real-time playback.

Starts `vocalis serve` on loopback, then for a few assistant-style answers streams the
text token by token (clients/text_stream.py, as `vocalis stream` does) at --rate
tokens per second, and measures, rep by rep:

- first_audio_ratio: time from the first sentence being complete (its last token sent)
  to its first audio, over the time to first audio of that sentence sent alone as one
  complete text (the issue's target: at most 1.5);
- underruns: times real-time playback from the first audio on would run dry, and for how long.

Prints a table and writes JSON (default bench/results/llm_stream.json).

    python bench/llm_stream.py --reps 5 --rate 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serving import start_server  # noqa: E402
from vocalis.clients.aio import AsyncClient  # noqa: E402
from vocalis.clients.text_stream import SAMPLE_ANSWER, first_audio_alone, llm_tokens, stream_text  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

ANSWERS = {
    "museum": SAMPLE_ANSWER,
    "recipe": (
        "Of course! To make a simple tomato sauce, heat two tablespoons of olive oil in a pan over medium heat. "
        "Add one chopped onion and cook it for about five minutes, until it is soft. Then stir in two cloves of "
        "garlic, a can of crushed tomatoes, a pinch of salt and some fresh basil. Let it simmer for twenty minutes. "
        "That's it, your sauce is ready."
    ),
    "support": (
        "I'm sorry to hear that your order has not arrived yet. I checked the tracking number, and the parcel left "
        "our warehouse on Tuesday. It is now with the local courier, who expects to deliver it tomorrow before noon. "
        "If it does not arrive by then, just reply to this message and I will send a replacement right away."
    ),
}
GRANULARITIES = {
    "auto": pb.SPLIT_GRANULARITY_AUTO,
    "sentence": pb.SPLIT_GRANULARITY_SENTENCE,
    "clause": pb.SPLIT_GRANULARITY_CLAUSE,
}


async def measure(target: str, rate: float, reps: int) -> dict:
    rows = {}
    async with AsyncClient(target, timeout=300) as client:
        for granularity, value in GRANULARITIES.items():
            config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
            config.text_splitting.granularity = value
            for label, text in ANSWERS.items():
                tokens = llm_tokens(text)
                await stream_text(client, config, tokens, rate * 4)  # warm-up
                runs = []
                for _ in range(reps):
                    report, _ = await stream_text(client, config, tokens, rate)
                    report.first_unit_alone_s = statistics.median(
                        [await first_audio_alone(client, config, report.first_unit_text) for _ in range(3)]
                    )
                    runs.append(report)
                rows[f"{label} / {granularity}"] = {
                    "audio_seconds": runs[0].audio_seconds,
                    "utterances": runs[0].utterances,
                    "first_unit": runs[0].first_unit_text,
                    "first_unit_alone_s": statistics.median(r.first_unit_alone_s for r in runs),
                    "first_unit_complete_to_first_audio_s": statistics.median(r.first_unit_complete_to_first_audio_s for r in runs),
                    "first_audio_ratio": statistics.median(r.first_audio_ratio for r in runs),
                    "first_text_to_first_audio_s": statistics.median(r.first_text_to_first_audio_s for r in runs),
                    "last_text_to_last_audio_s": statistics.median(r.last_text_to_last_audio_s for r in runs),
                    "runs_with_underrun": sum(r.underruns > 0 for r in runs),
                    "max_underrun_s": max(r.max_underrun_s for r in runs),
                    "underrun_s": [round(r.underrun_s, 3) for r in runs],
                }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rate", type=float, default=20.0, help="Tokens per second.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "llm_stream.json")
    args = parser.parse_args()

    server = start_server(Path(tempfile.mkdtemp()))
    try:
        rows = asyncio.run(measure(server.grpc_target, args.rate, args.reps))
    finally:
        server.stop()

    header = (
        "| answer / split | audio s | units | first unit alone ms | first unit complete -> audio ms | ratio | "
        "first text -> audio ms | last text -> audio ms | runs with underrun | longest underrun ms |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['audio_seconds']:.1f} | {r['utterances']} | {r['first_unit_alone_s'] * 1000:.0f} | "
            f"{r['first_unit_complete_to_first_audio_s'] * 1000:.0f} | {r['first_audio_ratio']:.2f} | "
            f"{r['first_text_to_first_audio_s'] * 1000:.0f} | {r['last_text_to_last_audio_s'] * 1000:.0f} | "
            f"{r['runs_with_underrun']}/{args.reps} | {r['max_underrun_s'] * 1000:.0f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"reps": args.reps, "rate": args.rate, "machine": platform.platform(), "processor": platform.processor(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
