"""Where the time goes for the Piper voice: raw synthesis vs. end to end over gRPC and HTTP.

Starts `vocalis serve` on loopback, then for a ~20-word and a ~200-word text measures,
interleaved rep by rep: in-process synthesis through the Piper stage (no server),
the full response over gRPC and over HTTP, and the time to first audio when
streaming over each. Prints a table and writes JSON (default bench/results/).

    python bench/piper_latency.py --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serving import start_server  # noqa: E402
from vocalis.clients.sync import Client  # noqa: E402
from vocalis.stages.models.piper.loader import load_piper  # noqa: E402
from vocalis.stages.runtime.output import AudioOutput  # noqa: E402
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

TEXTS = {
    "20 words": "The quick brown fox jumps over the lazy dog while the farmer watches quietly from the old wooden porch nearby.",
    "200 words": (
        "Early in the morning the city was still quiet. A few delivery vans moved slowly through the narrow streets, "
        "and the bakeries had just opened their doors. The smell of fresh bread drifted across the square, where an "
        "old man was feeding pigeons from a paper bag. By seven o'clock the first commuters appeared, hurrying towards "
        "the station with coffee in their hands. Buses filled up, bicycles appeared at every corner, and the traffic "
        "lights began their long day of changing colours. In the park, a group of runners passed the fountain for the "
        "third time, while a woman with two dogs tried to keep them away from the ducks. Shops raised their shutters one "
        "after another. A street musician unpacked his violin near the museum and started with a slow, familiar tune. "
        "Tourists gathered around him, taking pictures and dropping coins into his case. At the school on the hill, "
        "children ran through the gates as the bell rang. Teachers greeted them by name. By nine, the city was fully "
        "awake, loud and busy, as if the quiet hour before dawn had never existed at all. Later that afternoon, clouds "
        "rolled in from the sea, and the first drops of rain sent everyone looking for shelter under the awnings."
    ),
}
NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}


def raw_synthesis(model, text: str) -> tuple[float, float, float]:
    """(total seconds, seconds to first sentence, audio seconds) of in-process synthesis."""

    async def go() -> tuple[float, float, float]:
        stage_input = model.adapter.stage_input(RequestParams(model.name, model.name, {"extra_params": NOISELESS}))
        request = SynthesisRequest(text=text, stage_input=stage_input, output=AudioOutput())
        synthesizer = model.pipeline.stages[0].model
        start = time.perf_counter()
        first = None
        samples = 0
        for chunk in synthesizer.synthesize(request):
            first = first or time.perf_counter() - start
            samples += len(chunk)
        return time.perf_counter() - start, first or 0.0, samples / model.capabilities.sample_rate

    return asyncio.run(go())


def grpc_times(target: str, text: str) -> tuple[float, float]:
    """(full response seconds with file delivery, streamed time to first audio)."""
    with Client(target, timeout=120) as client:
        config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, delivery=pb.AUDIO_DELIVERY_FILE)
        config.extra_params.update(NOISELESS)
        start = time.perf_counter()
        client.synthesize(config, text)
        full = time.perf_counter() - start
        config.delivery = pb.AUDIO_DELIVERY_STREAM
        start = time.perf_counter()
        ttfa = 0.0
        for response in client.stream(config, text):
            if response.WhichOneof("response") == "audio" and not ttfa:
                ttfa = time.perf_counter() - start
        return full, ttfa


def http_times(url: str, text: str) -> tuple[float, float]:
    body = {"input": text, "response_format": "pcm", "extra_params": NOISELESS}
    with httpx.Client(base_url=url, timeout=120) as http:
        start = time.perf_counter()
        http.post("/v1/audio/speech", json=body).raise_for_status()
        full = time.perf_counter() - start
        start = time.perf_counter()
        ttfa = 0.0
        with http.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio"}) as response:
            for _ in response.iter_raw():
                ttfa = ttfa or time.perf_counter() - start
        return full, ttfa


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_latency.json")
    args = parser.parse_args()

    model = load_piper()
    server = start_server(Path(tempfile.mkdtemp()))
    try:
        for text in TEXTS.values():  # warm-up
            raw_synthesis(model, text)
            grpc_times(server.grpc_target, text)
            http_times(server.http_url, text)
        rows = {}
        for label, text in TEXTS.items():
            samples: dict[str, list[float]] = {k: [] for k in ("raw", "raw_first", "grpc", "grpc_ttfa", "http", "http_ttfa")}
            audio_seconds = 0.0
            for _ in range(args.reps):
                total, first, audio_seconds = raw_synthesis(model, text)
                samples["raw"].append(total)
                samples["raw_first"].append(first)
                full, ttfa = grpc_times(server.grpc_target, text)
                samples["grpc"].append(full)
                samples["grpc_ttfa"].append(ttfa)
                full, ttfa = http_times(server.http_url, text)
                samples["http"].append(full)
                samples["http_ttfa"].append(ttfa)
            rows[label] = {"audio_seconds": audio_seconds, **{k: statistics.median(v) for k, v in samples.items()}}
    finally:
        server.stop()
        model.close()

    header = "| text | audio s | raw s | gRPC s | HTTP s | gRPC/raw | HTTP/raw | raw 1st sentence s | gRPC TTFA s | HTTP TTFA s |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['audio_seconds']:.2f} | {r['raw']:.3f} | {r['grpc']:.3f} | {r['http']:.3f} | "
            f"{r['grpc'] / r['raw']:.2f} | {r['http'] / r['raw']:.2f} | {r['raw_first']:.3f} | "
            f"{r['grpc_ttfa']:.3f} | {r['http_ttfa']:.3f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"reps": args.reps, "machine": platform.platform(), "processor": platform.processor(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
