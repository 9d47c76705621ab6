"""What word timestamps cost: how long after each unit's last audio its word times arrive, and first-audio time.

Starts `vocalis serve` on loopback and sends the bundled prompts (short and medium) one session at
a time (c = 1), each twice in turn: with and without `word_timestamps`. Per unit it records, at the
client, when the unit's last audio chunk and its last WordTimings arrived. Two servers:

- Piper (en_US-joe-medium): times from its own phoneme durations. Target: under 50 ms after the
  unit's last audio.
- The forced aligner behind a neural family: the tiny test TTS with `--forced-aligner` on a
  random-weight CTC checkpoint of wav2vec2-base's real sizes (95 M parameters, built into a temp
  dir; `--aligner-size tiny` for tiny widths with the real 20 ms frames: the stage's own cost). Target: under one chunk of the family's audio
  (its `chunk_frames` x hop at its rate) after the unit's last audio.

Prints a table and writes JSON (default bench/results/).

    python bench/word_timestamps.py --reps 2
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_json  # noqa: E402
from clients.prompts import MEDIUM, SHORT  # noqa: E402
from tests.serving import start_server  # noqa: E402
from tests.stages.text.aligner.tiny_ctc import build_tiny_ctc  # noqa: E402
from vocalis.clients.sync import Client  # noqa: E402
from vocalis.stages.models._template.build import build_checkpoint  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

TINY_CHUNK_FRAMES, TINY_HOP, TINY_RATE = 10, 160, 16000
"""The tiny family's code2wav chunk (stages/models/_template/deploy.yaml): 100 ms of audio."""


def session(client: Client, text: str, words: bool, **fields) -> dict:
    """One session: per unit, seconds from its last audio to its last word times; and the first audio's time."""
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=words, **fields)
    start = time.perf_counter()
    first_audio = None
    last_audio: dict[int, float] = {}
    last_words: dict[int, float] = {}
    for response in client.stream(config, text):
        now = time.perf_counter()
        kind = response.WhichOneof("response")
        if kind == "audio" and response.audio.num_samples:
            first_audio = first_audio if first_audio is not None else now - start
            last_audio[response.audio.utterance_index] = now
        elif kind == "word_timings":
            last_words[response.word_timings.utterance_index] = now
    after = [last_words[u] - last_audio[u] for u in last_words if u in last_audio]
    return {"first_audio_s": first_audio, "words_after_last_audio_s": after, "units": len(last_audio)}


def measure(target: str, texts: list[str], reps: int, **fields) -> dict:
    with Client(target, timeout=300) as client:
        session(client, texts[0], True, **fields)  # warm-up
        runs = {"with": [], "without": []}
        for _ in range(reps):
            for text in texts:
                runs["with"].append(session(client, text, True, **fields))
                runs["without"].append(session(client, text, False, **fields))
    after = [a for run in runs["with"] for a in run["words_after_last_audio_s"]]
    return {
        "units": len(after),
        "words_after_last_audio_ms_median": 1000 * statistics.median(after),
        "words_after_last_audio_ms_p95": 1000 * sorted(after)[int(0.95 * (len(after) - 1))],
        "first_audio_ms_with": 1000 * statistics.median(r["first_audio_s"] for r in runs["with"]),
        "first_audio_ms_without": 1000 * statistics.median(r["first_audio_s"] for r in runs["without"]),
    }


def build_base_ctc(path: Path) -> Path:
    """A CTC checkpoint of wav2vec2-base's sizes (random weights), in the published layout."""
    return build_tiny_ctc(
        path, "base", hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
        conv_dim=[512] * 7, conv_kernel=[10, 3, 3, 3, 3, 2, 2], conv_stride=[5, 2, 2, 2, 2, 2, 2],
        num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--aligner-size", choices=["base", "tiny"], default="base")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "word_timestamps.json")
    args = parser.parse_args()
    texts = [*SHORT[:4], *MEDIUM[:2]]
    results: dict = {"machine": platform.processor() or platform.machine(), "reps": args.reps}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        piper = start_server(root, timeout=180)
        try:
            results["piper"] = measure(piper.grpc_target, texts, args.reps)
        finally:
            piper.stop()
        checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
        ctc = build_base_ctc(root / "ctc") if args.aligner_size == "base" else build_tiny_ctc(
            root / "ctc", conv_dim=[16] * 7, conv_kernel=[10, 3, 3, 3, 3, 2, 2], conv_stride=[5, 2, 2, 2, 2, 2, 2]
        )  # tiny widths, the real 20 ms frames: what the stage itself costs
        aligned = start_server(root, "--family-module", "vocalis.stages.models._template.family", "--forced-aligner", str(ctc), str(checkpoint),
                               timeout=300)
        try:
            # The tiny family speaks max_new_tokens frames per unit: 2 s of audio, like a short sentence.
            results["aligner"] = measure(aligned.grpc_target, texts, args.reps, max_new_tokens=200)
            results["aligner"]["chunk_ms"] = 1000 * TINY_CHUNK_FRAMES * TINY_HOP / TINY_RATE
            results["aligner"]["aligner"] = args.aligner_size
        finally:
            aligned.stop()
    piper_result, aligner_result = results["piper"], results["aligner"]
    print("| stage | units | words after last audio, median (p95) | target | first audio with / without |")
    print("|---|---|---|---|---|")
    print(f"| Piper durations | {piper_result['units']} | {piper_result['words_after_last_audio_ms_median']:.1f} ms "
          f"({piper_result['words_after_last_audio_ms_p95']:.1f}) | < 50 ms | "
          f"{piper_result['first_audio_ms_with']:.0f} / {piper_result['first_audio_ms_without']:.0f} ms |")
    print(f"| forced aligner ({args.aligner_size}) | {aligner_result['units']} | "
          f"{aligner_result['words_after_last_audio_ms_median']:.1f} ms ({aligner_result['words_after_last_audio_ms_p95']:.1f}) | "
          f"< {aligner_result['chunk_ms']:.0f} ms (one chunk) | "
          f"{aligner_result['first_audio_ms_with']:.0f} / {aligner_result['first_audio_ms_without']:.0f} ms |")
    write_json(args.out, results, indent=1)


if __name__ == "__main__":
    main()
