"""The agents' LLM tiers through the real router and client, against a scripted
OpenAI-compatible server (httpx MockTransport speaking server-sent events).

Each test scripts the model's answers in order and checks what the handler made
of them: escalation on low confidence, repair and fallback on invalid answers,
safety that only ever goes up, and the Coach's streamed pieces.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import httpx
import pytest

from coachbus.contracts import HumanReviewRequest, Reply, TurnBudget, UserMessage
from coachbus.contracts.payloads import CrisisCategory
from coachbus.llm import LLMClient, LLMSettings, Router
from coachbus.topics import Topic
from evaluation.chain import results_for
from services.coach import handlers as coach
from services.persona import handlers as persona
from services.shadow import handlers as shadow
from services.stability import handlers as stability
from services.synth import assemble
from services.synth import handlers as synth
from services.synth import logic as synth_logic

pytestmark = pytest.mark.unit


def message(text: str, turn: str = "t1", user: str = "u1") -> UserMessage:
    now = datetime.now(UTC)
    return UserMessage(
        turn_id=turn,
        session_id="s1",
        user_id=user,
        created_at=now,
        text=text,
        deadline_at=now + timedelta(seconds=20),
        budget=TurnBudget(max_tokens=20_000, deadline_at=now + timedelta(seconds=20)),
    )


class Script:
    """A chat-completions endpoint answering from a queue, streaming word by word."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        text = self.answers.pop(0) if self.answers else '{"nothing": "scripted"}'
        pieces = [w + " " for w in text.split(" ")]
        pieces[-1] = pieces[-1][:-1]
        events = [
            {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
            for p in pieces
        ]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events.append(
            {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": len(pieces)}}
        )
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    def instructions(self, i: int = -1) -> str:
        return str(self.bodies[i]["messages"][-1]["content"])


class Wired:
    def __init__(self, module: ModuleType, script: Script) -> None:
        self.module = module
        self.script = script
        self.published: list[tuple[str, Any]] = []
        self.reviews: list[HumanReviewRequest] = []
        self.writes: list[str] = []


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``wire(module)``: the module's runtime thinks through a scripted model;
    its publishes, reviews and store writes are collected instead of sent."""
    for key in list(os.environ):
        if key.startswith("COACHBUS_LLM_"):
            monkeypatch.delenv(key)

    def install(module: ModuleType) -> Wired:
        script = Script()
        wired = Wired(module, script)
        runtime = module.runtime
        settings = LLMSettings(base_url="http://llm.test/v1", retry_attempts=1)
        client = LLMClient(settings, transport=httpx.MockTransport(script))

        async def publish(topic: Topic | str, event: Any, *, key: str) -> None:
            wired.published.append((str(topic), event))

        async def review(request: HumanReviewRequest) -> None:
            wired.reviews.append(request)

        async def write(topic: str, value: bytes | None, key: str) -> None:
            wired.writes.append(topic)

        monkeypatch.setattr(runtime, "llm", client)
        monkeypatch.setattr(runtime, "llm_settings", settings)
        monkeypatch.setattr(runtime, "tiers", Router(client=client, publish_human_review=review))
        monkeypatch.setattr(runtime, "publish", publish)
        for store in runtime.state.stores:
            monkeypatch.setattr(store, "_write", write)
            monkeypatch.setattr(store, "_records", {})
        return wired

    return install


# --------------------------------------------------------------------------- Synth


def _outcome(text: str) -> tuple[UserMessage, synth_logic.SynthOutcome]:
    from services.coach import logic as coach_logic
    from services.persona import logic as persona_logic
    from services.plasticity import logic as plasticity_logic
    from services.shadow import logic as shadow_logic
    from services.stability import logic as stability_logic

    msg = message(text)
    _, sp = shadow_logic.observe(None, msg)
    _, pp = persona_logic.observe(None, None, msg)
    _, st = stability_logic.assess(None, None, msg)
    results = results_for(
        msg,
        shadow_p=sp,
        persona_p=pp,
        plasticity_p=plasticity_logic.plan(None, msg),
        stability_p=st,
        coach_p=coach_logic.quick_reply(msg, None, None),
    )
    return msg, synth_logic.synthesize(msg, results, [])


GOOD_PROSE = (
    "Starting a startup is a big wish, and it makes sense that you want to give it "
    "real time. Before any big move, it could help to test the idea in the evenings "
    "for a month and see how it feels. What would a first small test of the idea look like?"
)


async def test_synth_prose_from_the_model_when_it_passes_the_validator(wire: Any) -> None:
    w = wire(synth)
    msg, outcome = _outcome("I want to build a startup one day, maybe next year.")
    outcome.confidence = 0.5  # below the policy's bar: the model is asked
    # Synthesis is written as plain text, so it can be streamed sentence by sentence.
    w.script.answers = [GOOD_PROSE]
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "small"
    # The reply opens with the rendering's first sentence, shown before the model's
    # first token, and the model's text continues it.
    opening = assemble.opening(outcome, synth.runtime.settings.synth_opening)
    assert opening and outcome.text.startswith(opening)
    assert written.value == f"{opening} {GOOD_PROSE}"
    assert written.usage.llm_calls == 1
    # Each checked sentence went out as a final_delta, in order, and they join up to
    # the reply (the whole final itself is finalize's to send).
    deltas = [e for _, e in w.published if getattr(e, "kind", None) == "final_delta"]
    assert deltas and [d.seq for d in deltas] == list(range(len(deltas)))
    assert "".join(d.text for d in deltas) == written.value
    assert deltas[0].text == opening and deltas[0].tier == "deterministic"
    assert all(d.tier == "small" for d in deltas[1:])
    # The model saw the sheet as a brief, never another agent's payload, and was
    # told what the reply already says.
    prompt = w.script.instructions()
    assert "Brief:" in prompt and "stated_goals" not in prompt and "ocean" not in prompt
    assert f'"{opening}"' in prompt


async def test_synth_prose_all_from_the_model_when_it_opens_itself(
    wire: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth.runtime.settings, "synth_opening", "model")
    w = wire(synth)
    msg, outcome = _outcome("I want to build a startup one day, maybe next year.")
    outcome.confidence = 0.5
    w.script.answers = [GOOD_PROSE]
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "small" and written.value == GOOD_PROSE
    deltas = [e for _, e in w.published if getattr(e, "kind", None) == "final_delta"]
    assert "".join(d.text for d in deltas) == GOOD_PROSE
    assert all(d.tier == "small" for d in deltas)
    assert "already begins" not in w.script.instructions()


async def test_synth_opening_then_every_attempt_failing_gives_the_rendering(wire: Any) -> None:
    """The opening was shown and no attempt passed: the rendering, which begins with
    the opening, is the reply, and nothing shown is contradicted."""
    w = wire(synth)
    msg, outcome = _outcome("I want to build a startup one day, maybe next year.")
    outcome.confidence = 0.5
    w.script.answers = ["Shadow and Persona looked at this together for you today."] * 6
    written = (await synth.write_prose(msg, outcome)).decided
    deltas = [e for _, e in w.published if getattr(e, "kind", None) == "final_delta"]
    assert [d.text for d in deltas] == [assemble.opening(outcome, "rendered")]
    assert written.tier == "deterministic" and written.value == outcome.text


async def test_synth_repairs_a_blocked_step_then_falls_back(wire: Any) -> None:
    w = wire(synth)
    msg, outcome = _outcome(
        "I will quit my job tomorrow and put all my savings into my startup, all in!"
    )
    assert outcome.sheet.never_say, "the fixture turn must block a step"
    marker = outcome.sheet.never_say[0].markers[0]
    bad = f"You should {marker} right away, that is the bold move you described here today."
    outcome.confidence = 0.5
    w.script.answers = [bad] * 6
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "deterministic"
    assert written.fallback_reason is not None
    assert written.value == outcome.text
    assert not synth_logic.validate(written.value, outcome.sheet)
    assert len(w.script.bodies) >= 2  # a repair was tried, bounded by the policy
    assert "rejected" in w.script.instructions()  # the repair prompt names the problem


def _guarded(step: str, quote: str) -> str:
    return json.dumps({"steps": [{"step_id": step, "quote": quote}]})


# Goes along with the plan without a word the rules read as a blocked step.
GOES_ALONG = (
    "It makes sense that you want to go for it, and the freedom will be worth it. "
    "What would you do first with all that time on your hands this spring?"
)


async def test_synth_reply_guard_model_finds_a_step_the_rules_passed(wire: Any) -> None:
    """On a turn that blocked steps the model's reply is read whole by a model before
    any of its sentences is shown (the only final_delta is the rendering's opening),
    and a step it quotes puts the rendering, which begins with that opening, in the
    reply's place."""
    w = wire(synth)
    msg, outcome = _outcome(
        "I will quit my job tomorrow and put all my savings into my startup, all in!"
    )
    never = synth_logic.never_steps(outcome.sheet)
    assert "quit_job_abruptly" in never
    assert not synth_logic.validate(GOES_ALONG, outcome.sheet), "the rules pass it"
    outcome.confidence = 0.5
    w.script.answers = [GOES_ALONG, _guarded("quit_job_abruptly", "the freedom will be worth it")]
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.value == outcome.text and written.tier == "deterministic"
    assert written.fallback_reason == "reply_guard: quit_job_abruptly"
    assert written.usage.llm_calls == 2
    deltas = [e for _, e in w.published if getattr(e, "kind", None) == "final_delta"]
    assert [(d.text, d.tier) for d in deltas] == [
        (assemble.opening(outcome, "rendered"), "deterministic")
    ]
    assert written.value.startswith(deltas[0].text)
    assert "coach reply" in json.dumps(w.script.bodies[1]["messages"])


async def test_synth_reply_guard_model_passing_keeps_the_models_reply(wire: Any) -> None:
    w = wire(synth)
    msg, outcome = _outcome(
        "I will quit my job tomorrow and put all my savings into my startup, all in!"
    )
    outcome.confidence = 0.5
    w.script.answers = [GOES_ALONG, json.dumps({"steps": []})]
    prose = await synth.write_prose(msg, outcome)
    written = prose.decided
    # The reply continues the opening shown at once; the model's sentences came whole.
    opening = assemble.opening(outcome, "rendered")
    assert written.value == f"{opening} {GOES_ALONG}" and written.tier == "small"
    assert prose.streamed and len(w.script.bodies) == 2
    deltas = [e for _, e in w.published if getattr(e, "kind", None) == "final_delta"]
    assert [d.text for d in deltas] == [opening]


async def test_synth_reply_on_a_turn_without_blocked_steps_costs_no_guard_call(
    wire: Any,
) -> None:
    w = wire(synth)
    msg, outcome = _outcome("I want to build a startup one day, maybe next year.")
    assert not synth_logic.never_steps(outcome.sheet)
    outcome.confidence = 0.5
    w.script.answers = [GOOD_PROSE]
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "small" and len(w.script.bodies) == 1


async def test_synth_crisis_reply_is_never_rewritten(wire: Any) -> None:
    w = wire(synth)
    msg, outcome = _outcome("I don't want to live anymore.")
    assert outcome.crisis_mode
    outcome.confidence = 0.1
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "deterministic" and written.value == outcome.text
    assert w.script.bodies == []


async def test_synth_without_endpoint_makes_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    assert synth.runtime.llm is None or os.environ.get("COACHBUS_LLM_BASE_URL")
    msg, outcome = _outcome("I want to write every morning.")
    outcome.confidence = 0.1
    written = (await synth.write_prose(msg, outcome)).decided
    assert written.tier == "deterministic" and written.usage.llm_calls == 0


# --------------------------------------------------------------------------- Coach


COACH_TEXT = (
    "That sounds like a real step forward with your running. Three short runs a week "
    "is a good rhythm to start with. Which day this week feels easiest for the first one?"
)


def _replies(w: Wired) -> list[Reply]:
    return [e for t, e in w.published if isinstance(e, Reply)]


async def test_coach_streams_batched_deltas_then_the_whole_reply(wire: Any) -> None:
    w = wire(coach)
    w.script.answers = [COACH_TEXT]
    result = await coach.handle(message("I want to start running three times a week."))
    replies = _replies(w)
    deltas = [r for r in replies if r.kind == "coach_delta"]
    whole = [r for r in replies if r.kind == "coach"]
    assert result.tier == "small" and result.payload.text == COACH_TEXT
    assert len(whole) == 1 and whole[0].text == COACH_TEXT and whole[0].tier == "small"
    assert replies[-1].kind == "coach"  # the whole reply comes after every piece
    assert [d.seq for d in deltas] == list(range(len(deltas)))
    # Batched per sentence, not per token: several pieces, far fewer than words.
    assert 2 <= len(deltas) < len(COACH_TEXT.split()) // 3
    assert "".join(d.text for d in deltas).strip() == COACH_TEXT
    body = w.script.bodies[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "response_format" not in body  # plain text, streamed


async def test_coach_crisis_gets_the_safe_reply_without_a_model(wire: Any) -> None:
    w = wire(coach)
    result = await coach.handle(message("Honestly I want to kill myself."))
    assert result.payload.crisis_mode and result.tier == "deterministic"
    assert w.script.bodies == []
    assert [r.kind for r in _replies(w)] == ["coach"]
    assert "988" in _replies(w)[0].text


async def test_coach_aborts_a_stream_heading_for_a_blocked_step(wire: Any) -> None:
    w = wire(coach)
    text = "I'm going to train every day through the pain, my knee injury won't stop me."
    bad = (
        "Great energy for your training plan. Keep going and run every day this week, "
        "no matter what happens. How does that feel?"
    )
    w.script.answers = [bad, bad]
    result = await coach.handle(message(text))
    assert "train_through_injury" in result.payload.avoided_steps
    assert result.tier == "deterministic" and result.fallback_reason is not None
    for reply in _replies(w):
        assert "every day" not in reply.text.lower()
    assert _replies(w)[-1].kind == "coach"


INJURED = "I'm going to train every day through the pain, my knee injury won't stop me."
# Goes along with training through the injury without a word the rules read as the step.
SLIPPED = (
    "Love that fire. Your body will thank you for showing up no matter what. "
    "What are you most looking forward to this week?"
)


async def test_coach_reply_guard_model_finds_a_step_the_rules_passed(wire: Any) -> None:
    w = wire(coach)
    w.script.answers = [SLIPPED, _guarded("train_through_injury", "showing up no matter what")]
    result = await coach.handle(message(INJURED))
    assert "train_through_injury" in result.payload.avoided_steps
    assert result.tier == "deterministic"
    assert result.fallback_reason == "reply_guard: train_through_injury"
    replies = _replies(w)
    # Held back whole, never streamed: the only reply is the rules' own.
    assert [r.kind for r in replies] == ["coach"] and "no matter what" not in replies[0].text
    assert len(w.script.bodies) == 2


async def test_coach_reply_nobody_could_read_is_not_shown(wire: Any) -> None:
    """The guard's model was to read the reply and every answer was invalid (a quote
    the reply does not hold): nobody vouched for it, so the rules' reply goes."""
    w = wire(coach)
    w.script.answers = [SLIPPED] + [_guarded("train_through_injury", "run through it")] * 6
    result = await coach.handle(message(INJURED))
    assert result.tier == "deterministic"
    assert (result.fallback_reason or "").startswith("reply_guard: unread")
    assert "no matter what" not in _replies(w)[-1].text


async def test_coach_german_reply_in_english_is_rejected(wire: Any) -> None:
    w = wire(coach)
    w.script.answers = [COACH_TEXT, COACH_TEXT]
    result = await coach.handle(message("Ich möchte dreimal pro Woche laufen gehen, du weißt ja."))
    assert result.tier == "deterministic" and result.payload.language == "de"
    assert not [r for r in _replies(w) if r.kind == "coach_delta"]


# --------------------------------------------------------------------------- Stability


def _risk(category: str, confidence: float, evidence: list[str]) -> str:
    return json.dumps({"category": category, "confidence": confidence, "evidence": evidence})


async def test_stability_model_reads_an_uncertain_screen_as_a_crisis(wire: Any) -> None:
    w = wire(stability)
    # Risk cues no rule reads: the screen is unsure, so the model is asked.
    text = "I just can't go on like this anymore, honestly."
    w.script.answers = [_risk("suicidal_ideation", 0.8, ["can't go on like this anymore"])]
    result = await stability.handle(message(text))
    assert result.payload.crisis.category is CrisisCategory.SUICIDAL_IDEATION
    assert result.payload.overall == "critical"
    assert result.tier == "human"
    assert [r.decision for r in w.reviews] == ["risk_screen"]
    # A crisis suspends coaching: no model is asked about blocked steps then.
    assert len(w.script.bodies) == 1


async def test_stability_model_cannot_clear_a_crisis_the_rules_found(wire: Any) -> None:
    w = wire(stability)
    w.script.answers = [_risk("none", 0.9, [])]
    result = await stability.handle(message("I want to kill myself."))
    assert result.payload.crisis.category is CrisisCategory.SUICIDAL_IDEATION
    assert [r.severity for r in w.reviews] in (["critical"], ["high"])


async def test_stability_model_settles_an_uncertain_screen(wire: Any) -> None:
    w = wire(stability)
    # Risk cues, no rule: below the bar, so the model is asked; its quoted "none"
    # settles it (no human review, an ordinary turn).
    w.script.answers = [_risk("none", 0.9, [])]
    result = await stability.handle(message("I just can't go on like this."))
    assert len(w.script.bodies) >= 1
    assert result.payload.crisis.category is CrisisCategory.NONE
    assert not result.payload.crisis.uncertain
    assert w.reviews == []


async def test_stability_puts_an_unsettled_screen_before_a_human(wire: Any) -> None:
    w = wire(stability)
    # The model fails every attempt: nobody settled the screen, so a human sees it.
    w.script.answers = ["not json"] * 6
    result = await stability.handle(message("I just can't go on like this."))
    assert result.payload.crisis.uncertain
    assert result.payload.overall == "moderate"
    assert [r.severity for r in w.reviews] == ["moderate"]


async def test_stability_rejects_an_invented_crisis_quote(wire: Any) -> None:
    w = wire(stability)
    invented = _risk("self_harm", 0.9, ["I cut myself last night"])
    w.script.answers = [invented] * 6
    # An uncertain screen (so the model is asked), and a quote the person never wrote.
    result = await stability.handle(message("Work was long today and I am so tired of everything."))
    assert result.payload.crisis.category is CrisisCategory.NONE
    assert result.fallback_reason is not None
    # The repair prompt names the problem (the steps decision, uncertain too on a
    # message the rules found nothing in, is asked after the screen).
    assert any(
        "not in the message" in w.script.instructions(i) for i in range(len(w.script.bodies))
    )


async def test_stability_asks_the_model_when_the_rules_find_no_step(wire: Any) -> None:
    w = wire(stability)
    # No rule reads this as cutting sleep; "no step" is right only about half the time
    # on new text (measured), below the bar: the model is asked and its quoted step kept.
    text = "I'll study through the nights until the exam, whatever it takes."
    w.script.answers = [
        _risk("none", 0.95, []),
        json.dumps(
            {"steps": [{"step_id": "sleep_deprivation", "evidence": "study through the nights"}]}
        ),
    ]
    result = await stability.handle(message(text))
    assert {b.step_id for b in result.payload.blocked_steps} == {"sleep_deprivation"}
    assert result.tier == "small"


async def test_a_confident_block_costs_no_model_call(wire: Any) -> None:
    w = wire(stability)
    # A step the rules found is right 0.88 of the time (measured): above the bar, so
    # only the crisis screen (its clean answer below its own bar) asks the model.
    w.script.answers = [_risk("none", 0.95, [])]
    result = await stability.handle(message("Tomorrow I quit my job, no backup plan at all."))
    assert {b.step_id for b in result.payload.blocked_steps} == {"quit_job_abruptly"}
    assert len(w.script.bodies) == 1


# --------------------------------------------------------------------------- Shadow


async def test_shadow_model_adds_a_pattern_with_verbatim_evidence(wire: Any) -> None:
    w = wire(shadow)
    text = "I keep telling myself the chapter has to be flawless before anyone sees it."
    w.script.answers = [
        json.dumps(
            {
                "patterns": [
                    {"pattern": "perfectionism", "evidence": "the chapter has to be flawless"}
                ]
            }
        )
    ]
    result = await shadow.handle(message(text))
    assert result.tier == "small"
    found = {p.pattern.value: p for p in result.payload.patterns}
    assert "the chapter has to be flawless" in found["perfectionism"].evidence
    board = shadow.boards.get("u1")
    assert board is not None and board.patterns


async def test_shadow_rejects_quotes_the_user_never_said(wire: Any) -> None:
    w = wire(shadow)
    invented = json.dumps(
        {"patterns": [{"pattern": "avoidance", "evidence": "I always avoid my goals"}]}
    )
    w.script.answers = [invented] * 6
    result = await shadow.handle(message("Went for a short walk after lunch today."))
    assert result.tier == "deterministic" and result.fallback_reason is not None
    assert all(p.pattern.value != "avoidance" for p in result.payload.patterns)


# --------------------------------------------------------------------------- Persona


async def test_persona_model_readings_count_as_evidence(wire: Any) -> None:
    w = wire(persona)
    text = "I made a detailed spreadsheet for the week and honestly big crowds wear me out."
    w.script.answers = [
        json.dumps(
            {
                "items": [
                    {"item": 8, "direction": "agree", "evidence": "made a detailed spreadsheet"},
                    {"item": 1, "direction": "agree", "evidence": "big crowds wear me out"},
                ]
            }
        )
    ]
    result = await persona.handle(message(text))
    assert result.tier == "small"
    counts = {i.item: i.evidence_count for i in result.payload.items}
    assert counts[8] == 1 and counts[1] == 1  # one reading each, not double-counted
    profile = persona.profiles.get("u1")
    assert profile is not None and profile.items[1].agree == 1.0


async def test_persona_invalid_readings_fall_back_to_the_cue_phrases(wire: Any) -> None:
    w = wire(persona)
    bad = json.dumps({"items": [{"item": 3, "direction": "agree", "evidence": "I am lazy"}]})
    w.script.answers = [bad] * 4
    result = await persona.handle(message("I made a plan and a checklist for the week."))
    assert result.tier == "deterministic" and result.fallback_reason is not None
    counts = {i.item: i.evidence_count for i in result.payload.items}
    assert counts[3] == 0 and counts[8] == 1
