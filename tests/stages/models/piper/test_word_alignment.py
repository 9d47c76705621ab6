"""Piper's word times without a server: phoneme spans from durations, phonemes back to words, whole utterances."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from vocalis.stages.models.piper import voice as piper_voice
from vocalis.stages.models.piper.loader import default_voice_path
from vocalis.stages.models.piper.runtime import PiperInput, PiperSynthesizer
from vocalis.stages.models.piper.word_alignment import PieceWords, owners, phoneme_sample_spans
from vocalis.stages.runtime.output import AudioOutput, WordTimes
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.utterance import piece_samples
from vocalis.stages.text.word_times import WordTime, text_words

ID_MAP = {"^": [1], "_": [0], "$": [2], " ": [3], "a": [10], "b": [11], "c": [12], ",": [8]}


def test_text_words_leave_out_edge_punctuation_and_keep_what_is_read():
    text = '"Hello," Dr. Smith\'s -- $3.50 (e-mail)...'
    assert [(w.text, text[w.start : w.end]) for w in text_words(text)] == [
        ("Hello", "Hello"), ("Dr", "Dr"), ("Smith's", "Smith's"), ("$3.50", "$3.50"), ("e-mail", "e-mail"),
    ]


def test_phoneme_spans_follow_piper_id_layout():
    # ^ _ a _ b _ , _ $  -> samples per id
    samples = np.array([5, 1, 10, 2, 20, 3, 7, 1, 4])
    assert phoneme_sample_spans(["a", "b", ","], ID_MAP, samples) == [(6, 18), (18, 41), (41, 49)]
    assert phoneme_sample_spans(["a", "?", "b", ","], ID_MAP, samples)[1] is None  # no id: not synthesized
    with pytest.raises(ValueError, match="duration values"):
        phoneme_sample_spans(["a"], ID_MAP, samples)


def test_words_espeak_joins_are_split_again():
    # "did not catch" comes out of espeak-ng as two phoneme words: "dɪdnˌɑːt kˈætʃ"
    sentence = list("dɪdnˌɑːt kˈætʃ.")
    alone = [list("dˈɪd"), list("nˈɑːt"), list("kˈætʃ")]
    owner = owners(sentence, alone)
    assert "".join(p for p, o in zip(sentence, owner, strict=True) if o == 0) == "dɪd"
    assert "".join(p for p, o in zip(sentence, owner, strict=True) if o == 1) == "nˌɑːt"
    assert "".join(p for p, o in zip(sentence, owner, strict=True) if o == 2) == "kˈætʃ"
    assert owner[sentence.index(" ")] is None and owner[-1] is None


def test_a_word_is_timed_once_its_last_phoneme_is():
    words = PieceWords.build("ab c", 10, [list("ab c")], [list("ab"), list("c")], ID_MAP)
    first = words.timed(0, 0, [(0, 4), (4, 9)], at_sample=100)  # the run ends after "ab"
    assert first == [WordTime("ab", 10, 12, 100, 109)]
    assert words.timed(0, 2, [(0, 3), (3, 8)], at_sample=200) == [WordTime("c", 13, 14, 203, 208)]


@pytest.fixture(scope="module")
def voice():
    return piper_voice.load(default_voice_path())


def timed_run(voice, text: str, stage_input: PiperInput, max_ids: int = 500) -> tuple[list[WordTime], int]:
    async def go() -> tuple[list[WordTime], int]:
        output = AudioOutput()
        request = SynthesisRequest(text=text, stage_input=stage_input, output=output)
        samples = sum(len(piece_samples(a)) for a in PiperSynthesizer(voice, max_ids_per_run=max_ids).synthesize(request))
        output.close()
        words = [w for item in [i async for i in output] if isinstance(item, WordTimes) for w in item.words]
        return words, samples

    return asyncio.run(go())


def test_durations_fill_the_audio_and_every_word_gets_its_place(voice):
    text = "Your order number is 4729, costing $3.50. I did not catch that... ok!"
    words, samples = timed_run(voice, text, PiperInput(1.0, 0.0, 0.0, None, word_timestamps=True))
    assert [(w.char_start, w.char_end) for w in words] == [(w.start, w.end) for w in text_words(text)]
    assert all(a.end_sample <= b.start_sample for a, b in zip(words, words[1:], strict=False))
    assert 0 < words[0].start_sample < 0.3 * 22050 and samples - 0.3 * 22050 < words[-1].end_sample <= samples


def test_runs_cut_short_and_a_seed_give_the_same_times(voice):
    text = "A sentence long enough to be cut into several runs of phonemes, each synthesized on its own."
    noiseless = PiperInput(1.0, 0.0, 0.0, None, word_timestamps=True)
    whole, _ = timed_run(voice, text, noiseless)
    cut, samples = timed_run(voice, text, noiseless, max_ids=60)
    seeded, _ = timed_run(voice, text, PiperInput(1.0, 0.0, 0.0, 7, word_timestamps=True))
    assert [w.word for w in cut] == [w.word for w in whole] and cut[-1].end_sample <= samples
    assert all(a.end_sample <= b.start_sample for a, b in zip(cut, cut[1:], strict=False))
    assert seeded == whole
