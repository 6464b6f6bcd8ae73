"""Memory between turns and sessions: explicit stored state, never a growing transcript.

Synth is the only writer of the ``memory`` topic (compacted, keyed by user). After
each final reply it folds the exchange into the user's :class:`MemoryRecord`:

* the last few exchanges of the current session, verbatim but clipped;
* when a session ends (a new session id, an explicit end, or idleness), its
  exchanges are compressed into a :class:`SessionSummary` under a strict size
  budget (facts, goals, commitments, open threads, tone), and only the last few
  summaries are kept, older ones folded into one long-term summary;
* short briefs of what Shadow and Persona concluded, so the next turn's prompt
  does not need their full payloads.

Every agent of the next turn builds its prompt from the same record through
:func:`context_for`, so the prompt prefix is byte-identical across the agents of a
turn (vLLM's prefix cache serves them all) and its size stays flat however long a
user's history grows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts import UserMessage, utcnow
from coachbus.contracts.payloads import PersonaPayload, ShadowPayload
from coachbus.contracts.state import StateRecord
from coachbus.llm.prompt import PromptContext
from coachbus.text import extract_goals, sentences
from coachbus.vocabulary import VOCABULARY

EXCHANGE_CHARS = 400  # per side of one remembered exchange
RECENT_EXCHANGES = 4  # of the current session, verbatim
KEPT_SUMMARIES = 4  # most recent sessions, each compressed
SUMMARY_ITEMS = 4  # per list in a summary
ITEM_CHARS = 140
BRIEF_CHARS = 600
IDLE_SESSION_END = timedelta(hours=6)

BRIEFING = (
    "You are part of coachbus, a behavioural-coaching assistant. You help one person "
    "turn intentions into small, concrete, safe steps. Be specific to what this person "
    "said; never invent facts about them; never give medical, legal or financial "
    "instructions; safety always comes before ambition.\n\n"
    # The shared vocabulary: identical for every agent, so it is part of the prefix.
    f"## Reference\n{VOCABULARY}"
)


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class Exchange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_id: str
    user: str
    coach: str
    at: datetime


class SessionSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    turns: int = Field(ge=0)
    started_at: datetime
    ended_at: datetime
    facts: list[str] = Field(default_factory=list)
    goals: list[str] = Field(default_factory=list)
    commitments: list[str] = Field(default_factory=list)
    open_threads: list[str] = Field(default_factory=list)
    tone: str = "neutral"

    def render(self) -> str:
        parts = [f"Session of {self.ended_at:%Y-%m-%d} ({self.turns} turns, tone: {self.tone})."]
        for label, items in (
            ("Goals", self.goals),
            ("Commitments", self.commitments),
            ("Facts", self.facts),
            ("Open threads", self.open_threads),
        ):
            if items:
                parts.append(f"{label}: " + "; ".join(items) + ".")
        return " ".join(parts)


class MemoryRecord(StateRecord):
    """Synth's record of a user's conversation memory (topic ``memory``)."""

    session_id: str | None = None
    session_started_at: datetime | None = None
    session_turns: int = 0
    recent: list[Exchange] = Field(default_factory=list)
    summaries: list[SessionSummary] = Field(default_factory=list)
    long_term: SessionSummary | None = None
    profile_brief: str = ""
    blackboard_brief: str = ""
    turn_count: int = 0
    last_active: datetime | None = None


def _dedupe(items: list[str], limit: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.lower()
        if item and key not in seen:
            seen.add(key)
            out.append(clip(item, ITEM_CHARS))
    return out[-limit:]


_COMMIT_CUES = ("i will", "i'll", "tomorrow i", "ich werde", "morgen ", "i'm going to", "ich will")
_TONE_CUES = {
    "strained": ("tired", "stress", "overwhelm", "anxious", "müde", "stress", "überfordert"),
    "upbeat": ("finally", "proud", "great", "did it", "endlich", "stolz", "geschafft"),
}


def compress_session(record: MemoryRecord, ended_at: datetime) -> SessionSummary:
    """Deterministic compression of the current session (the cheapest tier).

    Keeps goals the user stated, commitments they made, what stayed unanswered
    (questions they asked last), and a coarse tone, each list and item capped.
    """
    texts = [e.user for e in record.recent]
    goals: list[str] = []
    commitments: list[str] = []
    facts: list[str] = []
    for text in texts:
        goals.extend(g.text for g in extract_goals(text))
        for sentence in sentences(text):
            low = sentence.lower()
            if any(cue in low for cue in _COMMIT_CUES):
                commitments.append(sentence)
            elif len(sentence.split()) >= 6 and not sentence.endswith("?"):
                facts.append(sentence)
    threads = [s for t in texts[-2:] for s in sentences(t) if s.endswith("?")]
    joined = " ".join(texts).lower()
    tone = next(
        (name for name, cues in _TONE_CUES.items() if any(c in joined for c in cues)), "neutral"
    )
    return SessionSummary(
        session_id=record.session_id or "-",
        turns=record.session_turns,
        started_at=record.session_started_at or ended_at,
        ended_at=ended_at,
        facts=_dedupe(facts, SUMMARY_ITEMS),
        goals=_dedupe(goals, SUMMARY_ITEMS),
        commitments=_dedupe(commitments, SUMMARY_ITEMS),
        open_threads=_dedupe(threads, SUMMARY_ITEMS),
        tone=tone,
    )


def _merge(old: SessionSummary | None, new: SessionSummary) -> SessionSummary:
    if old is None:
        return new.model_copy(update={"session_id": "long-term"})
    return SessionSummary(
        session_id="long-term",
        turns=old.turns + new.turns,
        started_at=old.started_at,
        ended_at=new.ended_at,
        facts=_dedupe([*old.facts, *new.facts], SUMMARY_ITEMS),
        goals=_dedupe([*old.goals, *new.goals], SUMMARY_ITEMS),
        commitments=_dedupe([*old.commitments, *new.commitments], SUMMARY_ITEMS),
        open_threads=_dedupe([*old.open_threads, *new.open_threads], SUMMARY_ITEMS),
        tone=new.tone,
    )


def end_session(record: MemoryRecord, at: datetime | None = None) -> None:
    """Compress the current session into a summary; keep the summaries bounded."""
    if not record.recent and record.session_turns == 0:
        record.session_id = None
        return
    summary = compress_session(record, at or record.last_active or utcnow())
    record.summaries.append(summary)
    while len(record.summaries) > KEPT_SUMMARIES:
        record.long_term = _merge(record.long_term, record.summaries.pop(0))
    record.recent = []
    record.session_id = None
    record.session_turns = 0
    record.session_started_at = None


def profile_brief(persona: PersonaPayload | None) -> str:
    if persona is None:
        return ""
    traits = ", ".join(
        f"{trait.value} {est.value:.2f} (confidence {est.confidence:.2f})"
        for trait, est in sorted(persona.ocean.items(), key=lambda kv: kv[0].value)
    )
    parts = [f"Big Five estimate (a weak prior, not a verdict): {traits}."]
    if persona.recurring_goals:
        parts.append("Recurring goals: " + "; ".join(persona.recurring_goals[:4]) + ".")
    if persona.follow_through_pct is not None:
        parts.append(f"Follow-through so far: about {persona.follow_through_pct:.0f}%.")
    return clip(" ".join(parts), BRIEF_CHARS)


def blackboard_brief(shadow: ShadowPayload | None) -> str:
    if shadow is None:
        return ""
    parts = []
    if shadow.stated_goals:
        parts.append("Stated goals: " + "; ".join(g.text for g in shadow.stated_goals[:4]) + ".")
    if shadow.primary_pattern is not None:
        parts.append(f"Main pattern: {shadow.primary_pattern.value.replace('_', ' ')}.")
    predictions = [f"{p.goal_id} {p.probability}%" for p in shadow.follow_through[:4]]
    if predictions:
        parts.append("Predicted follow-through: " + ", ".join(predictions) + ".")
    if shadow.avoided_goals:
        parts.append("Avoided: " + ", ".join(shadow.avoided_goals[:3]) + ".")
    return clip(" ".join(parts), BRIEF_CHARS)


def remember(
    record: MemoryRecord | None,
    message: UserMessage,
    reply_text: str,
    *,
    shadow: ShadowPayload | None = None,
    persona: PersonaPayload | None = None,
) -> MemoryRecord:
    """Fold one answered turn into (a copy of) the user's memory; idempotent per turn."""
    base = record if record is not None else MemoryRecord(user_id=message.user_id)
    if base.has_applied(message.turn_id):
        return base
    mem = base.model_copy(deep=True)
    idle = mem.last_active is not None and message.created_at - mem.last_active > IDLE_SESSION_END
    if mem.session_id is not None and (mem.session_id != message.session_id or idle):
        end_session(mem, mem.last_active)
    if mem.session_id is None:
        mem.session_id = message.session_id
        mem.session_started_at = message.created_at
    mem.recent.append(
        Exchange(
            turn_id=message.turn_id,
            user=clip(message.text, EXCHANGE_CHARS),
            coach=clip(reply_text, EXCHANGE_CHARS),
            at=message.created_at,
        )
    )
    del mem.recent[:-RECENT_EXCHANGES]
    mem.session_turns += 1
    mem.turn_count += 1
    mem.last_active = message.created_at
    if shadow is not None:
        mem.blackboard_brief = blackboard_brief(shadow)
    if persona is not None:
        mem.profile_brief = profile_brief(persona)
    mem.mark_applied(message.turn_id)
    return mem


def context_for(memory: MemoryRecord | None, message: UserMessage) -> PromptContext:
    """The shared prompt prefix of one turn: identical for every agent that reads the
    same memory record, bounded in size whatever the length of the history."""
    history: list[str] = []
    if memory is not None:
        if memory.long_term is not None:
            history.append("Earlier sessions, in short: " + memory.long_term.render())
        history.extend(s.render() for s in memory.summaries)
        history.extend(f"User: {e.user}\nCoach: {e.coach}" for e in memory.recent)
    return PromptContext(
        briefing=BRIEFING,
        profile=memory.profile_brief if memory else "",
        blackboard=memory.blackboard_brief if memory else "",
        history=history,
        message=message.text,
    )
