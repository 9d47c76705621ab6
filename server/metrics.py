"""Prometheus metrics of a serving process, on a registry of its own.

Engine-side figures (time to first audio, real-time factor, queue depth, running
sequences, batch sizes) are only known in the server process; the gateway fetches
this exposition over gRPC (the Metrics service) and serves it at GET /metrics.
"""

from __future__ import annotations

import asyncio

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from vocalis.server.engine import Engine, UtteranceStats
from vocalis.stages.api.model import LoadedModel
from vocalis.tts.v1 import metrics_pb2, metrics_pb2_grpc

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ABORT_REASONS = {"CANCELLED": "cancelled", "DEADLINE_EXCEEDED": "deadline", "UNAVAILABLE": "unavailable"}
DEADLINE_SKEW_S = 0.1
"""A cancel this close to the call's deadline is the deadline: a client whose deadline passes mid-stream resets the
stream itself, and the reset reaches the server just before the server's copy of that deadline (counted from when the
call arrived: later by the one-way latency) has passed."""


class ServerMetrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry()
        self.engine = engine
        self.ttfa = Histogram(
            "vocalis_time_to_first_audio_seconds", "Time from an utterance entering the engine to its first audio.",
            ["model"], registry=self.registry, buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10),
        )
        self.rtf = Histogram(
            "vocalis_real_time_factor", "Synthesis time divided by audio duration, per utterance.",
            ["model"], registry=self.registry, buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5),
        )
        self.audio_seconds = Counter("vocalis_audio_seconds", "Seconds of audio synthesized.", ["model"], registry=self.registry)
        self.requests = Counter(
            "vocalis_requests", "Finished RPCs by method and gRPC status.", ["method", "status"], registry=self.registry
        )
        self.aborted = Counter(
            "vocalis_aborted_streams", "Sessions that ended before SessionDone, by reason.", ["reason"], registry=self.registry
        )
        self.batch_size = Histogram(
            "vocalis_batch_size", "Requests in one step of a stage.", ["model", "stage"], registry=self.registry,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        )
        self.registry.register(_EngineCollector(engine))
        engine.on_utterance = self.utterance_done
        for model in engine.models.values():
            model.pipeline.observe(lambda stage, size, name=model.name: self.batch_size.labels(name, stage).observe(size))

    def utterance_done(self, model: LoadedModel, stats: UtteranceStats) -> None:
        audio_s = stats.samples / model.capabilities.sample_rate
        self.ttfa.labels(model.name).observe(stats.time_to_first_audio_s)
        if audio_s > 0:
            self.rtf.labels(model.name).observe(stats.synthesis_s / audio_s)
        self.audio_seconds.labels(model.name).inc(audio_s)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector:
    """Gauges read from the engine at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self):  # -> Iterator[Metric]
        queued = GaugeMetricFamily("vocalis_queue_depth", "Utterances admitted and not finished, per model.", labels=["model"])
        running = GaugeMetricFamily("vocalis_running_sequences", "Requests each stage holds.", labels=["model", "stage"])
        cache_labels = ["model", "stage", "cache"]
        hits = CounterMetricFamily("vocalis_stage_cache_hits", "Lookups that found a stage's kept work (a voice's "
                                   "primed prompt, an encoded reference clip).", labels=cache_labels)
        misses = CounterMetricFamily("vocalis_stage_cache_misses", "Lookups that computed that work.", labels=cache_labels)
        entries = GaugeMetricFamily("vocalis_stage_cache_entries", "Entries a stage's cache keeps.", labels=cache_labels)
        held = GaugeMetricFamily("vocalis_stage_cache_bytes", "Bytes a stage's cache holds.", labels=cache_labels)
        for model in self.engine.models.values():
            queued.add_metric([model.name], self.engine.outstanding(model))
            for stage, count in model.pipeline.running().items():
                running.add_metric([model.name, stage], count)
            for (stage, cache), stats in model.pipeline.caches().items():
                labels = [model.name, stage, cache]
                hits.add_metric(labels, stats.hits)
                misses.add_metric(labels, stats.misses)
                entries.add_metric(labels, stats.entries)
                held.add_metric(labels, stats.nbytes)
        yield from (queued, running, hits, misses, entries, held)


class MetricsService(metrics_pb2_grpc.MetricsServicer):
    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    async def GetMetrics(self, request: metrics_pb2.GetMetricsRequest, context: grpc.aio.ServicerContext) -> metrics_pb2.GetMetricsResponse:
        return metrics_pb2.GetMetricsResponse(text=self.metrics.exposition().decode(), content_type=CONTENT_TYPE)


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every finished RPC by method and final status."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(self, continuation, details):  # noqa: ANN001, ANN201
        handler = await continuation(details)
        if handler is None or details.method.startswith(("/grpc.health.", "/grpc.reflection.")):
            return handler
        method = details.method.rsplit("/", 1)[-1]
        count = self.metrics.requests
        aborted = self.metrics.aborted

        def status_of(context: grpc.aio.ServicerContext, error: BaseException | None) -> str:
            if isinstance(error, asyncio.CancelledError):
                remaining = context.time_remaining()
                return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= DEADLINE_SKEW_S else "CANCELLED"
            code = context.code()
            if code is None:
                return "UNKNOWN" if error is not None and not isinstance(error, grpc.aio.AbortError) else "OK"
            return code.name if isinstance(code, grpc.StatusCode) else str(code)

        if handler.response_streaming:
            inner = handler.stream_stream if handler.request_streaming else handler.unary_stream

            async def streaming(request, context):  # noqa: ANN001
                error = None
                try:
                    async for response in inner(request, context):
                        yield response
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    status = status_of(context, error)
                    count.labels(method, status).inc()
                    if status != "OK":
                        aborted.labels(ABORT_REASONS.get(status, "error")).inc()

            factory = grpc.stream_stream_rpc_method_handler if handler.request_streaming else grpc.unary_stream_rpc_method_handler
            return factory(streaming, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        inner = handler.stream_unary if handler.request_streaming else handler.unary_unary

        async def unary(request, context):  # noqa: ANN001
            error = None
            try:
                return await inner(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                count.labels(method, status_of(context, error)).inc()

        factory = grpc.stream_unary_rpc_method_handler if handler.request_streaming else grpc.unary_unary_rpc_method_handler
        return factory(unary, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
