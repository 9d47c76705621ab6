"""word_timestamps in a session's config: refused naming the field where nothing can time words, taken by the
forced aligner where the model cannot time its own, left to the model where it can."""

from __future__ import annotations

import grpc
import pytest

from tests.server.fakes import fake_model
from vocalis.server import session_config
from vocalis.server.config import Limits
from vocalis.server.errors import StatusError
from vocalis.tts.v1 import synthesizer_pb2 as pb


def test_refused_naming_the_field_without_a_way_to_time_words():
    with pytest.raises(StatusError) as caught:
        session_config.validate(pb.SessionConfig(word_timestamps=True), fake_model(), Limits())
    error = caught.value
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "word_timestamps", "FIELD_NOT_SUPPORTED")


def test_the_aligner_takes_the_field_and_the_model_never_sees_it():
    model = fake_model(frozenset({"speed", "word_timestamps"}))
    model.aligner = object()
    settings = session_config.validate(pb.SessionConfig(word_timestamps=True, speed=1.5), model, Limits())
    assert settings.aligned_words and settings.params == {"speed": 1.5}


def test_a_model_that_times_its_own_words_gets_the_field():
    model = fake_model(frozenset({"word_timestamps"}))
    settings = session_config.validate(pb.SessionConfig(word_timestamps=True), model, Limits())
    assert not settings.aligned_words and settings.params == {"word_timestamps": True}
