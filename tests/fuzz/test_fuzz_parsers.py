"""Hypothesis over the sentence splitter and the audio decoders: no crash but the documented errors."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.seeding import fuzzed
from vocalis.server.audio_decoding import UndecodableAudio, decode_audio
from vocalis.stages.text.sentence_splitter import SentenceSplitter


@given(pieces=st.lists(st.text(max_size=60), max_size=12))
@fuzzed(max_examples=300)
def test_splitter_keeps_every_word(pieces):
    splitter = SentenceSplitter()
    units = []
    for piece in pieces:
        units.extend(splitter.feed(piece))
    units.extend(splitter.flush())
    spoken = "".join(unit.text for unit in units)
    # Units with nothing to say (no letter or digit) are dropped; every letter and digit is spoken, in order.
    assert [c for c in spoken if c.isalnum()] == [c for c in "".join(pieces) if c.isalnum()]
    text = "".join(pieces)
    assert all(text[u.start : u.end] == u.text for u in units)


def wav_header() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros(800, np.float32), 8000, format="WAV")
    return buffer.getvalue()[:44]


@given(data=st.binary(max_size=2048), keep_header=st.booleans())
@fuzzed(max_examples=300)
def test_decoders_refuse_garbage_cleanly(data, keep_header):
    blob = (wav_header() + data) if keep_header else data
    try:
        audio = decode_audio(blob)
    except UndecodableAudio:
        return
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1 and audio.sample_rate > 0
