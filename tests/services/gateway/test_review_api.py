"""The reviewers' API over a real HTTP server, its review log in memory (LoopbackBus):
roles, claims and answers, the item view, the live queue, where the console is served."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from coachbus.contracts import (
    HumanReviewRequest,
    Reply,
    StabilityResult,
    UserMessage,
    new_turn_id,
    utcnow,
)
from coachbus.contracts.payloads import AGENTS, CrisisCategory, CrisisScreen, StabilityPayload
from coachbus.embedded.broker import free_port
from coachbus.metrics import REVIEW_OLDEST_AGE, REVIEW_PENDING
from coachbus.safety.helplines import Helplines
from coachbus.settings import ApiKey, CoachbusSettings
from services.gateway import review_content
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.internal import create_internal_app
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import LoopbackBus, ReviewBus, ReviewDesk
from services.gateway.review_settings import ReviewSettings
from services.gateway.turns import TurnStore
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

KEYS = {"carol": "c" * 40, "rita": "r" * 40, "bob": "b" * 40}
REVIEWERS = {"carol", "rita"}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def ring() -> KeyRing:
    return KeyRing(
        [ApiKey(user_id=u, key=SecretStr(k), reviewer=u in REVIEWERS) for u, k in KEYS.items()]
    )


def request(text: str = "I can't go on.", severity: str = "critical", **ids: Any) -> Any:
    turn = ids.get("turn", new_turn_id())
    return HumanReviewRequest.model_validate(
        {
            "turn_id": turn,
            "session_id": ids.get("session", "s1"),
            "user_id": ids.get("user", "bob"),
            "decision": "risk_screen",
            "reason": "severity critical at or above high",
            "severity": severity,
            "excerpt": text,
        }
    )


def make_desk(store: TurnStore, bus: ReviewBus, **settings: Any) -> ReviewDesk:
    return ReviewDesk(
        ReviewQueue(),
        store,
        bus,
        settings=ReviewSettings(**settings),
        content=review_content.shipped(),
        helplines=Helplines.configured(None, None),
    )


@dataclass
class Served:
    url: str
    desk: ReviewDesk
    log: LoopbackBus
    store: TurnStore
    api: FastAPI


async def _publish(_message: object) -> None:
    return None


@pytest_asyncio.fixture
async def served() -> AsyncIterator[Served]:
    store = TurnStore()
    log = LoopbackBus()
    desk = make_desk(store, log.bus, session_turns=2)
    log.desk = desk
    api = create_api(CoachbusSettings(), ring(), store, _publish, desk, _publish)  # type: ignore[arg-type]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        yield Served(f"http://127.0.0.1:{port}", desk, log, store, api)
    finally:
        server.should_exit = True
        await serving
        await desk.close()


def review_routes(api: FastAPI) -> list[tuple[str, str]]:
    # The schema lists the routes of the included routers too; the live queue is
    # left out of it (a stream that never ends) and added here.
    return sorted(
        [
            *(
                (method.upper(), path)
                for path, operations in api.openapi()["paths"].items()
                if path.startswith("/v1/review")
                for method in operations
            ),
            ("GET", "/v1/review/events"),
        ]
    )


async def test_every_console_route_refuses_keys_without_the_reviewer_role(
    served: Served,
) -> None:
    item = request()
    await served.desk.add_request(item, live=True)
    routes = review_routes(served.api)
    assert len(routes) == 9, routes  # a new route must be added to the console's API here
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        for method, path in routes:
            url = path.replace("{item_id}", item.turn_id)
            body = {"text": "x", "outcome": "false_alarm"} if method == "POST" else None
            if path.endswith("/close"):
                body = {"outcome": "false_alarm"}
            elif method == "POST":
                body = {"text": "x"}
            refused = await client.request(method, url, json=body, headers=auth("bob"))
            assert refused.status_code == 403, (method, path, refused.text)
            assert refused.json()["detail"] == "this key has no reviewer role"
            anonymous = await client.request(method, url, json=body)
            assert anonymous.status_code == 401, (method, path)
    # Nothing a refused caller sent reached the log.
    assert served.log.actions == []


async def test_two_reviewers_one_claim_and_only_the_holder_answers(served: Served) -> None:
    bob_said = msg("Ich kann nicht mehr, ich will nicht mehr leben.", user="bob")
    item = request(bob_said.text, turn=new_turn_id())
    served.store.add_message(bob_said.model_copy(update={"turn_id": item.turn_id}))
    await served.desk.add_request(item, live=True)
    url = f"/v1/review/{item.turn_id}"
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        claimed = await client.post(f"{url}/claim", headers=auth("carol"))
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["claim"]["reviewer_id"] == "carol"
        lost = await client.post(f"{url}/claim", headers=auth("rita"))
        assert lost.status_code == 409 and lost.json()["detail"] == "claimed by carol"
        stolen = await client.post(f"{url}/answer", json={"text": "hi"}, headers=auth("rita"))
        assert stolen.status_code == 409
        assert served.log.replies == []  # no word of rita's reached the person

        listing = (await client.get("/v1/review", headers=auth("rita"))).json()
        (shown,) = listing["items"]
        assert shown["claim"]["reviewer_id"] == "carol" and shown["claim"]["since"]
        assert shown["age_s"] >= 0 and listing["you"] == "rita"

        unknown = await client.post(
            f"{url}/answer", json={"template": "nope"}, headers=auth("carol")
        )
        assert unknown.status_code == 422
        sent = await client.post(
            f"{url}/answer", json={"template": "check_in"}, headers=auth("carol")
        )
        assert sent.status_code == 202, sent.text
        ((reply, answer_id),) = served.log.replies
        assert answer_id == sent.json()["answer_id"]
        assert reply.kind == "human" and reply.user_id == "bob"
        # In the person's language and their du (they wrote "ich kann nicht mehr").
        template = review_content.shipped().templates["check_in"]
        assert reply.text == template.render("de", bob_said.address)
        assert reply.language == "de"

        bad = await client.post(f"{url}/close", json={"outcome": "x"}, headers=auth("carol"))
        assert bad.status_code == 422
        refused = await client.post(
            f"{url}/close", json={"outcome": "false_alarm"}, headers=auth("rita")
        )
        assert refused.status_code == 409
        closed = await client.post(
            f"{url}/close",
            json={"outcome": "emergency_services", "note": "called 112 with bob's consent"},
            headers=auth("carol"),
        )
        assert closed.status_code == 200, closed.text
        assert (await client.get("/v1/review", headers=auth("carol"))).json()["items"] == []
        assert (await client.get(url, headers=auth("carol"))).status_code == 404
        again = await client.post(f"{url}/claim", headers=auth("rita"))
        assert again.status_code == 409 and again.json()["detail"] == "closed by carol"

    audit = [(e.action, e.reviewer_id, e.accepted) for e in served.log.audits]
    assert audit == [
        ("claim", "carol", True),
        ("claim", "rita", False),
        ("answer", "rita", False),
        ("answer", "carol", True),
        ("close", "rita", False),
        ("close", "carol", True),
        ("claim", "rita", False),
    ]
    trail = json.dumps([e.model_dump(mode="json") for e in served.log.audits])
    for private in (bob_said.text, reply.text, "called 112", "bob"):
        assert private not in trail
    assert served.log.audits[5].outcome == "emergency_services"


async def test_release_and_renew(served: Served) -> None:
    item = request()
    await served.desk.add_request(item, live=True)
    url = f"/v1/review/{item.turn_id}"
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        assert (await client.post(f"{url}/renew", headers=auth("carol"))).status_code == 409
        assert (await client.post(f"{url}/claim", headers=auth("carol"))).status_code == 200
        renewed = await client.post(f"{url}/renew", headers=auth("carol"))
        assert renewed.status_code == 200 and renewed.json()["claim"]["reviewer_id"] == "carol"
        assert (await client.post(f"{url}/release", headers=auth("rita"))).status_code == 409
        assert (await client.post(f"{url}/release", headers=auth("carol"))).status_code == 200
        assert (await client.post(f"{url}/claim", headers=auth("rita"))).status_code == 200
        missing = await client.post("/v1/review/no-such-item/claim", headers=auth("rita"))
        assert missing.status_code == 404


async def test_the_one_step_answer_claims_answers_and_closes(served: Served) -> None:
    first, second = request(), request()
    for item in (first, second):
        await served.desk.add_request(item, live=True)
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        sent = await client.post(
            f"/v1/review/{first.turn_id}", json={"text": "Carol here."}, headers=auth("carol")
        )
        assert sent.status_code == 202 and sent.json()["status"] == "sent"
        ((reply, _),) = served.log.replies
        assert reply.text == "Carol here."
        again = await client.post(
            f"/v1/review/{first.turn_id}", json={"text": "again"}, headers=auth("carol")
        )
        assert again.status_code == 404
        state = served.desk.ledger.get(first.turn_id)
        assert state is not None and state.closed is not None
        assert state.closed.outcome == "answered_in_chat"
        # Someone else holds the second: the one-step answer is refused, nothing sent.
        await client.post(f"/v1/review/{second.turn_id}/claim", headers=auth("rita"))
        refused = await client.post(
            f"/v1/review/{second.turn_id}", json={"text": "hi"}, headers=auth("carol")
        )
        assert refused.status_code == 409 and refused.json()["detail"] == "claimed by rita"
        assert len(served.log.replies) == 1


async def test_the_item_view(served: Served) -> None:
    earlier, now = new_turn_id(), new_turn_id()
    first = msg("I had a bad week.", user="bob", turn=earlier, session="s1")
    crisis = msg("I keep thinking about ending my life.", user="bob", turn=now, session="s1")
    other = msg("Another session entirely.", user="bob", turn=new_turn_id(), session="s2")
    for said in (first, other, crisis):
        served.store.add_message(said)
    helpline = "Please call the 988 Suicide & Crisis Lifeline now."
    final = Reply(turn_id=now, session_id="s1", user_id="bob", kind="final", text=helpline)
    await served.store.add_reply(final)
    coach = Reply(turn_id=now, session_id="s1", user_id="bob", kind="coach", text="I hear you.")
    await served.store.add_reply(coach)
    stability = StabilityResult(
        turn_id=now,
        session_id="s1",
        user_id="bob",
        tier="deterministic",
        latency_ms=1.0,
        payload=StabilityPayload(
            risks=[],
            blocked_steps=[],
            overall="critical",
            crisis=CrisisScreen(
                category=CrisisCategory.SUICIDAL_IDEATION,
                confidence=0.93,
                matched=["ending my life"],
                escalated=True,
                plan=False,
            ),
        ),
    )
    await served.store.add_result(stability)
    item = request(crisis.text, turn=now)
    await served.desk.add_request(item, live=True)
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        await client.post(f"/v1/review/{now}/claim", headers=auth("carol"))
        body = (await client.get(f"/v1/review/{now}", headers=auth("rita"))).json()
    assert body["item"]["claim"]["reviewer_id"] == "carol"
    assert body["screen"] == {
        "decision": "risk_screen",
        "reason": "severity critical at or above high",
        "severity": "critical",
        "category": "suicidal_ideation",
        "confidence": 0.93,
        "basis": "message",
        "plan": False,
    }
    assert body["sent"]["final"]["help_lines"] is True
    assert body["sent"]["final"]["numbers"] == ["988"]
    assert body["sent"]["coach"]["help_lines"] is False
    # This session only, oldest first, and no more turns than configured.
    assert [t["said"] for t in body["session"]] == [first.text, crisis.text]
    assert [t["this_item"] for t in body["session"]] == [False, True]
    assert body["session"][1]["final"] == helpline
    assert body["language"] == "en" and body["locale"] == "en"
    assert "988" in json.dumps(body["help_lines"])
    assert [h["action"] for h in body["history"]] == ["claim"]
    assert {o["id"] for o in body["outcomes"]} >= {"false_alarm", "emergency_services"}
    assert all(t["text"] for t in body["templates"])


async def test_the_live_queue(served: Served) -> None:
    first = request(severity="high")
    await served.desk.add_request(first, live=True)
    events: list[tuple[str, dict[str, Any]]] = []

    async def read(response: httpx.Response) -> None:
        name = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and name:
                events.append((name, json.loads(line[6:])))

    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        response = await client.send(
            client.build_request("GET", "/v1/review/events", headers=auth("rita")), stream=True
        )
        assert response.status_code == 200
        reader = asyncio.create_task(read(response))
        try:

            async def seen(test: Any) -> dict[str, Any]:
                async with asyncio.timeout(5):
                    while True:
                        found = [d for n, d in events if test(n, d)]
                        if found:
                            return found[-1]
                        await asyncio.sleep(0.02)

            snapshot = await seen(lambda n, _d: n == "snapshot")
            assert [i["item_id"] for i in snapshot["items"]] == [first.turn_id]
            assert snapshot["you"] == "rita" and snapshot["server_time"]
            second = request(severity="critical")
            await served.desk.add_request(second, live=True)
            await seen(lambda n, d: n == "item" and d["item_id"] == second.turn_id)
            await client.post(f"/v1/review/{first.turn_id}/claim", headers=auth("carol"))
            claimed = await seen(lambda n, d: n == "item" and d["claim"] is not None)
            assert claimed["item_id"] == first.turn_id
            assert claimed["claim"]["reviewer_id"] == "carol"
            await client.post(
                f"/v1/review/{first.turn_id}/close",
                json={"outcome": "false_alarm"},
                headers=auth("carol"),
            )
            await seen(lambda n, d: n == "gone" and d["item_id"] == first.turn_id)
        finally:
            reader.cancel()
            await response.aclose()


async def test_a_request_whose_action_never_comes_back_says_so() -> None:
    store = TurnStore()
    published: list[object] = []

    async def lost(action: object) -> None:
        published.append(action)  # on the bus, but this replica never reads it back

    async def nothing(*_args: object) -> None:
        return None

    desk = make_desk(store, ReviewBus(action=lost, audit=nothing, reply=nothing))
    desk.settings.confirm_timeout_s = 0.2
    item = request()
    await desk.add_request(item, live=True)
    api = create_api(CoachbusSettings(), ring(), store, _publish, desk, _publish)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        response = await client.post(f"/v1/review/{item.turn_id}/claim", headers=auth("carol"))
    assert response.status_code == 504
    assert len(published) == 1


async def test_erase_forgets_items_claims_and_answers_and_the_audit_says_erased(
    served: Served,
) -> None:
    item, kept = request(user="bob"), request(user="dana")
    for each in (item, kept):
        await served.desk.add_request(each, live=True)
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        await client.post(f"/v1/review/{item.turn_id}/claim", headers=auth("carol"))
        await client.post(
            f"/v1/review/{item.turn_id}/answer", json={"text": "hello"}, headers=auth("carol")
        )
        erased = served.desk.items_of("bob", utcnow() + timedelta(seconds=1))
        assert erased == [item.turn_id]
        served.desk.drop_user("bob", before=utcnow() + timedelta(seconds=1))
        await served.desk.audit_erased(erased)
        listing = (await client.get("/v1/review", headers=auth("carol"))).json()
        assert [i["item_id"] for i in listing["items"]] == [kept.turn_id]
        gone = await client.get(f"/v1/review/{item.turn_id}", headers=auth("carol"))
        assert gone.status_code == 404
        late = await client.post(f"/v1/review/{item.turn_id}/claim", headers=auth("rita"))
        assert late.status_code == 404
    assert served.desk.ledger.get(item.turn_id) is None
    # A re-read of the escalation (a restart's lookback) does not bring it back.
    await served.desk.add_request(item, live=False)
    assert served.desk.queue.get(item.turn_id) is None
    marker = served.log.audits[-1]
    assert (marker.action, marker.item_id) == ("erased", item.turn_id)
    assert marker.reviewer_id == "coachbus"


async def test_queue_metrics_by_severity(served: Served) -> None:
    old = request(severity="critical")
    old = old.model_copy(update={"created_at": utcnow() - timedelta(minutes=7)})
    held = request(severity="critical")
    held = held.model_copy(update={"created_at": utcnow() - timedelta(minutes=30)})
    for each in (old, held, request(severity="moderate")):
        await served.desk.add_request(each, live=True)
    await served.desk.act(served.desk.claim_action(held.turn_id, "carol"))
    served.desk.refresh_metrics()
    assert REVIEW_PENDING.labels("critical")._value.get() == 2
    assert REVIEW_PENDING.labels("moderate")._value.get() == 1
    assert REVIEW_PENDING.labels("high")._value.get() == 0
    # The held item is being worked on: the oldest waiting critical item is 7 min old.
    assert 7 * 60 <= REVIEW_OLDEST_AGE.labels("critical")._value.get() < 8 * 60


def _client_for(console: str) -> tuple[TestClient, TestClient]:
    api = create_api(
        CoachbusSettings(),
        ring(),
        TurnStore(),
        _publish,  # type: ignore[arg-type]
        ReviewQueue(),
        _publish,  # type: ignore[arg-type]
        review=ReviewSettings(console=console),  # type: ignore[arg-type]
    )
    internal = create_internal_app(api, api.state.review_app)
    return TestClient(api), TestClient(internal)


def test_the_console_page_loads_only_its_own_files_and_runs_nothing_inline() -> None:
    public, _internal = _client_for("public")
    page = public.get("/review").text
    refs = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert {"/review/review.js", "/review/review.css"} <= set(refs)
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), ref
        assert public.get(ref).status_code == 200, ref
    # Inline scripts, styles and on* handlers would be blocked by the CSP anyway.
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=", page) is None
    script = public.get("/review/review.js").text
    assert 'from "./sse.js"' in script  # served beside it, under /review/


def test_the_console_is_served_where_the_setting_says() -> None:
    public, internal = _client_for("public")
    page = public.get("/review")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "script-src" not in page.headers["content-security-policy"]  # self only
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("review.js", "review.css", "sse.js"):
        assert public.get(f"/review/{name}").status_code == 200, name
    assert public.get("/review/app.py").status_code == 404
    assert public.get("/v1/review", headers=auth("carol")).status_code == 200
    assert internal.get("/review").status_code == 404

    public, internal = _client_for("internal")
    assert public.get("/review").status_code == 404
    assert public.get("/v1/review", headers=auth("carol")).status_code == 404
    assert internal.get("/review").status_code == 200
    assert internal.get("/review/review.js").status_code == 200
    assert internal.get("/v1/review", headers=auth("carol")).status_code == 200
    assert internal.get("/v1/review", headers=auth("bob")).status_code == 403
    assert internal.get("/v1/review").status_code == 401
    assert internal.get("/metrics").status_code == 200  # still the internal port

    public, internal = _client_for("off")
    assert public.get("/review").status_code == 404
    assert internal.get("/review").status_code == 404
    # The reviewer API stays: a deployment without the page still answers people.
    assert public.get("/v1/review", headers=auth("carol")).status_code == 200


async def _follow(client: httpx.AsyncClient, turn_id: str, seen: list[str]) -> None:
    """The person's stream of a turn, event names in order, until it closes."""
    async with client.stream("GET", f"/v1/turns/{turn_id}/events", headers=auth("bob")) as s:
        async for line in s.aiter_lines():
            if line.startswith("event: "):
                seen.append(line[7:])


def _crisis_final(said: UserMessage) -> Reply:
    """The final of a crisis turn, released at once (no agent's result to wait for)."""
    return Reply(
        turn_id=said.turn_id,
        session_id=said.session_id,
        user_id=said.user_id,
        kind="final",
        text="crisis reply",
        degraded=True,
        missing_agents=list(AGENTS),
    )


async def _held_after_final(seen: list[str], following: asyncio.Task[None]) -> None:
    """Wait for the final on the stream, then a little: the stream is still open."""
    async with asyncio.timeout(5):
        while "final" not in seen:
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    assert not following.done()  # held


async def test_the_persons_open_stream_carries_the_reviewers_answer(served: Served) -> None:
    # A turn that went to a human: its stream does not close at the final, so the chat
    # the person has open shows the reviewer's answer the moment it is sent.
    said = msg("I can't go on.", user="bob")
    item = request(said.text, turn=said.turn_id)
    served.store.open(said.turn_id, "bob", said.session_id, sent=True)
    served.store.add_message(said)
    await served.desk.add_request(item, live=True)
    seen: list[str] = []
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        following = asyncio.create_task(_follow(client, said.turn_id, seen))
        await served.store.add_reply(_crisis_final(said))
        await _held_after_final(seen, following)  # held for the answer
        assert seen[-1] == "final"
        url = f"/v1/review/{item.turn_id}"
        assert (await client.post(f"{url}/claim", headers=auth("carol"))).status_code == 200
        sent = await client.post(f"{url}/answer", json={"text": "hi"}, headers=auth("carol"))
        assert sent.status_code == 202, sent.text
        ((reply, _),) = served.log.replies
        await served.store.add_reply(reply)  # as the replies topic brings it back
        await asyncio.wait_for(following, 5)
    assert seen == ["final", "human"]


async def test_a_turn_no_human_saw_closes_at_the_final(served: Served) -> None:
    said = msg("I want to run 5k by June.", user="bob")
    served.store.open(said.turn_id, "bob", said.session_id, sent=True)
    result = StabilityResult(
        turn_id=said.turn_id,
        session_id=said.session_id,
        user_id="bob",
        tier="deterministic",
        latency_ms=1.0,
        payload=StabilityPayload(
            risks=[],
            blocked_steps=[],
            overall="low",
            crisis=CrisisScreen(
                category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False
            ),
        ),
    )
    await served.store.add_result(result)
    seen: list[str] = []
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        following = asyncio.create_task(_follow(client, said.turn_id, seen))
        await served.store.add_reply(
            Reply(
                turn_id=said.turn_id,
                session_id=said.session_id,
                user_id="bob",
                kind="final",
                text="plan",
                degraded=True,
                missing_agents=[a for a in AGENTS if a != "stability"],
            )
        )
        await asyncio.wait_for(following, 2)  # well before the decision window ends
    assert seen == ["agent", "final"]


async def test_live_queues_share_one_build_of_the_items_per_change(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three reviewers watching: a change builds each open item's summary once, not
    # once per watcher (at 5,000 items that was the cost of every change, times the
    # reviewers connected).
    for _ in range(3):
        await served.desk.add_request(request(), live=True)
    built: list[str] = []
    summary = served.desk.summary

    def counted(req: HumanReviewRequest, now: Any) -> dict[str, Any]:
        built.append(req.turn_id)
        return summary(req, now)

    monkeypatch.setattr(served.desk, "summary", counted)
    seen: dict[str, list[str]] = {who: [] for who in ("carol", "rita", "carol2")}

    async def watch(client: httpx.AsyncClient, who: str) -> None:
        key = "carol" if who == "carol2" else who
        async with client.stream("GET", "/v1/review/events", headers=auth(key)) as s:
            async for line in s.aiter_lines():
                if line.startswith("event: "):
                    seen[who].append(line[7:])

    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        watchers = [asyncio.create_task(watch(client, who)) for who in seen]
        try:
            async with asyncio.timeout(5):
                while not all("snapshot" in names for names in seen.values()):
                    await asyncio.sleep(0.02)
            built.clear()
            fourth = request()
            await served.desk.add_request(fourth, live=True)
            async with asyncio.timeout(5):
                while not all("item" in names for names in seen.values()):
                    await asyncio.sleep(0.02)
        finally:
            for task in watchers:
                task.cancel()
    # Four open items, built once for the change (a second may have ticked over
    # meanwhile: at most twice), never once per watcher.
    assert built.count(fourth.turn_id) <= 2 and len(built) <= 8, built


async def test_a_newer_stream_of_the_person_ends_the_hold(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One held stream per person: a newer one (their next turn) takes over, and the
    # older turn's answer is still on the turn for a client that asks. A held stream
    # looks again at each keep-alive: made short here so the test does not wait 15 s.
    monkeypatch.setattr("services.gateway.api.SSE_HEARTBEAT_S", 0.2)
    said = msg("I can't go on.", user="bob")
    served.store.open(said.turn_id, "bob", said.session_id, sent=True)
    await served.desk.add_request(request(said.text, turn=said.turn_id), live=True)
    seen: list[str] = []
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        following = asyncio.create_task(_follow(client, said.turn_id, seen))
        await served.store.add_reply(_crisis_final(said))
        await _held_after_final(seen, following)
        later = msg("ok", user="bob")
        served.store.open(later.turn_id, "bob", later.session_id, sent=True)
        newer: list[str] = []
        second = asyncio.create_task(_follow(client, later.turn_id, newer))
        # The held stream ends at its next look (a keep-alive period at most).
        await asyncio.wait_for(following, 5)
        second.cancel()
    assert seen == ["final"]
