"""Piper as an utterance model: one ONNX run per sentence, each sentence's audio out at once.

Bounds hold whatever the caller's unit length: text is phonemized at most
MAX_PIECE_CHARS at a time, in a child process (espeak-ng can crash), and a sentence
whose phonemes exceed MAX_IDS_PER_RUN ids is synthesized in several runs (limits.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from vocalis.stages.models.piper.limits import (
    MAX_IDS_PER_RUN,
    MAX_PIECE_CHARS,
    MIN_IDS_PER_RUN,
    phoneme_runs,
    text_pieces,
)
from vocalis.stages.models.piper.voice import LoadedPiperVoice
from vocalis.stages.request import SynthesisRequest
from vocalis.stages.utterance import solo


@dataclass(frozen=True)
class PiperInput:
    """Stage-0 input of a Piper request."""

    length_scale: float
    """Phoneme duration multiplier: 1/speed times the voice's own length scale."""
    noise_scale: float
    noise_w_scale: float
    seed: int | None
    """With a seed the noise is drawn from it, so the same request gives the same audio."""
    speaker_id: int | None = None


class PiperSynthesizer:
    """Synthesizes a request sentence by sentence (the UtteranceModel of the piper stage)."""

    def __init__(
        self, voice: LoadedPiperVoice, max_piece_chars: int = MAX_PIECE_CHARS, max_ids_per_run: int = MAX_IDS_PER_RUN
    ) -> None:
        self.voice = voice
        self.max_piece_chars = max_piece_chars
        self.max_ids_per_run = max_ids_per_run

    def synthesize(self, request: SynthesisRequest) -> Iterator[np.ndarray]:
        params: PiperInput = request.stage_input
        voice = self.voice.voice
        # Slow speech has more frames per id: the cap is on frames, so fewer ids per run (speed 0.25: a quarter).
        slowdown = max(1.0, params.length_scale / self.voice.config.length_scale)
        max_ids = min(self.max_ids_per_run, max(MIN_IDS_PER_RUN, int(self.max_ids_per_run / slowdown)))
        index = 0  # of the ONNX run in this request: the seeded noise of each run is drawn from it
        for piece in text_pieces(_speakable(request.text), self.max_piece_chars):
            if request.cancelled:
                return
            for phonemes in self.voice.phonemizer.phonemize(piece):
                if not phonemes:
                    continue
                for ids in phoneme_runs(phonemes, voice.phonemes_to_ids, max_ids):
                    if request.cancelled:
                        return
                    request.output_tokens += len(ids)
                    yield _normalized(self._run(ids, params, index))
                    index += 1

    def _run(self, ids: list[int], params: PiperInput, sentence_index: int) -> np.ndarray:
        scales = np.array([params.noise_scale, params.length_scale, params.noise_w_scale], dtype=np.float32)
        if params.seed is None:
            inputs = {
                "input": np.expand_dims(np.array(ids, dtype=np.int64), 0),
                "input_lengths": np.array([len(ids)], dtype=np.int64),
                "scales": scales,
            }
            if self.voice.config.num_speakers > 1:
                inputs["sid"] = np.array([params.speaker_id or 0], dtype=np.int64)
            lane_session = self.voice.lane_session
            session = self.voice.voice.session if lane_session is None or solo() else lane_session
            audio = session.run(None, inputs)[0]
        else:
            audio = self.voice.seeded.run(  # type: ignore[union-attr]
                np.array([ids], dtype=np.int64), scales, params.seed, sentence_index, params.speaker_id
            )
        return np.asarray(audio, dtype=np.float32).reshape(-1)


def _normalized(audio: np.ndarray) -> np.ndarray:
    """Peak-normalize one sentence, as Piper's own synthesize() does."""
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak < 1e-8:
        return np.zeros_like(audio)
    return np.clip(audio / peak, -1.0, 1.0).astype(np.float32)


_CONTROLS = {c: " " for c in range(32) if chr(c) not in "\n\t"} | {0x7F: " "}


def _speakable(text: str) -> str:
    """Control characters become spaces: espeak-ng refuses a NUL and has nothing to say for the rest."""
    return text.translate(_CONTROLS)
