"""The step screen's measured confidence routes for real (issue #28), over the broker.

Seven processes on the embedded broker, a scripted model as the small tier, and a
policy where only the blocked-steps decision may reach it (at the shipped bar, 0.9).
A message neither reader finds a step in reports "no step" at the confidence
measured for it (below the bar), a step only the learned reader found likewise: the
model is asked, and the step it quotes is blocked. A step both readers find reports
the measured 0.95: the model is never asked about it, and the block stands.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from coachbus.confidence import measured
from coachbus.llm import Policy
from coachbus.safety.steps import step_screen
from tests.fault.conftest import read_topic
from tests.integration.conftest import RunningStack
from tests.integration.scripted_llm import Script, ScriptedLLM, post_turn, scripted_stack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

HERE = Path(__file__).parent
USERS = ("nora", "otto", "pia", "quinn")
KEYS = {u: f"key-{u}-0123456789" for u in USERS}

# Said without any word the rules read as cutting sleep: only the learned reader
# finds it (its own outcome, under the bar); the model quotes it.
UNSEEN = "I will study till dawn every night until the exam (nightowl), whatever it takes."
STEPS_ANSWER = json.dumps(
    {"steps": [{"step_id": "sleep_deprivation", "evidence": "study till dawn every night"}]}
)
# Neither reader finds the step: an uncertain "no step", which the model reads.
NEITHER = "The exam is in a week (larkspur), so the nights are for the books now."
NEITHER_ANSWER = json.dumps(
    {"steps": [{"step_id": "sleep_deprivation", "evidence": "the nights are for the books"}]}
)
BAR = Policy.load(HERE / "step_routing_policy.toml").for_kind("blocked_steps").min_confidence
FOUND = "Tomorrow I quit my job (quartz), no backup plan at all."
# One step the rules find, beside another step domain they read nothing risky in:
# the hit_more outcome, under the bar, so the model reads it and finds the second.
BESIDE = (
    "Tomorrow I quit my job, no backup plan at all (saffron). "
    "And my diet is going to be very strict till the launch."
)
BESIDE_ANSWER = json.dumps(
    {
        "steps": [
            {"step_id": "quit_job_abruptly", "evidence": "quit my job, no backup plan"},
            {"step_id": "crash_diet", "evidence": "my diet is going to be very strict"},
        ]
    }
)


@pytest_asyncio.fixture(scope="module")
async def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningStack, ScriptedLLM]]:
    llm = ScriptedLLM(
        {
            "nightowl": Script(STEPS_ANSWER),
            "larkspur": Script(NEITHER_ANSWER),
            "saffron": Script(BESIDE_ANSWER),
        },
        Script('{"steps": []}'),
    )
    folder = tmp_path_factory.mktemp("step-routing")
    policy = HERE / "step_routing_policy.toml"
    async with scripted_stack(
        kafka_bootstrap, folder, llm, name="sr", keys=KEYS, policy=policy
    ) as rs:
        yield rs, llm


async def _stability_result(rs: RunningStack, user: str, text: str) -> dict[str, Any]:
    turn = await post_turn(rs, KEYS[user], f"{user}-s", text)
    records = await read_topic(
        rs.bootstrap,
        f"{rs.prefix}agent.stability",
        until=lambda recs: any(turn in r.value for r in recs),
        timeout=60,
        settle=0.5,
    )
    [result] = [json.loads(r.value) for r in records if turn in r.value]
    return result  # type: ignore[no-any-return]


async def test_a_confident_block_costs_no_model_call(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, llm = stack
    # The premise, measured: both readers find it, and that answer clears the bar.
    assert step_screen(FOUND).outcome == "agreed" and step_screen(FOUND).confidence >= BAR
    result = await _stability_result(rs, "otto", FOUND)
    assert [b["step_id"] for b in result["payload"]["blocked_steps"]] == ["quit_job_abruptly"]
    assert not [r for r in llm.requests if "quartz" in r], "a found step still cost a call"
    assert result["tier"] == "deterministic"


@pytest.mark.parametrize(
    ("user", "text", "outcome", "marker", "expected"),
    [
        # A step only the learned reader found: the model checks it.
        ("nora", UNSEEN, ("learned",), "nightowl", {"sleep_deprivation"}),
        # An uncertain "no step": neither reader found a step (the learned one may lean
        # toward one under its bar: "none_doubt", measured lower still).
        ("quinn", NEITHER, ("none", "none_doubt"), "larkspur", {"sleep_deprivation"}),
        # A step found beside another step domain (hit_more): the model adds the second.
        ("pia", BESIDE, ("hit_more",), "saffron", {"quit_job_abruptly", "crash_diet"}),
    ],
)
async def test_an_answer_under_the_bar_reaches_the_model(
    stack: tuple[RunningStack, ScriptedLLM],
    user: str,
    text: str,
    outcome: tuple[str, ...],
    marker: str,
    expected: set[str],
) -> None:
    rs, llm = stack
    screen = step_screen(text)  # the premise, measured
    assert screen.outcome in outcome
    assert screen.confidence == measured("blocked_steps").of(screen.outcome)
    assert screen.confidence < BAR
    result = await _stability_result(rs, user, text)
    assert [r for r in llm.requests if marker in r], f"the model never read {user}'s message"
    blocked = {b["step_id"] for b in result["payload"]["blocked_steps"]}
    assert blocked == expected, blocked
    assert result["tier"] == "small"
