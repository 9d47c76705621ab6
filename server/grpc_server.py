"""Assemble the grpc.aio server: the Vocalis services, health checking and reflection."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from vocalis.server.catalog_services import ModelsService, VoicesService
from vocalis.server.config import ServerConfig
from vocalis.server.engine import Engine
from vocalis.server.synthesizer_service import SynthesizerService
from vocalis.tts.v1 import models_pb2, models_pb2_grpc, synthesizer_pb2, synthesizer_pb2_grpc, voices_pb2, voices_pb2_grpc

SERVICE_NAMES = (
    synthesizer_pb2.DESCRIPTOR.services_by_name["Synthesizer"].full_name,
    voices_pb2.DESCRIPTOR.services_by_name["Voices"].full_name,
    models_pb2.DESCRIPTOR.services_by_name["Models"].full_name,
)


class GrpcServer:
    """A started grpc.aio server and its health servicer."""

    def __init__(self, server: grpc.aio.Server, health_servicer: health.aio.HealthServicer, port: int) -> None:
        self.server = server
        self.health = health_servicer
        self.port = port

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, status)

    async def stop(self, grace: float | None = None) -> None:
        await self.set_serving(False)
        await self.server.stop(grace)


async def start_grpc_server(engine: Engine, config: ServerConfig) -> GrpcServer:
    max_bytes = config.limits.max_message_bytes
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)]
    )
    synthesizer_pb2_grpc.add_SynthesizerServicer_to_server(SynthesizerService(engine, config.limits), server)
    voices_pb2_grpc.add_VoicesServicer_to_server(VoicesService(engine), server)
    models_pb2_grpc.add_ModelsServicer_to_server(ModelsService(engine, config.limits.max_input_chars), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = server.add_insecure_port(config.grpc_address)
    if port == 0:
        raise OSError(f"cannot listen on {config.grpc_address}")
    await server.start()
    running = GrpcServer(server, health_servicer, port)
    await running.set_serving(True)
    return running
