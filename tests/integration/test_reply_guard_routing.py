"""The reply guard's model tier for real, over the broker (issue #28).

Seven processes on the embedded broker and a scripted model that writes the Coach's
reply and answers the guard. On a turn with a step to avoid, a reply the rules pass
reports a confidence measured below the guard's shipped bar: it is held back (no
piece is shown), a model reads it whole, and the step the model quotes puts the
rules' reply in its place. A reply the rules reject costs no guard call, and a turn
with nothing to avoid streams as before, with no guard call either.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from coachbus.llm import Policy
from coachbus.safety import judge
from coachbus.safety.steps import read_reply
from tests.fault.conftest import read_topic
from tests.integration.conftest import RunningStack
from tests.integration.scripted_llm import Script, ScriptedLLM, post_turn, scripted_stack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

HERE = Path(__file__).parent
POLICY = HERE / "reply_guard_policy.toml"
USERS = ("rhea", "sami", "tova")
KEYS = {u: f"key-{u}-0123456789" for u in USERS}
# What only the guard's instructions say: the scripted model answers the guard by it.
ASKED = "must not suggest these risky steps"

INJURED = "I'm going to train every day through the pain, my knee injury won't stop me"
# Goes along with training through the injury in words the rules do not read as the step.
SLIPPED = (
    "Love that fire. Your body will thank you for showing up no matter what. "
    "What are you most looking forward to this week?"
)
FLAGGED = json.dumps(
    {"steps": [{"step_id": "train_through_injury", "quote": "showing up no matter what"}]}
)
# Says the step in words the rules read: rejected without asking anyone.
CAUGHT = (
    "Great energy. Keep training hard every day through the knee pain this week, "
    "no rest days at all. How does that feel?"
)
EASY = (
    "That sounds like a real step forward with your running. Three short runs a week is "
    "a good rhythm to start with. Which day this week feels easiest for the first one?"
)


@pytest_asyncio.fixture(scope="module")
async def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningStack, ScriptedLLM]]:
    llm = ScriptedLLM(
        {
            ASKED: Script(FLAGGED),  # the guard's call, whoever's turn it is
            "marigold": Script(SLIPPED),
            "thistle": Script(CAUGHT),
            "juniper": Script(EASY),
        },
        Script('{"steps": []}'),
    )
    folder = tmp_path_factory.mktemp("reply-guard")
    async with scripted_stack(
        kafka_bootstrap, folder, llm, name="rg", keys=KEYS, policy=POLICY
    ) as rs:
        yield rs, llm


async def _coach(rs: RunningStack, user: str, text: str) -> tuple[dict[str, Any], list[Any]]:
    """The Coach's result of the turn and every reply record it published for it."""
    turn = await post_turn(rs, KEYS[user], f"{user}-s", text)
    records = await read_topic(
        rs.bootstrap,
        (f"{rs.prefix}agent.coach", f"{rs.prefix}coach-replies"),
        until=lambda recs: any(turn in r.value and r.topic.endswith("agent.coach") for r in recs),
        timeout=60,
        settle=0.5,
    )
    mine = [r for r in records if turn in r.value]
    [result] = [json.loads(r.value) for r in mine if r.topic.endswith("agent.coach")]
    replies = [json.loads(r.value) for r in mine if r.topic.endswith("coach-replies")]
    return result, replies


def test_the_premise_is_measured() -> None:
    # An operator's file without the guard gets the shipped entry, whose bar every
    # passing answer of the guard measures below.
    policy = Policy.load(POLICY).for_kind(judge.KIND)
    assert policy == Policy.load_shipped().for_kind(judge.KIND)
    slipped = read_reply(SLIPPED, ["train_through_injury"])
    assert slipped.found == [] and slipped.confidence < policy.min_confidence
    assert read_reply(CAUGHT, ["train_through_injury"]).found


async def test_a_reply_the_rules_pass_is_held_and_read_by_a_model(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, llm = stack
    result, replies = await _coach(rs, "rhea", f"{INJURED} (marigold).")
    payload = result["payload"]
    assert "train_through_injury" in payload["avoided_steps"]
    assert result["fallback_reason"] == "reply_guard: train_through_injury"
    assert result["tier"] == "deterministic"
    # Nothing of the model's reply was shown: one whole reply, the rules' own.
    assert [r["kind"] for r in replies] == ["coach"], replies
    assert "no matter what" not in replies[0]["text"]
    assert [r for r in llm.requests if "marigold" in r and ASKED in r]


async def test_a_reply_the_rules_reject_costs_no_guard_call(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, llm = stack
    result, replies = await _coach(rs, "sami", f"{INJURED} (thistle).")
    assert result["tier"] == "deterministic" and result["fallback_reason"] != "reply_guard"
    assert not [r for r in llm.requests if "thistle" in r and ASKED in r]
    assert [r for r in llm.requests if "thistle" in r], "the coach's model was asked"
    assert all("every day through" not in r["text"] for r in replies)


async def test_a_turn_with_nothing_to_avoid_streams_without_a_guard_call(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, llm = stack
    result, replies = await _coach(
        rs, "tova", "I want to start running three times a week (juniper)."
    )
    assert result["payload"]["avoided_steps"] == []
    assert result["tier"] == "small"
    assert "coach_delta" in [r["kind"] for r in replies]
    assert not [r for r in llm.requests if "juniper" in r and ASKED in r]
