"""Word times on text full of numbers and symbols, against an independent recogniser (PocketSphinx).

`python bench/word_times_symbols.py --target HOST:PORT` (a running `vocalis serve`, Piper by default): each text
of TEXTS is synthesized with word_timestamps over gRPC; PocketSphinx aligns the same audio to the text's spoken
form (stages/text/spoken_form.py, e.g. "$3.50" -> "three dollars fifty cents"), and each of the caller's words
gets the start of its first spoken word and the end of its last. Prints how many words were timed, and the
start and end differences (median, p90, ms). PocketSphinx is a test dependency, never the server's; its word
segments run into each other (a word starts where the one before ended), so its starts are early by the pause
before a word and its ends late by the pause after it.
"""

from __future__ import annotations

import argparse
import re
import statistics

import numpy as np
import pocketsphinx
import soxr

from vocalis.clients.sync import Client
from vocalis.stages.text.spoken_form import spoken_form
from vocalis.stages.text.word_times import text_words
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

TEXTS = (
    "Your total is $3.50, due by 7:45 tonight.",
    "Call 555-0123 or 555-0199 before 9:30.",
    "In 2024, about 1,234,567 people voted, up 12% from 2020.",
    "The score was 2-1 after 90 minutes, and 3-2 after extra time.",
    "Rates rose 100% & prices rose 50% in the 1st quarter.",
    "Room 12 on the 22nd floor costs $1,200 a month.",
    "Flight 447 leaves at 6:15 and lands at 10:40.",
    "Mix 2 cups of flour, 1.5 cups of sugar & 3 eggs.",
    "Order #1 shipped on May 3rd; order #2 ships on the 15th.",
    "Save 25% today: pay $19.99 instead of $26.65.",
    "Version 3.14 fixed 7 bugs and added 2 features in 2023.",
    "Dial 911 in an emergency, or 311 for city services.",
)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def recognised(decoder: pocketsphinx.Decoder, samples: np.ndarray, rate: int, spoken: list[str]) -> list[tuple[str, float, float]]:
    pcm = (np.clip(soxr.resample(samples, rate, 16000), -1, 1) * 32767).astype(np.int16).tobytes()
    decoder.set_align_text(" ".join(spoken))
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    return [(s.word.split("(")[0], s.start_frame * 10.0, (s.end_frame + 1) * 10.0)
            for s in decoder.seg() or () if not s.word.startswith(("<", "["))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    args = parser.parse_args()
    decoder = pocketsphinx.Decoder(samprate=16000, lm=None, loglevel="FATAL")
    starts, ends, timed, total, symbolic = [], [], 0, 0, 0
    symbol_starts, symbol_ends = [], []
    with Client(args.target, timeout=120) as client:
        for text in TEXTS:
            config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True)
            audio, words = bytearray(), []
            started = None
            for response in client.stream(config, text):
                kind = response.WhichOneof("response")
                if kind == "session_started":
                    started = response.session_started
                elif kind == "audio":
                    audio += response.audio.audio
                elif kind == "word_timings":
                    words += list(response.word_timings.words)
            assert started is not None
            written = text_words(text)
            total += len(written)
            timed += len(words)
            symbolic += sum(1 for w in written if spoken_form(w.text) != w.text)
            parts = [re.sub(r"[^a-z' ]", " ", spoken_form(w.text).lower()).split() for w in written]
            segments = recognised(decoder, np.frombuffer(bytes(audio), np.int16).astype(np.float32) / 32768, started.sample_rate,
                                  [p for part in parts for p in part])
            if len(segments) != sum(len(p) for p in parts):
                print(f"recogniser lost words of: {text!r}")
                continue
            at = 0
            by_start = {w.text_span.start: w for w in words}
            for word, part in zip(written, parts, strict=True):
                group = segments[at : at + len(part)]
                at += len(part)
                mine = by_start.get(word.start)
                if mine is None or not group:
                    continue
                starts.append(abs(mine.start_ms - group[0][1]))
                ends.append(abs(mine.end_ms - group[-1][2]))
                if spoken_form(word.text) != word.text:
                    symbol_starts.append(starts[-1])
                    symbol_ends.append(ends[-1])
    print(f"{total} words ({symbolic} written with digits or symbols), {timed} timed, {len(starts)} compared")
    print(f"start |diff| ms: median {statistics.median(starts):.0f}, p90 {percentile(starts, 90):.0f}")
    print(f"end   |diff| ms: median {statistics.median(ends):.0f}, p90 {percentile(ends, 90):.0f}")
    print(f"words with digits or symbols ({len(symbol_starts)} compared): start median {statistics.median(symbol_starts):.0f}, "
          f"p90 {percentile(symbol_starts, 90):.0f}; end median {statistics.median(symbol_ends):.0f}, p90 {percentile(symbol_ends, 90):.0f}")


if __name__ == "__main__":
    main()
