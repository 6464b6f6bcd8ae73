"""The human tier measured: racing reviewers on two gateway replicas, a crisis message
through the whole pipeline to a reviewer's answer, and the review console over a long
queue in headless Chromium.

``python -m bench.review`` (``--only replicas|crisis|console``, repeatable; ``--quick``
for the test suite) runs three parts; every figure is measured in the run, on this
process's clock unless said otherwise, and nothing is asserted on timings.

**replicas** (``--items N``): two gateway processes on their own Tansu broker
(``--bootstrap`` to use a running one; nothing else of the pipeline: the escalations
are published to ``human-review`` here, as Stability would). For each of ``N``
critical items:

* **visible**: from the escalation's acknowledgement by the broker to the item
  listed by both replicas;
* **claim**: one reviewer on each replica claims the item at the same moment; the
  time each request takes to answer (a request answers once its action came back
  from the log with the verdict), and whether exactly one won and both replicas
  name the same holder;
* **answer**: the holder answers on one replica; from the request to the person's
  turn on the *other* replica showing the reply;
* **rebuild**: the second replica restarted; from its start to it listing the same
  items with the same holders as the first.

Polling the replicas every 20 ms bounds the visible and answer figures from below
by that much.

**crisis** (``--runs N``): the whole pipeline (rules tier, no model) on one gateway.
A fresh person per run posts an explicit suicidal statement and reads the turn's
event stream from the 202 on; a scripted reviewer follows the live queue
(``/v1/review/events``, as the console does), claims the item the moment it shows
(think time zero) and answers with a template. From the POST to the person seeing
the answer, split into: to the item in the reviewer's live queue, to the claim
accepted, and from the answer request to the person. The turn's stream closes at the
final (docs/streaming.md): an answer that comes later is read, as documented, from
``GET /v1/turns/{id}``, polled every 5 ms (that figure is late by up to that much);
which way each answer came is counted. One warm-up run is not counted.

**console** (``--queue 50,5000``): on the same pipeline, the queue grown to each size
in turn (published to ``human-review``, twenty items a person), and the console
measured in a fresh page at each size (bench/review_console.py has the definitions),
side by side with the payloads of the listing, the live snapshot and one item.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from bench.harness import machine
from bench.review_console import measure_page
from coachbus.bus.codec import encode
from coachbus.contracts import HumanReviewRequest, new_turn_id
from coachbus.embedded.stack import Stack, StackConfig
from tests.browser.cdp import chromium, find_chromium

KEYS = {
    "person": "bench-person-0123456789abcdef0123",
    "carol": "bench-carol-0123456789abcdef01234",
    "rita": "bench-rita-0123456789abcdef012345",
}
REVIEWERS = ("carol", "rita")
POLL_S = 0.02


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def summary(values: list[float]) -> dict[str, float]:
    """p50/p95/max in ms; nan when there are none."""
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "max": float("nan"), "n": 0}
    if len(values) == 1:
        return {"p50": values[0], "p95": values[0], "max": values[0], "n": 1}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "max": max(values), "n": len(values)}


async def _listing(client: httpx.AsyncClient, url: str) -> dict[str, dict[str, Any]]:
    response = await client.get(f"{url}/v1/review", headers=auth("carol"))
    response.raise_for_status()
    return {item["item_id"]: item for item in response.json()["items"]}


def _holders(listing: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    return {i: (item["claim"] or {}).get("reviewer_id") for i, item in listing.items()}


async def _until(test: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await test():
        if loop.time() > end:
            raise TimeoutError("the replicas did not get there in time")
        await asyncio.sleep(POLL_S)


def stack_env(prefix: str, keys: dict[str, str]) -> dict[str, str]:
    """A bench stack's settings: its own topics, the reviewers' role on their keys,
    and no per-key rate limit (the bench measures the tier, not the limit)."""
    return {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": "3",
        "COACHBUS_API_KEYS": ",".join(
            f"{u}:{k}:reviewer" if u in REVIEWERS else f"{u}:{k}" for u, k in keys.items()
        ),
        "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
    }


async def measure(items: int, bootstrap: str | None, log_dir: Path) -> dict[str, Any]:
    prefix = f"rb{uuid.uuid4().hex[:8]}."
    config = StackConfig.ephemeral(
        bootstrap=bootstrap,
        log_dir=log_dir,
        services=("gateway",),
        replicas={"gateway": 2},
        env=stack_env(prefix, KEYS),
    )
    stack = Stack(config)
    await stack.start()
    try:
        assert stack.supervisor is not None
        # The second replica's port: the supervisor's own record of it.
        urls = [
            stack.gateway_url,
            f"http://127.0.0.1:{stack.supervisor._children['gateway-2'].spec.port}",
        ]
        producer = AIOKafkaProducer(bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"])
        await producer.start()
        visible: list[float] = []
        claims: list[float] = []
        answers: list[float] = []
        winners: dict[str, str] = {}
        one_winner = agree = 0
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                for n in range(items):
                    item = new_turn_id()
                    request = HumanReviewRequest(
                        turn_id=item,
                        session_id="bench",
                        user_id="person",
                        decision="risk_screen",
                        reason="bench",
                        severity="critical",
                        excerpt=f"bench escalation {n}",
                    )
                    await producer.send_and_wait(
                        f"{prefix}human-review", encode(request), key=b"person"
                    )
                    sent = time.perf_counter()

                    async def listed(item: str = item) -> bool:
                        found = await asyncio.gather(*(_listing(client, u) for u in urls))
                        return all(item in f for f in found)

                    await _until(listed)
                    visible.append((time.perf_counter() - sent) * 1000)

                    async def claim(url: str, who: str, item: str = item) -> tuple[int, float]:
                        started = time.perf_counter()
                        response = await client.post(
                            f"{url}/v1/review/{item}/claim", headers=auth(who)
                        )
                        return response.status_code, (time.perf_counter() - started) * 1000

                    results = await asyncio.gather(claim(urls[0], "carol"), claim(urls[1], "rita"))
                    claims.extend(ms for _status, ms in results)
                    won = [who for who, (s, _) in zip(REVIEWERS, results, strict=True) if s == 200]
                    one_winner += len(won) == 1
                    holders = {
                        (await _listing(client, u))[item]["claim"]["reviewer_id"] for u in urls
                    }
                    agree += holders == set(won)
                    if len(won) != 1:
                        continue
                    winner = winners[item] = won[0]
                    started = time.perf_counter()
                    answered = await client.post(
                        f"{urls[0]}/v1/review/{item}/answer",
                        json={"text": f"bench answer {n}"},
                        headers=auth(winner),
                    )
                    answered.raise_for_status()

                    async def delivered(item: str = item) -> bool:
                        turn = f"{urls[1]}/v1/turns/{item}"
                        view = await client.get(turn, headers=auth("person"))
                        return view.status_code == 200 and bool(view.json()["human"])

                    await _until(delivered)
                    answers.append((time.perf_counter() - started) * 1000)

                await stack.supervisor.stop_service("gateway-2")
                started = time.perf_counter()
                await stack.supervisor.start_service("gateway-2")

                # What the first replica holds: one person's oldest items beyond the
                # per-person cap are folded away on both alike.
                expected = _holders(await _listing(client, urls[0]))

                async def rebuilt() -> bool:
                    try:
                        found = await _listing(client, urls[1])
                    except httpx.HTTPError:
                        return False
                    return _holders(found) == expected

                await _until(rebuilt, timeout=90)
                rebuild_s = time.perf_counter() - started
        finally:
            await producer.stop()
    finally:
        await stack.stop()
    return {
        "items": items,
        "visible_ms": summary(visible),
        "claim_ms": summary(claims),
        "answer_ms": summary(answers),
        "rebuild_s": rebuild_s,
        "one_winner": one_winner,
        "replicas_agree": agree,
    }


# ---------------------------------------------------------------------- the whole pipeline

# An explicit statement of suicidal intent in English: the rules tier's crisis screen
# escalates it at once (no model is asked), so what is measured is the pipeline.
CRISIS_TEXT = "I want to kill myself tonight. I have thought about how I would do it."
# The reviewer answers with a template, rendered in the person's language.
TEMPLATE = "check_in"
PERSON_POLL_S = 0.005


@dataclass
class Pipeline:
    """The whole pipeline on one gateway, with keys for reviewers and ``persons``."""

    stack: Stack
    url: str
    prefix: str
    keys: dict[str, str]

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}


@contextlib.asynccontextmanager
async def pipeline(bootstrap: str | None, log_dir: Path, persons: int) -> AsyncIterator[Pipeline]:
    """Every service (rules tier, no model) on the embedded broker, or ``bootstrap``."""
    prefix = f"rp{uuid.uuid4().hex[:8]}."
    keys = {who: f"bench-{who}-{secrets.token_hex(12)}" for who in REVIEWERS}
    keys |= {person(n): f"bench-{person(n)}-{secrets.token_hex(12)}" for n in range(persons)}
    config = StackConfig.ephemeral(
        bootstrap=bootstrap,
        log_dir=log_dir,
        env=stack_env(prefix, keys),
    )
    stack = Stack(config)
    await stack.start()
    try:
        yield Pipeline(stack, stack.gateway_url, prefix, keys)
    finally:
        await stack.stop()


def person(n: int) -> str:
    # One person per run: no run's open item or conversation risk carries into the next.
    return f"person{n:03d}"


class LiveQueue:
    """A reviewer following ``/v1/review/events`` (as the console does): when each
    item was first seen, on this process's clock."""

    def __init__(self, pipe: Pipeline, client: httpx.AsyncClient, reviewer: str) -> None:
        self._pipe, self._client, self._reviewer = pipe, client, reviewer
        self.seen: dict[str, float] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._open = asyncio.Event()

    async def __aenter__(self) -> LiveQueue:
        self._task = asyncio.create_task(self._read(), name="bench-live-queue")
        await asyncio.wait_for(self._open.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> None:
        url = f"{self._pipe.url}/v1/review/events"
        headers = self._pipe.headers(self._reviewer)
        async with self._client.stream("GET", url, headers=headers, timeout=None) as response:
            response.raise_for_status()
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event is not None:
                    at = time.perf_counter()
                    data = json.loads(line[6:])
                    ids = [i["item_id"] for i in data["items"]] if event == "snapshot" else []
                    if event == "item":
                        ids = [data["item_id"]]
                    async with self._changed:
                        for item_id in ids:
                            self.seen.setdefault(item_id, at)
                        self._changed.notify_all()
                    self._open.set()
                    event = None

    async def listed(self, item_id: str, timeout: float = 30.0) -> float:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: item_id in self.seen), timeout)
        return self.seen[item_id]


async def _person_sees_human(
    pipe: Pipeline, client: httpx.AsyncClient, user: str, turn_id: str
) -> dict[str, Any]:
    """The person's side: the turn's event stream, open from the 202 on (a turn that
    went to a human keeps it open past ``final`` for the answer, docs/streaming.md);
    should it close without one, ``GET /v1/turns/{id}`` every 20 ms until a ``human``
    reply is there. When the answer was first seen, and by which way."""
    seen: dict[str, float] = {}
    url = f"{pipe.url}/v1/turns/{turn_id}"
    async with client.stream("GET", f"{url}/events", headers=pipe.headers(user)) as response:
        response.raise_for_status()
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event is not None:
                seen.setdefault(event, time.perf_counter())
                event = None
    if "human" in seen:
        return {"human_at": seen["human"], "via": "stream", "final_at": seen.get("final")}
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while loop.time() < give_up:
        view = await client.get(url, headers=pipe.headers(user))
        view.raise_for_status()
        if view.json()["human"]:
            human_at = time.perf_counter()
            return {"human_at": human_at, "via": "turn", "final_at": seen.get("final")}
        await asyncio.sleep(PERSON_POLL_S)
    raise TimeoutError(f"no human reply reached turn {turn_id}")


async def crisis_run(
    pipe: Pipeline, client: httpx.AsyncClient, queue: LiveQueue, n: int
) -> dict[str, Any]:
    """One person's crisis message answered by a scripted reviewer with no think time."""
    user, reviewer = person(n), REVIEWERS[0]
    sent = time.perf_counter()
    posted = await client.post(
        f"{pipe.url}/v1/sessions/bench/messages",
        json={"text": CRISIS_TEXT},
        headers=pipe.headers(user),
    )
    posted.raise_for_status()
    accepted = time.perf_counter()
    turn_id: str = posted.json()["turn_id"]
    watching = asyncio.create_task(_person_sees_human(pipe, client, user, turn_id))
    try:
        listed = await queue.listed(turn_id)
        # Think time zero: the reviewer claims the moment the item shows.
        claim_at = max(listed, time.perf_counter())
        item = f"{pipe.url}/v1/review/{turn_id}"
        claimed = await client.post(f"{item}/claim", headers=pipe.headers(reviewer))
        claimed.raise_for_status()
        claimed_at = answer_at = time.perf_counter()
        answered = await client.post(
            f"{item}/answer", json={"template": TEMPLATE}, headers=pipe.headers(reviewer)
        )
        answered.raise_for_status()
        answer_ok = time.perf_counter()
        person_side = await watching
    finally:
        watching.cancel()
    # Closed once measured, as a reviewer would: every run starts on an empty queue.
    closed = await client.post(
        f"{item}/close", json={"outcome": "answered_in_chat"}, headers=pipe.headers(reviewer)
    )
    closed.raise_for_status()
    human_at = person_side["human_at"]
    final_at = person_side["final_at"]
    return {
        "turn_id": turn_id,
        "via": person_side["via"],
        "total_ms": (human_at - sent) * 1000,
        "accepted_ms": (accepted - sent) * 1000,
        "listed_ms": (listed - sent) * 1000,
        "claim_ms": (claimed_at - claim_at) * 1000,
        "answer_request_ms": (answer_ok - answer_at) * 1000,
        "delivered_ms": (human_at - answer_at) * 1000,
        "final_ms": (final_at - sent) * 1000 if final_at is not None else None,
        # The item shown to the claim sent: this process's own scheduling (the
        # reviewer's think time is zero), the rest of the total beside the three parts.
        "reaction_ms": (claim_at - listed) * 1000,
    }


async def measure_crisis(pipe: Pipeline, runs: int, warmup: int = 1) -> dict[str, Any]:
    """``runs`` crisis messages one after another (``warmup`` more first, not counted)."""
    async with (
        httpx.AsyncClient(timeout=30) as client,
        LiveQueue(pipe, client, REVIEWERS[0]) as queue,
    ):
        done = [await crisis_run(pipe, client, queue, n) for n in range(warmup + runs)][warmup:]
    out: dict[str, Any] = {"runs": len(done), "warmup": warmup, "think_time_ms": 0.0}
    for key in (
        "total_ms",
        "listed_ms",
        "claim_ms",
        "delivered_ms",
        "answer_request_ms",
        "accepted_ms",
        "reaction_ms",
    ):
        out[key] = summary([r[key] for r in done])
    out["final_ms"] = summary([r["final_ms"] for r in done if r["final_ms"] is not None])
    out["via"] = dict(collections.Counter(r["via"] for r in done))
    out["human_arrived"] = len(done)
    return out


# ---------------------------------------------------------------------- the console

# What a person in crisis writes is often a few sentences; the queue's rows carry it.
QUEUE_TEXT = (
    "I can't see a way out any more and I keep thinking about ending it. "
    "Nobody would notice if I was gone."
)


def queue_item(n: int) -> HumanReviewRequest:
    # Twenty items a person (the queue's per-person cap), critical and high in turn:
    # neither is ever evicted across people, so every item stays open.
    return HumanReviewRequest(
        turn_id=new_turn_id(),
        session_id="bench",
        user_id=f"queue{n // 20:04d}",
        decision="risk_screen",
        reason="bench",
        severity="critical" if n % 2 == 0 else "high",
        excerpt=f"({n}) {QUEUE_TEXT}",
    )


async def _listing_of(client: httpx.AsyncClient, pipe: Pipeline) -> tuple[list[str], int, float]:
    started = time.perf_counter()
    response = await client.get(f"{pipe.url}/v1/review", headers=pipe.headers(REVIEWERS[0]))
    response.raise_for_status()
    took = (time.perf_counter() - started) * 1000
    return [i["item_id"] for i in response.json()["items"]], len(response.content), took


async def _snapshot_bytes(client: httpx.AsyncClient, pipe: Pipeline) -> tuple[int, float]:
    """The live queue's first event (the snapshot): its size and time to arrive."""
    started = time.perf_counter()
    url = f"{pipe.url}/v1/review/events"
    seen = b""
    async with client.stream("GET", url, headers=pipe.headers(REVIEWERS[1])) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            seen += chunk
            if b"\n\n" in seen:
                break
    return seen.index(b"\n\n") + 2, (time.perf_counter() - started) * 1000


async def _claims_seen_live(
    client: httpx.AsyncClient, pipe: Pipeline, items: list[str]
) -> list[float]:
    """Another reviewer claims each item; from the request to the claim's ``item``
    event on a live queue (``/v1/review/events``) followed here, with no page open."""
    seen: dict[str, float] = {}
    changed = asyncio.Condition()
    ready = asyncio.Event()

    async def follow() -> None:
        url = f"{pipe.url}/v1/review/events"
        async with client.stream("GET", url, headers=pipe.headers(REVIEWERS[0])) as response:
            response.raise_for_status()
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event is not None:
                    at = time.perf_counter()
                    ready.set()
                    data = json.loads(line[6:])
                    if event == "item" and data["claim"] is not None:
                        async with changed:
                            seen.setdefault(data["item_id"], at)
                            changed.notify_all()
                    event = None

    reader = asyncio.create_task(follow(), name="bench-claims-seen")
    out: list[float] = []
    try:
        await asyncio.wait_for(ready.wait(), 60)
        for item_id in items:
            started = time.perf_counter()
            claimed = await client.post(
                f"{pipe.url}/v1/review/{item_id}/claim", headers=pipe.headers(REVIEWERS[1])
            )
            claimed.raise_for_status()

            def arrived(item_id: str = item_id) -> bool:
                return item_id in seen

            async with changed:
                await asyncio.wait_for(changed.wait_for(arrived), 60)
            out.append((seen[item_id] - started) * 1000)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return out


async def measure_console(
    pipe: Pipeline, counts: list[int], binary: str, idle_s: float
) -> dict[str, Any]:
    """The console over ``counts`` open items each (ascending, the same queue grown),
    in one browser: first render, item view, a claim seen live, the payloads."""
    producer = AIOKafkaProducer(bootstrap_servers=pipe.stack.env["KAFKA_BOOTSTRAP_SERVERS"])
    await producer.start()
    levels: list[dict[str, Any]] = []
    published = 0
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            with chromium(binary) as browser:
                for count in sorted(counts):
                    sends = [
                        await producer.send(
                            f"{pipe.prefix}human-review", encode(queue_item(n)), key=b"queue"
                        )
                        for n in range(published, count)
                    ]
                    await asyncio.gather(*sends)
                    published = count

                    async def complete(count: int = count) -> bool:
                        return len((await _listing_of(client, pipe))[0]) == count

                    await _until(complete, timeout=120)
                    listings = [await _listing_of(client, pipe) for _ in range(3)]
                    ordered, listing_bytes, _ = listings[-1]
                    snapshot_bytes, snapshot_ms = await _snapshot_bytes(client, pipe)
                    detail = await client.get(
                        f"{pipe.url}/v1/review/{ordered[0]}", headers=pipe.headers(REVIEWERS[0])
                    )
                    detail.raise_for_status()
                    # Claims by another reviewer: three seen by a live queue
                    # subscriber alone (the server's share), three in the page.
                    third = len(ordered) // 3
                    api_claims, page_claims = ordered[third : third + 3], ordered[-4:-1]
                    event_ms = await _claims_seen_live(client, pipe, api_claims)

                    def claim(item_id: str) -> None:
                        httpx.post(
                            f"{pipe.url}/v1/review/{item_id}/claim",
                            headers=pipe.headers(REVIEWERS[1]),
                            timeout=60,
                        ).raise_for_status()

                    page = await asyncio.to_thread(
                        measure_page,
                        browser,
                        pipe.url,
                        pipe.keys[REVIEWERS[0]],
                        count,
                        open_items=[ordered[0], ordered[len(ordered) // 2], ordered[-1]],
                        claims=page_claims,
                        claim=claim,
                        claimant=REVIEWERS[1],
                        idle_s=idle_s,
                    )
                    for item_id in api_claims + page_claims:
                        released = await client.post(
                            f"{pipe.url}/v1/review/{item_id}/release",
                            headers=pipe.headers(REVIEWERS[1]),
                        )
                        released.raise_for_status()
                    levels.append(
                        {
                            **page,
                            "listing_bytes": listing_bytes,
                            "listing_ms": statistics.median(ms for _, _, ms in listings),
                            "snapshot_bytes": snapshot_bytes,
                            "snapshot_ms": snapshot_ms,
                            "item_bytes": len(detail.content),
                            "claims_event_ms": event_ms,
                        }
                    )
    finally:
        await producer.stop()
    return {"levels": levels, "idle_s": idle_s}


def table(result: dict[str, Any]) -> str:
    rows = [
        ("escalation to listed by both replicas", "visible_ms"),
        ("claim request (two reviewers racing)", "claim_ms"),
        ("answer to the person's turn on the other replica", "answer_ms"),
    ]
    lines = [f"{'ms':<52}{'p50':>9}{'p95':>9}{'max':>9}{'n':>5}"]
    for label, key in rows:
        s = result[key]
        lines.append(f"{label:<52}{s['p50']:>9.1f}{s['p95']:>9.1f}{s['max']:>9.1f}{s['n']:>5}")
    lines.append(f"restarted replica rebuilt the queue in {result['rebuild_s']:.2f} s")
    lines.append(
        f"races with exactly one winner: {result['one_winner']}/{result['items']}; "
        f"both replicas naming that winner: {result['replicas_agree']}/{result['items']}"
    )
    return "\n".join(lines)


def _row(label: str, s: dict[str, float], width: int = 52) -> str:
    return f"{label:<{width}}{s['p50']:>9.1f}{s['p95']:>9.1f}{s['max']:>9.1f}{s['n']:>5}"


def crisis_table(result: dict[str, Any]) -> str:
    runs = result["runs"]
    lines = [
        f"crisis message to the human answer, {runs} runs (+{result['warmup']} warm-up), "
        f"reviewer's think time {result['think_time_ms']:.0f} ms",
        f"{'ms':<52}{'p50':>9}{'p95':>9}{'max':>9}{'n':>5}",
        _row("POST to the person seeing the answer (total)", result["total_ms"]),
        _row("  POST to the item in the reviewer's live queue", result["listed_ms"]),
        _row("  item shown to the claim accepted", result["claim_ms"]),
        _row("  answer request to the person seeing it", result["delivered_ms"]),
        _row("  (item shown to the claim sent: this process)", result["reaction_ms"]),
        _row("beside: POST answered (202)", result["accepted_ms"]),
        _row("beside: POST to the final reply on the stream", result["final_ms"]),
        _row("beside: answer request answered (202)", result["answer_request_ms"]),
    ]
    via = result["via"]
    lines.append(
        f"the answer reached the person on the turn's open event stream in "
        f"{via.get('stream', 0)}/{runs} runs, by GET /v1/turns/{{id}} after the stream "
        f"closed at the final in {via.get('turn', 0)}/{runs}"
    )
    return "\n".join(lines)


# (label, key, format): one row per figure, a column per queue size.
_CONSOLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("all rows in the list, count shown (ms)", "all_rows_ms", "{:.0f}"),
    ("rows painted (ms)", "painted_ms", "{:.0f}"),
    ("live queue's snapshot drawn (ms)", "live_ms", "{:.0f}"),
    ("queue drawn, times, during the load", "queue_renders_at_load", "{:d}"),
    ("main thread during the load (ms)", "load_task_ms", "{:.0f}"),
    ("  of it layout and style (ms)", "load_layout_ms", "{:.0f}"),
    ("main thread while idle (% of a core)", "idle_busy_percent", "{:.1f}"),
    ("item view shown (ms, slowest of 3)", "item_view_ms", "{:.1f}"),
    ("item view painted (ms, slowest of 3)", "item_painted_ms", "{:.1f}"),
    ("a claim to its live queue event (ms, median of 3)", "claim_event_ms", "{:.0f}"),
    ("a claim to its row in the page (ms, median of 3)", "claim_shown_ms", "{:.0f}"),
    ("GET /v1/review (ms, server)", "listing_ms", "{:.1f}"),
    ("GET /v1/review (KiB)", "listing_kib", "{:.0f}"),
    ("live queue's snapshot event (KiB)", "snapshot_kib", "{:.0f}"),
    ("one item's view, GET /v1/review/{id} (KiB)", "item_kib", "{:.1f}"),
    ("elements in the page", "dom_elements", "{:d}"),
)


def console_figures(level: dict[str, Any]) -> dict[str, Any]:
    """The table's figures of one queue size, from the measured level."""
    load = level["load_main_thread_s"]
    views = level["item_views"]
    return {
        **level,
        "load_task_ms": load["TaskDuration"] * 1000,
        "load_layout_ms": (load["LayoutDuration"] + load["RecalcStyleDuration"]) * 1000,
        "idle_busy_percent": level["idle_busy_share"] * 100,
        "item_view_ms": max(v["shown_ms"] for v in views),
        "item_painted_ms": max(v["painted_ms"] for v in views),
        "claim_event_ms": statistics.median(level["claims_event_ms"]),
        "claim_shown_ms": statistics.median(level["claims_seen_ms"]),
        "listing_kib": level["listing_bytes"] / 1024,
        "snapshot_kib": level["snapshot_bytes"] / 1024,
        "item_kib": level["item_bytes"] / 1024,
    }


def console_table(result: dict[str, Any]) -> str:
    if result.get("skipped"):
        return f"review console: not measured ({result['skipped']})"
    levels = [console_figures(level) for level in result["levels"]]
    width = 52
    head = "".join(f"{level['items']:>10}" for level in levels)
    ratio = len(levels) > 1
    lines = [
        "review console in headless Chromium, by open items (times from navigation start)",
        f"{'':<{width}}{head}{'ratio':>8}" if ratio else f"{'':<{width}}{head}",
    ]
    for label, key, fmt in _CONSOLE_ROWS:
        values = [level[key] for level in levels]
        cells = "".join(f"{'n/a' if v is None else fmt.format(v):>10}" for v in values)
        line = f"{label:<{width}}{cells}"
        if ratio and values[0] and values[-1] is not None:
            line += f"{values[-1] / values[0]:>7.1f}x"
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True)
class Plan:
    """How much of each part to run; ``quick`` for the test suite."""

    items: int  # racing claims on two replicas
    runs: int  # crisis messages through the whole pipeline
    queue: tuple[int, ...]  # open items the console is measured over, ascending
    idle_s: float  # how long the console is watched idle

    @classmethod
    def full(cls) -> Plan:
        return cls(items=50, runs=50, queue=(50, 5000), idle_s=5.0)

    @classmethod
    def quick(cls) -> Plan:
        return cls(items=3, runs=3, queue=(10, 100), idle_s=1.0)


PARTS = ("replicas", "crisis", "console")


async def run(
    plan: Plan, parts: tuple[str, ...], bootstrap: str | None, log_dir: Path
) -> dict[str, Any]:
    """The parts asked for: racing replicas on a stack of their own, then the crisis
    runs and the console on one whole pipeline (the console after the crisis runs,
    whose items are closed by then)."""
    out: dict[str, Any] = {"plan": dataclasses.asdict(plan)}
    if "replicas" in parts:
        out["replicas"] = await measure(plan.items, bootstrap, log_dir / "replicas")
    if "crisis" not in parts and "console" not in parts:
        return out
    binary = find_chromium() if "console" in parts else None
    async with pipeline(bootstrap, log_dir / "pipeline", 1 + plan.runs) as pipe:
        if "crisis" in parts:
            out["crisis"] = await measure_crisis(pipe, plan.runs)
        if "console" in parts:
            if binary is None:
                out["console"] = {"skipped": "no chromium on PATH"}
            else:
                out["console"] = await measure_console(pipe, list(plan.queue), binary, plan.idle_s)
    return out


def report(result: dict[str, Any]) -> str:
    parts = []
    if "replicas" in result:
        parts.append(table(result["replicas"]))
    if "crisis" in result:
        parts.append(crisis_table(result["crisis"]))
    if "console" in result:
        parts.append(console_table(result["console"]))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few of each (the test suite)")
    parser.add_argument("--items", type=int, default=None, help="racing claims (default 50)")
    parser.add_argument("--runs", type=int, default=None, help="crisis messages (default 50)")
    parser.add_argument(
        "--queue", default=None, help="open items for the console, e.g. 50,5000 (the default)"
    )
    parser.add_argument("--only", choices=PARTS, action="append", help="run this part (repeat)")
    parser.add_argument("--bootstrap", default=None, help="a running broker (default: its own)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan.full()
    changes: dict[str, Any] = {}
    if args.items is not None:
        changes["items"] = args.items
    if args.runs is not None:
        changes["runs"] = args.runs
    if args.queue:
        changes["queue"] = tuple(sorted(int(n) for n in args.queue.split(",")))
    plan = dataclasses.replace(plan, **changes)
    where = machine()
    print(f"machine: {json.dumps(where)}")
    with tempfile.TemporaryDirectory(prefix="bench-review-") as logs:
        result = asyncio.run(run(plan, tuple(args.only or PARTS), args.bootstrap, Path(logs)))
    result["machine"] = where
    print(report(result))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
