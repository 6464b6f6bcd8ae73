"""Coach: the immediate reply. It never waits for this turn's other agents."""

from __future__ import annotations

import time
from typing import cast

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import CoachResult, Reply, UserMessage, utcnow
from coachbus.contracts.payloads import CoachPayload
from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.llm import LLMClient, LLMTier, Message, Router
from coachbus.memory import MemoryRecord, context_for
from coachbus.metrics import COACH_FIRST_REPLY
from coachbus.reply_stream import DeltaPublisher, StreamingLLM, Withheld
from coachbus.safety import judge as reply_judge
from coachbus.safety.helplines import Helplines
from coachbus.safety.warm import warm_in_thread
from coachbus.topics import Topic
from services.coach import logic, prompts

runtime = AgentRuntime("coach")
# The screens' patterns and learned readers load before the first message, not
# inside its deadline.
runtime.hooks.startup.append(warm_in_thread)
router = KafkaRouter()
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)
safety = runtime.table_view(Topic.SAFETY, SafetyState)
memory = runtime.table_view(Topic.MEMORY, MemoryRecord)
# Read and checked now: a broken help-lines file or an unknown locale stops Coach at
# start, not in the middle of a crisis reply.
helplines = Helplines.configured(runtime.settings.helplines_file, runtime.settings.locale)


def _reply(message: UserMessage, kind: str, text: str, **extra: object) -> Reply:
    return Reply.model_validate(
        {
            "turn_id": message.turn_id,
            "session_id": message.session_id,
            "user_id": message.user_id,
            "kind": kind,
            "text": text,
            **extra,
        }
    )


@runtime.agent(router, output=Topic.COACH)
async def handle(message: UserMessage) -> CoachResult:
    """Answer at once from what is already known (blackboard, last blocked steps,
    crisis screen of the new message)."""
    # Below the policy's confidence a small model writes the reply instead, streamed
    # to the user as it is written (the docstring is the AsyncAPI description).
    started = time.perf_counter()
    board, state = boards.get(message.user_id), safety.get(message.user_id)
    payload = logic.quick_reply(message, board, state, helplines=helplines)
    register = logic.register_for(message, board)

    async def publish_delta(text: str, seq: int) -> None:
        piece = _reply(
            message, "coach_delta", text, seq=seq, tier="small", language=payload.language
        )
        await runtime.publish(Topic.COACH_REPLIES, piece, key=message.user_id)

    sink = DeltaPublisher(
        publish_delta,
        lambda text: prompts.problems(text, payload, register, partial=True),
        holdback=prompts.longest_marker(payload),
        min_words=prompts.LANGUAGE_AFTER_WORDS,
    )
    decider = runtime.tiers
    never = payload.avoided_steps
    # On a turn with steps to avoid, a model may read the reply the rules passed (the
    # reply guard's model tier): the reply is then not streamed, so no piece reaches the
    # person before the whole of it was read (a piece shown cannot be taken back).
    held = bool(never) and reply_judge.asks_model(runtime.tiers)
    if runtime.llm is not None and not payload.crisis_mode:
        # A router of its own whose client streams (same policy): the router still
        # picks the tier and bounds the repair loop, the pieces reach the user live
        # (or, held, reach nobody until the whole reply was read).
        shown: DeltaPublisher | Withheld = sink
        if held:
            shown = Withheld(lambda text: prompts.problems(text, payload, register, partial=True))
        streaming = StreamingLLM(runtime.llm, shown, lambda text: prompts.CoachDraft(text=text))
        decider = Router(policy=runtime.tiers.policy, client=cast(LLMClient, streaming))

    def deterministic() -> tuple[CoachPayload, float]:
        # A crisis (or the check-in after one) gets the safe reply at once, never a
        # model's: full confidence keeps every LLM tier out of it.
        return payload, 1.0 if payload.crisis_mode else payload.confidence

    def build(tier: LLMTier, errors: list[str]) -> list[Message]:
        ctx = context_for(memory.get(message.user_id), message)
        return prompts.messages(runtime.prompt_builder(), ctx, payload, register, errors)

    def convert(parsed: prompts.CoachDraft) -> CoachPayload:
        return payload.model_copy(
            update={"text": parsed.text, "grounded_on": [*payload.grounded_on, "llm"]}
        )

    outcome = await decider.decide(
        kind="coach_reply",
        agent="coach",
        deterministic=deterministic,
        build_messages=build,
        response_model=prompts.CoachDraft,
        budget=message.budget,
        validate=lambda value: prompts.problems(value.text, value, register),
        convert=convert,
    )
    if held:
        # A step a model finds (quoting the reply), or no model able to read it: the
        # rules' reply, which offers the safer path and suggests no step, goes instead.
        await reply_judge.vouch(
            runtime.tiers,
            outcome,
            outcome.value.text,
            never,
            payload,
            agent="coach",
            builder=runtime.prompt_builder(),
            ctx=context_for(memory.get(message.user_id), message),
            budget=message.budget,
        )
    final = outcome.value
    if outcome.tier != "deterministic":
        await sink.finish()
    reply = _reply(
        message,
        "coach",
        final.text,
        language=final.language,
        tier=outcome.tier,
        usage=outcome.usage,
    )
    await runtime.publish(Topic.COACH_REPLIES, reply, key=message.user_id)
    COACH_FIRST_REPLY.labels(outcome.tier).observe((utcnow() - message.created_at).total_seconds())
    return CoachResult.for_message(
        message,
        final,
        started=started,
        tier=outcome.tier,
        usage=outcome.usage,
        fallback_reason=outcome.fallback_reason,
    )
