"""Synth: joins a turn's results, resolves conflicts, delivers the final reply."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import cast

from faststream.kafka import KafkaRouter
from opentelemetry.context import Context
from pydantic import TypeAdapter

from coachbus.bus.codec import DecodeError, decode
from coachbus.bus.consume import record_context
from coachbus.bus.dispatch import Hold, Record
from coachbus.bus.erasure import origin
from coachbus.bus.service import AgentRuntime
from coachbus.bus.state import read_tail
from coachbus.contracts import (
    AgentResult,
    AgentResultAdapter,
    EraseRequest,
    Reply,
    SessionEnd,
    Tier,
    UserInputAdapter,
    UserMessage,
    utcnow,
)
from coachbus.llm import DecisionContext, LLMClient, LLMTier, Message, Outcome, Router
from coachbus.memory import MemoryRecord, context_for
from coachbus.metrics import MESSAGES, SYNTH_FIRST_TEXT, SYNTH_JOIN_WAIT, TURN_LATENCY
from coachbus.reply_stream import SentencePublisher, StreamingLLM, partial_check
from coachbus.safety import judge as reply_judge
from coachbus.safety.helplines import Helplines
from coachbus.safety.warm import warm_in_thread
from coachbus.topics import AGENT_TOPICS, Topic
from coachbus.tracing import turn_span
from services.synth import assemble, logic, prompts
from services.synth.conflicts import SAFETY_MODES
from services.synth.join import Join, OpenTurn
from services.synth.memory import MemoryKeeper

log = logging.getLogger(__name__)

runtime = AgentRuntime("synth")
# The screens' patterns and learned readers load before the first message, not
# inside its deadline.
runtime.hooks.startup.append(warm_in_thread)
router = KafkaRouter()
_replies: TypeAdapter[Reply] = TypeAdapter(Reply)
_input_topic = runtime.topic(Topic.USER_MESSAGES)
# A user message is held to the same byte limit as at every other agent; results and
# replies carry more than the message (settings say how much and why).
_message_limit = runtime.settings.max_message_bytes
_result_limit = runtime.settings.max_result_bytes
# How far back in the replies topic to look for finals already sent, per partition.
FINALS_LOOKBACK = 20_000
# Read and checked now: a broken help-lines file or an unknown locale stops Synth at
# start, not in the middle of a crisis reply.
helplines = Helplines.configured(runtime.settings.helplines_file, runtime.settings.locale)


memory = MemoryKeeper(runtime)


def _memory(user_id: str) -> MemoryRecord | None:
    """The user's conversation memory (Synth is its only writer)."""
    return memory.store.get(user_id)


def _piece(
    message: UserMessage, outcome: logic.SynthOutcome, text: str, seq: int, tier: Tier
) -> Reply:
    return Reply(
        turn_id=message.turn_id,
        session_id=message.session_id,
        user_id=message.user_id,
        kind="final_delta",
        text=text,
        seq=seq,
        tier=tier,
        language=outcome.language,
    )


@dataclass(slots=True)
class FinalProse:
    """The final reply's prose as the router decided it, and whether the user has
    seen it streamed (``final_delta`` pieces before the final)."""

    decided: Outcome[str]
    streamed: bool


async def write_prose(message: UserMessage, outcome: logic.SynthOutcome) -> FinalProse:
    """The final reply's prose: the deterministic rendering first; below the policy's
    confidence an LLM writes from the sheet alone, checked by the same validator and
    repaired within the router's bounded loop, else the rendering stands.

    The LLM's reply is streamed to the user sentence by sentence as it is written
    (``final_delta``), each sentence checked before it leaves; a sentence that
    fails, or a deadline mid-stream, ends the stream there and the reply is
    completed from the deterministic rendering (``assemble.complete``). With nothing
    shown yet, a failure is an ordinary failed attempt that the router repairs.
    Crisis, care and check-in replies are never streamed (nor rewritten): their
    help lines can only be checked on the whole text."""
    sheet = outcome.sheet
    decider = runtime.tiers
    sink: SentencePublisher | None = None
    streaming: StreamingLLM | None = None
    opener = ""
    never = logic.never_steps(sheet)
    # On a turn that blocked steps, a model may read the reply the rules passed (the
    # reply guard's model tier): the model's sentences are then held back, not
    # streamed, so none reaches the person before the whole reply was read (a shown
    # sentence cannot be taken back). The opening, the rendering's own sentence, is
    # still shown at once.
    held = bool(never) and reply_judge.asks_model(runtime.tiers)
    if runtime.llm is not None and sheet.mode not in SAFETY_MODES:
        opener = assemble.opening(outcome, runtime.settings.synth_opening)

        async def publish(text: str, seq: int) -> None:
            tier: Tier = streaming.tier if streaming is not None and streaming.tier else "small"
            if seq == 0 and opener:
                # The sink shows its opening first, before any attempt's sentence.
                tier = "deterministic"  # the rendering's sentence, not the model's
            piece = _piece(message, outcome, text, seq, tier)
            await runtime.publish(Topic.REPLIES, piece, key=message.user_id)
            if seq == 0:
                SYNTH_FIRST_TEXT.labels("streamed", piece.tier).observe(
                    (utcnow() - message.created_at).total_seconds()
                )

        sink = SentencePublisher(
            publish,
            partial_check(language=sheet.language, register=sheet.formality, never=never),
            max_words=sheet.max_words,
            opening=opener,
            # Prompts of an older release asked for JSON: a model that still answers
            # so is understood (not streamed) rather than refused.
            json_field="text",
            hold=held,
        )
        # A router of its own whose client streams (same policy): the router still
        # picks the tier and bounds the repair loop, the sentences reach the user live.
        streaming = StreamingLLM(
            runtime.llm,
            sink,
            lambda text: prompts.Prose(text=text),
            complete=lambda shown: assemble.complete(shown, outcome, helplines=helplines),
            whole=lambda text: logic.validate(text, sheet, helplines=helplines),
        )
        decider = Router(
            policy=runtime.tiers.policy,
            client=cast(LLMClient, streaming),
            publish_human_review=runtime.tiers.publish_human_review,
        )

    def deterministic() -> tuple[str, float]:
        # Crisis and check-in replies must carry exact help lines: never rewritten.
        return outcome.text, 1.0 if outcome.crisis_mode else outcome.confidence

    def build(tier: LLMTier, errors: list[str]) -> list[Message]:
        ctx = context_for(_memory(message.user_id), message)
        return prompts.messages(runtime.prompt_builder(), ctx, sheet, errors, opener)

    written = await decider.decide(
        kind="synthesis_prose",
        agent="synth",
        deterministic=deterministic,
        build_messages=build,
        response_model=prompts.Prose,
        budget=message.budget,
        validate=lambda text: logic.validate(text, sheet, helplines=helplines),
        convert=prompts.clean,
        context=DecisionContext(message.turn_id, message.session_id, message.user_id, message.text),
    )
    streamed = sink is not None and sink.streamed
    streamed_model = sink is not None and sink.streamed_model
    streaming_tier = streaming.tier if streaming is not None else None
    if sink is not None and streamed and not written.value.startswith(sink.shown):
        # The stream was cut (the turn's deadline, an error) or a later attempt won:
        # the reply still starts with what the user has read.
        log.info("synth %s: streamed reply completed (%s)", message.turn_id, written.stop_reason)
        written.value = assemble.complete(sink.shown, outcome)
    if streamed_model and streaming_tier is not None:
        # The reply begins with the model's sentences whatever completed it.
        written.tier = streaming_tier
    if held:
        # The model's reply the rules passed, read whole; the rendering, built from the
        # sheet, replaces it when a model finds a step or none could read it.
        blocked = await reply_judge.vouch(
            runtime.tiers,
            written,
            written.value,
            never,
            outcome.text,
            agent="synth",
            builder=runtime.prompt_builder(),
            ctx=context_for(_memory(message.user_id), message),
            budget=message.budget,
            context=DecisionContext(
                message.turn_id, message.session_id, message.user_id, message.text
            ),
        )
        if blocked is not None:
            log.info("synth %s: %s", message.turn_id, blocked)
    return FinalProse(written, streamed)


def _erased(message: UserMessage) -> bool:
    """The user erased their data after this turn began (while it was open)."""
    return runtime.erasures.predates(message.user_id, origin(message.turn_id, message.created_at))


async def finalize(turn: OpenTurn, degraded: bool) -> None:
    message = turn.message
    assert message is not None
    if _erased(message):
        # Finalising when the erase arrived: the turn ends unanswered and nothing
        # of it is written (the records are committed; the user asked to be forgotten).
        MESSAGES.labels("synth", "join", "erased").inc()
        return
    missing = turn.missing(join.required)
    SYNTH_JOIN_WAIT.labels("deadline" if missing else "complete").observe(
        (utcnow() - message.created_at).total_seconds()
    )
    outcome = logic.synthesize(message, turn.results, missing, helplines=helplines)
    review = logic.review_without_stability(message, outcome, missing)
    if review is not None:
        # Stability, which puts a crisis before a human, did not report in time:
        # Synth's own screen goes instead (the review queue keeps one item per turn,
        # so a late Stability review of the same turn is not shown twice).
        await runtime.publish(Topic.HUMAN_REVIEW, review, key=message.user_id)
    prose = await write_prose(message, outcome)
    written = prose.decided
    usage = written.usage
    for result in turn.results.values():
        usage = usage + result.usage
    if written.fallback_reason:
        log.info("synth %s: prose fell back (%s)", message.turn_id, written.fallback_reason)
    reply = Reply(
        turn_id=message.turn_id,
        session_id=message.session_id,
        user_id=message.user_id,
        kind="final",
        text=written.value,
        degraded=bool(missing),
        missing_agents=missing,  # type: ignore[arg-type]
        conflicts=outcome.conflicts,
        tier=written.tier,
        language=outcome.language,
        usage=usage,
    )
    if _erased(message):  # the erase came while the prose was being written
        MESSAGES.labels("synth", "join", "erased").inc()
        return
    context = turn.trace_context if isinstance(turn.trace_context, Context) else None
    with turn_span("synth.final", message.turn_id, "synth", parent=context):
        await runtime.publish(Topic.REPLIES, reply, key=message.user_id)
    if not prose.streamed:
        SYNTH_FIRST_TEXT.labels("final", reply.tier).observe(
            (utcnow() - message.created_at).total_seconds()
        )
    # After the reply: the next turn's shared prompt prefix comes from this record.
    # The keeper checks the watermark again right before it writes.
    await memory.after_final(message, turn.results, reply.text)
    TURN_LATENCY.labels("degraded" if missing else "complete").observe(
        (utcnow() - message.created_at).total_seconds()
    )


join = Join(required=list(runtime.settings.synth_required_agents), finalize=finalize)


async def handle(record: Record) -> Hold | None:
    try:
        if record.topic == _input_topic:
            message = decode(record.value, UserInputAdapter, max_bytes=_message_limit)
            if isinstance(message, EraseRequest):
                join.forget_user(message.user_id)
                # Tombstones its memory record, applies the watermark (a turn being
                # finalised now writes nothing) and confirms the erase.
                await runtime.erase_user(message.user_id, message, record)
                return None
            if isinstance(message, SessionEnd):
                await memory.end_session(message)
                return None
            hold = join.add_message(message, record.partition, record_context(record))
        else:
            result: AgentResult = decode(record.value, AgentResultAdapter, max_bytes=_result_limit)
            hold = join.add_result(result, record.partition)
    except DecodeError as exc:
        await runtime.dead_letter(record, exc.reason, exc.error_type)
        return None
    MESSAGES.labels("synth", record.topic, "ok" if hold is not None else "duplicate").inc()
    return hold


async def _remember_finals(partitions: set[int]) -> None:
    """After (re)assignment: learn which recent turns were answered already."""
    if not runtime.kafka_io:
        return
    started = time.monotonic()
    tail = await read_tail(
        runtime.kafka, runtime.topic(Topic.REPLIES), sorted(partitions), FINALS_LOOKBACK
    )
    finals = 0
    for _partition, _key, value in tail:
        try:
            reply = decode(value, _replies, max_bytes=_result_limit)
        except DecodeError:
            continue
        if reply.kind == "final":
            join.mark_done(reply.turn_id)
            finals += 1
    log.info(
        "synth: %d finals remembered for partitions %s in %.0f ms",
        finals,
        sorted(partitions),
        (time.monotonic() - started) * 1000,
    )


async def _abandon(partitions: set[int]) -> None:
    dropped = join.abandon(partitions)
    if dropped:
        log.info("synth: %d open turns left to the partitions' next owner", dropped)


runtime.hooks.partitions_assigned.append(_remember_finals)
runtime.hooks.partitions_revoked.append(_abandon)
dispatcher = runtime.consume(
    router,
    [Topic.USER_MESSAGES, *AGENT_TOPICS.values()],
    handle,
    title="synth:join",
    description="Joins each turn's user message and agent results by turn id.",
)
router.publisher(runtime.topic(Topic.REPLIES), title="synth:replies")
