"""Piper as an utterance model: one ONNX run per sentence, each sentence's audio out at once.

Bounds hold whatever the caller's unit length: text is phonemized at most
MAX_PIECE_CHARS at a time, in a child process (espeak-ng can crash), and a sentence
whose phonemes exceed MAX_IDS_PER_RUN ids is synthesized in several runs (limits.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from vocalis.stages.api.errors import SynthesisFailed
from vocalis.stages.models.piper.limits import (
    MAX_IDS_PER_RUN,
    MAX_PIECE_CHARS,
    MIN_IDS_PER_RUN,
    located_phoneme_runs,
    located_text_pieces,
)
from vocalis.stages.models.piper.voice import LoadedPiperVoice
from vocalis.stages.models.piper.word_alignment import PieceWords, phoneme_sample_spans
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.utterance import LastPiece, solo
from vocalis.stages.text.word_times import text_words

log = logging.getLogger(__name__)

T = TypeVar("T")
_Run = tuple[PieceWords | None, int, int, list[str], list[int]]
"""One ONNX run: its piece's words (None without word times), its sentence in the piece, where its phonemes start
in that sentence, the phonemes and their ids."""


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
    word_timestamps: bool = False
    """Send the time of each word (from the voice's own phoneme durations) with the audio."""


class PiperSynthesizer:
    """Synthesizes a request sentence by sentence (the UtteranceModel of the piper stage)."""

    def __init__(
        self, voice: LoadedPiperVoice, max_piece_chars: int = MAX_PIECE_CHARS, max_ids_per_run: int = MAX_IDS_PER_RUN
    ) -> None:
        self.voice = voice
        self.max_piece_chars = max_piece_chars
        self.max_ids_per_run = max_ids_per_run

    def synthesize(self, request: SynthesisRequest, payload: None = None) -> Iterator[np.ndarray | LastPiece]:
        """The request's audio, sentence by sentence, the last as a LastPiece (so the request ends with it). Piper is
        stage 0 of its pipeline: `payload` is None, the text and the stage input are on the request."""
        params: PiperInput = request.stage_input
        index = 0  # of the ONNX run in this request: the seeded noise of each run is drawn from it
        at_sample = 0  # where the next run's audio starts in the utterance
        for (words, s, start, run, ids), last in _with_last(self._runs(request, params)):
            if request.cancelled:
                return
            request.output_tokens += len(ids)
            audio, id_frames = self._run(ids, params, index)
            if words is not None and id_frames is not None:
                id_samples = _id_samples(id_frames, len(audio))
                spans = phoneme_sample_spans(run, self.voice.config.phoneme_id_map, id_samples)
                request.emit_words(words.timed(s, start, spans, at_sample))
            at_sample += len(audio)
            yield LastPiece(_normalized(audio)) if last else _normalized(audio)
            index += 1

    def _runs(self, request: SynthesisRequest, params: PiperInput) -> Iterator[_Run]:
        """The request's ONNX runs, in order: its text phonemized piece by piece, each sentence cut to the id cap."""
        voice = self.voice.voice
        # Slow speech has more frames per id: the cap is on frames, so fewer ids per run (speed 0.25: a quarter).
        slowdown = max(1.0, params.length_scale / self.voice.config.length_scale)
        max_ids = min(self.max_ids_per_run, max(MIN_IDS_PER_RUN, int(self.max_ids_per_run / slowdown)))
        for offset, piece in located_text_pieces(_speakable(request.text), self.max_piece_chars):
            if request.cancelled:
                return
            sentences = self.voice.phonemizer.phonemize(piece)
            words = self._piece_words(piece, offset, sentences) if params.word_timestamps else None
            for s, phonemes in enumerate(sentences):
                if phonemes:
                    for start, run, ids in located_phoneme_runs(phonemes, voice.phonemes_to_ids, max_ids):
                        yield words, s, start, run, ids

    def _piece_words(self, piece: str, offset: int, sentences: list[list[str]]) -> PieceWords | None:
        """The piece's words, ready to be timed; None (no word times for it, the audio goes on) when the text front
        end fails on a word said alone."""
        try:
            said = self.voice.phonemizer.phonemize_words([word.text for word in text_words(piece)])
        except SynthesisFailed as error:
            log.warning("no word times for a piece of text: %s", error)
            return None
        return PieceWords.build(piece, offset, sentences, said, self.voice.config.phoneme_id_map)

    def _run(self, ids: list[int], params: PiperInput, sentence_index: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The run's audio, and the frames of each phoneme id (None where the voice does not give them)."""
        scales = np.array([params.noise_scale, params.length_scale, params.noise_w_scale], dtype=np.float32)
        if params.seed is None:
            inputs = {
                "input": np.expand_dims(np.array(ids, dtype=np.int64), 0),
                "input_lengths": np.array([len(ids)], dtype=np.int64),
                "scales": scales,
            }
            if self.voice.config.num_speakers > 1:
                inputs["sid"] = np.array([params.speaker_id or 0], dtype=np.int64)
            # The one-thread lane session sums some short convolutions in another order than the all-core one (a
            # flow convolution's GEMM, split otherwise over threads), so a noiseless request keeps to the all-core
            # session, as a seeded one does: its samples must not depend on what else is running.
            noiseless = params.noise_scale == 0 and params.noise_w_scale == 0
            lane_session = self.voice.lane_session
            session = self.voice.voice.session if lane_session is None or noiseless or solo() else lane_session
            outputs = session.run(None, inputs)
            audio, frames = outputs[0], outputs[1] if len(outputs) > 1 else None
        else:
            outputs = self.voice.seeded.run_all(  # type: ignore[union-attr]
                np.array([ids], dtype=np.int64), scales, params.seed, sentence_index, params.speaker_id
            )
            audio, frames = outputs["output"], outputs.get(self.voice.durations_output or "")
        return np.asarray(audio, dtype=np.float32).reshape(-1), None if frames is None else np.asarray(frames).reshape(-1)


def _with_last(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """Each item and whether it is the last, looking one item ahead (Piper's: the next text piece is phonemized,
    about a millisecond a sentence, before the current run is synthesized). A failure to make the next item comes
    after the current one, as it would without the look-ahead."""
    iterator = iter(items)
    try:
        item = next(iterator)
    except StopIteration:
        return
    while True:
        try:
            following = next(iterator)
        except StopIteration:
            yield item, True
            return
        except Exception as error:  # noqa: BLE001 - re-raised once the current item is out
            yield item, False
            raise error
        yield item, False
        item = following


def _id_samples(id_frames: np.ndarray, total: int) -> np.ndarray:
    """Samples of each phoneme id: its frames times the hop, which add up to the run's audio (scaled to it if not)."""
    frames = np.maximum(np.asarray(id_frames, dtype=np.float64), 0.0)
    if frames.sum() <= 0:
        return np.zeros(len(frames), dtype=np.int64)
    bounds = np.round(np.concatenate([[0.0], np.cumsum(frames)]) * (total / frames.sum())).astype(np.int64)
    return np.diff(bounds)


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
