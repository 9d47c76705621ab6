"""Liveness, start-up and readiness, as named services of the standard gRPC health service.

Kubernetes and load balancers ask three different questions, so each has its own name:
  vocalis.live     the process answers (its event loop runs): SERVING from the moment gRPC listens;
  vocalis.startup  the model is loaded and warmed up: SERVING from then on, drain included;
  vocalis.ready    send it work: warmed up, not draining, and every model below its admission limit.
A Check on one of them carries the admission state in trailing metadata (`x-vocalis-admission`, a small
JSON object), so whoever probes (the gateway's /ready, a balancer's agent) can prefer the least loaded replica.
The other names (""/each service) keep their meaning: SERVING while serving.
"""

from __future__ import annotations

import json

import grpc
from grpc_health.v1 import health, health_pb2
from prometheus_client.core import GaugeMetricFamily

from vocalis.server.engine import Engine
from vocalis.server.lifecycle import Lifecycle, State

LIVE = "vocalis.live"
STARTUP = "vocalis.startup"
READY = "vocalis.ready"
PROBES = (LIVE, STARTUP, READY)
ADMISSION_KEY = "x-vocalis-admission"


def admission(lifecycle: Lifecycle, engine: Engine) -> dict:
    """What the replica is doing now: its lifecycle state, sessions, and per-model utterances admitted against the limit."""
    return {
        "state": lifecycle.state.value,
        "sessions": lifecycle.in_flight,
        "limit": engine.max_queued_requests,
        "queued": {model.name: engine.outstanding(model) for model in engine.models.values()},
    }


def probe(service: str, lifecycle: Lifecycle, engine: Engine) -> bool:
    if service == LIVE:
        return True
    if service == STARTUP:
        return lifecycle.state is not State.STARTING
    full = any(engine.outstanding(model) >= engine.max_queued_requests for model in engine.models.values())
    return lifecycle.state is State.SERVING and not full


class ProbingHealthServicer(health.aio.HealthServicer):
    """The standard health servicer, answering the probe names from the live state instead of a stored status."""

    def __init__(self, lifecycle: Lifecycle, engine: Engine) -> None:
        super().__init__()
        self.lifecycle = lifecycle
        self.engine = engine

    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        if request.service not in PROBES:
            return await super().Check(request, context)
        context.set_trailing_metadata(((ADMISSION_KEY, json.dumps(admission(self.lifecycle, self.engine), separators=(",", ":"))),))
        serving = probe(request.service, self.lifecycle, self.engine)
        return health_pb2.HealthCheckResponse(
            status=health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )


class AdmissionCollector:
    """The admission state as Prometheus gauges, read at scrape time (for autoscalers and dashboards)."""

    def __init__(self, lifecycle: Lifecycle, engine: Engine) -> None:
        self.lifecycle = lifecycle
        self.engine = engine

    def collect(self):  # -> Iterator[Metric]
        ready = GaugeMetricFamily("vocalis_ready", "1 when the replica takes new work (the vocalis.ready probe), else 0.")
        ready.add_metric([], float(probe(READY, self.lifecycle, self.engine)))
        sessions = GaugeMetricFamily("vocalis_sessions_in_flight", "Synthesize sessions open on this replica.")
        sessions.add_metric([], self.lifecycle.in_flight)
        limit = GaugeMetricFamily("vocalis_admission_limit", "Utterances each model admits before RESOURCE_EXHAUSTED.", labels=["model"])
        for model in self.engine.models.values():
            limit.add_metric([model.name], self.engine.max_queued_requests)
        yield ready
        yield sessions
        yield limit
