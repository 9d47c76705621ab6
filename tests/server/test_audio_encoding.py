import io
import struct
import wave

import av
import numpy as np
import pytest
import soundfile as sf

from vocalis.server.audio_encoding import (
    MEDIA_TYPES,
    OPUS_RATES,
    Encoding,
    StreamEncoder,
    encode_file,
    output_rate,
)

SR = 22050
AAC_PRIMING = 1024  # FFmpeg's aac encoder delay; ADTS has no way to signal it
AAC_FRAME = 1024
MP3_DELAY = 1105  # LAME's encoder delay (576) plus the decoder's (529)
MP3_FRAME = 1152


@pytest.fixture(scope="module")
def signal() -> np.ndarray:
    t = np.arange(SR) / SR
    return (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 1234 * t)).astype(np.float32)


def chunked(encoder: StreamEncoder, samples: np.ndarray, sizes=(1, 777, 0, 3001, 64, 4999)):
    """Feed samples in irregular chunks; return the list of (bytes, count) incl. finish()."""
    out, pos, i = [], 0, 0
    while pos < len(samples):
        n = sizes[i % len(sizes)]
        out.append(encoder.feed(samples[pos:pos + n]))
        pos, i = pos + n, i + 1
    out.append(encoder.finish())
    return out


def decode(data: bytes, encoding: Encoding) -> tuple[np.ndarray, int]:
    if encoding is Encoding.AAC:
        with av.open(io.BytesIO(data)) as container:
            rate = container.streams.audio[0].rate
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        return np.concatenate(frames), rate
    return sf.read(io.BytesIO(data), dtype="float32")


def test_media_types_cover_all_encodings():
    assert set(MEDIA_TYPES) == set(Encoding)
    assert Encoding("opus") is Encoding.OPUS and Encoding.MP3 == "mp3"


@pytest.mark.parametrize("encoding", [e for e in Encoding if e is not Encoding.PCM])
@pytest.mark.parametrize("requested", [None, 16000])
def test_every_encoding_decodes(signal, encoding, requested):
    data = encode_file(signal, SR, encoding, requested)
    audio, rate = decode(data, encoding)
    expected_rate = output_rate(encoding, SR, requested)
    assert rate == expected_rate
    expected = len(signal) * expected_rate / SR
    n = len(audio)
    if encoding is Encoding.AAC:
        # Priming plus padding of the last frame: the decoder cannot trim either.
        assert 0 <= n - AAC_PRIMING - expected < AAC_FRAME + 2
        n -= AAC_PRIMING
    if encoding is Encoding.MP3:
        # Written as it is fed, an MP3 has no LAME tag to tell decoders its encoder delay and padding.
        assert 0 <= n - expected < MP3_DELAY + 2 * MP3_FRAME
        n -= MP3_DELAY
    assert abs(n - expected) <= 0.05 * expected
    # Roughly the same loudness: the codec carried the signal, not silence.
    rms_in = float(np.sqrt(np.mean(signal**2)))
    assert abs(float(np.sqrt(np.mean(audio**2))) - rms_in) < 0.2 * rms_in


def test_pcm_file_is_s16le(signal):
    data = encode_file(signal, SR, Encoding.PCM)
    assert len(data) == 2 * len(signal)
    pcm = np.frombuffer(data, "<i2")
    assert np.array_equal(pcm, np.rint(signal * 32768).astype(np.int16))


def test_output_rate():
    assert output_rate(Encoding.WAV, SR, None) == SR
    assert output_rate(Encoding.WAV, SR, 0) == SR
    assert output_rate(Encoding.WAV, SR, 16000) == 16000
    assert output_rate(Encoding.OPUS, SR, None) == 48000
    assert output_rate(Encoding.OPUS, SR, 44100) == 48000
    for rate in OPUS_RATES:
        assert output_rate(Encoding.OPUS, SR, rate) == rate
        assert output_rate(Encoding.OPUS, rate, None) == rate


@pytest.mark.parametrize("encoding", [Encoding.MP3, Encoding.AAC])
def test_unsupported_codec_rate_fails_early(encoding):
    with pytest.raises(ValueError):
        StreamEncoder(encoding, SR, 16001)


def test_opus_rates(signal):
    audio, rate = decode(encode_file(signal, SR, Encoding.OPUS), Encoding.OPUS)
    assert rate == 48000 and abs(len(audio) - 48000) <= 0.05 * 48000
    audio, rate = decode(encode_file(signal, 24000, Encoding.OPUS), Encoding.OPUS)
    assert rate == 24000 and abs(len(audio) - len(signal)) <= 0.05 * len(signal)
    assert StreamEncoder(Encoding.OPUS, 24000).rate == 24000


def test_wav_requested_rate(signal):
    with wave.open(io.BytesIO(encode_file(signal, SR, Encoding.WAV, 16000))) as w:
        assert w.getframerate() == 16000
        assert w.getnframes() == 16000


def test_pcm_chunked_resampling_matches_one_shot(signal):
    one = StreamEncoder(Encoding.PCM, SR, 16000)
    head, n_head = one.feed(signal)
    tail, n_tail = one.finish()
    reference = np.frombuffer(head + tail, "<i2").astype(np.int32)
    assert n_head + n_tail == len(reference) == one.samples_out == 16000

    encoder = StreamEncoder(Encoding.PCM, SR, 16000)
    parts = chunked(encoder, signal)
    for data, count in parts:
        assert len(data) == 2 * count
    got = np.frombuffer(b"".join(d for d, _ in parts), "<i2").astype(np.int32)
    assert sum(c for _, c in parts) == encoder.samples_out == len(got) == len(reference)
    assert np.abs(got - reference).max() <= 2


def test_pcm_without_resampling_is_immediate(signal):
    encoder = StreamEncoder(Encoding.PCM, SR)
    data, count = encoder.feed(signal[:100])
    assert count == 100 and len(data) == 200
    assert encoder.feed(np.zeros(0, np.float32)) == (b"", 0)
    assert encoder.finish() == (b"", 0)


def test_clipping():
    data, _ = StreamEncoder(Encoding.PCM, SR).feed(np.array([2.0, -3.0, 0.5], np.float32))
    assert np.frombuffer(data, "<i2").tolist() == [32767, -32768, 16384]


def test_streaming_wav(signal):
    encoder = StreamEncoder(Encoding.WAV, SR, 16000)
    assert encoder.streams_incrementally
    parts = chunked(encoder, signal)
    first = next(d for d, _ in parts if d)
    riff, riff_size, wave_id, fmt_id, fmt_size, tag, ch, rate, byte_rate, align, bits, data_id, data_size = (
        struct.unpack("<4sI4s4sIHHIIHH4sI", first[:44])
    )
    assert (riff, wave_id, fmt_id, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert riff_size == data_size == 0xFFFFFFFF
    assert (fmt_size, tag, ch, rate, byte_rate, align, bits) == (16, 1, 1, 16000, 32000, 2, 16)

    stream = b"".join(d for d, _ in parts)
    assert len(stream) == 44 + 2 * sum(c for _, c in parts)
    # libsndfile accepts the 0xFFFFFFFF sizes and reads to the end of the data.
    audio, sf_rate = sf.read(io.BytesIO(stream), dtype="int16")
    assert sf_rate == 16000 and len(audio) == 16000

    pcm = StreamEncoder(Encoding.PCM, SR, 16000)
    pcm_bytes = b"".join(d for d, _ in chunked(pcm, signal))
    assert stream[44:] == pcm_bytes
    assert audio.tobytes() == pcm_bytes


def test_buffered_wav_has_exact_sizes(signal):
    encoder = StreamEncoder(Encoding.WAV, SR, stream=False)
    assert not encoder.streams_incrementally
    parts = chunked(encoder, signal)
    assert all(d == b"" for d, _ in parts[:-1])
    assert sum(c for _, c in parts) == encoder.samples_out == len(signal)
    data = parts[-1][0]
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SR)
        assert w.getnframes() == len(signal)
        frames = w.readframes(w.getnframes())
    riff_size, = struct.unpack("<I", data[4:8])
    assert riff_size == len(data) - 8
    # Same sample conversion as PCM.
    assert frames == encode_file(signal, SR, Encoding.PCM)


@pytest.mark.parametrize("encoding", [Encoding.FLAC, Encoding.MP3, Encoding.OPUS, Encoding.AAC])
def test_compressed_formats_stream_container_bytes_as_they_are_fed(signal, encoding):
    encoder = StreamEncoder(encoding, 24000)  # a rate every codec takes: no resampler latency
    assert encoder.streams_incrementally
    second = len(signal) // 2
    early, _ = encoder.feed(signal[:second])
    assert early, "half a second of audio gave no bytes before finish()"
    late, _ = encoder.feed(signal[second:])
    tail, _ = encoder.finish()
    assert encoder.samples_out == len(signal)
    stream = early + late + tail
    with av.open(io.BytesIO(stream)) as container:  # the concatenated pieces are one valid stream
        decoded_rate = container.streams.audio[0].rate  # FFmpeg decodes Opus at 48 kHz whatever it was fed
        decoded = sum(frame.samples for frame in container.decode(audio=0))
    expected = len(signal) * decoded_rate / 24000
    assert expected - 2 <= decoded <= expected + 2 * 2048  # plus the codec's priming and last-frame padding
    # The first bytes alone start a decodable stream: a client can play them before the rest arrives.
    with av.open(io.BytesIO(early)) as container:
        assert sum(frame.samples for frame in container.decode(audio=0)) > 0


@pytest.mark.parametrize("encoding", [Encoding.FLAC, Encoding.WAV])
def test_files_of_formats_with_lengths_in_their_headers_wait_for_finish(signal, encoding):
    encoder = StreamEncoder(encoding, 24000, stream=False)
    assert not encoder.streams_incrementally
    assert encoder.feed(signal[:500]) == (b"", 500)
    data, count = encoder.finish()
    assert data and count == 0
    assert encoder.samples_out == 500


@pytest.mark.parametrize("encoding", [Encoding.MP3, Encoding.OPUS, Encoding.AAC])
def test_files_of_formats_without_lengths_stream_anyway(signal, encoding):
    encoder = StreamEncoder(encoding, 24000, stream=False)
    assert encoder.streams_incrementally
    assert encoder.feed(signal)[0]


@pytest.mark.parametrize("speed", [0.5, 2.0])
@pytest.mark.parametrize("encoding", [Encoding.PCM, Encoding.OPUS])
def test_speed_changes_duration_not_pitch(encoding, speed):
    rate = 24000
    t = np.arange(2 * rate) / rate
    tone = (0.4 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    encoder = StreamEncoder(encoding, rate, speed=speed)
    data = b"".join(d for d, _ in chunked(encoder, tone))
    if encoding is Encoding.PCM:
        audio, out_rate = np.frombuffer(data, "<i2").astype(np.float32) / 32768, rate
    else:
        audio, out_rate = decode(data, encoding)
    assert abs(len(audio) / out_rate - len(tone) / rate / speed) <= 0.05 * len(tone) / rate / speed
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    assert abs(np.argmax(spectrum) * out_rate / len(audio) - 220) < 3
    assert encoder.samples_out == sum(c for _, c in chunked(StreamEncoder(encoding, rate, speed=speed), tone))


def test_feed_after_finish_raises(signal):
    encoder = StreamEncoder(Encoding.PCM, SR)
    encoder.finish()
    with pytest.raises(RuntimeError):
        encoder.feed(signal[:10])


def test_empty_streaming_wav_is_valid():
    encoder = StreamEncoder(Encoding.WAV, SR)
    assert encoder.feed(np.zeros(0, np.float32)) == (b"", 0)
    data, count = encoder.finish()
    assert len(data) == 44 and count == 0
    audio, rate = sf.read(io.BytesIO(data))
    assert rate == SR and len(audio) == 0


def test_empty_buffered_wav_is_valid():
    data = encode_file(np.zeros(0, np.float32), SR, Encoding.WAV)
    with wave.open(io.BytesIO(data)) as w:
        assert w.getframerate() == SR and w.getnframes() == 0


def test_the_stretch_lets_out_each_utterances_tail_at_its_end():
    rate = 24000
    tone = (0.4 * np.sin(2 * np.pi * 220 * np.arange(rate) / rate)).astype(np.float32)
    encoder = StreamEncoder(Encoding.PCM, rate, speed=2.0)
    for _ in range(2):  # two utterances of one second each
        counts = [c for _, c in (encoder.feed(tone[:7000]), encoder.feed(tone[7000:]), encoder.end_utterance())]
        assert counts[-1] > 0 and abs(sum(counts) - rate / 2) <= 0.01 * rate / 2
    assert encoder.end_utterance() == (b"", 0)  # nothing held between utterances
    assert StreamEncoder(Encoding.PCM, rate).end_utterance() == (b"", 0)  # no stretch: nothing to let out
