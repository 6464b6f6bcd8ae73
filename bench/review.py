"""The human tier measured: two gateway replicas, a review queue, reviewers racing.

``python -m bench.review --items N`` starts two gateway processes on their own Tansu
broker (``--bootstrap`` to use a running one; nothing else of the pipeline: the
escalations are published to ``human-review`` here, as Stability would), and for
each of ``N`` critical items measures, on the wall clock of this process:

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
by that much. Every figure is measured in this run; nothing is asserted on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from bench.harness import machine
from coachbus.bus.codec import encode
from coachbus.contracts import HumanReviewRequest, new_turn_id
from coachbus.embedded.stack import Stack, StackConfig

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


async def measure(items: int, bootstrap: str | None, log_dir: Path) -> dict[str, Any]:
    prefix = f"rb{uuid.uuid4().hex[:8]}."
    config = StackConfig.ephemeral(
        bootstrap=bootstrap,
        log_dir=log_dir,
        services=("gateway",),
        replicas={"gateway": 2},
        env={
            "COACHBUS_TOPIC_PREFIX": prefix,
            "COACHBUS_PARTITIONS": "3",
            "COACHBUS_API_KEYS": ",".join(
                f"{u}:{k}:reviewer" if u in REVIEWERS else f"{u}:{k}" for u, k in KEYS.items()
            ),
            "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
        },
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review", description=__doc__)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--bootstrap", default=None, help="a running broker (default: its own)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    where = machine()
    print(f"machine: {json.dumps(where)}")
    with tempfile.TemporaryDirectory(prefix="bench-review-") as logs:
        result = asyncio.run(measure(args.items, args.bootstrap, Path(logs)))
    result["machine"] = where
    print(table(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
