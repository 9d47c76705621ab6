"""Reading audio that callers send (voice uploads, reference clips) into mono float32.

libsndfile (via soundfile) reads wav, flac, ogg/opus and mp3; anything else that
FFmpeg knows (m4a/aac, webm, ...) is read through PyAV. Resampling is soxr.

A few compressed bytes can stand for hours of audio (10 h of silence is a 0.9 MB
FLAC), so nothing is decoded whole: libsndfile's header gives the length, which is
refused before any decoding when it is over the limit; a stream whose header does
not say (PyAV, or a FLAC with an unknown total) is decoded block by block and
dropped as soon as it passes the limit. Memory stays at most `max_seconds` of mono.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import av
import numpy as np
import soundfile as sf
import soxr

MAX_CHANNELS = 16
MIN_SAMPLE_RATE = 1000
MAX_SAMPLE_RATE = 192000
_BLOCK_FRAMES = 65536
_UNKNOWN_FRAMES = 2**62
"""libsndfile reports an unknown length (a FLAC whose header leaves it blank) as INT64_MAX."""


class UndecodableAudio(ValueError):
    """The bytes are not audio that either decoder can read."""


class AudioTooLong(ValueError):
    """The audio lasts longer than the caller's limit; found out before decoding all of it."""

    def __init__(self, seconds: float, exact: bool) -> None:
        super().__init__(f"{'' if exact else 'more than '}{seconds:.1f} s")
        self.seconds = seconds
        self.exact = exact
        """True when `seconds` is the whole length (from the header), False when decoding stopped there."""


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


def decode_audio(data: bytes, max_seconds: float | None = None) -> DecodedAudio:
    """Decode an encoded audio file of any common format, down-mixed to mono.

    Raises AudioTooLong as soon as the audio is known to last more than `max_seconds`,
    UndecodableAudio when it is not audio either decoder reads.
    """
    if not data:
        raise UndecodableAudio("the audio is empty")
    try:
        sound = sf.SoundFile(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError):
        sound = None
    if sound is not None:
        with sound:
            if sound.frames < _UNKNOWN_FRAMES:
                return _decode_with_libsndfile(sound, max_seconds)
    try:
        return _decode_with_pyav(data, max_seconds)
    except AudioTooLong:
        raise
    except Exception as error:  # noqa: BLE001 - any failure to decode a caller's bytes is the caller's fault, not ours
        if isinstance(error, UndecodableAudio) and str(error) != _NOT_AUDIO:
            raise
        raise UndecodableAudio(_wav_header_fault(data) or _NOT_AUDIO) from error


_NOT_AUDIO = "the file is not audio in a format we can read (wav, flac, ogg, mp3, m4a, webm)"


def _check_layout(rate: int, channels: int) -> None:
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise UndecodableAudio(f"the sample rate is {rate} Hz; it must be {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz")
    if not 1 <= channels <= MAX_CHANNELS:
        raise UndecodableAudio(f"the audio has {channels} channels; at most {MAX_CHANNELS} are accepted")


def _frame_limit(rate: int, max_seconds: float | None) -> int | None:
    return None if max_seconds is None else int(max_seconds * rate) + 1


def _decode_with_libsndfile(sound: sf.SoundFile, max_seconds: float | None) -> DecodedAudio:
    rate = int(sound.samplerate)
    _check_layout(rate, sound.channels)
    limit = _frame_limit(rate, max_seconds)
    if limit is not None and sound.frames > limit:
        raise AudioTooLong(sound.frames / rate, exact=True)
    try:
        blocks = [block.mean(axis=1) for block in sound.blocks(_BLOCK_FRAMES, dtype="float32", always_2d=True)]
    except (sf.LibsndfileError, RuntimeError) as error:
        raise UndecodableAudio(f"the audio is damaged: {error}") from error
    samples = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
    return DecodedAudio(np.ascontiguousarray(samples, dtype=np.float32), rate)


def _decode_with_pyav(data: bytes, max_seconds: float | None) -> DecodedAudio:
    with av.open(io.BytesIO(data)) as container:
        stream = next((s for s in container.streams if s.type == "audio"), None)
        if stream is None or stream.codec_context is None:
            raise UndecodableAudio(_NOT_AUDIO)
        context = stream.codec_context
        rate = int(context.sample_rate)
        _check_layout(rate, context.layout.nb_channels if context.layout else 1)
        limit = _frame_limit(rate, max_seconds)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        pieces: list[np.ndarray] = []
        total = 0
        for frame in container.decode(stream):
            for converted in resampler.resample(frame):
                pieces.append(converted.to_ndarray().reshape(-1))
                total += pieces[-1].size
            if limit is not None and total > limit:
                raise AudioTooLong(total / rate, exact=False)
        for converted in resampler.resample(None):
            pieces.append(converted.to_ndarray().reshape(-1))
            total += pieces[-1].size
    if limit is not None and total > limit:
        raise AudioTooLong(total / rate, exact=False)
    if not pieces:
        raise UndecodableAudio("the file holds no audio frames")
    return DecodedAudio(np.concatenate(pieces).astype(np.float32), rate)


def _wav_header_fault(data: bytes) -> str | None:
    """What is wrong with a RIFF/WAVE header that no decoder accepts, in the header's own terms."""
    if len(data) < 36 or data[:4] != b"RIFF" or data[8:12] != b"WAVE" or data[12:16] != b"fmt ":
        return None
    _format, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", data[20:36])
    if bits == 0:
        return "the WAV header says 0 bits per sample (bits_per_sample must be 8, 16, 24 or 32)"
    if channels == 0:
        return "the WAV header says 0 channels"
    if rate == 0:
        return "the WAV header says a sample rate of 0 Hz"
    return None
