"""Gateway pieces without a broker: keys, rate limits, the turn store."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
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
    from tests.fixtures.agents import msg

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
    from tests.fixtures.agents import msg

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
    from tests.fixtures.agents import msg

    message = msg("I want to run three times a week.", turn="t1", session="s", user="u")
    result = PlasticityResult.for_message(message, logic.plan(None, message), started=0.0)
    final = _final_without_all_but_plasticity()

    class OneBatch:
        """A consumer whose first fetch returns the replies topic before the agent's."""

        def __init__(self) -> None:
            self.fetches = 0

        def assignment(self) -> set[TopicPartition]:
            return set()  # nothing to check for a recreated topic

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


# The front door (services.gateway.ingress), driven as ASGI so each test sees exactly
# which body messages were read, and when.
FRONT_KEY = "k" * 40


class _Body:
    """An ASGI receive that hands out ``chunks`` and counts what was read."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.calls = 0
        # Body messages taken before the answer went out (set by _front_door).
        self.before_answer: int | None = None
        self.sent: list[dict[str, object]] | None = None

    async def __call__(self) -> dict[str, object]:
        if self.sent and self.before_answer is None:
            self.before_answer = self.calls
        self.calls += 1
        index = self.calls - 1
        if index >= len(self.chunks):
            return {"type": "http.disconnect"}
        return {
            "type": "http.request",
            "body": self.chunks[index],
            "more_body": index < len(self.chunks) - 1,
        }


async def _front_door(
    path: str, headers: dict[str, str], body: _Body, limit: int = 100
) -> tuple[int, dict[str, object], bytes | None]:
    import json

    from services.gateway.ingress import Ingress

    seen: list[bytes] = []

    async def app(scope: object, receive: object, send: object) -> None:
        message = await receive()  # type: ignore[operator]
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    sent: list[dict[str, object]] = []
    body.sent = sent

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    ring = KeyRing([ApiKey(user_id="alice", key=SecretStr(FRONT_KEY))])
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    await Ingress(app, keys=ring, limit=limit)(scope, body, send)  # type: ignore[arg-type]
    status = int(sent[0]["status"])  # type: ignore[call-overload]
    payload = json.loads(sent[1]["body"])  # type: ignore[arg-type]
    return status, payload, seen[0] if seen else None


@pytest.mark.parametrize("path", ["/v1/sessions/s/messages", "/v1/chat/completions"])
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", f"Basic {FRONT_KEY}"])
async def test_front_door_answers_401_before_reading_a_byte(
    path: str, authorization: str | None
) -> None:
    body = _Body([b"x" * 50] * 1000)
    headers = {"transfer-encoding": "chunked"}
    if authorization:
        headers["authorization"] = authorization
    status, payload, reached = await _front_door(path, headers, body)
    assert status == 401 and reached is None
    # Not one body message was taken before the answer; what followed was discarded
    # (a bounded drain, so the client can read the 401 instead of a reset).
    assert body.before_answer == 0
    assert body.calls == 1000
    if path == "/v1/chat/completions":  # OpenAI's error shape for OpenAI clients
        assert payload["error"]["code"] == "invalid_api_key"  # type: ignore[index]
    else:
        assert payload["status"] == 401


@pytest.mark.parametrize("path", ["/v1/sessions/s/messages", "/v1/chat/completions"])
async def test_front_door_counts_chunked_bytes_and_stops_at_the_limit(path: str) -> None:
    auth = {"authorization": f"Bearer {FRONT_KEY}", "transfer-encoding": "chunked"}
    body = _Body([b"x" * 30] * 1000)  # 30 000 bytes against a limit of 100
    status, payload, reached = await _front_door(path, auth, body)
    assert status == 413 and reached is None
    assert body.before_answer == 4  # 120 bytes: the first count over 100 answers
    code = payload["error"]["code"] if path == "/v1/chat/completions" else payload["status"]  # type: ignore[index]
    assert code in ("request_too_large", 413)


@pytest.mark.parametrize("path", ["/v1/sessions/s/messages", "/v1/chat/completions"])
async def test_front_door_refuses_a_declared_length_over_the_limit_unread(path: str) -> None:
    headers = {"authorization": f"Bearer {FRONT_KEY}", "content-length": "101"}
    body = _Body([b"x" * 101])
    status, _payload, reached = await _front_door(path, headers, body)
    assert (status, reached, body.before_answer) == (413, None, 0)


async def test_front_door_passes_a_body_at_the_limit_whole() -> None:
    headers = {"authorization": f"Bearer {FRONT_KEY}", "transfer-encoding": "chunked"}
    body = _Body([b"a" * 60, b"b" * 40])
    status, _payload, reached = await _front_door("/v1/sessions/s/messages", headers, body)
    assert (status, reached) == (200, b"a" * 60 + b"b" * 40)


async def test_front_door_lets_public_pages_and_preflights_through_without_a_key() -> None:
    status, _payload, reached = await _front_door("/", {}, _Body([b""]))
    assert (status, reached) == (200, b"")
    # Public pages are still held to the byte limit.
    status, _payload, reached = await _front_door("/", {}, _Body([b"x" * 60] * 3))
    assert (status, reached) == (413, None)


def _gateway_client(**settings: object) -> tuple[TestClient, FastAPI, list[object]]:
    from fastapi.testclient import TestClient

    from coachbus.settings import CoachbusSettings
    from services.gateway.api import create_api
    from services.gateway.review import ReviewQueue

    published: list[object] = []

    async def publish(message: object) -> None:
        published.append(message)

    config = CoachbusSettings(**settings)  # type: ignore[arg-type]
    ring = KeyRing([ApiKey(user_id="u" * 64, key=SecretStr(FRONT_KEY))])
    api = create_api(config, ring, TurnStore(), publish, ReviewQueue(), publish)
    return TestClient(api), api, published


def test_a_message_the_agents_would_dead_letter_is_never_published() -> None:
    from coachbus.bus.codec import encode
    from coachbus.settings import CoachbusSettings

    client, _api, published = _gateway_client()
    limit = CoachbusSettings().max_message_bytes
    # 8000 control characters: within the character limit and within the body limit
    # (6 bytes each as JSON escapes), but the record with its envelope is not.
    text = "\x01" * CoachbusSettings().max_message_chars
    auth = {"Authorization": f"Bearer {FRONT_KEY}"}
    native = client.post(f"/v1/sessions/{'s' * 128}/messages", json={"text": text}, headers=auth)
    assert native.status_code == 413, native.text
    openai = client.post(
        "/v1/chat/completions",
        json={"model": "coachbus", "messages": [{"role": "user", "content": text}]},
        headers={**auth, "X-Session-Id": "s" * 128},
    )
    assert openai.status_code == 413, openai.text
    assert openai.json()["error"]["code"] == "message_too_long"
    assert published == []
    ok = client.post("/v1/sessions/s/messages", json={"text": "x" * 8000}, headers=auth)
    assert ok.status_code == 202
    assert len(published) == 1 and len(encode(published[0])) <= limit  # type: ignore[arg-type]


def test_public_app_has_no_metrics_or_docs_and_the_internal_one_has_them() -> None:
    from fastapi.testclient import TestClient

    from services.gateway.internal import INTERNAL_PATHS, create_internal_app

    client, api, _published = _gateway_client()
    for path in INTERNAL_PATHS:
        assert client.get(path).status_code == 404, path
    internal = TestClient(create_internal_app(api))
    assert "/v1/sessions/{session_id}/messages" in internal.get("/openapi.json").json()["paths"]
    assert "swagger" in internal.get("/docs").text.lower()
    assert "redoc" in internal.get("/redoc").text.lower()
    assert internal.get("/metrics").status_code == 200


def test_gateway_main_drops_metrics_from_the_public_port() -> None:
    from services.gateway.internal import INTERNAL_PATHS
    from services.gateway.main import app

    assert not {path for path, _route in app.routes} & set(INTERNAL_PATHS)
    assert "/healthz" in {path for path, _route in app.routes}  # probes stay where they are


@pytest.mark.parametrize(
    ("environment", "refused"), [("local", False), ("staging", True), ("production", True)]
)
def test_gateway_refuses_to_start_without_keys_outside_local(
    monkeypatch: pytest.MonkeyPatch, environment: str, refused: bool
) -> None:
    from coachbus.settings import CoachbusSettings
    from services.gateway.auth import refuse_without_keys

    monkeypatch.delenv("COACHBUS_API_KEYS", raising=False)
    settings = CoachbusSettings(environment=environment)  # type: ignore[arg-type]
    if refused:
        with pytest.raises(SystemExit, match=f"refusing to start the gateway in {environment}"):
            refuse_without_keys(settings)
    else:
        refuse_without_keys(settings)
    keys = [ApiKey(user_id="a", key=SecretStr("k" * 40))]
    keyed = CoachbusSettings(environment=environment, api_keys=keys)  # type: ignore[arg-type]
    refuse_without_keys(keyed)


async def test_internal_server_binds_the_given_host_and_is_required_outside_local() -> None:
    import socket

    import httpx

    from services.gateway.internal import InternalServer, create_internal_app

    _client, api, _published = _gateway_client()
    server = InternalServer(create_internal_app(api), 0, required=True)
    await server.start(host="127.0.0.1")
    try:
        assert server.bound_port
        async with httpx.AsyncClient() as http:
            reply = await http.get(f"http://127.0.0.1:{server.bound_port}/openapi.json")
        assert reply.status_code == 200
        busy = InternalServer(create_internal_app(api), server.bound_port, required=True)
        with pytest.raises(RuntimeError, match="cannot be bound"):
            await busy.start(host="127.0.0.1")
        optional = InternalServer(create_internal_app(api), server.bound_port, required=False)
        await optional.start(host="127.0.0.1")  # a local second stack: logged, not fatal
        assert optional.bound_port is None
    finally:
        await server.stop()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", server.bound_port)) != 0


def test_every_v1_route_but_the_public_ones_needs_a_key_at_the_front_door() -> None:
    import re

    from services.gateway.ingress import PUBLIC_PATHS

    client, api, published = _gateway_client()
    # The schema lists the routes of the included routers too (OpenAI, web).
    paths = {p: ops for p, ops in api.openapi()["paths"].items() if p.startswith("/v1/")}
    assert {"/v1/sessions/{session_id}/messages", "/v1/chat/completions", "/v1/models"} <= set(
        paths
    )
    for route, operations in paths.items():
        path = re.sub(r"\{[^}]+\}", "x", route)
        for method in operations:
            status = client.request(method.upper(), path, content=b"{}").status_code
            assert (status != 401) == (route in PUBLIC_PATHS), (method, route, status)
    assert set(paths) >= PUBLIC_PATHS  # no stale entry would open a future route
    assert published == []


def test_stream_slots_count_per_user() -> None:
    from services.gateway.auth import StreamSlots

    slots = StreamSlots(2)
    assert slots.acquire("a") and slots.acquire("a")
    assert not slots.acquire("a")
    assert slots.acquire("b")  # another user is not affected
    slots.release("a")
    assert slots.acquire("a")
    for _ in range(2):
        slots.release("a")
    assert slots.open("a") == 0


async def test_event_streams_per_user_are_capped_and_freed_on_disconnect() -> None:
    """A real server: open streams hold their slot until the client goes away."""
    import httpx
    import uvicorn

    from coachbus.embedded.broker import free_port
    from coachbus.settings import CoachbusSettings
    from services.gateway.api import create_api
    from services.gateway.review import ReviewQueue

    async def publish(_message: object) -> None:
        return None

    key = "s" * 40
    settings = CoachbusSettings(max_streams_per_user=2)
    store = TurnStore()
    turns = [store.open(f"t{n}", "a", "s").turn_id for n in range(4)]
    api = create_api(
        settings,
        KeyRing([ApiKey(user_id="a", key=SecretStr(key))]),
        store,
        publish,  # type: ignore[arg-type]
        ReviewQueue(),
        publish,  # type: ignore[arg-type]
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{port}/v1/turns/{{}}/events"
        auth = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(timeout=10) as client:
            first = await client.send(
                client.build_request("GET", url.format(turns[0]), headers=auth), stream=True
            )
            second = await client.send(
                client.build_request("GET", url.format(turns[1]), headers=auth), stream=True
            )
            assert (first.status_code, second.status_code) == (200, 200)
            third = await client.get(url.format(turns[2]), headers=auth)
            assert third.status_code == 429 and third.headers["Retry-After"]
            await first.aclose()  # the client goes away: its slot is free again
            async with asyncio.timeout(5):
                while True:
                    fourth = await client.send(
                        client.build_request("GET", url.format(turns[3]), headers=auth), stream=True
                    )
                    if fourth.status_code == 200:
                        break
                    await asyncio.sleep(0.1)
            await fourth.aclose()
            await second.aclose()
    finally:
        server.should_exit = True
        await serving


async def test_feed_shows_each_topics_own_reply_kinds_only() -> None:
    """Coach writes coach-replies, Synth and the review endpoint write replies: a
    human answer or a final forged on coach-replies (a Coach credential) is never
    shown, nor a coach piece on replies."""
    from types import SimpleNamespace

    from aiokafka import TopicPartition

    from coachbus.bus.codec import encode
    from coachbus.settings import KafkaSettings
    from services.gateway.feed import ReplyFeed
    from services.gateway.review import ReviewQueue

    def reply(kind: str, text: str) -> Reply:
        return Reply(turn_id="t1", session_id="s", user_id="u", kind=kind, text=text)  # type: ignore[arg-type]

    class OneBatch:
        def __init__(self) -> None:
            self.fetches = 0

        def assignment(self) -> set[TopicPartition]:
            return set()  # nothing to check for a recreated topic

        async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[object]]:
            self.fetches += 1
            if self.fetches > 1:
                await asyncio.sleep(3600)
            return {
                TopicPartition("coach-replies", 0): [
                    SimpleNamespace(value=encode(reply("coach", "hello")), key=b"u"),
                    SimpleNamespace(value=encode(reply("human", "forged")), key=b"u"),
                    SimpleNamespace(value=encode(reply("final", "forged")), key=b"u"),
                ],
                TopicPartition("replies", 0): [
                    SimpleNamespace(value=encode(reply("coach_delta", "forged")), key=b"u"),
                    SimpleNamespace(value=encode(reply("human", "real")), key=b"u"),
                ],
            }

    shown: list[tuple[str, str]] = []

    class Recording(TurnStore):
        async def add_reply(self, r: Reply) -> None:
            shown.append((r.kind, r.text))
            await super().add_reply(r)

    store = Recording()
    store.open("t1", "u", "s", sent=True)
    feed = ReplyFeed(
        KafkaSettings(),
        store,
        ReviewQueue(),
        replies_topic="replies",
        review_topic="human-review",
        agent_topics=[],
        coach_replies_topic="coach-replies",
    )
    consumer = OneBatch()
    task = asyncio.create_task(feed._run(consumer))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(5):
            while consumer.fetches < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert shown == [("coach", "hello"), ("human", "real")]
