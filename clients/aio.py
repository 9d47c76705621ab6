"""Asynchronous client for the Vocalis gRPC API (grpc.aio)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vocalis.clients.errors import from_rpc_error
from vocalis.tts.v1 import (
    models_pb2,
    models_pb2_grpc,
    synthesizer_pb2,
    synthesizer_pb2_grpc,
    voices_pb2,
    voices_pb2_grpc,
)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def session_requests(config: synthesizer_pb2.SessionConfig, texts: Iterable[str]) -> list[synthesizer_pb2.SynthesizeRequest]:
    """The messages of a session that sends `texts` and then half-closes."""
    return [
        synthesizer_pb2.SynthesizeRequest(config=config),
        *(synthesizer_pb2.SynthesizeRequest(text=synthesizer_pb2.TextInput(text=t)) for t in texts),
    ]


class AsyncClient:
    """One channel to a Vocalis server; methods raise VocalisError on a non-OK status."""

    def __init__(self, target: str, *, timeout: float | None = None) -> None:
        self.target = target
        self.timeout = timeout
        self.channel = grpc.aio.insecure_channel(
            target,
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)],
        )
        self._synthesizer = synthesizer_pb2_grpc.SynthesizerStub(self.channel)
        self._models = models_pb2_grpc.ModelsStub(self.channel)
        self._voices = voices_pb2_grpc.VoicesStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

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
        call = self._synthesizer.Synthesize(iter(session_requests(config, [text])), timeout=timeout or self.timeout)
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    async def list_models(self) -> list[models_pb2.Model]:
        try:
            return list((await self._models.ListModels(models_pb2.ListModelsRequest(), timeout=self.timeout)).models)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def get_model(self, name: str) -> models_pb2.Model:
        try:
            return (await self._models.GetModel(models_pb2.GetModelRequest(name=name), timeout=self.timeout)).model
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def list_voices(self, model: str = "") -> list[voices_pb2.Voice]:
        try:
            response = await self._voices.ListVoices(voices_pb2.ListVoicesRequest(model=model), timeout=self.timeout)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        return list(response.voices)

    async def serving(self, service: str = "") -> bool:
        """Whether the server's health service reports SERVING (False when unreachable)."""
        try:
            response = await self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=self.timeout or 5)
        except grpc.aio.AioRpcError:
            return False
        return response.status == health_pb2.HealthCheckResponse.SERVING
