"""OpenTelemetry tracing: one trace per turn, carried across Kafka in record headers.

The gateway starts a turn's root span and injects its W3C ``traceparent`` into the
headers of the user message; every agent and Synth extracts it and opens its own
span as a child, injecting again into what it publishes. So one trace spans the
gateway, the agents and Synth, however many hops and partitions lie in between.

Export is opt-in: only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set do we install
an SDK tracer provider with an OTLP exporter. Without it nothing is installed and
the API's no-op provider stays in place, so tracing costs nothing in tests and on
a laptop. Incoming trace context is still passed on unchanged either way.

Personal data: span attributes carry the turn id and the agent name, never a user
id or message text. Traces leave the process for a collector we may not control,
and a user id in a span is personal data in someone else's storage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "ENDPOINT_ENV",
    "build_tracer_provider",
    "extract_context",
    "inject_headers",
    "otlp_exporter_from_env",
    "setup_tracing",
    "turn_span",
]

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_INSTRUMENTATION = "coachbus"

# W3C trace context only (traceparent, tracestate), not the global propagator:
# the default one also sends W3C baggage, and baggage is free-form key/values that
# would travel in every Kafka record; nothing we need, and a place personal data leaks.
_PROPAGATOR = TraceContextTextMapPropagator()

_installed = False


def otlp_exporter_from_env(environ: Mapping[str, str] | None = None) -> SpanExporter | None:
    """The OTLP span exporter the environment asks for, or ``None`` when it asks for none.

    The protocol follows the standard ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``
    variables; ``http/protobuf`` is the specification's default. The exporters read
    endpoint, headers and TLS settings from the same standard variables themselves.
    """
    env = os.environ if environ is None else environ
    if not env.get(ENDPOINT_ENV, "").strip():
        return None
    protocol = next((env[name] for name in _PROTOCOL_ENVS if env.get(name)), "http/protobuf")
    # Imported here: the exporters pull in protobuf (and grpc), which a process that
    # exports nothing should not pay for at start-up.
    if protocol.strip().lower() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter()


def build_tracer_provider(
    service: str, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """An SDK tracer provider for ``service`` exporting over OTLP, or ``None`` when the
    environment configures no OTLP endpoint."""
    exporter = otlp_exporter_from_env(environ)
    if exporter is None:
        return None
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    # Batching keeps export off the hot path: a span end is a queue append.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def setup_tracing(service: str) -> None:
    """Install tracing for this process when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

    Does nothing otherwise, and nothing on a second call: OpenTelemetry lets a
    process set its global tracer provider only once.
    """
    global _installed
    if _installed:
        return
    provider = build_tracer_provider(service)
    if provider is None:
        return
    trace.set_tracer_provider(provider)
    _installed = True


def inject_headers(headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``headers`` with the current trace context (``traceparent``) added.

    A copy so that a caller's headers dict, perhaps shared between publishes, is
    never changed behind its back. Without a valid current span nothing is added.
    """
    carrier: dict[str, str] = dict(headers or {})
    _PROPAGATOR.inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str | bytes] | None) -> Context:
    """The trace context carried in Kafka record headers.

    Accepts decoded (``str``) values as FastStream hands them over and raw
    ``bytes`` values as aiokafka does. Header names are matched case-insensitively,
    as W3C trace context asks for. Missing or malformed headers give an empty
    context, so a span opened in it starts a new trace instead of failing.
    """
    carrier: dict[str, str] = {}
    for key, value in (headers or {}).items():
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        carrier[key.lower()] = text
    return _PROPAGATOR.extract(carrier)


@contextmanager
def turn_span(
    name: str,
    turn_id: str,
    agent: str,
    *,
    parent: Context | None = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    tracer_provider: trace.TracerProvider | None = None,
) -> Iterator[trace.Span]:
    """Open ``name`` as the current span for one turn's work in ``agent``.

    ``parent`` is usually ``extract_context(message.headers)``; without it the span
    continues the current context (or starts the turn's trace, in the gateway).
    Only the turn id and the agent are recorded: see the module docstring for why
    no user id. Exceptions are recorded on the span and re-raised.
    """
    tracer = trace.get_tracer(_INSTRUMENTATION, tracer_provider=tracer_provider)
    attributes = {"coachbus.turn_id": turn_id, "coachbus.agent": agent}
    with tracer.start_as_current_span(
        name, context=parent, kind=kind, attributes=attributes
    ) as span:
        yield span
