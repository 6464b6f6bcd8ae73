"""Prompt layout: a byte-identical prefix across the agents of a turn, and budgets."""

from __future__ import annotations

import pytest

from coachbus.llm import (
    EstimateCounter,
    LLMSettings,
    PromptBudgetError,
    PromptBuilder,
    PromptContext,
    Section,
    count_messages,
    render_chatml,
    shared_prefix_ratio,
)

pytestmark = pytest.mark.unit

AGENTS = {
    "shadow": "Find the user's stated goals and the patterns that block them. Answer as JSON.",
    "persona": "Update the OCEAN estimate from the evidence in this turn. Answer as JSON.",
    "plasticity": "Choose the coaching strategy and communication style. Answer as JSON.",
    "stability": "Screen for risks and list the steps the coach must not suggest. Answer as JSON.",
    "coach": "Reply to the user now, briefly and warmly, in their language.",
}


def context(history: int = 4, sections: int = 3, profile_words: int = 40) -> PromptContext:
    return PromptContext(
        briefing="You are part of coachbus, a behavioural coaching team. Be honest and kind.",
        profile=" ".join(f"trait{i} detail" for i in range(profile_words)),
        blackboard=[
            Section(f"section-{i}", f"note {i}: " + "evidence " * 30, priority=i)
            for i in range(sections)
        ],
        history=[f"turn {i}: the user talked about running and sleep " * 3 for i in range(history)],
        message="I skipped my run again and I feel bad about it.",
    )


def settings(**kw: object) -> LLMSettings:
    return LLMSettings(**kw)  # type: ignore[arg-type]


def test_prefix_is_byte_identical_across_agents_and_instructions_come_last() -> None:
    builder = PromptBuilder(settings())
    ctx = context()
    prompts = {agent: builder.build(ctx, agent, text) for agent, text in AGENTS.items()}
    prefixes = {render_chatml(p.messages[:-1]) for p in prompts.values()}
    assert len(prefixes) == 1
    assert builder.shared_prefix(ctx) == prompts["coach"].messages[:-1]
    for agent, prompt in prompts.items():
        assert prompt.messages[-1]["content"] == AGENTS[agent]
        assert prompt.shared
    ratio = shared_prefix_ratio(prompts["shadow"].messages, prompts["coach"].messages)
    assert ratio > 0.85
    assert prompts["coach"].messages[1]["content"].endswith(ctx.message)


def test_every_prompt_stays_within_its_agents_budget_when_context_is_huge() -> None:
    s = settings(shared_prefix_budget=600, prompt_budgets={"coach": 700, "shadow": 900})
    builder = PromptBuilder(s)
    ctx = context(history=60, sections=8, profile_words=300)
    for agent in ("coach", "shadow"):
        prompt = builder.build(ctx, agent, AGENTS[agent])
        real = count_messages(prompt.messages, builder.counter)
        assert real <= s.prompt_budget_for(agent)
        assert prompt.tokens <= prompt.budget
        assert prompt.messages[-1]["content"] == AGENTS[agent]
        assert ctx.message in prompt.messages[1]["content"]
        assert prompt.shared


def test_truncation_drops_oldest_history_first_then_low_priority_blackboard() -> None:
    builder = PromptBuilder(settings(shared_prefix_budget=700, default_prompt_budget=900))
    ctx = context(history=30, sections=3)
    prompt = builder.build(ctx, "persona", AGENTS["persona"])
    body = prompt.messages[1]["content"]
    assert prompt.dropped_history > 0
    assert "turn 0:" not in body
    assert "turn 29:" in body  # the newest survives
    assert prompt.dropped_sections == []  # history went first
    tighter = PromptBuilder(settings(shared_prefix_budget=300, default_prompt_budget=400))
    squeezed = tighter.build(ctx, "persona", AGENTS["persona"])
    assert squeezed.dropped_history == 30
    assert squeezed.dropped_sections[0] == "section-0"  # lowest priority first
    assert "section-2" in squeezed.messages[1]["content"] or squeezed.profile_truncated


def test_an_agent_with_a_small_budget_shrinks_its_own_prefix() -> None:
    s = settings(shared_prefix_budget=800, prompt_budgets={"coach": 350, "shadow": 2000})
    builder = PromptBuilder(s)
    ctx = context(history=40)
    coach = builder.build(ctx, "coach", AGENTS["coach"])
    shadow = builder.build(ctx, "shadow", AGENTS["shadow"])
    assert not coach.shared
    assert shadow.shared
    assert coach.tokens <= 350
    assert coach.prefix_tokens < shadow.prefix_tokens


def test_the_new_message_and_instructions_are_never_cut() -> None:
    builder = PromptBuilder(settings(shared_prefix_budget=60, default_prompt_budget=80))
    ctx = PromptContext(briefing="b", profile="", blackboard="", history=[], message="word " * 200)
    with pytest.raises(PromptBudgetError, match="new message"):
        builder.build(ctx, "persona", "x", budget=80)
    # Too long for the shared prefix, but this agent's own budget holds it: unshared.
    roomy = builder.build(ctx, "persona", "x", budget=2000)
    assert not roomy.shared
    assert roomy.messages[1]["content"].endswith(ctx.message)
    with pytest.raises(PromptBudgetError, match="instructions"):
        builder.build(context(), "persona", "instruction " * 200, budget=80)


def test_builder_works_with_the_estimate_counter_too() -> None:
    builder = PromptBuilder(settings(shared_prefix_budget=400), counter=EstimateCounter())
    prompt = builder.build(context(history=50), "shadow", AGENTS["shadow"])
    assert count_messages(prompt.messages, EstimateCounter()) <= prompt.budget


def test_shared_prefix_ratio_bounds() -> None:
    assert shared_prefix_ratio("abc", "abc") == 1.0
    assert shared_prefix_ratio("abc", "xbc") == 0.0
    assert shared_prefix_ratio("abcd", "abXY") == 0.5
