"""Does the OpenAI Python SDK's streaming response stream? Its first byte vs. a lone first sentence.

Starts `vocalis serve` (Piper, en_US-joe-medium) on loopback. For each format, interleaved rep by
rep: the time to the first body byte of `client.audio.speech.with_streaming_response.create(...)`
on a three-sentence text (no stream_format: what the SDK sends), and the time to the whole
response of `client.audio.speech.create(...)` for its first sentence alone. Streaming works when
the ratio stays near 1 (target: at most 2); a server that held the audio back would score the
whole text's time instead. Prints a table and writes JSON (default bench/results/).

    python bench/openai_first_byte.py --reps 5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serving import start_server  # noqa: E402

FIRST = "The first sentence is the one a listener hears while the rest is still being made."
TEXT = FIRST + (
    " The second sentence goes on for a little while, so that it takes the server some time to speak it."
    " And the third sentence closes the paragraph with a few more words of its own."
)
FORMATS = ("mp3", "opus", "pcm")


def first_byte_s(client: OpenAI, text: str, response_format: str) -> tuple[float, float]:
    """(seconds to the first body byte, seconds to the last) of a streaming-response request."""
    start = time.perf_counter()
    first = None
    with client.audio.speech.with_streaming_response.create(
        model="en_US-joe-medium", voice="en_US-joe-medium", input=text, response_format=response_format
    ) as response:
        for piece in response.iter_bytes():
            if piece and first is None:
                first = time.perf_counter() - start
    return first or float("nan"), time.perf_counter() - start


def whole_s(client: OpenAI, text: str, response_format: str) -> float:
    start = time.perf_counter()
    client.audio.speech.create(model="en_US-joe-medium", voice="en_US-joe-medium", input=text, response_format=response_format).read()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "openai_first_byte.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as logs:
        server = start_server(Path(logs), timeout=120)
        try:
            client = OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
            for response_format in FORMATS:  # warm every encoder once
                whole_s(client, FIRST, response_format)
            samples: dict[str, dict[str, list[float]]] = {f: {"first_byte": [], "last_byte": [], "lone_first": []} for f in FORMATS}
            for _ in range(args.reps):
                for response_format in FORMATS:
                    first, last = first_byte_s(client, TEXT, response_format)
                    samples[response_format]["first_byte"].append(first)
                    samples[response_format]["last_byte"].append(last)
                    samples[response_format]["lone_first"].append(whole_s(client, FIRST, response_format))
        finally:
            server.stop()

    rows = []
    for response_format, values in samples.items():
        first, last, lone = (statistics.median(values[k]) for k in ("first_byte", "last_byte", "lone_first"))
        rows.append({"format": response_format, "first_byte_s": first, "last_byte_s": last, "lone_first_sentence_s": lone,
                     "first_byte_over_lone": first / lone, "last_byte_over_lone": last / lone})
    print(f"median of {args.reps} reps; three-sentence text of {len(TEXT)} chars, first sentence {len(FIRST)} chars")
    print("| format | SDK first byte s | lone first sentence s | first byte / lone | SDK last byte s | last byte / lone |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['format']} | {row['first_byte_s']:.3f} | {row['lone_first_sentence_s']:.3f} | {row['first_byte_over_lone']:.2f} "
              f"| {row['last_byte_s']:.3f} | {row['last_byte_over_lone']:.2f} |")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "reps": args.reps, "text": TEXT, "first_sentence": FIRST, "rows": rows, "samples": samples,
        "machine": {"python": platform.python_version(), "machine": platform.machine(), "platform": platform.platform()},
    }, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
