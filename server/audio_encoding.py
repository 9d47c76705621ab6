"""Turn synthesized float samples into the bytes a client asked for.

Models produce mono float32 audio at their own rate; clients ask for a
container/codec and maybe a different rate. This is the one place that knows
about audio formats, so the gRPC and HTTP layers only deal in bytes and
sample counts. Codecs come from libsndfile (via soundfile) and FFmpeg (via
PyAV); resampling is soxr, run as a stream so chunk boundaries don't matter.
"""

from __future__ import annotations

import enum
import io
import struct

import av
import numpy as np
import soundfile as sf
import soxr

__all__ = [
    "Encoding",
    "MEDIA_TYPES",
    "OPUS_RATES",
    "StreamEncoder",
    "encodable_rate",
    "encode_file",
    "output_rate",
]


class Encoding(enum.StrEnum):
    PCM = "pcm"  # raw s16le mono
    WAV = "wav"
    FLAC = "flac"
    MP3 = "mp3"
    OPUS = "opus"  # in an Ogg container
    AAC = "aac"  # in an ADTS stream


MEDIA_TYPES: dict[Encoding, str] = {
    Encoding.PCM: "audio/pcm",
    Encoding.WAV: "audio/wav",
    Encoding.FLAC: "audio/flac",
    Encoding.MP3: "audio/mpeg",
    Encoding.OPUS: "audio/ogg",
    Encoding.AAC: "audio/aac",
}

OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
# Rates the MP3 (LAME) and AAC encoders accept; others fail only at finish().
_CODEC_RATES = {
    Encoding.MP3: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    Encoding.AAC: (7350, 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000),
}

AAC_BIT_RATE = 64_000  # plenty for mono speech
_STREAMING_SIZE = 0xFFFFFFFF  # "unknown length" in RIFF and data chunk sizes


def output_rate(encoding: Encoding, source_rate: int, requested_rate: int | None) -> int:
    """The sample rate the output will have (0 or None means "source rate")."""
    rate = requested_rate or source_rate
    if rate <= 0:
        raise ValueError(f"sample rate must be positive, got {rate}")
    if encoding is Encoding.OPUS and rate not in OPUS_RATES:
        return 48000
    return rate


def encodable_rate(encoding: Encoding, source_rate: int, requested_rate: int | None) -> int:
    """`output_rate`, checked against what the codec can encode; ValueError saying why not."""
    rate = output_rate(encoding, source_rate, requested_rate)
    if rate not in _CODEC_RATES.get(encoding, (rate,)):
        raise ValueError(f"{encoding.value} cannot be encoded at {rate} Hz")
    return rate


def _to_s16(samples: np.ndarray) -> np.ndarray:
    # Round to nearest like FFmpeg; libsndfile 1.2 floors float->PCM_16, so
    # WAV/FLAC get int16 from here too and every PCM_16 output agrees.
    return np.clip(np.rint(samples * 32768.0), -32768, 32767).astype("<i2")


def _wav_stream_header(rate: int) -> bytes:
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", _STREAMING_SIZE, b"WAVE",
        b"fmt ", 16, 1, 1, rate, rate * 2, 2, 16,  # PCM, mono, byte rate, align, bits
        b"data", _STREAMING_SIZE,
    )


def _soundfile_bytes(samples: np.ndarray, rate: int, format: str, subtype: str) -> bytes:
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=rate, channels=1, format=format, subtype=subtype) as f:
        f.write(samples)
    return buf.getvalue()


def _aac_bytes(samples: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    with av.open(buf, "w", format="adts") as container:
        stream = container.add_stream("aac", rate=rate, layout="mono")
        stream.bit_rate = AAC_BIT_RATE
        stream.codec_context.open()  # frame_size is only known once open
        frame_size = stream.codec_context.frame_size
        for start in range(0, len(samples), frame_size):
            chunk = samples[start:start + frame_size]
            frame = av.AudioFrame.from_ndarray(chunk[np.newaxis, :], format="fltp", layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))  # drain the encoder's look-ahead
    return buf.getvalue()


class StreamEncoder:
    """Encode one utterance fed in chunks.

    PCM and streaming WAV give bytes as soon as samples arrive; the other
    formats buffer and produce the whole file from finish(). The counts
    returned by feed() and finish() add up to samples_out.
    """

    def __init__(
        self,
        encoding: Encoding,
        source_rate: int,
        requested_rate: int | None = None,
        *,
        stream: bool = True,
    ) -> None:
        self.encoding = Encoding(encoding)
        self.source_rate = source_rate
        self.rate = encodable_rate(self.encoding, source_rate, requested_rate)
        self.stream = stream
        self.samples_out = 0
        self._resampler = (
            soxr.ResampleStream(source_rate, self.rate, 1, dtype="float32")
            if self.rate != source_rate
            else None
        )
        self._pending: list[np.ndarray] = []
        self._header_sent = False
        self._finished = False

    @property
    def streams_incrementally(self) -> bool:
        """Whether feed() returns audio bytes before finish()."""
        return self.encoding is Encoding.PCM or (self.encoding is Encoding.WAV and self.stream)

    def feed(self, samples: np.ndarray) -> tuple[bytes, int]:
        """Accept mono float32 samples at source_rate; return (bytes now, output samples)."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono 1-D samples, got shape {samples.shape}")
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return self._emit(samples)

    def finish(self) -> tuple[bytes, int]:
        """Flush the resampler and return the remaining bytes (the whole file if buffered)."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        tail = np.zeros(0, dtype=np.float32)
        if self._resampler is not None:
            tail = self._resampler.resample_chunk(tail, last=True)
        data, count = self._emit(tail)
        self._finished = True
        if self.streams_incrementally:
            if not self._header_sent and self.encoding is Encoding.WAV:
                data = _wav_stream_header(self.rate)  # empty but valid stream
                self._header_sent = True
            return data, count
        audio = np.concatenate(self._pending) if self._pending else np.zeros(0, np.float32)
        self._pending.clear()
        return self._encode_whole(audio), count

    def _emit(self, samples: np.ndarray) -> tuple[bytes, int]:
        # Resampling can overshoot full scale; clip before integer conversion.
        samples = np.clip(samples, -1.0, 1.0)
        self.samples_out += len(samples)
        if not self.streams_incrementally:
            if len(samples):
                self._pending.append(samples)
            return b"", len(samples)
        if not len(samples):
            return b"", 0
        data = _to_s16(samples).tobytes()
        if self.encoding is Encoding.WAV and not self._header_sent:
            data = _wav_stream_header(self.rate) + data
            self._header_sent = True
        return data, len(samples)

    def _encode_whole(self, audio: np.ndarray) -> bytes:
        if self.encoding is Encoding.WAV:
            return _soundfile_bytes(_to_s16(audio), self.rate, "WAV", "PCM_16")
        if self.encoding is Encoding.FLAC:
            return _soundfile_bytes(_to_s16(audio), self.rate, "FLAC", "PCM_16")
        if self.encoding is Encoding.MP3:
            return _soundfile_bytes(audio, self.rate, "MP3", "MPEG_LAYER_III")
        if self.encoding is Encoding.OPUS:
            return _soundfile_bytes(audio, self.rate, "OGG", "OPUS")
        if self.encoding is Encoding.AAC:
            return _aac_bytes(audio, self.rate)
        raise AssertionError(f"unhandled encoding {self.encoding}")


def encode_file(
    samples: np.ndarray,
    source_rate: int,
    encoding: Encoding,
    requested_rate: int | None = None,
) -> bytes:
    """Encode a whole utterance as one file (WAV gets exact sizes)."""
    encoder = StreamEncoder(encoding, source_rate, requested_rate, stream=False)
    head, _ = encoder.feed(samples)
    tail, _ = encoder.finish()
    return head + tail
