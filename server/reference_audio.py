"""The voice a synthesis request clones: an inline `ref_audio`, or a stored voice by name.

`ref_audio` may be base64, a `data:` URL, an http(s) URL (only to allowlisted hosts,
never to loopback or private addresses, with size and time limits) or a local
path / file:// URI (only under an allowlisted directory). Whatever it is, the clip
then passes the same checks as an upload.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ssl
import urllib.parse
from pathlib import Path

import httpx

from vocalis.server.config import VoiceConfig
from vocalis.server.errors import invalid_argument
from vocalis.server.pinned_http import pinned_client
from vocalis.server.public_address import UnresolvableHost, is_public, resolve
from vocalis.server.voice_catalog import VoiceCatalog
from vocalis.server.voice_rules import check_clip
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.request import ReferenceAudio
from vocalis.tts.v1 import synthesizer_pb2


class ReferenceResolver:
    def __init__(self, catalog: VoiceCatalog, config: VoiceConfig, tls_verify: ssl.SSLContext | bool = True) -> None:
        self.catalog = catalog
        self.config = config
        self.tls_verify = tls_verify
        """How ref_audio https URLs are verified (the system's CAs by default)."""

    async def resolve(self, session: synthesizer_pb2.SessionConfig, model: LoadedModel) -> ReferenceAudio | None:
        """The reference for `session` on `model`, or None when it uses a preset voice."""
        ref_text = session.ref_text if session.HasField("ref_text") else None
        if session.HasField("ref_audio"):
            if "ref_audio" not in model.capabilities.accepted_fields:
                return None  # session_config.resolve refuses the field by name, before any fetching
            data = await self._fetch(session.ref_audio)
            audio = await asyncio.to_thread(check_clip, data, self.config, "ref_audio")
            return ReferenceAudio(audio.samples, audio.sample_rate, text=ref_text)
        reference = await asyncio.to_thread(self.catalog.reference, session.voice, model)
        if reference is not None and ref_text is not None:
            reference = ReferenceAudio(reference.samples, reference.sample_rate, ref_text, reference.name, reference.artifacts)
        return reference

    async def resolve_more(self, session: synthesizer_pb2.SessionConfig, model: LoadedModel) -> tuple[ReferenceAudio, ...]:
        """The clips of `more_references`, each fetched and checked as `ref_audio` is; they need `ref_audio`."""
        if not session.more_references or "more_references" not in model.capabilities.accepted_fields:
            return ()  # session_config.validate refuses the field by name on a model without it
        if not session.HasField("ref_audio"):
            raise invalid_argument("more_references", "REF_AUDIO_REQUIRED",
                                   "more_references follow the first reference: give ref_audio and ref_text too")
        clips = []
        for index, clip in enumerate(session.more_references):
            field = f"more_references[{index}]"
            if not clip.audio:
                raise invalid_argument(field, "REF_AUDIO_REQUIRED", f"{field}.audio is empty")
            audio = await asyncio.to_thread(check_clip, await self._fetch(clip.audio), self.config, field)
            clips.append(ReferenceAudio(audio.samples, audio.sample_rate, text=clip.text))
        return tuple(clips)

    async def _fetch(self, value: str) -> bytes:
        value = value.strip()
        if value.startswith("data:"):
            header, _, payload = value.partition(",")
            if ";base64" not in header:
                raise invalid_argument("ref_audio", "INVALID_REF_AUDIO", "ref_audio data: URLs must be base64 (data:audio/wav;base64,...)")
            return self._base64(payload)
        scheme = urllib.parse.urlsplit(value).scheme.lower()
        if scheme in ("http", "https"):
            return await self._download(value)
        if scheme == "file" or value.startswith(("/", "./", "../")):
            return await asyncio.to_thread(self._read_local, value)
        return self._base64(value)

    def _base64(self, payload: str) -> bytes:
        if len(payload) * 3 // 4 > self.config.max_upload_bytes:
            raise invalid_argument(
                "ref_audio", "AUDIO_TOO_LARGE", f"ref_audio is larger than {self.config.max_upload_bytes / 2**20:g} MiB"
            )
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise invalid_argument(
                "ref_audio", "INVALID_REF_AUDIO", "ref_audio must be base64 audio, a data: URL, or an allowed URL or path"
            ) from None

    def _read_local(self, value: str) -> bytes:
        root = self.config.ref_audio_dir
        if root is None:
            raise invalid_argument("ref_audio", "LOCAL_PATH_REFUSED", "ref_audio local paths are not allowed on this server")
        raw = urllib.parse.unquote(urllib.parse.urlsplit(value).path) if value.startswith("file:") else value
        if "\0" in raw:
            raise invalid_argument("ref_audio", "INVALID_REF_AUDIO", "ref_audio path holds a NUL character")
        path = (root / raw).resolve() if not Path(raw).is_absolute() else Path(raw).resolve()
        # The message names neither the directory nor whether the path exists outside it.
        if not path.is_relative_to(root.resolve()) or not path.is_file():
            raise invalid_argument(
                "ref_audio", "LOCAL_PATH_REFUSED", "ref_audio path is not a file in this server's reference audio directory"
            )
        if path.stat().st_size > self.config.max_upload_bytes:
            raise invalid_argument("ref_audio", "AUDIO_TOO_LARGE", "ref_audio file is larger than the upload limit")
        return path.read_bytes()

    async def _download(self, url: str) -> bytes:
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        if not self.config.allowed_ref_hosts:
            raise invalid_argument("ref_audio", "URL_REFUSED", "ref_audio URLs are not allowed on this server; send the audio as base64")
        if host not in {h.lower() for h in self.config.allowed_ref_hosts}:
            raise invalid_argument("ref_audio", "URL_REFUSED", f"ref_audio host {host!r} is not on this server's allowlist")
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:
            raise invalid_argument("ref_audio", "URL_REFUSED", "ref_audio URL has an invalid port") from None
        address = await self._public_address(host, port)
        limit = self.config.max_upload_bytes
        try:
            async with pinned_client(address, timeout=self.config.ref_fetch_timeout_s, verify=self.tls_verify) as client:
                async with client.stream("GET", url) as response:
                    if response.status_code != 200:
                        raise invalid_argument("ref_audio", "URL_FAILED", f"ref_audio URL answered HTTP {response.status_code}")
                    data = bytearray()
                    async for chunk in response.aiter_bytes():
                        data += chunk
                        if len(data) > limit:
                            raise invalid_argument("ref_audio", "AUDIO_TOO_LARGE", f"ref_audio URL gives more than {limit / 2**20:g} MiB")
                    return bytes(data)
        except httpx.HTTPError as error:
            raise invalid_argument("ref_audio", "URL_FAILED", f"ref_audio URL could not be fetched: {type(error).__name__}") from None

    async def _public_address(self, host: str, port: int) -> str:
        """The one address the download connects to: `host` resolved once, every answer public."""
        try:
            addresses = await resolve(host, port)
        except UnresolvableHost:
            raise invalid_argument("ref_audio", "URL_FAILED", f"ref_audio host {host!r} does not resolve") from None
        if not all(is_public(address) for address in addresses):
            raise invalid_argument("ref_audio", "URL_REFUSED", f"ref_audio host {host!r} is a loopback or private address")
        return str(addresses[0])
