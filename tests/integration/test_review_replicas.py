"""The human tier over the real broker with two gateway replicas: they agree on who
claimed what (a race between them has one winner), an answer reaches the person once
and only from the holder, a restarted replica rebuilds the queue from the topics, the
webhook is called once per item, and an erase takes the person's items everywhere.

A stack of two gateway processes only: the escalations are published to
``human-review`` here, as Stability or Synth would publish them.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from coachbus.bus.codec import encode
from coachbus.contracts import HumanReviewRequest
from coachbus.embedded.broker import free_port
from coachbus.embedded.stack import Stack, StackConfig
from tests.fault.conftest import produce, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

KEYS = {
    "bob": "key-rv-bob-0123456789",
    "dana": "key-rv-dana-0123456789",
    "carol": "key-rv-carol-0123456789",
    "rita": "key-rv-rita-0123456789",
}
REVIEWERS = {"carol", "rita"}
WORDS = "I can't go on, I keep thinking about ending my life."


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


@dataclass
class Replicas:
    stack: Stack
    urls: list[str]
    prefix: str
    bootstrap: str
    hooks: list[bytes] = field(default_factory=list)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"


@pytest_asyncio.fixture(scope="module")
async def replicas(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Replicas]:
    hook_port = free_port()
    calls: list[bytes] = []

    async def hook(request: Request) -> Response:
        calls.append(await request.body())
        return Response(status_code=204)

    receiver = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/hook", hook, methods=["POST"])]),
            host="127.0.0.1",
            port=hook_port,
            log_level="warning",
        )
    )
    serving = asyncio.create_task(receiver.serve())
    prefix = f"rv{uuid.uuid4().hex[:8]}."
    config = StackConfig.ephemeral(
        bootstrap=kafka_bootstrap,
        log_dir=tmp_path_factory.mktemp("review-replica-logs"),
        services=("gateway",),
        replicas={"gateway": 2},
        env={
            "COACHBUS_TOPIC_PREFIX": prefix,
            "COACHBUS_PARTITIONS": "3",
            "COACHBUS_API_KEYS": ",".join(
                f"{u}:{k}:reviewer" if u in REVIEWERS else f"{u}:{k}" for u, k in KEYS.items()
            ),
            "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
            "COACHBUS_REVIEW_WEBHOOK_URL": f"http://127.0.0.1:{hook_port}/hook",
            "COACHBUS_REVIEW_WEBHOOK_SECRET": "s" * 40,
        },
    )
    stack = Stack(config)
    await stack.start()
    try:
        assert stack.supervisor is not None
        # The second replica's port: the supervisor's own record of it.
        second = stack.supervisor._children["gateway-2"].spec.port
        yield Replicas(
            stack, [stack.gateway_url, f"http://127.0.0.1:{second}"], prefix, kafka_bootstrap, calls
        )
    finally:
        await stack.stop()
        receiver.should_exit = True
        await serving


async def _escalate(rs: Replicas, client: httpx.AsyncClient, user: str, text: str) -> str:
    """The person writes (through the first replica), and their turn is escalated."""
    sent = await client.post(
        f"{rs.urls[0]}/v1/sessions/s1/messages", json={"text": text}, headers=auth(user)
    )
    assert sent.status_code == 202, sent.text
    turn_id: str = sent.json()["turn_id"]
    request = HumanReviewRequest(
        turn_id=turn_id,
        session_id="s1",
        user_id=user,
        decision="risk_screen",
        reason="severity critical at or above high",
        severity="critical",
        excerpt=text,
    )
    await produce(rs.bootstrap, rs.topic("human-review"), [(user.encode(), encode(request))])
    return turn_id


async def _listed(
    client: httpx.AsyncClient, url: str, turn_id: str, test: Any = None
) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            listing = await client.get(f"{url}/v1/review", headers=auth("carol"))
            assert listing.status_code == 200
            found = [i for i in listing.json()["items"] if i["item_id"] == turn_id]
            if found and (test is None or test(found[0])):
                item: dict[str, Any] = found[0]
                return item
            await asyncio.sleep(0.1)


async def _gone(client: httpx.AsyncClient, url: str, turn_id: str) -> None:
    async with asyncio.timeout(20):
        while True:
            items = (await client.get(f"{url}/v1/review", headers=auth("carol"))).json()["items"]
            if all(i["item_id"] != turn_id for i in items):
                return
            await asyncio.sleep(0.1)


@pytest.mark.heavy
async def test_two_replicas_agree_on_claims_answers_and_a_restart(replicas: Replicas) -> None:
    rs = replicas
    one, two = rs.urls
    async with httpx.AsyncClient(timeout=30) as client:
        turn = await _escalate(rs, client, "bob", WORDS)
        for url in rs.urls:
            await _listed(client, url, turn)

        # Carol on one replica, Rita on the other, at once: the log has one winner.
        carol, rita = await asyncio.gather(
            client.post(f"{one}/v1/review/{turn}/claim", headers=auth("carol")),
            client.post(f"{two}/v1/review/{turn}/claim", headers=auth("rita")),
        )
        statuses = sorted([carol.status_code, rita.status_code])
        assert statuses == [200, 409], (carol.text, rita.text)
        winner, loser = ("carol", "rita") if carol.status_code == 200 else ("rita", "carol")
        loser_url = two if loser == "rita" else one
        assert (rita if loser == "rita" else carol).json()["detail"] == f"claimed by {winner}"
        for url in rs.urls:
            item = await _listed(client, url, turn, lambda i: i["claim"] is not None)
            assert item["claim"]["reviewer_id"] == winner

        # The loser's answer is refused wherever it is sent; the winner's is accepted
        # on either replica.
        refused = await client.post(
            f"{loser_url}/v1/review/{turn}/answer", json={"text": "not me"}, headers=auth(loser)
        )
        assert refused.status_code == 409
        answer = "This is a person from the care team. I'm here: are you safe right now?"
        sent = await client.post(
            f"{loser_url}/v1/review/{turn}/answer", json={"text": answer}, headers=auth(winner)
        )
        assert sent.status_code == 202, sent.text

        # The person sees it once, on any replica, and never the refused one.
        for url in rs.urls:
            async with asyncio.timeout(20):
                while True:
                    view = (await client.get(f"{url}/v1/turns/{turn}", headers=auth("bob"))).json()
                    if view["human"]:
                        break
                    await asyncio.sleep(0.1)
            assert [h["text"] for h in view["human"]] == [answer]

        # The item view on the other replica shows the session and the history.
        detail = (await client.get(f"{one}/v1/review/{turn}", headers=auth("carol"))).json()
        assert detail["session"][-1]["said"] == WORDS
        # One replica won the webhook's call; the other's offer is nobody's action.
        history = [(h["action"], h["accepted"]) for h in detail["history"]]
        assert history.count(("notify", True)) == 1
        assert [h for h in history if h[0] != "notify"] == [
            ("claim", True),
            ("claim", False),
            ("answer", False),
            ("answer", True),
        ]

        # A restarted replica reads the queue back from the topics: same claim, same
        # history.
        assert rs.stack.supervisor is not None
        await rs.stack.supervisor.stop_service("gateway-2")
        await rs.stack.supervisor.start_service("gateway-2")
        await rs.stack.supervisor.wait_healthy("gateway-2")
        item = await _listed(client, two, turn, lambda i: i["claim"] is not None)
        assert item["claim"]["reviewer_id"] == winner and item["answers"] == 1
        rebuilt = (await client.get(f"{two}/v1/review/{turn}", headers=auth("carol"))).json()
        assert rebuilt["history"] == detail["history"]
        again = await client.post(f"{two}/v1/review/{turn}/claim", headers=auth(loser))
        assert again.status_code == 409

        closed = await client.post(
            f"{two}/v1/review/{turn}/close",
            json={"outcome": "false_alarm", "note": "talked it through"},
            headers=auth(winner),
        )
        assert closed.status_code == 200, closed.text
        for url in rs.urls:
            await _gone(client, url, turn)

    # On the topics: one human reply, and an audit of every action without the
    # person's words or the answer.
    replies = await read_topic(rs.bootstrap, rs.topic("replies"), timeout=5, settle=0)
    human = [json.loads(r.value) for r in replies if b'"human"' in r.value]
    assert [h["text"] for h in human if h["turn_id"] == turn] == [answer]
    audit = await read_topic(rs.bootstrap, rs.topic("review-audit"), timeout=5, settle=0)
    events = [json.loads(r.value) for r in audit if json.loads(r.value)["item_id"] == turn]
    # Each replica audits its own actions once folded: the topic's order among
    # replicas racing is theirs, the verdicts are the log's.
    trail_of_item = sorted((e["action"], e["accepted"]) for e in events)
    assert trail_of_item == sorted(
        [
            ("notify", True),
            ("claim", True),
            ("claim", False),
            ("answer", False),
            ("answer", True),
            ("claim", False),  # the loser's try after the restart
            ("close", True),
        ]
    )
    trail = b" ".join(r.value for r in audit)
    for private in (WORDS, answer, "talked it through", "bob"):
        assert private.encode() not in trail
    # The webhook was called once for the critical item, by one of the two replicas.
    calls = [json.loads(c) for c in rs.hooks]
    assert [c["item_id"] for c in calls].count(turn) == 1


@pytest.mark.heavy
async def test_erase_takes_the_persons_items_from_every_replica(replicas: Replicas) -> None:
    rs = replicas
    one, two = rs.urls
    async with httpx.AsyncClient(timeout=30) as client:
        erased = await _escalate(rs, client, "dana", "I don't want to be here any more.")
        for url in rs.urls:
            await _listed(client, url, erased)
        claimed = await client.post(f"{two}/v1/review/{erased}/claim", headers=auth("rita"))
        assert claimed.status_code == 200
        sent = await client.post(
            f"{two}/v1/review/{erased}/answer", json={"text": "Rita here."}, headers=auth("rita")
        )
        assert sent.status_code == 202
        gone = await client.delete(f"{one}/v1/me", headers=auth("dana"))
        assert gone.status_code == 202, gone.text
        for url in rs.urls:
            await _gone(client, url, erased)
            missing = await client.get(f"{url}/v1/review/{erased}", headers=auth("rita"))
            assert missing.status_code == 404
        # A restart reads the topics again and still does not bring it back.
        assert rs.stack.supervisor is not None
        await rs.stack.supervisor.stop_service("gateway-2")
        await rs.stack.supervisor.start_service("gateway-2")
        await rs.stack.supervisor.wait_healthy("gateway-2")
        await asyncio.sleep(1.0)
        await _gone(client, two, erased)
    audit = await read_topic(rs.bootstrap, rs.topic("review-audit"), timeout=5, settle=0)
    events = [json.loads(r.value) for r in audit if json.loads(r.value)["item_id"] == erased]
    assert events[-1]["action"] == "erased"
