"""One trace per turn: the gateway, the five agents and Synth all report spans of
the same trace to an OTLP collector (a tiny one in this test)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from coachbus.embedded.broker import free_port
from coachbus.embedded.stack import Stack, StackConfig
from tests.integration.conftest import KEYS, RunningStack, events, send

pytestmark = [pytest.mark.broker, pytest.mark.slow]


class Collector:
    """Receives OTLP/HTTP protobuf exports and indexes spans by turn id."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[str, bytes]]] = defaultdict(list)

    async def traces(self, request: Request) -> Response:
        export = trace_service_pb2.ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        for resource_spans in export.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                "?",
            )
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    turn = next(
                        (
                            a.value.string_value
                            for a in span.attributes
                            if a.key == "coachbus.turn_id"
                        ),
                        None,
                    )
                    if turn:
                        self.spans[turn].append((service, span.trace_id))
        return Response(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())


async def _serve(collector: Collector, port: int) -> AsyncIterator[None]:
    app = Starlette(routes=[Route("/v1/traces", collector.traces, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


@pytest.mark.heavy
async def test_one_trace_spans_the_whole_turn(kafka_bootstrap: str, tmp_path: Path) -> None:
    collector = Collector()
    port = free_port()
    prefix = f"tr{uuid.uuid4().hex[:8]}."
    stack = Stack(
        StackConfig.ephemeral(
            bootstrap=kafka_bootstrap,
            log_dir=tmp_path,
            env={
                "COACHBUS_TOPIC_PREFIX": prefix,
                "COACHBUS_PARTITIONS": "3",
                "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in KEYS.items()),
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": "200",  # export quickly, so the test is short
            },
        )
    )
    async for _ in _serve(collector, port):
        await stack.start()
        try:
            rs = RunningStack(stack, stack.gateway_url, prefix, kafka_bootstrap)
            async with httpx.AsyncClient(timeout=30) as client:
                turn_id = await send(client, rs, "alice", "I want to meditate every morning.")
                await events(client, rs, "alice", turn_id)
            expected = {
                f"coachbus-{s}"
                for s in (
                    "gateway",
                    "shadow",
                    "persona",
                    "plasticity",
                    "stability",
                    "coach",
                    "synth",
                )
            }
            async with asyncio.timeout(30):
                while {s for s, _ in collector.spans[turn_id]} < expected:
                    await asyncio.sleep(0.2)
        finally:
            await stack.stop()
    spans = collector.spans[turn_id]
    assert {s for s, _ in spans} >= expected
    assert len({trace_id for _, trace_id in spans}) == 1, "the turn's spans are one trace"
