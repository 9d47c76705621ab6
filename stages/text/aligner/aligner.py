"""The forced aligner: a CTC acoustic model in transformers' `Wav2Vec2ForCTC` layout, and its worker thread.

`vocalis serve --forced-aligner DIR` loads DIR (config.json, model.safetensors, vocab.json and
preprocessor_config.json, as wav2vec2 and MMS checkpoints are published) and gives every model
that cannot time its own words `word_timestamps`. Each utterance's audio is kept as it leaves the
pipeline; when its last audio has gone, the aligner worker resamples it to the aligner's rate,
runs the model, aligns the utterance's text to the frames (ctc.py), sends the word times and only
then ends the utterance. The audio itself never waits for it.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import soxr
import torch
from torch import nn

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.components.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
from vocalis.stages.layers.weights import fold_weight_norm, load_strict, read_weights
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.worker import inference_mode_if_torch
from vocalis.stages.text.aligner.ctc import forced_align
from vocalis.stages.text.aligner.emissions import WindowedEmissions
from vocalis.stages.text.aligner.transcript import transcript
from vocalis.stages.text.word_times import UntimedWord, WordTime, text_words

log = logging.getLogger(__name__)

UNUSED = (r"wav2vec2\.masked_spec_embed",)
"""Training-only tensors of a Wav2Vec2ForCTC checkpoint (the mask embedding of SpecAugment)."""

NOT_IN_VOCABULARY = "none of its characters is in the forced aligner's vocabulary"
TOO_SHORT = "its utterance's audio is too short for the forced aligner to place its text"
FAILED = "the forced aligner failed on its utterance"


@dataclass(frozen=True)
class Alignment:
    """The words of a text with their times, and those that could not be timed, with the reason."""

    words: list[WordTime]
    untimed: list[UntimedWord]


def untimed_alignment(text: str, reason: str) -> Alignment:
    """No word of `text` timed, each for `reason`."""
    return Alignment([], [UntimedWord(word.text, word.start, word.end, reason) for word in text_words(text)])


class Wav2Vec2ForCTC(nn.Module):
    """transformers' Wav2Vec2ForCTC at inference: the encoder, then a linear head over the vocabulary."""

    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.wav2vec2 = Wav2Vec2Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        """Logits [B, frames, vocab] of waveforms [B, N] at the model's rate (already normalized)."""
        return self.lm_head(self.wav2vec2(samples)[-1])


class ForcedAligner:
    """A loaded CTC model and its vocabulary; align() is pure compute, for any thread."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if data.get("model_type") not in ("wav2vec2", "hubert"):
            raise ValueError(f"{path}: model_type {data.get('model_type')!r} is not a Wav2Vec2ForCTC checkpoint")
        self.config = Wav2Vec2Config.from_dict(data)
        self.vocab: dict[str, int] = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
        if len(self.vocab) > self.config.vocab_size:
            raise ValueError(f"{path}: vocab.json has {len(self.vocab)} tokens, the model {self.config.vocab_size}")
        preprocessor = path / "preprocessor_config.json"
        features = json.loads(preprocessor.read_text(encoding="utf-8")) if preprocessor.exists() else {}
        self.sample_rate = int(features.get("sampling_rate", 16000))
        self.normalize = bool(features.get("do_normalize", True))
        self.blank = int(data.get("pad_token_id", 0))
        self.word_delimiter = "|" if "|" in self.vocab else None
        self.model = Wav2Vec2ForCTC(self.config)
        load_strict(self.model, fold_weight_norm(read_weights(path)), path, UNUSED)
        self.model.eval()

    def log_probs(self, samples: np.ndarray) -> np.ndarray:
        """Frame-wise log-probabilities [frames, vocab] of mono float32 `samples` at the aligner's rate."""
        x = torch.from_numpy(np.asarray(samples, dtype=np.float32))[None]
        if self.normalize:  # Wav2Vec2FeatureExtractor: zero mean, unit variance per utterance
            x = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + 1e-7)
        with inference_mode_if_torch():  # its own thread, or a caller's, never a stage worker's
            return torch.log_softmax(self.model(x)[0].float(), dim=-1).numpy()

    def windowed(self, rate: int) -> WindowedEmissions:
        """Emissions of a unit whose audio at `rate` comes piece by piece."""
        return WindowedEmissions(self.log_probs, rate, self.sample_rate, self.config.conv_kernel, self.config.conv_stride)

    def align(self, audio: np.ndarray, rate: int, text: str, log_probs: np.ndarray | None = None) -> Alignment:
        """Times of the words of `text` spoken in `audio` (mono float32 at `rate`), in samples at `rate`, and the
        words that could not be timed; `log_probs`: its emissions if already computed (windowed), else they are
        computed in one pass."""
        words = transcript(text, self.vocab, self.word_delimiter)
        unknown = [UntimedWord(word.text, word.start, word.end, NOT_IN_VOCABULARY) for word in words.untimed]
        if not words.tokens:
            return Alignment([], unknown)
        if log_probs is None:
            samples = audio if rate == self.sample_rate else soxr.resample(audio, rate, self.sample_rate)
            log_probs = self.log_probs(samples) if len(samples) >= self.config.conv_kernel[0] else np.zeros((0, 0))
        try:
            spans = forced_align(log_probs, words.tokens, self.blank) if len(log_probs) else None
        except ValueError:
            spans = None
        if spans is None:
            log.warning("forced aligner: %d frames are too few for the %d tokens of a unit", len(log_probs), len(words.tokens))
            too_short = [UntimedWord(word.text, word.start, word.end, TOO_SHORT) for word, _, _ in words.words]
            return Alignment([], sorted(unknown + too_short, key=lambda word: word.char_start))
        per_frame = len(audio) / len(log_probs)  # input samples per frame, at `rate`
        timed = [
            WordTime(word.text, word.start, word.end, round(spans[first][0] * per_frame), round(spans[end - 1][1] * per_frame))
            for word, first, end in words.words
        ]
        return Alignment(timed, unknown)


def attach_aligner(model: LoadedModel, path: Path) -> None:
    """Give `model` word timestamps from the aligner at `path`, unless it times its own words."""
    caps = model.capabilities
    if "word_timestamps" in caps.accepted_fields:
        log.info("model %s times its own words: the forced aligner is not used for it", model.name)
        return
    model.aligner = AlignerWorker(ForcedAligner(path), caps.sample_rate)
    model.capabilities = replace(caps, accepted_fields=caps.accepted_fields | {"word_timestamps"})


class AlignerWorker:
    """The aligner on a thread of its own: utterances are aligned in turn, each after its last audio."""

    def __init__(self, aligner: ForcedAligner, sample_rate: int) -> None:
        self.aligner = aligner
        self.sample_rate = sample_rate
        """The rate of the audio it is given (the model's)."""
        self._inbox: queue.SimpleQueue[SynthesisRequest | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stage-forced-aligner", daemon=True)
        self._thread.start()

    def attach(self, request: SynthesisRequest) -> None:
        """Keep `request`'s audio, compute its emissions as it comes, and align it when the pipeline finishes it."""
        request.kept_audio = []
        request.on_audio = lambda r: self._inbox.put((r, False))
        request.after_audio = lambda r: self._inbox.put((r, True))

    def close(self) -> None:
        self._inbox.put(None)

    def _run(self) -> None:
        units: dict[int, tuple[WindowedEmissions, int]] = {}
        """Per request in flight: its emissions so far and how many of its kept audio pieces they have seen."""
        while (message := self._inbox.get()) is not None:
            request, ended = message
            key = id(request)
            try:
                if request.cancelled or request.kept_audio is None:
                    continue
                emissions, seen = units.get(key) or (self.aligner.windowed(self.sample_rate), 0)
                pieces = request.kept_audio[seen:]
                for piece in pieces:
                    emissions.feed(piece)
                units[key] = (emissions, seen + len(pieces))
                if ended and request.kept_audio:
                    audio = np.concatenate(request.kept_audio)
                    aligned = self.aligner.align(audio, self.sample_rate, request.text, emissions.finish())
                    request.emit_words(aligned.words, aligned.untimed)
            except Exception:  # noqa: BLE001 - a failed alignment costs the words, never the utterance
                log.exception("forced alignment of request %s failed", request.request_id)
                request.emit_words([], untimed_alignment(request.text, FAILED).untimed)
                ended = True
            finally:
                if ended or request.cancelled:
                    units.pop(key, None)
                if ended:
                    request.kept_audio = None
                    request.finish()
