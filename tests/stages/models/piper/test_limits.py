"""Server-side caps on a Piper run: long text and long phoneme sequences are split, and nothing is lost."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from vocalis.stages.models.piper import voice as piper_voice
from vocalis.stages.models.piper.adapter import PiperAdapter
from vocalis.stages.models.piper.limits import phoneme_runs, text_pieces
from vocalis.stages.models.piper.loader import default_voice_path
from vocalis.stages.models.piper.runtime import PiperSynthesizer
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.request import RequestParams, SynthesisRequest
from vocalis.stages.runtime.utterance import piece_samples

LONG = (
    "When the river rose in the spring, the villagers moved their boats, their nets and their goats up the hill, "
    "and they waited there, patiently and without complaint, for the water to go down again, as it always had"
)


def test_short_text_is_one_piece_long_text_is_cut_at_boundaries():
    assert text_pieces("Short. Text.", 50) == ["Short. Text."]
    pieces = text_pieces(LONG + ". " + LONG + ".", 120)
    assert len(pieces) > 2 and all(len(p) <= 120 for p in pieces)
    assert " ".join(pieces).split() == (LONG + ". " + LONG + ".").split()  # every word, in order
    assert text_pieces("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def ids_of(phonemes: list[str]) -> list[int]:
    """Piper's layout: start, each phoneme then a pad, end; a phoneme's id is its code point."""
    return [1, *(i for p in phonemes for i in (ord(p), 0)), 2]


def phonemes_of(ids: list[int]) -> list[str]:
    return [chr(i) for i in ids[1:-1:2]]


def test_phoneme_runs_respect_the_cap_and_cover_every_phoneme():
    phonemes = list("ðə kwˈɪk bɹˈaʊn fˈɑːks, dʒˈʌmps ˈoʊvɚ ðə lˈeɪzi dˈɑːɡ. ") * 12
    runs = list(phoneme_runs(phonemes, ids_of, max_ids=100))
    assert len(runs) > 5 and all(len(r) <= 100 for r in runs)
    assert [p for r in runs for p in phonemes_of(r)] == phonemes
    cut_after = [phonemes_of(r)[-1] for r in runs[:-1]]
    assert all(p in ", ." for p in cut_after)  # after punctuation or between words, never inside a word
    assert list(phoneme_runs(phonemes[:10], ids_of, max_ids=100)) == [ids_of(phonemes[:10])]


def test_phoneme_runs_cut_a_word_only_when_it_alone_is_over_the_cap():
    runs = list(phoneme_runs(list("a" * 300), ids_of, max_ids=100))
    assert all(len(r) <= 100 for r in runs) and sum(len(phonemes_of(r)) for r in runs) == 300


@pytest.fixture(scope="module")
def voice():
    return piper_voice.load(default_voice_path())


def synthesize(synthesizer: PiperSynthesizer, text: str, speed: float = 1.0) -> tuple[list[np.ndarray], int]:
    adapter = PiperAdapter(synthesizer.voice)
    fields = {"speed": speed, "extra_params": {"noise_scale": 0, "noise_w_scale": 0}}
    stage_input = adapter.stage_input(RequestParams(model="m", voice="", fields=fields))

    async def go() -> tuple[list[np.ndarray], int]:
        request = SynthesisRequest(text=text, stage_input=stage_input, output=AudioOutput())
        pieces = [piece_samples(piece) for piece in synthesizer.synthesize(request)]
        return pieces, request.output_tokens

    return asyncio.run(go())


def test_capped_runs_still_speak_the_whole_text(voice):
    whole, whole_ids = synthesize(PiperSynthesizer(voice), LONG + ".")
    capped, capped_ids = synthesize(PiperSynthesizer(voice, max_piece_chars=120, max_ids_per_run=120), LONG + ".")
    assert len(whole) == 1 and len(capped) >= 3
    seconds = sum(len(p) for p in whole) / voice.sample_rate
    capped_seconds = sum(len(p) for p in capped) / voice.sample_rate
    assert seconds > 8 and abs(capped_seconds - seconds) < 0.2 * seconds  # same words, a few more pauses at most
    assert capped_ids >= whole_ids  # every phoneme, plus a start and an end id per extra run
    assert all(0.9 <= np.abs(p).max() <= 1.0 for p in capped)


def test_slow_speech_gets_fewer_ids_per_run(voice):
    synthesizer = PiperSynthesizer(voice, max_ids_per_run=240)
    normal, normal_ids = synthesize(synthesizer, LONG + ".")
    slow, slow_ids = synthesize(synthesizer, LONG + ".", speed=0.5)  # twice the frames per id: at most 120 ids a run
    assert len(slow) >= 2 * len(normal) - 1 and slow_ids >= normal_ids
    assert len(slow) >= -(-slow_ids // 120)  # no run over the halved cap
