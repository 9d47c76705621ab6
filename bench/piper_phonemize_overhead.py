"""What the phonemizer pool costs: espeak-ng in a child process vs in-process, per sentence, beside a synthesis run.

For each sentence of the bundled prompts, interleaved rep by rep: Piper's own
in-process `PiperVoice.phonemize`, the same through the PhonemizerPool (a pipe
round trip to a worker process), and one ONNX run of the sentence (what the
phonemization precedes). Prints a table and writes JSON.

    python bench/piper_phonemize_overhead.py --reps 5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalis.clients import prompts  # noqa: E402
from vocalis.stages.models.piper import voice as piper_voice  # noqa: E402
from vocalis.stages.models.piper.loader import default_voice_path  # noqa: E402


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_phonemize_overhead.json")
    args = parser.parse_args()
    voice = piper_voice.load(default_voice_path())
    piper = voice.voice
    sentences = [s for p in prompts.bundled() for s in p.text.replace("? ", "?|").replace(". ", ".|").split("|")]
    sentences = sentences[: args.sentences]
    for sentence in sentences[:3]:  # warm both paths up
        assert voice.phonemizer.phonemize(sentence) == piper.phonemize(sentence)
    in_process, pooled, synthesis = [], [], []
    for rep in range(args.reps):
        for sentence in sentences:
            pair = [("in", lambda s=sentence: piper.phonemize(s)), ("pool", lambda s=sentence: voice.phonemizer.phonemize(s))]
            for name, work in pair if rep % 2 == 0 else reversed(pair):
                (in_process if name == "in" else pooled).append(timed(work))
            if rep == 0:
                ids = piper.phonemes_to_ids(piper.phonemize(sentence)[0])
                synthesis.append(timed(lambda ids=ids: piper.phoneme_ids_to_audio(ids)))
    voice.phonemizer.close()
    rows = {
        "in-process phonemize": statistics.median(in_process),
        "pool phonemize": statistics.median(pooled),
        "ONNX run of the sentence": statistics.median(synthesis),
    }
    overhead = rows["pool phonemize"] - rows["in-process phonemize"]
    print("| per sentence (median) | ms |\n|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds * 1000:.2f} |")
    print(f"\npool / in-process: {rows['pool phonemize'] / rows['in-process phonemize']:.2f}x; "
          f"overhead {overhead * 1000:.2f} ms = {overhead / rows['ONNX run of the sentence'] * 100:.2f} % of a sentence's ONNX run")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": platform.platform(), "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "median_s": rows, "pool_over_in_process": rows["pool phonemize"] / rows["in-process phonemize"],
        "overhead_s": overhead, "sentences": len(sentences), "reps": args.reps,
    }, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
