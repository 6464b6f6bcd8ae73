"""Prompt layout and context budgets.

Every agent of a turn sends the same leading messages, byte for byte: the system
briefing, then one user message with the user profile, the blackboard snapshot,
the compressed history and the new message. The agent's own instructions come
last, in a message of their own. vLLM's automatic prefix caching then computes
the shared blocks once for all parallel agents of the turn.

Budgets: the shared prefix is fitted to ``shared_prefix_budget`` identically by
every agent (same inputs, same tokenizer, same result), so sharing survives
truncation. An agent whose own budget cannot hold that prefix plus its
instructions shrinks its prefix further and loses the cache hit (``shared=False``).
What goes first: the oldest history entries, then the lowest-priority
blackboard sections, then the tail of the profile. Never the new message, the
briefing or the instructions: if those alone exceed the budget,
:class:`PromptBudgetError` is raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coachbus.llm.api import Message
from coachbus.llm.settings import LLMSettings
from coachbus.llm.tokens import MESSAGE_OVERHEAD, REPLY_PRIMER, TokenCounter, default_counter


class PromptBudgetError(ValueError):
    """The parts that are never cut do not fit the budget."""


@dataclass(frozen=True, slots=True)
class Section:
    """One blackboard entry; lower ``priority`` is dropped first."""

    name: str
    text: str
    priority: int = 0


@dataclass(frozen=True, slots=True)
class PromptContext:
    briefing: str
    profile: str
    blackboard: Sequence[Section] | str
    history: Sequence[str]  # compressed, oldest first
    message: str

    def sections(self) -> list[Section]:
        if isinstance(self.blackboard, str):
            return [Section("snapshot", self.blackboard)] if self.blackboard else []
        return list(self.blackboard)


@dataclass(slots=True)
class Prompt:
    messages: list[Message]
    tokens: int
    budget: int
    prefix_tokens: int
    shared: bool
    dropped_history: int = 0
    dropped_sections: list[str] = field(default_factory=list)
    profile_truncated: bool = False


@dataclass(slots=True)
class _Fit:
    messages: list[Message]
    tokens: int
    dropped_history: int
    dropped_sections: list[str]
    profile_truncated: bool


def render_chatml(messages: Sequence[Message]) -> str:
    """The messages as a ChatML template renders them (Qwen3, SmolLM2)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def shared_prefix_ratio(a: Sequence[Message] | str, b: Sequence[Message] | str) -> float:
    """Common leading characters of two rendered prompts over the longer one's length."""
    ra = a if isinstance(a, str) else render_chatml(a)
    rb = b if isinstance(b, str) else render_chatml(b)
    longest = max(len(ra), len(rb))
    if longest == 0:
        return 1.0
    n = 0
    for x, y in zip(ra, rb, strict=False):
        if x != y:
            break
        n += 1
    return n / longest


def _context_text(
    profile: str, sections: Sequence[Section], history: Sequence[str], message: str
) -> str:
    parts = []
    if profile:
        parts.append(f"## User profile\n{profile}")
    if sections:
        parts.append("## Blackboard\n" + "\n".join(f"### {s.name}\n{s.text}" for s in sections))
    if history:
        parts.append(
            "## Earlier in this conversation (oldest first)\n"
            + "\n".join(f"- {h}" for h in history)
        )
    parts.append(f"## New message\n{message}")
    return "\n\n".join(parts)


class PromptBuilder:
    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        counter: TokenCounter | None = None,
        instructions_role: str = "system",
    ) -> None:
        self.settings = settings or LLMSettings()
        self.counter = counter or default_counter()
        # Qwen3's and ChatML templates render a later system message; servers with
        # stricter templates can take "user" instead.
        self.instructions_role = instructions_role

    def _count(self, messages: Sequence[Message]) -> int:
        return sum(self.counter.count(m["content"]) + MESSAGE_OVERHEAD for m in messages)

    def _fit(self, ctx: PromptContext, limit: int) -> _Fit:
        """The prefix messages within ``limit`` tokens, dropping the least valuable first."""
        history = list(ctx.history)
        sections = ctx.sections()
        profile = ctx.profile

        def make(h: Sequence[str], s: Sequence[Section], p: str) -> list[Message]:
            return [
                {"role": "system", "content": ctx.briefing},
                {"role": "user", "content": _context_text(p, s, h, ctx.message)},
            ]

        def fits(h: Sequence[str], s: Sequence[Section], p: str) -> bool:
            return self._count(make(h, s, p)) <= limit

        dropped_h = 0
        if not fits(history, sections, profile):
            # Fewest oldest entries to drop, by bisection (counts are monotone enough).
            lo, hi = 0, len(history)
            while lo < hi:
                mid = (lo + hi) // 2
                if fits(history[mid:], sections, profile):
                    hi = mid
                else:
                    lo = mid + 1
            dropped_h = lo
            history = history[lo:]
        dropped_s: list[str] = []
        if not fits(history, sections, profile):
            order = sorted(range(len(sections)), key=lambda i: (sections[i].priority, -i))
            keep = set(range(len(sections)))
            for i in order:
                keep.discard(i)
                dropped_s.append(sections[i].name)
                if fits(history, [sections[j] for j in sorted(keep)], profile):
                    break
            sections = [sections[j] for j in sorted(keep)]
        truncated = False
        if not fits(history, sections, profile):
            lo, hi = 0, len(profile)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if fits(history, sections, profile[:mid] + " …"):
                    lo = mid
                else:
                    hi = mid - 1
            profile = profile[:lo] + " …" if lo else ""
            truncated = True
        messages = make(history, sections, profile)
        tokens = self._count(messages)
        if tokens > limit:
            raise PromptBudgetError(
                f"briefing and new message alone take {tokens} tokens, budget {limit}"
            )
        return _Fit(messages, tokens, dropped_h, dropped_s, truncated)

    def shared_prefix(self, ctx: PromptContext) -> list[Message]:
        """The turn's shared leading messages, identical for every agent."""
        return self._fit(ctx, self.settings.shared_prefix_budget).messages

    def build(
        self, ctx: PromptContext, agent: str, instructions: str, *, budget: int | None = None
    ) -> Prompt:
        budget = budget if budget is not None else self.settings.prompt_budget_for(agent)
        tail: Message = {"role": self.instructions_role, "content": instructions}
        tail_tokens = self._count([tail]) + REPLY_PRIMER
        room = budget - tail_tokens
        if room <= 0:
            raise PromptBudgetError(
                f"{agent}: instructions alone take {tail_tokens} tokens, budget {budget}"
            )
        try:
            fit: _Fit | None = self._fit(ctx, self.settings.shared_prefix_budget)
        except PromptBudgetError:
            fit = None  # an outsized message: this agent may still have room of its own
        shared = fit is not None and fit.tokens <= room
        if fit is None or not shared:
            fit = self._fit(ctx, room)
        messages = [*fit.messages, tail]
        return Prompt(
            messages=messages,
            tokens=fit.tokens + tail_tokens,
            budget=budget,
            prefix_tokens=fit.tokens,
            shared=shared,
            dropped_history=fit.dropped_history,
            dropped_sections=fit.dropped_sections,
            profile_truncated=fit.profile_truncated,
        )
