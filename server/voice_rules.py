"""What a voice upload or a reference clip must be; each breach names its field."""

from __future__ import annotations

import numpy as np

from vocalis.server.audio_decoding import AudioTooLong, DecodedAudio, UndecodableAudio, decode_audio
from vocalis.server.config import VoiceConfig
from vocalis.server.errors import StatusError, invalid_argument
from vocalis.server.voice_store import NAME_PATTERN

SILENCE_RMS = 1e-3
TEXT_LIMITS = {"speaker_description": 1000, "ref_text": 2000, "consent": 256}
"""Most characters of each free-text field of a voice: every listing carries them, so they stay small."""


def check_name(name: str, reserved: set[str]) -> None:
    if not NAME_PATTERN.fullmatch(name):
        raise invalid_argument("name", "INVALID_NAME", "name must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
    if name.lower() in reserved:
        raise invalid_argument("name", "RESERVED_NAME", f"{name!r} is the name of a preset voice; choose another name")


def check_clip(data: bytes, config: VoiceConfig, field: str) -> DecodedAudio:
    """Decode and check an audio clip: size, format, duration, not silent."""
    if len(data) > config.max_upload_bytes:
        raise invalid_argument(
            field, "AUDIO_TOO_LARGE", f"{field} is {len(data) / 2**20:.1f} MiB; the limit is {config.max_upload_bytes / 2**20:g} MiB"
        )
    try:
        audio = decode_audio(data, max_seconds=config.max_seconds)
    except AudioTooLong as error:
        raise invalid_argument(
            field, "AUDIO_TOO_LONG", f"{field} is {error} long; the limit is {config.max_seconds:g} s, use a shorter clip"
        ) from None
    except UndecodableAudio as error:
        raise invalid_argument(field, "UNDECODABLE_AUDIO", f"{field}: {error}") from None
    if audio.seconds < config.min_seconds:
        raise invalid_argument(
            field, "AUDIO_TOO_SHORT", f"{field} is {audio.seconds:.2f} s long; at least {config.min_seconds:g} s of speech is needed"
        )
    if audio.seconds > config.max_seconds:
        raise invalid_argument(
            field, "AUDIO_TOO_LONG", f"{field} is {audio.seconds:.1f} s long; the limit is {config.max_seconds:g} s, use a shorter clip"
        )
    if not np.isfinite(audio.samples).all() or float(np.sqrt(np.mean(audio.samples.astype(np.float64) ** 2))) < SILENCE_RMS:
        raise invalid_argument(field, "AUDIO_SILENT", f"{field} is silent (or nearly); record some speech")
    return audio


def check_consent(consent: str) -> None:
    if not consent.strip():
        raise invalid_argument("consent", "CONSENT_REQUIRED", "consent is required: the id of the speaker's recorded consent")


def check_text_fields(**fields: str) -> None:
    """Each named free-text field is within its TEXT_LIMITS bound."""
    for field, value in fields.items():
        limit = TEXT_LIMITS[field]
        if len(value) > limit:
            raise invalid_argument(
                field, "FIELD_TOO_LONG", f"{field} is {len(value)} characters long; the limit is {limit}, shorten it"
            )


def check_embedding(values: list[float]) -> np.ndarray:
    embedding = np.asarray(values, dtype=np.float32)
    if embedding.size == 0 or embedding.size > 8192 or not np.isfinite(embedding).all():
        raise invalid_argument("speaker_embedding", "INVALID_EMBEDDING", "speaker_embedding must hold 1 to 8192 finite numbers")
    return embedding


def not_found(name: str, known: list[str], field: str = "voice") -> StatusError:
    """NOT_FOUND for `name`; `known` lists the voices worth suggesting, never other callers' uploads."""
    import grpc

    hint = f"; voices of this server: {', '.join(known)}" if known else ""
    return StatusError(
        grpc.StatusCode.NOT_FOUND, f"unknown voice {name!r}{hint} (GET /v1/audio/voices lists them all)", "UNKNOWN_VOICE", field
    )
