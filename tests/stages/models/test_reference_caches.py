"""Every family that clones a voice from a clip keeps the clip's encoding in a `ReferenceCache`, and its pipeline
reports that cache (`Pipeline.caches()`: the stage caches in /metrics, by stage and cache name), the same way in every
family: one "references" cache on the stage that encodes the clip, nothing counted before a request."""

from __future__ import annotations

import pytest

from tests.family_cases import CASES, checkpoint, load
from vocalis.stages.runtime.stage import CacheStats

ENCODED_PER_REQUEST = {
    "auk": "its clip is the content to edit or convert, encoded with the rest of the request's input",
    "tiny_tts": "the template's speaker embedding is the clip's loudness contour, computed in its adapter",
}
"""Families that take a clip but keep no encoding across requests, and why."""


@pytest.mark.parametrize("name", list(CASES))
def test_a_family_that_clones_reports_its_reference_cache(name, tmp_path):
    model = load(name, checkpoint(name, tmp_path))
    try:
        references = {stage: stats for (stage, cache), stats in model.pipeline.caches().items() if cache == "references"}
        if name in ENCODED_PER_REQUEST:  # an exemption holds only while the family takes a clip and keeps nothing
            assert model.capabilities.voice_cloning and references == {}
        elif model.capabilities.voice_cloning:
            assert len(references) == 1, f"{name}: {references}"
            [stats] = references.values()
            assert stats == CacheStats(hits=0, misses=0, entries=0, nbytes=0)
    finally:
        model.close()

