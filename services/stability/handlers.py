"""Stability: the risk frame, the steps the coach must not suggest, the crisis screen."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import TIER_RANK, StabilityResult, Tier, Usage, UserMessage
from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.llm import DecisionContext, LLMTier, Message
from coachbus.memory import MemoryRecord, context_for
from coachbus.normalize import NormalizedText
from coachbus.safety.conversation import open_question
from coachbus.safety.model import RISK_INSTRUCTIONS, RiskScreenCall, claim_screen, context_for_model
from coachbus.safety.screen import is_crisis, merge_screens
from coachbus.safety.warm import warm_in_thread
from coachbus.topics import Topic
from services.stability import logic, prompts
from services.stability.prompts import RiskDecision, StepsDecision

runtime = AgentRuntime("stability")
# The screens' patterns and learned readers load before the first message, not
# inside its deadline.
runtime.hooks.startup.append(warm_in_thread)
router = KafkaRouter()
safety = runtime.owned_store(Topic.SAFETY, SafetyState)
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)
memory = runtime.table_view(Topic.MEMORY, MemoryRecord)


@runtime.agent(router, output=Topic.STABILITY)
async def handle(message: UserMessage) -> StabilityResult:
    """Assess risks (severity × detectability × reversibility), block unsafe steps and
    escalate a crisis to a human."""
    started = time.perf_counter()
    state = safety.get(message.user_id)
    board = boards.get(message.user_id)
    # Normalised once, for every screen of this turn (crisis, conversation, steps).
    said = NormalizedText.of(message.text)
    updated, payload = logic.assess(state, board, message, said=said)
    det = payload
    if state is not None and updated.version == state.version:
        # Already applied (a redelivery after a crash before the result went out):
        # the decisions were taken then, a second LLM call or review would repeat them.
        return StabilityResult.for_message(message, payload, started=started)

    def build(
        instructions: str, kind: str, data: Sequence[tuple[str, str]] = ()
    ) -> Callable[[LLMTier, list[str]], list[Message]]:
        def messages(tier: LLMTier, errors: list[str]) -> list[Message]:
            ctx = context_for(memory.get(message.user_id), message)
            return prompts.messages(
                runtime.prompt_builder(), ctx, instructions, errors, kind, data=data
            )

        return messages

    # The model double-checks the message in its conversation: the question our last
    # reply asked and the recent warning signs travel with it, not the bare message.
    conversation = context_for_model(state, message.created_at)
    answering = open_question(state, message.created_at) is not None

    def to_risk(parsed: RiskScreenCall) -> RiskDecision:
        # A model's crisis adds to the rules' screen; its "none" settles an uncertain
        # screen (that is what it was asked), never a crisis the rules found.
        return RiskDecision(merge_screens(det.crisis, claim_screen(parsed)), parsed)

    # 1. Crisis screen. A crisis (found by either tier) goes to a human through the
    # router's severity rule; the turn continues at once with the screen as found.
    risk = await runtime.tiers.decide(
        kind="risk_screen",
        agent="stability",
        deterministic=lambda: (RiskDecision(det.crisis), logic.risk_confidence(det)),
        build_messages=build(RISK_INSTRUCTIONS, "risk_screen", conversation),
        response_model=RiskScreenCall,
        budget=message.budget,
        validate=lambda d: prompts.check_risk(d, said, answering=answering),
        convert=to_risk,
        context=DecisionContext(message.turn_id, message.session_id, message.user_id, message.text),
        severity=prompts.severity,
    )
    # Under review the router hands back a "safe" value; for a screen the safe value
    # is the alarming one that triggered the review, never the calmer regex answer.
    decided = risk.escalated_value if risk.human_pending and risk.escalated_value else risk.value
    screen = merge_screens(det.crisis, decided.screen)

    # 2. Blocked steps: a crisis suspends coaching, so no model is asked then.
    def to_steps(parsed: prompts.BlockedStepsCall) -> StepsDecision:
        known = {b.step_id for b in det.blocked_steps}
        added = [(c.step_id, c.evidence) for c in parsed.steps if c.step_id not in known]
        return StepsDecision(added=added, claims=list(parsed.steps))

    steps_conf = 1.0 if is_crisis(screen) else logic.steps_confidence(updated, said)
    conditions = sorted(logic.active_conditions(updated))
    steps = await runtime.tiers.decide(
        kind="blocked_steps",
        agent="stability",
        deterministic=lambda: (StepsDecision(), steps_conf),
        build_messages=build(prompts.steps_instructions(conditions), "blocked_steps"),
        response_model=prompts.BlockedStepsCall,
        budget=message.budget,
        validate=lambda d: prompts.check_steps(d, said),
        convert=to_steps,
    )

    if screen != det.crisis or steps.value.added:
        # Re-assess from the state as it was, with the LLM's additions: the crisis
        # history, blocks and risks then follow from one consistent pass.
        updated, payload = logic.assess(
            state, board, message, crisis=screen, extra_steps=steps.value.added, said=said
        )
    await safety.put(message.user_id, updated)
    outcomes = (risk, steps)
    tier: Tier = max((o.tier for o in outcomes), key=lambda t: TIER_RANK[t])
    usage = sum((o.usage for o in outcomes), Usage())
    reason = next((o.fallback_reason for o in outcomes if o.fallback_reason), None)
    return StabilityResult.for_message(
        message, payload, started=started, tier=tier, usage=usage, fallback_reason=reason
    )
