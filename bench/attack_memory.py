"""What a decompression bomb costs the server: memory and time, before and after bounded decoding.

The bomb is hours of 8 kHz silence as FLAC (10 h is 0.9 MB, under the 10 MiB upload limit):
once with its length in the header, once with the header's total-samples field blank (so
only decoding can tell). Two measurements:

* decode: each case in a fresh child process; "before" is how audio was read until now
  (decode the whole file, then check its length), "after" is `check_clip` as the server
  runs it now. Peak RSS growth (VmHWM minus RSS before) and wall time per case.
* server: `vocalis serve` on loopback; each bomb uploaded to POST /v1/audio/voices and
  sent as `ref_audio`; the status, its time, and the server's peak and lasting RSS growth.

Prints a table and writes JSON (default bench/results/attack_memory.json).

    python bench/attack_memory.py --hours 10
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import multiprocessing
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proc_status import status_kib  # noqa: E402
from tests.serving import start_server  # noqa: E402


def silent_flac(hours: float, known_length: bool) -> bytes:
    buffer = io.BytesIO()
    with sf.SoundFile(buffer, "w", 8000, 1, format="FLAC", subtype="PCM_16") as sound:
        block = np.zeros(8000 * 600, np.int16)
        for _ in range(int(hours * 6)):
            sound.write(block)
    data = bytearray(buffer.getvalue())
    if not known_length:  # STREAMINFO total samples (36 bits at bytes 18..26) set to 0: "unknown"
        word = int.from_bytes(data[18:26], "big") & ~((1 << 36) - 1)
        data[18:26] = word.to_bytes(8, "big")
    return bytes(data)


def _decode_whole(data: bytes) -> float:
    """How audio was read before bounded decoding: all of it, then its length checked."""
    import av

    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return len(samples.mean(axis=1)) / rate
    except (sf.LibsndfileError, RuntimeError, TypeError):
        pass
    with av.open(io.BytesIO(data)) as container:
        stream = next(s for s in container.streams if s.type == "audio")
        rate = stream.codec_context.sample_rate
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        pieces = [c.to_ndarray().reshape(-1) for f in container.decode(stream) for c in resampler.resample(f)]
    return len(np.concatenate(pieces)) / rate


def _decode_child(mode: str, data: bytes, results) -> None:  # noqa: ANN001
    from vocalis.server.config import VoiceConfig
    from vocalis.server.errors import StatusError
    from vocalis.server.voice_rules import check_clip

    before = status_kib("self", "VmRSS")
    started = time.perf_counter()
    try:
        if mode == "before":
            seconds = _decode_whole(data)
            outcome = f"decoded {seconds:.0f} s, then refused" if seconds > 30 else "accepted"
        else:
            check_clip(data, VoiceConfig(), "audio")
            outcome = "accepted"
    except StatusError as error:
        outcome = f"{error.reason}: {error.message}"
    except Exception as error:  # noqa: BLE001 - a crash is a result worth reporting here
        outcome = f"crash {type(error).__name__}: {error}"[:120]
    results.put({"wall_s": time.perf_counter() - started, "peak_growth_mib": (status_kib("self", "VmHWM") - before) / 1024, "outcome": outcome})


def measure_decode(mode: str, data: bytes) -> dict:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_decode_child, args=(mode, data, results))
    child.start()
    result = results.get(timeout=600)
    child.join()
    return result


def _sample_rss(pid: int, done: threading.Event, peaks: list[int]) -> None:
    while not done.is_set():
        peaks.append(status_kib(pid, "VmRSS"))
        time.sleep(0.005)


def measure_server(http_url: str, pid: int, data: bytes) -> list[dict]:
    rows = []
    requests = {
        "upload": lambda http: http.post("/v1/audio/voices", data={"name": "bomb", "consent": "c"},
                                         files={"audio_sample": ("bomb.flac", data, "audio/flac")}),
        "ref_audio": lambda http: http.post("/v1/audio/speech", json={"input": "Hi.", "ref_audio": base64.b64encode(data).decode()}),
    }
    for route, send in requests.items():
        rss_before = status_kib(pid, "VmRSS")
        peaks = [rss_before]
        done = threading.Event()
        sampler = threading.Thread(target=_sample_rss, args=(pid, done, peaks))
        sampler.start()
        started = time.perf_counter()
        with httpx.Client(base_url=http_url, timeout=600) as http:
            response = send(http)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        peak = max(peaks)
        message = response.json().get("error", {}).get("message", "") if response.headers.get("content-type", "").startswith("application/json") else ""
        rows.append({
            "route": route, "status": response.status_code, "wall_s": wall, "message": message[:100],
            "peak_growth_mib": (peak - rss_before) / 1024, "lasting_growth_mib": (status_kib(pid, "VmRSS") - rss_before) / 1024,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=10.0, help="Length of the silent bomb.")
    parser.add_argument("--skip-before", action="store_true", help="Skip decoding the whole bomb (it takes GiBs).")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "attack_memory.json")
    args = parser.parse_args()

    bombs = {"header says length": silent_flac(args.hours, True), "length left blank": silent_flac(args.hours, False)}
    decode_rows = []
    for case, data in bombs.items():
        for mode in (() if args.skip_before else ("before",)) + ("after",):
            decode_rows.append({"case": case, "bytes": len(data), "mode": mode, **measure_decode(mode, data)})

    with tempfile.TemporaryDirectory() as directory:
        server = start_server(Path(directory))
        try:
            server_rows = [
                {"case": case, **row} for case, data in bombs.items() for row in measure_server(server.http_url, server.process.pid, data)
            ]
            alive = server.alive()
        finally:
            server.stop()

    print(f"Bomb: {args.hours:g} h of 8 kHz silence as FLAC ({len(bombs['header says length']) / 1e6:.2f} MB)\n")
    print(f"{'case':<20} {'mode':<7} {'wall s':>8} {'peak RSS +MiB':>14}  outcome")
    for row in decode_rows:
        print(f"{row['case']:<20} {row['mode']:<7} {row['wall_s']:>8.2f} {row['peak_growth_mib']:>14.1f}  {row['outcome'][:70]}")
    print(f"\n{'server: case':<20} {'route':<10} {'status':>6} {'wall s':>8} {'peak +MiB':>10} {'after +MiB':>10}")
    for row in server_rows:
        print(f"{row['case']:<20} {row['route']:<10} {row['status']:>6} {row['wall_s']:>8.2f} "
              f"{row['peak_growth_mib']:>10.1f} {row['lasting_growth_mib']:>10.1f}")
    print(f"\nserver alive afterwards: {alive}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "hours": args.hours, "machine": platform.platform(), "python": platform.python_version(),
        "decode": decode_rows, "server": server_rows, "server_alive": alive,
    }, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
