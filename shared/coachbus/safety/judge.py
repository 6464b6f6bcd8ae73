"""The reply guard's model tier: a model reads a reply the rules passed, on a turn that
blocked steps, before the person sees it.

The guard (``steps.read_reply``) is the last line before the user, and on text it was
not written against it misses a step told in words it does not know. Like every
decision a model could take instead, it reports a confidence measured per outcome on
the replies corpus's calibration split (``coachbus eval replies --calibrate``); below
the policy's bar for ``reply_guard`` a model is asked (the ``reply_guard`` decision).

Rules of the call, which are the crisis screen's (``safety.model``):

* a model may add a step, never clear one the rules found: a reply the rules
  rejected is rejected whatever the model says, so the model is not asked about it
  (no call is paid for an answer that cannot change the reply's fate);
* every step the model adds quotes the reply's own words, checked verbatim up to the
  normaliser: a model cannot flag a reply for words it does not hold, and an invalid
  answer is repaired within the policy's bounded loop, then the rules' reading
  stands;
* with no model configured the rules' reading stands (the deterministic tier carries
  it, as before this tier existed); a model configured but failing (every tier, or
  the turn's budget spent) leaves a reply nobody vouched for, and the services put
  their rules' reply in its place (``Judged.blocks``): the protective choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts import Usage
from coachbus.contracts.events import TurnBudget
from coachbus.llm import Message, Outcome, PromptBuilder, PromptContext, Router
from coachbus.llm.router import DecisionContext
from coachbus.metrics import REPLY_GUARD
from coachbus.safety.model import quote_problems
from coachbus.safety.steps import CATALOGUE, ReplyReading, read_reply

T = TypeVar("T")

KIND = "reply_guard"
# What the data block holding the reply is called in the prompt.
REPLY_DATA = "coach reply"


class StepQuote(BaseModel):
    """One blocked step the reply suggests, with the reply's own words that do."""

    model_config = ConfigDict(extra="forbid")

    step_id: str
    quote: str = Field(max_length=400, description="the reply's exact words")


class ReplyGuardCall(BaseModel):
    """The blocked steps the coach's reply suggests, endorses or goes along with."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepQuote] = Field(max_length=6)


def instructions(never: Sequence[str]) -> str:
    """What the model is asked (code's text only: the reply goes in the data fence)."""
    listed = "; ".join(f"{s} ({CATALOGUE[s].step})" for s in never if s in CATALOGUE)
    return (
        "The data block 'coach reply' is a reply our coach wants to send. This turn the "
        f"coach must not suggest these risky steps from the reference: {listed}. Which of "
        "them does the reply suggest, endorse, plan with the person or go along with, in "
        "any words (a paraphrase, a hint, a step said as the person's own idea and then "
        "backed, a 'safe' version that is the step)? A reply that names a step only to "
        "warn against it, or steers to a safer path, does not suggest it. List each "
        "such step by its id with the reply's exact words as 'quote'; an empty list "
        "when the reply suggests none."
    )


def check(claims: Sequence[tuple[str, str]], reply: str, never: Sequence[str]) -> list[str]:
    """A model's step must be one of the turn's blocked steps, quoted from the reply:
    (step id, quote) pairs as ``judge`` converts the answer."""
    out: list[str] = []
    for step_id, quote in claims:
        if step_id not in never:
            out.append(f"{step_id!r} is not one of the blocked steps {list(never)}")
            continue
        out.extend(quote_problems([quote], reply, step_id, source="reply"))
    return out


@dataclass(slots=True)
class Judged:
    """The guard's answer on one reply: the steps it suggests (the rules' and any a
    model added, each with its words), which tier carried it, and what it cost."""

    reading: ReplyReading
    found: list[tuple[str, str]]
    tier: str = "deterministic"
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None

    @property
    def added(self) -> list[tuple[str, str]]:
        """What the model found beyond the rules."""
        return self.found[len(self.reading.found) :]

    @property
    def unread(self) -> bool:
        """A model was to read the reply and none could (every tier failed, the turn's
        budget ran out): nobody vouched for a reply the rules were not sure of. The
        protective answer is the rules' own reply, so the services treat it as a
        reply they may not show (see ``blocks``)."""
        return self.tier == "deterministic" and self.stop_reason is not None

    def blocks(self) -> str | None:
        """Why the reply may not be shown, None when it may: a step the model quoted,
        or a reply the model was to read and could not."""
        if self.added:
            return "reply_guard: " + ", ".join(step for step, _ in self.added)
        if self.unread:
            return f"reply_guard: unread ({self.stop_reason})"
        return None


def messages(
    builder: PromptBuilder,
    ctx: PromptContext,
    agent: str,
    reply: str,
    never: Sequence[str],
    errors: Sequence[str] = (),
) -> list[Message]:
    """The guard's prompt: the service's shared prefix (briefing, blackboard, the
    person's message), the reply fenced as data, the instructions, a repair's reasons
    last."""
    told = instructions(never)
    if errors:
        told += "\n\nYour previous answer was rejected; the reasons follow."
    return builder.build(
        ctx, agent, told, data=[(REPLY_DATA, reply)], rejected=list(errors)[:6], kind=KIND
    ).messages


def asks_model(router: Router) -> bool:
    """Whether a reply the rules pass may be read by a model too: a tier is configured
    for ``reply_guard`` and a passing outcome's measured confidence is below its bar.
    A service that streams a reply holds it back on a turn that blocked steps when
    this holds: a sentence shown cannot be taken back after the model flags it."""
    if not router.llm_enabled:
        return False
    policy = router.policy.for_kind(KIND)
    client = router.client
    if client is None or not any(
        t not in ("deterministic", "human") and client.has_tier(t) for t in policy.tiers[1:]
    ):
        return False
    passing = (ReplyReading([], named=True), ReplyReading([], named=False))
    return any(r.confidence < policy.min_confidence for r in passing)


async def judge(
    router: Router,
    reply: str,
    never: Sequence[str],
    *,
    agent: str,
    builder: PromptBuilder,
    ctx: PromptContext,
    budget: TurnBudget,
    context: DecisionContext | None = None,
) -> Judged:
    """The guard's answer on ``reply`` for the steps ``never``: the rules first; a model
    below the policy's bar, adding only steps it quotes from the reply."""
    reading = read_reply(reply, never)
    found = list(reading.found)
    if found or not never:
        # A rejected reply stays rejected: no model can clear it, so none is asked.
        return Judged(reading, found)
    steps = [s for s in dict.fromkeys(never) if s in CATALOGUE]

    def convert(parsed: ReplyGuardCall) -> list[tuple[str, str]]:
        return [(c.step_id, c.quote) for c in parsed.steps]

    out = await router.decide(
        kind=KIND,
        agent=agent,
        deterministic=lambda: ([], reading.confidence),
        build_messages=lambda _tier, errors: messages(builder, ctx, agent, reply, steps, errors),
        response_model=ReplyGuardCall,
        budget=budget,
        validate=lambda claims: check(claims, reply, steps),
        convert=convert,
        context=context,
    )
    # One quote per step (a model may list a step twice).
    added = list(dict(out.value).items())
    stop = out.stop_reason.value if out.stop_reason is not None else None
    judged = Judged(reading, found + added, out.tier, out.usage, stop)
    verdict = (
        "flagged"
        if judged.added
        else "unread"
        if judged.unread
        else "trusted"
        if judged.tier == "deterministic"
        else "passed"
    )
    REPLY_GUARD.labels(agent, verdict).inc()
    return judged


async def vouch(
    router: Router,
    out: Outcome[T],
    text: str,
    never: Sequence[str],
    safe: T,
    *,
    agent: str,
    builder: PromptBuilder,
    ctx: PromptContext,
    budget: TurnBudget,
    context: DecisionContext | None = None,
) -> str | None:
    """Read a held-back reply a model wrote (``out``, its text ``text``) before it is
    shown: a step a model quotes, or no model able to read it, puts ``safe`` (the
    service's rules' reply) in its place. Why it was replaced, None when it stands. A
    reply the rules or a human gave is left as it is: the guard reads models' words.
    The Coach's and Synth's one way of doing it."""
    if out.tier in ("deterministic", "human"):
        return None
    judged = await judge(
        router, text, never, agent=agent, builder=builder, ctx=ctx, budget=budget,
        context=context,
    )  # fmt: skip
    out.usage = out.usage + judged.usage
    blocked = judged.blocks()
    if blocked is not None:
        out.value, out.tier, out.fallback_reason = safe, "deterministic", blocked
    return blocked


__all__ = [
    "KIND",
    "REPLY_DATA",
    "Judged",
    "ReplyGuardCall",
    "StepQuote",
    "asks_model",
    "check",
    "instructions",
    "judge",
    "messages",
    "vouch",
]
