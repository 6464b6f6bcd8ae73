"""The review webhook against a local HTTP server: what it sends (id, severity, age,
signed; never the person's words), its retries, its failures, and that one call is
made per item however many replicas saw it."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
import uvicorn
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from coachbus.contracts import HumanReviewRequest, ReviewAction, new_turn_id
from coachbus.embedded.broker import free_port
from coachbus.metrics import REVIEW_WEBHOOK
from coachbus.safety.helplines import Helplines
from services.gateway import review_content
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import LoopbackBus, ReviewBus, ReviewDesk
from services.gateway.review_settings import ReviewSettings
from services.gateway.review_webhook import SIGNATURE_HEADER, Notice, ReviewWebhook
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit

SECRET = SecretStr("w" * 40)
WORDS = "I can't go on, I want to end it tonight."


@dataclass
class Receiver:
    url: str
    # Status codes to answer with, in turn; 200 once they run out.
    script: list[int] = field(default_factory=list)
    calls: list[tuple[bytes, dict[str, str]]] = field(default_factory=list)


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    port = free_port()
    state = Receiver(f"http://127.0.0.1:{port}/hook")

    async def hook(request: Request) -> Response:
        state.calls.append((await request.body(), dict(request.headers)))
        status = state.script.pop(0) if state.script else 200
        return Response(status_code=status)

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        yield state
    finally:
        server.should_exit = True
        await serving


def count(outcome: str) -> float:
    value: float = REVIEW_WEBHOOK.labels(outcome)._value.get()
    return value


async def test_a_notice_is_signed_and_carries_no_words(receiver: Receiver) -> None:
    hook = ReviewWebhook(receiver.url, SECRET, backoff_s=0.01)
    try:
        ok = count("ok")
        assert await hook.send(Notice("item-1", "critical", 12.34))
    finally:
        await hook.close()
    ((body, headers),) = receiver.calls
    assert json.loads(body) == {"item_id": "item-1", "severity": "critical", "age_s": 12.3}
    expected = hmac.new(SECRET.get_secret_value().encode(), body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER.lower()] == f"sha256={expected}"
    assert count("ok") == ok + 1


async def test_failures_are_retried_with_backoff_then_counted(receiver: Receiver) -> None:
    hook = ReviewWebhook(receiver.url, SECRET, attempts=3, backoff_s=0.05)
    try:
        receiver.script = [500, 503]
        retried, failed = count("retried"), count("failed")
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await hook.send(Notice("item-2", "high", 1.0))
        # Two failed attempts waited 0.05 s, then 0.1 s: backing off.
        assert loop.time() - started >= 0.15
        assert len(receiver.calls) == 3
        assert count("retried") == retried + 2 and count("failed") == failed

        receiver.script = [500, 500, 500]
        assert not await hook.send(Notice("item-3", "high", 1.0))
        assert count("failed") == failed + 1
    finally:
        await hook.close()


async def test_an_unreachable_receiver_is_a_counted_failure_and_never_blocks() -> None:
    hook = ReviewWebhook(f"http://127.0.0.1:{free_port()}/hook", SECRET, attempts=2, backoff_s=0)
    try:
        failed = count("failed")
        loop = asyncio.get_running_loop()
        started = loop.time()
        hook.submit(Notice("item-4", "critical", 0.0))  # returns at once
        assert loop.time() - started < 0.05
        async with asyncio.timeout(10):
            await hook.drain()
        assert count("failed") == failed + 1
    finally:
        await hook.close()


class SharedLog:
    """One review log read by several replicas, in one order."""

    def __init__(self) -> None:
        self.desks: list[ReviewDesk] = []
        self.lock = asyncio.Lock()

    async def action(self, action: ReviewAction) -> None:
        async with self.lock:
            for desk in self.desks:
                await desk.fold(action, live=True)


async def test_one_call_per_new_urgent_item_however_many_replicas(receiver: Receiver) -> None:
    log = SharedLog()
    hooks = [ReviewWebhook(receiver.url, SECRET, backoff_s=0.01) for _ in range(3)]
    sink = LoopbackBus()
    for hook in hooks:
        desk = ReviewDesk(
            ReviewQueue(),
            TurnStore(),
            ReviewBus(action=log.action, audit=sink.audit, reply=sink.reply),
            settings=ReviewSettings(),
            content=review_content.shipped(),
            helplines=Helplines.configured(None, None),
            webhook=hook,
        )
        log.desks.append(desk)

    def escalation(severity: str) -> HumanReviewRequest:
        return HumanReviewRequest(
            turn_id=new_turn_id(),
            session_id="s",
            user_id="bob",
            decision="risk_screen",
            reason="test",
            severity=severity,  # type: ignore[arg-type]
            excerpt=WORDS,
        )

    urgent, mild, reread = escalation("critical"), escalation("moderate"), escalation("high")
    try:
        for desk in log.desks:
            await desk.add_request(urgent, live=True)
            await desk.add_request(mild, live=True)
            await desk.add_request(reread, live=False)  # read back after a restart
        async with asyncio.timeout(5):
            while not receiver.calls:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # a second call would have come by now
            for hook in hooks:
                await hook.drain()
        ((body, _headers),) = receiver.calls
        sent = json.loads(body)
        assert sent["item_id"] == urgent.turn_id and sent["severity"] == "critical"
        assert set(sent) == {"item_id", "severity", "age_s"}
        assert WORDS not in body.decode()
        # Every replica agrees on who called.
        notifiers = {desk.ledger.get(urgent.turn_id).notifier for desk in log.desks}  # type: ignore[union-attr]
        assert len(notifiers) == 1
    finally:
        for desk in log.desks:
            await desk.close()
