"""LLM faults: HTTP 500s, hangs, invalid JSON, truncated JSON, endless whitespace.

Two levels. The router against the simulator *process* with one fault at rate 1.0:
every decision still returns, carried by the deterministic fallback and marked
with why. The whole pipeline against a simulator mixing every fault: every accepted
turn still gets exactly one final reply.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from pydantic import BaseModel, Field

from coachbus.contracts import TurnBudget
from coachbus.llm import LLMClient, LLMSettings, Message, Policy, Router, StopReason
from tests.fault.conftest import (
    LLM_POLICY,
    llm_env,
    llm_sim,
    new_prefix,
    post_turn,
    replies_for,
    running,
    sim_stats,
    stack_env,
)
from tests.integration.conftest import RunningStack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

FAULTS = {
    "http_500": ["--error-rate", "1.0"],
    "timeout": ["--timeout-rate", "1.0", "--hang-s", "3"],
    "invalid_json": ["--invalid-json-rate", "1.0"],
    "truncated_json": ["--truncate-rate", "1.0"],
    "endless_whitespace": ["--whitespace-rate", "1.0"],
}


class Plan(BaseModel):
    step: str = Field(min_length=1, max_length=200)
    minutes: int = Field(ge=1, le=120)


DETERMINISTIC = Plan(step="write one sentence", minutes=5)


def _messages(_tier: str, errors: list[str]) -> list[Message]:
    msgs: list[Message] = [{"role": "user", "content": "I keep putting off my report."}]
    if errors:
        msgs.append({"role": "user", "content": "Fix: " + "; ".join(errors)})
    return msgs


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_router_falls_back_under_every_fault(tmp_path: Path, fault: str) -> None:
    with llm_sim(tmp_path, *FAULTS[fault]) as base_url:
        settings = LLMSettings(
            base_url=base_url,
            default_timeout_s=1.5,
            connect_timeout_s=1.0,
            retry_attempts=2,
            retry_wait_initial_s=0.01,
            retry_wait_max_s=0.02,
            retry_wait_jitter_s=0.0,
            send_priority=False,
        )
        client = LLMClient(settings)
        router = Router(policy=Policy.load(LLM_POLICY), client=client)
        try:
            budget = TurnBudget(
                max_tokens=20_000, deadline_at=datetime.now(UTC) + timedelta(seconds=20)
            )
            # Bounded so a hang in the layer fails the test instead of the suite.
            outcome = await asyncio.wait_for(
                router.decide(
                    kind="blocked_steps",
                    agent="stability",
                    deterministic=lambda: (DETERMINISTIC, 0.5),
                    build_messages=_messages,
                    response_model=Plan,
                    budget=budget,
                ),
                timeout=60,
            )
        finally:
            await client.aclose()
        stats = sim_stats(base_url)
    # The fault really happened: the simulator answered and injected it.
    assert stats["requests"] >= 1
    assert sum(stats["faults"].values()) >= 1, stats["faults"]
    # ...and the decision still came back, from the fallback, saying why.
    assert outcome.value == DETERMINISTIC
    assert outcome.tier == "deterministic"
    assert outcome.fallback_reason is not None
    assert [step.tier for step in outcome.trail][:2] == ["deterministic", "small"]


# --------------------------------------------------------------------------- pipeline

MIXED = [
    "--error-rate", "0.2",
    "--timeout-rate", "0.1",
    "--invalid-json-rate", "0.15",
    "--truncate-rate", "0.15",
    "--whitespace-rate", "0.15",
    "--hang-s", "3",
]  # fmt: skip


@pytest_asyncio.fixture(scope="module")
async def faulty_llm_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningStack, str]]:
    logs = tmp_path_factory.mktemp("llm-fault-logs")
    with llm_sim(logs, *MIXED) as base_url:
        env = {**stack_env(new_prefix("lf"), deadline_ms=12_000), **llm_env(base_url)}
        async with running(kafka_bootstrap, logs, env) as rs:
            yield rs, base_url


@pytest.mark.heavy
async def test_every_turn_answered_once_whatever_the_llm_does(
    faulty_llm_stack: tuple[RunningStack, str],
) -> None:
    rs, base_url = faulty_llm_stack
    users = ["alice", "bob", "carol"]
    texts = [
        "I want to write my thesis but I keep scrolling instead.",
        "Ich will jeden Morgen laufen gehen, schaffe es aber nie.",
        "I'm thinking about putting all my savings into a friend's startup.",
    ]
    async with httpx.AsyncClient(timeout=30) as client:
        turns = await asyncio.gather(
            *(
                post_turn(client, rs, users[i % 3], texts[i % 3], session=f"llm-{i % 4}")
                for i in range(15)
            )
        )
    replies = await replies_for(rs, set(turns), timeout=120)
    assert not replies.missing(turns), f"{len(replies.missing(turns))} turns never answered"
    assert not replies.doubled(), f"turns answered twice: {replies.doubled()}"
    assert not replies.doubled_coach(), f"coach replied twice: {replies.doubled_coach()}"
    for turn in turns:
        final = replies.last_final[turn]
        assert final["text"].strip()
        # A final that is missing agents says so.
        assert final["degraded"] or not final["missing_agents"]
    stats = sim_stats(base_url)
    if stats["requests"]:
        # Once the agents' LLM tiers are wired, the faults must really have been hit.
        assert sum(stats["faults"].values()) >= 1, stats


async def test_agent_results_name_their_fallback(
    faulty_llm_stack: tuple[RunningStack, str],
) -> None:
    """Every agent result of a turn is valid and, when it came from a fallback after
    an LLM failure, carries ``fallback_reason`` instead of pretending to be an LLM tier."""
    rs, _base_url = faulty_llm_stack
    from tests.fault.conftest import read_topic

    async with httpx.AsyncClient(timeout=30) as client:
        turn = await post_turn(client, rs, "alice", "I always skip the gym after work.", "fb")
    await replies_for(rs, {turn}, timeout=90)
    seen: dict[str, dict[str, object]] = {}
    for agent in ("shadow", "persona", "plasticity", "stability", "coach"):
        records = await read_topic(
            rs.bootstrap,
            f"{rs.prefix}agent.{agent}",
            until=lambda recs: any(turn.encode() in (r.value or b"") for r in recs),
            timeout=30,
            settle=0.2,
        )
        for record in records:
            result = json.loads(record.value)
            if result["turn_id"] == turn:
                seen[agent] = result
    assert set(seen) == {"shadow", "persona", "plasticity", "stability", "coach"}
    # An agent may take several decisions (Stability: risk screen and blocked steps),
    # so its tier is the highest that carried one; a fallback of any of them must be
    # named with a reason the router knows.
    known = {r.value for r in StopReason} | {"human_review"}
    for agent, result in seen.items():
        reason = result.get("fallback_reason")
        assert reason is None or reason in known, (agent, reason)
