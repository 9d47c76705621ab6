"""A reference clip the codec cannot encode is the caller's to fix: a 400 naming the field, never a 500."""

from __future__ import annotations

import numpy as np
import pytest

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.higgs_audio_v2.loader import load_modules
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsTalkerModel
from vocalis.stages.runtime.request import ReferenceAudio


@pytest.mark.parametrize(("name", "field"), [(None, "ref_audio"), ("narrator", "voice")])
def test_a_clip_shorter_than_one_codec_frame_is_invalid(native_dir, name, field):
    talker, codec, tokenizer = load_modules(native_dir)
    model = HiggsTalkerModel(talker, tokenizer, codec, 64)
    rate = codec.config.sample_rate
    with pytest.raises(InvalidField) as refused:
        model.reference_codes(ReferenceAudio(np.zeros(codec.config.hop_length - 1, np.float32), rate, "hi", name=name))
    assert (refused.value.field, refused.value.reason) == (field, "REFERENCE_TOO_SHORT")
