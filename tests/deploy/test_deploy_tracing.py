"""coachbus.tracing: W3C trace context through Kafka headers, opt-in OTLP export."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpExporter,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coachbus import tracing

pytestmark = pytest.mark.unit


@pytest.fixture
def provider_and_spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    # A local provider: the global one can be set only once per process.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_inject_extract_round_trip(
    provider_and_spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = provider_and_spans
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("gateway") as span:
        original = {"content-type": "application/json"}
        headers = tracing.inject_headers(original)
    assert original == {"content-type": "application/json"}, "caller's dict untouched"
    assert headers["content-type"] == "application/json"
    sent = span.get_span_context()
    assert (
        headers["traceparent"]
        == f"00-{sent.trace_id:032x}-{sent.span_id:016x}-{sent.trace_flags:02x}"
    )

    # As aiokafka hands them over: bytes values.
    raw = {key: value.encode() for key, value in headers.items()}
    for carrier in (headers, raw):
        received = trace.get_current_span(tracing.extract_context(carrier)).get_span_context()
        assert received.is_remote
        assert (received.trace_id, received.span_id) == (sent.trace_id, sent.span_id)


def test_one_trace_across_hops(
    provider_and_spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """gateway -> agent -> synth, each hop through headers only, is one trace."""
    provider, exporter = provider_and_spans
    with tracing.turn_span("gateway.accept", "turn-1", "gateway", tracer_provider=provider):
        to_agent = tracing.inject_headers({})
    with tracing.turn_span(
        "shadow.handle",
        "turn-1",
        "shadow",
        parent=tracing.extract_context(to_agent),
        kind=trace.SpanKind.CONSUMER,
        tracer_provider=provider,
    ):
        to_synth = tracing.inject_headers({})
    with tracing.turn_span(
        "synth.join",
        "turn-1",
        "synth",
        parent=tracing.extract_context(to_synth),
        tracer_provider=provider,
    ):
        pass
    spans: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    assert len({s.context.trace_id for s in spans}) == 1
    assert by_name["shadow.handle"].parent is not None
    assert by_name["shadow.handle"].parent.span_id == by_name["gateway.accept"].context.span_id
    assert by_name["synth.join"].parent is not None
    assert by_name["synth.join"].parent.span_id == by_name["shadow.handle"].context.span_id
    for s in spans:
        attributes = dict(s.attributes or {})
        assert attributes["coachbus.turn_id"] == "turn-1"
        assert not any("user" in key for key in attributes), "no user ids in spans"


def test_missing_or_malformed_headers_start_a_new_trace() -> None:
    for headers in (None, {}, {"traceparent": "garbage"}, {"traceparent": b"\xff\xfe"}):
        span = trace.get_current_span(tracing.extract_context(headers))
        assert not span.get_span_context().is_valid


def test_no_span_no_header() -> None:
    assert "traceparent" not in tracing.inject_headers({"a": "b"})


def test_baggage_is_not_propagated(
    provider_and_spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    from opentelemetry import baggage, context

    provider, _ = provider_and_spans
    token = context.attach(baggage.set_baggage("user_id", "u-42"))
    try:
        with provider.get_tracer("test").start_as_current_span("x"):
            headers = tracing.inject_headers({})
    finally:
        context.detach(token)
    assert "baggage" not in headers
    assert "u-42" not in str(headers)


def test_turn_span_records_errors(
    provider_and_spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = provider_and_spans
    with (
        pytest.raises(RuntimeError),
        tracing.turn_span("coach.reply", "turn-2", "coach", tracer_provider=provider),
    ):
        raise RuntimeError("llm down")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.events[0].name == "exception"


def test_no_exporter_without_endpoint() -> None:
    assert tracing.otlp_exporter_from_env({}) is None
    assert tracing.otlp_exporter_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}) is None
    assert tracing.build_tracer_provider("shadow", {}) is None


def test_otlp_exporter_when_endpoint_is_set() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    http = tracing.otlp_exporter_from_env(env)
    assert isinstance(http, HttpExporter)
    grpc = tracing.otlp_exporter_from_env({**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert isinstance(grpc, GrpcExporter)
    for exporter in (http, grpc):
        exporter.shutdown()

    provider = tracing.build_tracer_provider("shadow", env)
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == "shadow"
        processors = provider._active_span_processor._span_processors
        assert len(processors) == 1
        assert isinstance(processors[0].span_exporter, HttpExporter)  # type: ignore[attr-defined]
    finally:
        provider.shutdown()


def test_setup_tracing_is_a_no_op_without_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setattr(tracing, "_installed", False)
    calls: list[object] = []
    monkeypatch.setattr(trace, "set_tracer_provider", calls.append)
    tracing.setup_tracing("shadow")
    assert calls == []


def test_setup_tracing_installs_once_with_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setattr(tracing, "_installed", False)
    calls: list[TracerProvider] = []
    monkeypatch.setattr(trace, "set_tracer_provider", calls.append)
    tracing.setup_tracing("synth")
    tracing.setup_tracing("synth")
    try:
        (provider,) = calls
        assert provider.resource.attributes["service.name"] == "synth"
    finally:
        for provider in calls:
            provider.shutdown()
