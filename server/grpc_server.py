"""Assemble the grpc.aio server: the Vocalis services, health, reflection, keys, lifecycle, metrics, TLS."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from vocalis.server.auth import ApiKeyInterceptor, ApiKeys
from vocalis.server.catalog_services import ModelsService
from vocalis.server.config import ServerConfig
from vocalis.server.engine import Engine
from vocalis.server.heap_trim import HeapTrimmer
from vocalis.server.lifecycle import Lifecycle, LifecycleInterceptor, State
from vocalis.server.malformed_messages import MalformedMessageInterceptor
from vocalis.server.metrics import MetricsInterceptor, MetricsService, ServerMetrics
from vocalis.server.probes import LIVE, READY, STARTUP, AdmissionCollector, ProbingHealthServicer
from vocalis.server.reference_audio import ReferenceResolver
from vocalis.server.synthesizer_service import SynthesizerService
from vocalis.server.voice_catalog import VoiceCatalog
from vocalis.server.voices_service import VoicesService
from vocalis.stages.runtime.freed_memory import malloc_trim
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

SERVICE_NAMES = (
    synthesizer_pb2.DESCRIPTOR.services_by_name["Synthesizer"].full_name,
    voices_pb2.DESCRIPTOR.services_by_name["Voices"].full_name,
    models_pb2.DESCRIPTOR.services_by_name["Models"].full_name,
    metrics_pb2.DESCRIPTOR.services_by_name["Metrics"].full_name,
)


class GrpcServer:
    """A started grpc.aio server, its health servicer, lifecycle and metrics."""

    def __init__(
        self, server: grpc.aio.Server, health_servicer: health.aio.HealthServicer, port: int, lifecycle: Lifecycle, metrics: ServerMetrics
    ) -> None:
        self.server = server
        self.health = health_servicer
        self.port = port
        self.lifecycle = lifecycle
        self.metrics = metrics

    async def ready(self) -> None:
        """The model is loaded and warm: take sessions, report SERVING."""
        self.lifecycle.state = State.SERVING
        await self.health.set(STARTUP, health_pb2.HealthCheckResponse.SERVING)  # Watch on the probe names; Check computes them
        await self.set_serving(True)

    async def drain(self, delay: float, grace: float) -> bool:
        """Leave in two steps: report NOT_SERVING at once but admit new sessions for `delay` s, the time the proxies'
        health checks take to stop sending (what they send meanwhile is served, not refused); then refuse new
        sessions and wait up to `grace` s for the running ones. True when they all finished."""
        self.lifecycle.state = State.DRAINING
        await self.set_serving(False)
        await asyncio.sleep(delay)
        self.lifecycle.state = State.STOPPING
        return await self.lifecycle.wait_idle(grace)

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *SERVICE_NAMES, READY):
            await self.health.set(name, status)

    async def stop(self, grace: float | None = None) -> None:
        await self.set_serving(False)
        await self.server.stop(grace)


async def start_grpc_server(engine: Engine, config: ServerConfig, catalog: VoiceCatalog) -> GrpcServer:
    """Start listening, NOT_SERVING until ready() is called (after warm-up)."""
    max_bytes = config.limits.max_message_bytes
    trimmer = HeapTrimmer(
        lambda: lifecycle.in_flight == 0, malloc_trim(), config.heap_trim_after_s, config.heap_trim_above_mib * 1024 * 1024
    )
    lifecycle = Lifecycle(config.limits.max_sessions_per_key, config.retry_after_s, on_idle=trimmer.went_idle)
    metrics = ServerMetrics(engine)
    metrics.registry.register(AdmissionCollector(lifecycle, engine))
    security = config.security
    interceptors = [
        MetricsInterceptor(metrics),
        ApiKeyInterceptor(
            ApiKeys(security.api_keys),
            open_health=security.open_health,
            open_metrics=security.open_metrics,
            open_reflection=security.reflection == "open",
        ),
        LifecycleInterceptor(lifecycle),
        MalformedMessageInterceptor(),  # innermost: it replaces the deserializers the others pass on
    ]
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)],
    )
    references = ReferenceResolver(catalog, config.voices)
    synthesizer_pb2_grpc.add_SynthesizerServicer_to_server(SynthesizerService(engine, config.limits, references, config.strict_fields), server)
    voices_pb2_grpc.add_VoicesServicer_to_server(VoicesService(catalog, config.voices), server)
    models_pb2_grpc.add_ModelsServicer_to_server(ModelsService(engine, config.limits.max_input_chars), server)
    metrics_pb2_grpc.add_MetricsServicer_to_server(MetricsService(metrics), server)
    health_servicer = ProbingHealthServicer(lifecycle, engine)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if security.reflection != "off":
        reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    if security.tls:
        credentials = grpc.ssl_server_credentials([(security.tls_key.read_bytes(), security.tls_cert.read_bytes())])  # type: ignore[union-attr]
        port = server.add_secure_port(config.grpc_address, credentials)
    else:
        port = server.add_insecure_port(config.grpc_address)
    if port == 0:
        raise OSError(f"cannot listen on {config.grpc_address}")
    await server.start()
    running = GrpcServer(server, health_servicer, port, lifecycle, metrics)
    await running.set_serving(False)
    await health_servicer.set(LIVE, health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(STARTUP, health_pb2.HealthCheckResponse.NOT_SERVING)
    return running
