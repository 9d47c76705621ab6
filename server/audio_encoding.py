"""Turn synthesized float samples into the bytes a client asked for.

Models produce mono float32 audio at their own rate; clients ask for a
container/codec and maybe a different rate and speed. This is the one place that knows
about audio formats, so the gRPC and HTTP layers only deal in bytes and
sample counts. Codecs come from libsndfile (via soundfile: WAV, FLAC, and G.711
mu-law/A-law for telephone lines) and FFmpeg (via PyAV), each written as it is fed; resampling is soxr and speed change Sonic
(server/time_stretch.py), both run as streams so chunk boundaries don't matter.
"""

from __future__ import annotations

import enum
import io
import struct

import av
import numpy as np
import soundfile as sf
import soxr

from vocalis.server.time_stretch import TimeStretch

__all__ = [
    "Encoding",
    "MEDIA_TYPES",
    "OPUS_RATES",
    "StreamEncoder",
    "encodable_rate",
    "encode_file",
    "media_type",
    "output_rate",
]


class Encoding(enum.StrEnum):
    PCM = "pcm"  # raw s16le mono
    WAV = "wav"
    FLAC = "flac"
    MP3 = "mp3"
    OPUS = "opus"  # in an Ogg container
    AAC = "aac"  # in an ADTS stream
    MULAW = "mulaw"  # G.711 mu-law: raw bytes streamed, a WAV of format tag 7 as a file
    ALAW = "alaw"  # G.711 A-law: raw bytes streamed, a WAV of format tag 6 as a file


MEDIA_TYPES: dict[Encoding, str] = {
    Encoding.PCM: "audio/pcm",
    Encoding.WAV: "audio/wav",
    Encoding.FLAC: "audio/flac",
    Encoding.MP3: "audio/mpeg",
    Encoding.OPUS: "audio/ogg",
    Encoding.AAC: "audio/aac",
    Encoding.MULAW: "audio/PCMU",
    Encoding.ALAW: "audio/PCMA",
}
"""Media type of each encoding as it streams; G.711's are the RTP names (RFC 3551), raw bytes as on a phone line."""

G711_RATE = 8000
"""G.711's own rate, the output rate of MULAW and ALAW unless the caller asks for another."""
_G711_SUBTYPES = {Encoding.MULAW: "ULAW", Encoding.ALAW: "ALAW"}


def media_type(encoding: Encoding, stream: bool) -> str:
    """The media type of `encoding`'s bytes: G.711 as a file is a WAV (format tag 7 or 6), streamed raw."""
    if not stream and encoding in _G711_SUBTYPES:
        return MEDIA_TYPES[Encoding.WAV]
    return MEDIA_TYPES[encoding]

OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
# Rates the MP3 (LAME) and AAC encoders accept, checked up front: a bad rate is refused before any synthesis.
_CODEC_RATES = {
    Encoding.MP3: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    Encoding.AAC: (7350, 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000),
}

AAC_BIT_RATE = 64_000  # plenty for mono speech
_STREAMING_SIZE = 0xFFFFFFFF  # "unknown length" in RIFF and data chunk sizes


def output_rate(encoding: Encoding, source_rate: int, requested_rate: int | None) -> int:
    """The sample rate the output will have (0 or None means "source rate")."""
    rate = requested_rate or (G711_RATE if encoding in _G711_SUBTYPES else source_rate)
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


class _ByteSink(io.RawIOBase):
    """A write-only, unseekable file for the muxer: what it writes is taken away after every packet."""

    def __init__(self) -> None:
        self._data = bytearray()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._data += data
        return len(data)

    def take(self) -> bytes:
        data = bytes(self._data)
        self._data.clear()
        return data


# Container, codec and muxer options of each compressed format. flush_packets hands every packet to the
# sink at once; Ogg pages are closed every 20 ms instead of every second.
_CONTAINERS: dict[Encoding, tuple[str, str, dict[str, str]]] = {
    Encoding.MP3: ("mp3", "libmp3lame", {"flush_packets": "1"}),
    Encoding.OPUS: ("ogg", "libopus", {"flush_packets": "1", "page_duration": "20000"}),
    Encoding.AAC: ("adts", "aac", {"flush_packets": "1"}),
    Encoding.FLAC: ("flac", "flac", {"flush_packets": "1"}),
}
_WHOLE_FILE_ENCODINGS = (Encoding.WAV, Encoding.FLAC, Encoding.MULAW, Encoding.ALAW)
"""Their headers hold the length (WAV sizes, FLAC's STREAMINFO sample count; G.711 as a file is a WAV): exact in a file, unknown in a stream
(and libsndfile cannot read a FLAC stream without it). MP3 streams even as a file, as OpenAI's does: its LAME tag,
which would tell decoders the encoder's delay, can only be written at the end."""
_FLAC_FRAME = 4608  # FLAC takes frames of any size: this is its encoder's default block size


class _ContainerStream:
    """A compressed format written as it is fed: each call returns the container bytes completed so far
    (MP3 frames, Ogg pages, ADTS frames, FLAC frames), the header with the first of them.

    The sink cannot seek, so nothing is patched at the end: no MP3 Xing/LAME tag, FLAC's STREAMINFO
    without the total sample count; decoders read all of these to the end of the data.
    """

    def __init__(self, encoding: Encoding, rate: int) -> None:
        format_name, codec, options = _CONTAINERS[encoding]
        self._sink = _ByteSink()
        self._container = av.open(self._sink, "w", format=format_name, options=options)
        self._stream = self._container.add_stream(codec, rate=rate, layout="mono")
        if encoding is Encoding.AAC:
            self._stream.bit_rate = AAC_BIT_RATE
        self._stream.codec_context.open()  # frame_size is only known once open
        self._frame_size = self._stream.codec_context.frame_size or _FLAC_FRAME
        self._sample_format = self._stream.codec_context.format.name
        self._rate = rate
        self._pending = np.zeros(0, np.float32)
        self._pts = 0

    def feed(self, samples: np.ndarray) -> bytes:
        self._pending = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        whole = len(self._pending) - len(self._pending) % self._frame_size
        for start in range(0, whole, self._frame_size):
            self._encode(self._pending[start : start + self._frame_size])
        self._pending = self._pending[whole:]
        return self._sink.take()

    def finish(self) -> bytes:
        if len(self._pending):
            self._encode(self._pending)  # a short last frame: every codec here takes one
        self._container.mux(self._stream.encode(None))  # drain the encoder's look-ahead
        self._container.close()
        return self._sink.take()

    def _encode(self, samples: np.ndarray) -> None:
        frame = av.AudioFrame.from_ndarray(self._as_codec_format(samples)[np.newaxis, :], format=self._sample_format, layout="mono")
        frame.sample_rate = self._rate
        frame.pts = self._pts
        self._pts += len(samples)
        self._container.mux(self._stream.encode(frame))

    def _as_codec_format(self, samples: np.ndarray) -> np.ndarray:
        if self._sample_format in ("flt", "fltp"):
            return np.ascontiguousarray(samples, dtype=np.float32)
        s16 = _to_s16(samples).astype(np.int16)
        if self._sample_format in ("s16", "s16p"):
            return s16
        if self._sample_format in ("s32", "s32p"):
            return s16.astype(np.int32) << 16
        raise AssertionError(f"unhandled sample format {self._sample_format}")


class StreamEncoder:
    """Encode one stream of audio fed in chunks, changing its speed and rate on the way.

    Streaming, every format gives bytes as soon as it has them: PCM, WAV and G.711 per
    sample (G.711 as raw bytes), MP3/AAC per frame, Opus per Ogg page, FLAC per block. As a file
    (stream=False), WAV, FLAC and G.711 (in a WAV) wait for finish() to write exact lengths in their
    headers; the others still give bytes as they come. The counts returned by feed()
    and finish() add up to samples_out.

    speed != 1.0 time-stretches (pitch kept) before resampling: for models that
    cannot change their own speed.
    """

    def __init__(
        self,
        encoding: Encoding,
        source_rate: int,
        requested_rate: int | None = None,
        *,
        stream: bool = True,
        speed: float = 1.0,
    ) -> None:
        self.encoding = Encoding(encoding)
        self.source_rate = source_rate
        self.rate = encodable_rate(self.encoding, source_rate, requested_rate)
        self.stream = stream
        self.speed = speed
        self.samples_out = 0
        self._stretch = TimeStretch(source_rate, speed) if speed != 1.0 else None
        self._resampler = (
            soxr.ResampleStream(source_rate, self.rate, 1, dtype="float32")
            if self.rate != source_rate
            else None
        )
        self._container = _ContainerStream(self.encoding, self.rate) if self.streams_incrementally and self.encoding in _CONTAINERS else None
        self._pending: list[np.ndarray] = []
        self._header_sent = False
        self._finished = False

    @property
    def streams_incrementally(self) -> bool:
        """Whether feed() returns audio bytes before finish(): always when streaming; as a file
        (stream=False) WAV, FLAC and G.711 (a WAV) wait for the end, to write the exact length in their headers."""
        return self.stream or self.encoding not in _WHOLE_FILE_ENCODINGS

    def feed(self, samples: np.ndarray) -> tuple[bytes, int]:
        """Accept mono float32 samples at source_rate; return (bytes now, output samples)."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono 1-D samples, got shape {samples.shape}")
        if self._stretch is not None:
            samples = self._stretch.feed(samples)
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return self._emit(samples)

    def end_utterance(self) -> tuple[bytes, int]:
        """Let out what the time-stretch holds of the utterance that just ended, so that it leaves with
        its utterance rather than with the next one; feeding may go on."""
        if self._stretch is None or self._finished:
            return b"", 0
        samples = self._stretch.flush()
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return self._emit(samples)

    def finish(self) -> tuple[bytes, int]:
        """Flush the stretcher, the resampler and the codec; return the remaining bytes
        (the whole file if buffered)."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        tail = np.zeros(0, dtype=np.float32)
        if self._stretch is not None:
            tail = self._stretch.finish()
        if self._resampler is not None:
            tail = self._resampler.resample_chunk(tail, last=True)
        data, count = self._emit(tail)
        self._finished = True
        if self._container is not None:
            return data + self._container.finish(), count
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
        if self._container is not None:
            return (self._container.feed(samples) if len(samples) else b""), len(samples)
        if not self.streams_incrementally:
            if len(samples):
                self._pending.append(samples)
            return b"", len(samples)
        if not len(samples):
            return b"", 0
        s16 = _to_s16(samples)
        if self.encoding in _G711_SUBTYPES:  # stateless, sample by sample: each chunk is encoded alone
            return _soundfile_bytes(s16, self.rate, "RAW", _G711_SUBTYPES[self.encoding]), len(samples)
        data = s16.tobytes()
        if self.encoding is Encoding.WAV and not self._header_sent:
            data = _wav_stream_header(self.rate) + data
            self._header_sent = True
        return data, len(samples)

    def _encode_whole(self, audio: np.ndarray) -> bytes:
        if self.encoding is Encoding.WAV:
            return _soundfile_bytes(_to_s16(audio), self.rate, "WAV", "PCM_16")
        if self.encoding is Encoding.FLAC:
            return _soundfile_bytes(_to_s16(audio), self.rate, "FLAC", "PCM_16")
        if self.encoding in _G711_SUBTYPES:
            return _soundfile_bytes(_to_s16(audio), self.rate, "WAV", _G711_SUBTYPES[self.encoding])
        raise AssertionError(f"{self.encoding} is never buffered")


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
