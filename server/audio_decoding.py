"""Reading audio that callers send (voice uploads, reference clips) into mono float32.

libsndfile (via soundfile) reads wav, flac, ogg/opus and mp3; anything else that
FFmpeg knows (m4a/aac, webm, ...) is read through PyAV. Resampling is soxr.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np
import soundfile as sf
import soxr


class UndecodableAudio(ValueError):
    """The bytes are not audio that either decoder can read."""


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray
    """Mono float32."""
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.sample_rate

    def resampled(self, rate: int) -> DecodedAudio:
        if rate == self.sample_rate:
            return self
        return DecodedAudio(soxr.resample(self.samples, self.sample_rate, rate).astype(np.float32), rate)


def decode_audio(data: bytes) -> DecodedAudio:
    """Decode an encoded audio file of any common format, down-mixed to mono."""
    if not data:
        raise UndecodableAudio("the audio is empty")
    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return DecodedAudio(np.ascontiguousarray(samples.mean(axis=1), dtype=np.float32), int(rate))
    except (sf.LibsndfileError, RuntimeError, TypeError):
        pass
    try:
        return _decode_with_pyav(data)
    except (av.FFmpegError, ValueError, IndexError, StopIteration) as error:
        raise UndecodableAudio("the file is not audio in a format we can read (wav, flac, ogg, mp3, m4a, webm)") from error


def _decode_with_pyav(data: bytes) -> DecodedAudio:
    with av.open(io.BytesIO(data)) as container:
        stream = next(s for s in container.streams if s.type == "audio")
        resampler = av.AudioResampler(format="flt", layout="mono", rate=stream.rate or stream.codec_context.sample_rate)
        pieces = []
        for frame in container.decode(stream):
            for converted in resampler.resample(frame):
                pieces.append(converted.to_ndarray().reshape(-1))
        for converted in resampler.resample(None):
            pieces.append(converted.to_ndarray().reshape(-1))
        rate = resampler.rate
    if not pieces:
        raise ValueError("no audio frames")
    return DecodedAudio(np.concatenate(pieces).astype(np.float32), int(rate))
