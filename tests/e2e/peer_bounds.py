"""The check behind each family's peer-bounds test: vLLM-Omni's clients send max_new_tokens up to 4096 (the GLM-TTS demo
always does) to mean "no limit of mine"; the server answers 200 with audio, and says where its cache capped it."""

from __future__ import annotations

import io

import httpx
import numpy as np
import soundfile as sf

PEER_MAX_NEW_TOKENS = 4096
"""The peer's upper bound (`TA/base`: 1..4096), what its demos send."""


def capped_audio(response: httpx.Response, rate: int, capped: bool = True, empty: bool = False) -> np.ndarray:
    """The WAV body's samples after checking the status, the rate and, when `capped`, the MAX_NEW_TOKENS_CAPPED warning;
    `empty`: no samples is fine too (a budget too small for any audio)."""
    assert response.status_code == 200, response.text
    warnings = response.headers.get_list("x-vocalis-warning")
    assert any(w.startswith("MAX_NEW_TOKENS_CAPPED max_new_tokens: ") for w in warnings) == capped, warnings
    samples, got = sf.read(io.BytesIO(response.content), dtype="float32")
    assert got == rate and (empty or len(samples) > 0) and np.isfinite(samples).all()
    return samples
