"""Gateway pieces without a broker: keys, rate limits, the turn store."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from coachbus.contracts import Reply
from coachbus.settings import ApiKey
from services.gateway.auth import KeyRing, RateLimits
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit


def test_keyring_resolves_bearer_tokens_only() -> None:
    ring = KeyRing(
        [
            ApiKey(user_id="a", key=SecretStr("k1")),
            ApiKey(user_id="r", key=SecretStr("k2"), reviewer=True),
        ]
    )
    assert ring.resolve("Bearer k1") is not None
    assert ring.resolve("bearer k2").reviewer is True  # type: ignore[union-attr]
    for bad in (None, "", "k1", "Basic k1", "Bearer ", "Bearer k3"):
        assert ring.resolve(bad) is None


def test_rate_limit_bucket_refills() -> None:
    limits = RateLimits(per_minute=3)
    assert [limits.take("u", now=0.0) for _ in range(3)] == [None, None, None]
    wait = limits.take("u", now=0.0)
    assert wait is not None and 19 < wait <= 20  # one token every 20 s
    assert limits.take("other", now=0.0) is None  # buckets are per user
    assert limits.take("u", now=21.0) is None


async def test_turn_store_dedupes_and_is_bounded() -> None:
    store = TurnStore(capacity=2)
    reply = Reply(turn_id="t1", session_id="s", user_id="u", kind="coach", text="x")
    store.open("t1", "u", "s")
    await store.add_reply(reply)
    await store.add_reply(reply)
    view = store.get("t1", "u")
    assert view is not None and [e for e, _ in view.events] == ["coach"]
    assert store.get("t1", "someone-else") is None
    store.open("t2", "u", "s")
    store.open("t3", "u", "s")
    assert store.get("t1", "u") is None  # the oldest turn was evicted
    assert len(store) == 2


def test_cors_allows_configured_origins_only() -> None:
    from fastapi.testclient import TestClient

    from coachbus.settings import CoachbusSettings
    from services.gateway.api import create_api
    from services.gateway.review import ReviewQueue

    async def publish(_message: object) -> None:
        return None

    settings = CoachbusSettings(cors_origins=["https://app.example"])  # type: ignore[arg-type]
    api = create_api(settings, KeyRing([]), TurnStore(), publish, ReviewQueue(), publish)  # type: ignore[arg-type]
    client = TestClient(api)
    headers = {"Access-Control-Request-Method": "POST"}
    ok = client.options("/v1/me", headers={"Origin": "https://app.example", **headers})
    assert ok.headers.get("access-control-allow-origin") == "https://app.example"
    bad = client.options("/v1/me", headers={"Origin": "https://evil.example", **headers})
    assert "access-control-allow-origin" not in bad.headers


def test_rate_limited_send_gets_429_with_retry_after() -> None:
    from fastapi.testclient import TestClient

    from coachbus.settings import CoachbusSettings
    from services.gateway.api import create_api
    from services.gateway.review import ReviewQueue

    sent: list[object] = []

    async def publish(message: object) -> None:
        sent.append(message)

    settings = CoachbusSettings(rate_limit_per_minute=2)
    ring = KeyRing([ApiKey(user_id="a", key=SecretStr("k1"))])
    api = create_api(settings, ring, TurnStore(), publish, ReviewQueue(), publish)  # type: ignore[arg-type]
    client = TestClient(api)
    auth = {"Authorization": "Bearer k1"}
    codes = [
        client.post("/v1/sessions/s/messages", json={"text": "hi"}, headers=auth).status_code
        for _ in range(3)
    ]
    assert codes == [202, 202, 429]
    blocked = client.post("/v1/sessions/s/messages", json={"text": "hi"}, headers=auth)
    assert int(blocked.headers["Retry-After"]) >= 1
    assert blocked.headers["content-type"].startswith("application/problem+json")
    assert len(sent) == 2  # nothing published for refused requests


async def test_turns_in_flight_count_sent_turns_until_their_final(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from services.gateway import turns

    store = TurnStore(capacity=3)
    store.open("t1", "u", "s", sent=True)
    store.open("t2", "u", "s", sent=True)
    store.open("t3", "u", "s")  # seen on the feed, sent by another gateway
    assert store.in_flight == 2
    await store.add_reply(
        Reply(turn_id="t1", session_id="s", user_id="u", kind="final", text="done")
    )
    assert store.in_flight == 1
    # Evicted from the cache: no longer counted.
    store.open("t4", "u", "s")
    store.open("t5", "u", "s")
    assert store.in_flight == 0
    # A final that never comes stops counting after the limit.
    store.open("t6", "u", "s", sent=True)
    monkeypatch.setattr(turns, "IN_FLIGHT_LIMIT_S", -1.0)
    assert store.in_flight == 0


async def test_turn_store_keeps_json_once_and_is_bounded_in_bytes() -> None:
    from coachbus.contracts import PlasticityResult
    from services.plasticity import logic
    from tests.unit.agents.helpers import msg

    store = TurnStore(capacity=100, max_bytes=6_000)
    message = msg("I want to run three times a week.", turn="t0", session="s", user="u")
    result = PlasticityResult.for_message(message, logic.plan(None, message), started=0.0)
    await store.add_result(result)
    view = store.get("t0", "u")
    assert view is not None
    # The agent's JSON is the very string the event stream replays: no second copy.
    assert view.agents["plasticity"] is view.events[0][1]
    assert view.agent("plasticity") == result
    assert view.as_json()["agents"]["plasticity"]["turn_id"] == "t0"
    for i in range(1, 40):
        await store.add_reply(
            Reply(turn_id=f"t{i}", session_id="s", user_id="u", kind="coach", text="x" * 400)
        )
    assert store.bytes_held <= 6_000
    assert store.get("t0", "u") is None  # the oldest went first
    assert store.get("t39", "u") is not None
    assert store.bytes_held == sum(v.size for v in store.turns_of("u"))


def _final_without_all_but_plasticity() -> Reply:
    """Turn t1's final, built when only Plasticity had reported."""
    return Reply(
        turn_id="t1",
        session_id="s",
        user_id="u",
        kind="final",
        text="done",
        degraded=True,
        missing_agents=["shadow", "persona", "stability", "coach"],
    )


async def test_final_event_waits_for_the_results_it_was_built_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from coachbus.contracts import PlasticityResult
    from services.gateway import turns
    from services.plasticity import logic
    from tests.unit.agents.helpers import msg

    store = TurnStore()
    message = msg("I want to run three times a week.", turn="t1", session="s", user="u")
    store.open("t1", "u", "s", sent=True)
    # The final overtook Plasticity's result; the others were missing by its deadline.
    await store.add_reply(_final_without_all_but_plasticity())
    view = store.get("t1", "u")
    assert view is not None and view.final is not None
    assert [e for e, _ in view.events] == []  # held, not shown
    assert store.in_flight == 0  # but the turn is answered
    result = PlasticityResult.for_message(message, logic.plan(None, message), started=0.0)
    await store.add_result(result)
    assert [e for e, _ in view.events] == ["agent", "final"]
    assert view.grace_task is None  # its grace timer is gone with it

    # A result that never comes holds the final no longer than the grace.
    monkeypatch.setattr(turns, "FINAL_GRACE_S", 0.01)
    store.open("t2", "u", "s", sent=True)
    await store.add_reply(Reply(turn_id="t2", session_id="s", user_id="u", kind="final", text="x"))
    late = store.get("t2", "u")
    assert late is not None and late.events == []
    await asyncio.sleep(0.05)
    assert [e for e, _ in late.events] == ["final"]


def test_sending_a_turn_tells_the_feed_at_once() -> None:
    store = TurnStore()
    calls: list[int] = []
    store.on_sent = lambda: calls.append(store.in_flight)
    store.open("t1", "u", "s")  # seen on the feed: not ours
    store.open("t2", "u", "s", sent=True)
    assert calls == [1]


async def test_feed_handles_replies_after_the_agent_results_of_the_same_batch() -> None:
    """Within one fetched batch the final is handled after the results it was built
    from, whatever order the consumer returned the topics in, so the store need not
    hold it (the hold is what keeps the order when they come in different batches)."""
    from types import SimpleNamespace

    from aiokafka import TopicPartition

    from coachbus.bus.codec import encode
    from coachbus.contracts import AgentResult, PlasticityResult
    from coachbus.settings import KafkaSettings
    from services.gateway.feed import ReplyFeed
    from services.gateway.review import ReviewQueue
    from services.plasticity import logic
    from tests.unit.agents.helpers import msg

    message = msg("I want to run three times a week.", turn="t1", session="s", user="u")
    result = PlasticityResult.for_message(message, logic.plan(None, message), started=0.0)
    final = _final_without_all_but_plasticity()

    class OneBatch:
        """A consumer whose first fetch returns the replies topic before the agent's."""

        def __init__(self) -> None:
            self.fetches = 0

        async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[object]]:
            self.fetches += 1
            if self.fetches > 1:
                await asyncio.sleep(3600)
            return {
                TopicPartition("replies", 0): [SimpleNamespace(value=encode(final))],
                TopicPartition("agent.plasticity", 0): [SimpleNamespace(value=encode(result))],
            }

    calls: list[str] = []

    class Recording(TurnStore):
        async def add_reply(self, reply: Reply) -> None:
            calls.append(reply.kind)
            await super().add_reply(reply)

        async def add_result(self, result: AgentResult) -> None:
            calls.append(result.agent)
            await super().add_result(result)

    store = Recording()
    store.open("t1", "u", "s", sent=True)
    feed = ReplyFeed(
        KafkaSettings(),
        store,
        ReviewQueue(),
        replies_topic="replies",
        review_topic="human-review",
        agent_topics=["agent.plasticity"],
    )
    consumer = OneBatch()
    task = asyncio.create_task(feed._run(consumer))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(5):
            while consumer.fetches < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    # The result first: the final is never held (no grace timer started for it).
    assert calls == ["plasticity", "final"]
    view = store.get("t1", "u")
    assert view is not None
    assert [e for e, _ in view.events] == ["agent", "final"]
