"""Asynchronous client for the Vocalis gRPC API (grpc.aio)."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Iterable, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vocalis.clients.errors import VocalisError, from_rpc_error
from vocalis.tts.v1 import (
    metrics_pb2,
    metrics_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    synthesizer_pb2,
    synthesizer_pb2_grpc,
    voices_pb2,
    voices_pb2_grpc,
)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
LIST_PAGE_SIZE = 500
"""Voices asked for per ListVoices page when listing them all (the server's largest page)."""


def call_metadata(api_key: str | None = None, metadata: Sequence[tuple[str, str]] = ()) -> tuple[tuple[str, str], ...]:
    """Metadata sent with every call: `authorization: Bearer <api_key>` when a key is given, then `metadata`."""
    bearer = (("authorization", f"Bearer {api_key}"),) if api_key else ()
    return (*bearer, *((key.lower(), value) for key, value in metadata))


def session_requests(config: synthesizer_pb2.SessionConfig, texts: Iterable[str]) -> list[synthesizer_pb2.SynthesizeRequest]:
    """The messages of a session that sends `texts` and then half-closes."""
    return [
        synthesizer_pb2.SynthesizeRequest(config=config),
        *(synthesizer_pb2.SynthesizeRequest(text=synthesizer_pb2.TextInput(text=t)) for t in texts),
    ]


class AsyncTextSession:
    """An open Synthesize call on asyncio: send text while it runs and read responses as they are made.

    The write methods may be called from one task while another iterates the session
    (the gateway's WebSocket does just that). `end()` half-closes; `cancel()` aborts
    the call and frees its work on the server at once; so does leaving `async with`.
    """

    def __init__(self, call: grpc.aio.StreamStreamCall) -> None:
        self._call = call

    async def send(self, text: str) -> None:
        """Append `text` to the session's buffer, verbatim (no separator is added)."""
        await self._write(synthesizer_pb2.SynthesizeRequest(text=synthesizer_pb2.TextInput(text=text)))

    async def flush(self, flush_id: str = "") -> None:
        """Synthesize what is buffered now; the server answers FlushDone(flush_id) after its last audio."""
        await self._write(synthesizer_pb2.SynthesizeRequest(flush=synthesizer_pb2.Flush(flush_id=flush_id)))

    async def clear(self) -> None:
        """Drop buffered text and audio not yet sent (barge-in); the server answers Cleared."""
        await self._write(synthesizer_pb2.SynthesizeRequest(clear=synthesizer_pb2.Clear()))

    async def end(self) -> None:
        """No more text: the server synthesizes what is buffered and ends with SessionDone."""
        if not self._call.done():
            await self._call.done_writing()

    def cancel(self) -> None:
        self._call.cancel()

    async def _write(self, request: synthesizer_pb2.SynthesizeRequest) -> None:
        try:
            await self._call.write(request)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        except asyncio.InvalidStateError:  # the call has ended (its status is what the reader gets) or was half-closed
            raise VocalisError(grpc.StatusCode.FAILED_PRECONDITION, "the session has ended") from None

    async def __aiter__(self) -> AsyncIterator[synthesizer_pb2.SynthesizeResponse]:
        try:
            async for response in self._call:
                yield response
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def __aenter__(self) -> AsyncTextSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncClient:
    """One channel to a Vocalis server; methods raise VocalisError (a subclass per status code) on a non-OK status.

    `timeout` is the default deadline of every call in seconds (None: no deadline);
    each method takes its own `timeout` too. `api_key` is sent as
    `authorization: Bearer <key>` on every call, with any extra `metadata` pairs.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float | None = None,
        api_key: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        root_certificates: bytes | None = None,
        tls: bool = False,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.metadata = call_metadata(api_key, metadata)
        """Metadata sent with every call."""
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
        if tls or root_certificates is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self.channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options)
        self._synthesizer = synthesizer_pb2_grpc.SynthesizerStub(self.channel)
        self._models = models_pb2_grpc.ModelsStub(self.channel)
        self._voices = voices_pb2_grpc.VoicesStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)
        self._metrics = metrics_pb2_grpc.MetricsStub(self.channel)

    def with_metadata(self, metadata: Sequence[tuple[str, str]]) -> AsyncClient:
        """A view on the same channel that sends `metadata` (e.g. a caller's authorization) instead."""
        view = copy.copy(self)
        view.metadata = tuple((key.lower(), value) for key, value in metadata)
        return view

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def synthesize(
        self, config: synthesizer_pb2.SessionConfig, text: str, *, timeout: float | None = None
    ) -> AsyncIterator[synthesizer_pb2.SynthesizeResponse]:
        """Synthesize one complete text; yields every response of the session in order.

        Leaving the loop early cancels the call, which stops the work on the server.
        """
        call = self._synthesizer.Synthesize(
            iter(session_requests(config, [text])), timeout=timeout or self.timeout, metadata=self.metadata
        )
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    async def session(
        self, config: synthesizer_pb2.SessionConfig, *, timeout: float | None = None
    ) -> AsyncTextSession:
        """Open an incremental session with `config` sent: send text as it comes, iterate for the responses."""
        call = self._synthesizer.Synthesize(timeout=timeout or self.timeout, metadata=self.metadata)
        session = AsyncTextSession(call)
        await session._write(synthesizer_pb2.SynthesizeRequest(config=config))
        return session

    async def list_models(self) -> list[models_pb2.Model]:
        try:
            response = await self._models.ListModels(models_pb2.ListModelsRequest(), timeout=self.timeout, metadata=self.metadata)
            return list(response.models)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def get_model(self, name: str) -> models_pb2.Model:
        try:
            request = models_pb2.GetModelRequest(name=name)
            return (await self._models.GetModel(request, timeout=self.timeout, metadata=self.metadata)).model
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def list_voices(self, model: str = "") -> list[voices_pb2.Voice]:
        """Every voice (or those usable with `model`): all pages, in name order."""
        voices: list[voices_pb2.Voice] = []
        token = ""
        while True:
            page, token = await self.list_voices_page(model, page_size=LIST_PAGE_SIZE, page_token=token)
            voices.extend(page)
            if not token:
                return voices

    async def list_voices_page(self, model: str = "", *, page_size: int = 0, page_token: str = "") -> tuple[list[voices_pb2.Voice], str]:
        """One page of voices and the token of the next ("" after the last page)."""
        try:
            request = voices_pb2.ListVoicesRequest(model=model, page_size=page_size, page_token=page_token)
            response = await self._voices.ListVoices(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        return list(response.voices), response.next_page_token

    async def get_voice(self, name: str) -> voices_pb2.Voice:
        try:
            request = voices_pb2.GetVoiceRequest(name=name)
            return (await self._voices.GetVoice(request, timeout=self.timeout, metadata=self.metadata)).voice
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def create_voice(self, request: voices_pb2.CreateVoiceRequest) -> voices_pb2.Voice:
        """Upload a voice (vocalis.clients.messages.voice_request builds it from a file)."""
        try:
            return (await self._voices.CreateVoice(request, timeout=self.timeout, metadata=self.metadata)).voice
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def delete_voice(self, name: str) -> str:
        """Delete an uploaded voice; returns the name the server deleted."""
        try:
            request = voices_pb2.DeleteVoiceRequest(name=name)
            return (await self._voices.DeleteVoice(request, timeout=self.timeout, metadata=self.metadata)).name
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def get_metrics(self) -> metrics_pb2.GetMetricsResponse:
        """The server's Prometheus exposition."""
        try:
            return await self._metrics.GetMetrics(metrics_pb2.GetMetricsRequest(), timeout=self.timeout or 10, metadata=self.metadata)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def serving(self, service: str = "", *, raise_refusals: bool = False) -> bool:
        """Whether the server's health service reports SERVING (False when unreachable).

        With `raise_refusals`, a missing or wrong key (UNAUTHENTICATED, PERMISSION_DENIED) raises VocalisError instead.
        """
        try:
            request = health_pb2.HealthCheckRequest(service=service)
            response = await self._health.Check(request, timeout=self.timeout or 5, metadata=self.metadata)
        except grpc.aio.AioRpcError as error:
            if raise_refusals and error.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise from_rpc_error(error) from None
            return False
        return response.status == health_pb2.HealthCheckResponse.SERVING

    async def probe(self, service: str, timeout: float = 2.0) -> tuple[bool, dict]:
        """Whether the server's probe `service` (vocalis.live, vocalis.startup, vocalis.ready) answers SERVING, and the
        admission state it reports ({} when the server did not send one); (False, {}) when unreachable.

        A missing or wrong key (UNAUTHENTICATED, PERMISSION_DENIED) raises VocalisError.
        """
        call = self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout, metadata=self.metadata)
        try:
            response = await call
        except grpc.aio.AioRpcError as error:
            if error.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise from_rpc_error(error) from None
            return False, {}
        admission: dict = {}
        for key, value in await call.trailing_metadata() or ():
            if key == "x-vocalis-admission":
                try:
                    admission = json.loads(value)
                except ValueError:
                    admission = {}
        return response.status == health_pb2.HealthCheckResponse.SERVING, admission
