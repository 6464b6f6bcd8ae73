"""The reply guard's model tier (coachbus.safety.judge): which replies a model reads,
what it may add, and what it can never do (clear a step, flag words the reply lacks).

The model is a scripted OpenAI-compatible endpoint (httpx MockTransport), the router
and client are the real ones.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coachbus.contracts import TurnBudget, UserMessage
from coachbus.llm import LLMClient, LLMSettings, Policy, PromptBuilder, Router
from coachbus.memory import context_for
from coachbus.metrics import REGISTRY
from coachbus.safety import judge
from coachbus.safety.steps import ReplyReading, read_reply
from tests.services.test_llm_tiers import Script

pytestmark = pytest.mark.unit

# Goes along with quitting the job without a word the rules read as the step: "quiet".
GOES_ALONG = "Honestly the freedom will be worth it. What would you do first with all that time?"
NEVER = ["quit_job_abruptly"]


@pytest.fixture(autouse=True)
def _no_operator_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("COACHBUS_LLM_"):
            monkeypatch.delenv(key)


def _wired(script: Script) -> Router:
    settings = LLMSettings(base_url="http://llm.test/v1", retry_attempts=1)
    return Router(client=LLMClient(settings, transport=httpx.MockTransport(script)))


async def _judge(router: Router, reply: str, never: list[str] = NEVER) -> judge.Judged:
    now = datetime.now(UTC)
    msg = UserMessage.create(
        user_id="u1",
        session_id="s1",
        text="I'm done, I'll just walk out of that office on Friday.",
        deadline_ms=20_000,
        max_tokens=0,
        wall_clock_ms=20_000,
    )
    return await judge.judge(
        router,
        reply,
        never,
        agent="synth",
        builder=PromptBuilder(),
        ctx=context_for(None, msg),
        budget=TurnBudget(max_tokens=8_000, deadline_at=now + timedelta(seconds=20)),
    )


def _steps(*claims: tuple[str, str]) -> str:
    return json.dumps({"steps": [{"step_id": s, "quote": q} for s, q in claims]})


def test_a_reading_reports_its_outcome_and_measured_confidence() -> None:
    quiet = read_reply(GOES_ALONG, NEVER)
    assert (quiet.found, quiet.outcome) == ([], "quiet")
    named = read_reply("Rather than quitting on Friday, keep the job while you test it.", NEVER)
    assert (named.found, named.outcome) == ([], "named")
    hit = read_reply("Hand in your notice tomorrow and sort the money out later.", NEVER)
    assert hit.outcome == "suggested" and hit.found
    # Measured, never chosen: each outcome's confidence is the committed table's.
    for reading in (quiet, named, hit):
        assert 0 < reading.confidence < 1


def test_a_model_is_asked_only_below_the_bar_and_with_an_endpoint() -> None:
    assert not judge.asks_model(Router())  # no endpoint: the rules' reading stands
    router = _wired(Script())
    bar = router.policy.for_kind(judge.KIND).min_confidence
    passing = (ReplyReading([], named=True), ReplyReading([], named=False))
    assert judge.asks_model(router) == any(r.confidence < bar for r in passing)
    # An operator's bar below every passing outcome: the rules' reading is trusted.
    lenient = Policy.from_toml(_policy_with_bar(0.0))
    assert not judge.asks_model(Router(policy=lenient, client=router.client))


def _policy_with_bar(bar: float) -> str:
    from importlib import resources

    text = resources.files("coachbus.llm").joinpath("policy.toml").read_text("utf-8")
    head, _, rest = text.partition("[decision.reply_guard]")
    body, _, tail = rest.partition("\n\n[")
    body = body.replace("min_confidence = 0.95", f"min_confidence = {bar}")
    return f"{head}[decision.reply_guard]{body}\n\n[{tail}"


def _verdicts(verdict: str) -> float:
    value = REGISTRY.get_sample_value(
        "coachbus_reply_guard_total", {"agent": "synth", "verdict": verdict}
    )
    return value or 0.0


async def test_a_reply_the_rules_passed_goes_to_the_model_which_adds_a_quoted_step() -> None:
    flagged = _verdicts("flagged")
    script = Script()
    script.answers = [_steps(("quit_job_abruptly", "the freedom will be worth it"))]
    judged = await _judge(_wired(script), GOES_ALONG)
    assert judged.added == [("quit_job_abruptly", "the freedom will be worth it")]
    assert judged.blocks() == "reply_guard: quit_job_abruptly"
    assert _verdicts("flagged") == flagged + 1
    assert judged.tier == "small" and len(script.bodies) == 1
    body = script.bodies[0]
    # The reply is data, fenced; the instructions name the blocked step.
    prompt = " ".join(str(m["content"]) for m in body["messages"])
    assert GOES_ALONG in prompt and "quit_job_abruptly" in prompt
    assert body["response_format"]["type"] == "json_schema"


async def test_a_step_the_rules_found_costs_no_call() -> None:
    script = Script()
    judged = await _judge(_wired(script), "Hand in your notice tomorrow, sort money later.")
    assert judged.found and judged.tier == "deterministic"
    assert script.bodies == []


async def test_an_invented_quote_or_an_unblocked_step_is_repaired_then_the_rules_stand() -> None:
    script = Script()
    script.answers = [
        _steps(("quit_job_abruptly", "just quit on friday")),  # not in the reply
        _steps(("all_savings", "the freedom will be worth it")),  # not blocked this turn
    ] * 3
    judged = await _judge(_wired(script), GOES_ALONG)
    assert judged.found == [] and judged.tier == "deterministic"
    assert len(script.bodies) >= 2  # a repair was tried, bounded by the policy
    assert "rejected" in script.instructions()
    # Nobody vouched for the reply: the services may not show it.
    assert judged.unread and judged.blocks() is not None
    assert (judged.blocks() or "").startswith("reply_guard: unread")


async def test_a_model_saying_none_leaves_the_reply_passed() -> None:
    script = Script()
    script.answers = [_steps()]
    judged = await _judge(_wired(script), GOES_ALONG)
    assert judged.found == [] and judged.tier == "small"
    assert not judged.unread and judged.blocks() is None


async def test_no_blocked_step_no_call() -> None:
    script = Script()
    judged = await _judge(_wired(script), GOES_ALONG, never=[])
    assert judged.found == [] and script.bodies == []
    assert judged.blocks() is None
    # No endpoint: the rules' reading stands and the reply may be shown.
    judged = await _judge(Router(), GOES_ALONG)
    assert judged.tier == "deterministic" and judged.blocks() is None


def test_check_names_what_is_wrong() -> None:
    problems = judge.check(
        [("all_savings", "worth it all"), ("quit_job_abruptly", "walk out now")],
        GOES_ALONG,
        NEVER,
    )
    assert "not one of the blocked steps" in problems[0]
    assert "not in the reply" in problems[1]
