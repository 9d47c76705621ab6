"""Precomputed voices: the manifest, its artifacts, and what it may not do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vocalis.server.precomputed_voices import load_precomputed


def test_artifacts_by_key(tmp_path):
    np.save(tmp_path / "n.speaker_embedding.npy", np.ones(4, np.float32))
    np.save(tmp_path / "n.ref_codes.npy", np.arange(6).reshape(2, 3))
    entry = {"name": "n", "speaker_embedding": "n.speaker_embedding.npy", "ref_codes": "n.ref_codes.npy", "ref_text": "hi"}
    (tmp_path / "manifest.json").write_text(json.dumps({"voices": [entry]}))
    (voice,) = load_precomputed(tmp_path)
    assert voice.audio is None and voice.ref_text == "hi"
    assert set(voice.artifacts) == {"speaker_embedding", "ref_codes"} and voice.artifacts["ref_codes"].shape == (2, 3)


@pytest.mark.parametrize(
    ("entry", "message"),
    [({"name": "../x", "audio": "a.wav"}, "bad voice name"), ({"name": "x"}, "needs audio"), ({"name": "x", "e": "../../e.npy"}, "outside")],
)
def test_bad_entries(tmp_path, entry, message):
    (tmp_path / "manifest.json").write_text(json.dumps({"voices": [entry]}))
    with pytest.raises(ValueError, match=message):
        load_precomputed(tmp_path)
