"""Hostile records on every consumed topic: a dead letter with the reason from each
consuming service, never a crash, and the pipeline keeps answering."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections import defaultdict
from typing import Any

import httpx
import pytest

from coachbus.roster import AGENT_SERVICES
from tests.fault.conftest import post_turn, produce, read_topic, replies_for
from tests.integration.conftest import RunningStack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

AGENTS = AGENT_SERVICES
WRONG_SCHEMA = json.dumps(
    {"schema_version": 1, "turn_id": "t-wrong", "user_id": "mallory", "kind": "message"}
).encode()


def hostile_payloads() -> dict[str, bytes]:
    return {
        "random_bytes": os.urandom(512) + b"\xff",  # \xff: never valid UTF-8
        "bad_utf8": b'{"text": "caf\xc3\x28"}',
        "not_json": b"{this is not json",
        "wrong_schema": WRONG_SCHEMA,
        "future_version": json.dumps({"schema_version": 99, "turn_id": "t9"}).encode(),
        "json_scalar": b"null",
        "deep_nesting": b"[" * 10_000 + b"]" * 10_000,
    }


# Over every consumer's size limit, and (base64-encoded) over the producer's 1 MB
# request limit too: the dead letter cannot carry all of it.
HUGE = b'{"text": "' + b"x" * (5 * 1024 * 1024) + b'"}'


EXPECTED_TYPES = {
    "bad_utf8": {"bad_utf8"},
    "not_json": {"not_json"},
    "wrong_schema": {"schema"},
    "future_version": {"schema_version"},
    "json_scalar": {"schema"},
    "deep_nesting": {"too_deep"},
    "random_bytes": {"bad_utf8"},
}


def _targets() -> dict[str, tuple[str, ...]]:
    # user-messages is read by all six services; each agent.* topic by Synth (and the
    # gateway's feed, which skips what it cannot read).
    targets: dict[str, tuple[str, ...]] = {"user-messages": AGENTS}
    for agent in AGENTS[:-1]:
        targets[f"agent.{agent}"] = ("synth",)
    return targets


async def _dead_letters(
    rs: RunningStack, payloads: dict[str, bytes]
) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], set[tuple[str, str, str]], int]:
    """Publish every payload to every consumed topic; collect the dead letters."""
    targets = _targets()
    run = uuid.uuid4().hex[:6]
    for topic in targets:
        await produce(
            rs.bootstrap,
            f"{rs.prefix}{topic}",
            [(f"{name}|{topic}|{run}".encode(), value) for name, value in payloads.items()],
        )
    expected = sum(len(services) * len(payloads) for services in targets.values())

    def mine(recs: list[Any]) -> list[dict[str, Any]]:
        letters = [json.loads(r.value) for r in recs]
        return [d for d in letters if (d["key"] or "").endswith(f"|{run}")]

    records = await read_topic(
        rs.bootstrap, f"{rs.prefix}dlq", until=lambda recs: len(mine(recs)) >= expected, timeout=90
    )
    got: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for letter in mine(records):
        name, topic, _run = letter["key"].split("|")
        got[(topic, name)].append(letter)
    missing = {
        (topic, name, service)
        for topic, services in targets.items()
        for name in payloads
        for service in services
        if service not in {d["service"] for d in got[(topic, name)]}
    }
    return got, missing, expected


async def test_hostile_records_are_dead_lettered_by_every_consumer(
    running_stack: RunningStack,
) -> None:
    rs = running_stack
    payloads = hostile_payloads()
    got, missing, expected = await _dead_letters(rs, payloads)
    assert not missing, f"no dead letter for: {sorted(missing)}"
    assert sum(map(len, got.values())) == expected, "a hostile record was dead-lettered twice"
    for (topic, name), letters in got.items():
        for letter in letters:
            assert letter["source_topic"] == f"{rs.prefix}{topic}"
            assert letter["reason"], letter
            assert letter["error_type"] in EXPECTED_TYPES[name], (name, letter["error_type"])
            assert base64.b64decode(letter["original_b64"]) == payloads[name]


async def test_oversized_record_is_dead_lettered(running_stack: RunningStack) -> None:
    """BUG (found by this suite): the dead letter of a 5 MB record embeds all of it as
    base64 (~7 MB), over the producer's max_request_size, so publishing it raises
    MessageSizeTooLargeError inside KeyedDispatcher._work: no dead letter, and the
    key's worker dies with the record's offset left in flight (see docs/reliability.md)."""
    rs = running_stack
    got, missing, _expected = await _dead_letters(rs, {"huge": HUGE})
    assert not missing, f"no dead letter for: {sorted(missing)}"
    for letters in got.values():
        for letter in letters:
            assert letter["error_type"] == "too_large"
            assert "exceeds limit" in letter["reason"]
    # user-messages is read by all six services; each agent.* topic by Synth (and the
    # gateway's feed, which skips what it cannot read).


async def test_pipeline_still_answers_after_the_hostile_records(
    running_stack: RunningStack,
) -> None:
    rs = running_stack
    supervisor = rs.stack.supervisor
    assert supervisor is not None
    async with httpx.AsyncClient(timeout=30) as client:
        turns = [
            await post_turn(client, rs, u, "I want to go to bed before midnight.", "after")
            for u in ("alice", "bob", "carol")
        ]
    replies = await replies_for(rs, set(turns), timeout=60)
    assert not replies.missing(turns)
    assert not replies.doubled()
    for turn in turns:
        assert replies.last_final[turn]["missing_agents"] == []
    # Nobody crashed on the way: no restarts.
    assert all(supervisor.restarts(name) == 0 for name in supervisor.names)
