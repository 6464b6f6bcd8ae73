"""The decisions beside the crisis screen, scored on their corpora.

Each corpus under ``tests/data/eval/<corpus>/`` holds the inputs of one decision and
what it should have decided; a scorer runs the decision in process — the agents'
own functions, in order, as the services chain them through their state topics,
with no broker — and counts per label:

* ``steps``: the risky steps Stability blocks for a message and its standing
  conditions (multi-label: per step and micro precision/recall, exact match);
* ``register``: the language and du/Sie decided where a message enters;
* ``patterns``: the primary pattern Shadow writes on the blackboard after a short
  conversation;
* ``conflicts``: the conflict Synth records on the last turn of a conversation
  (rule, winner, overruled), and none where none is expected;
* ``replies``: the defects the one reply checker finds (merge artefacts, blocked
  steps, wrong register, wrong language), and good replies it must pass.

The agents run through :mod:`evaluation.chain`, the one chain the tests and the
fingerprint run too.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeAlias

from coachbus.confidence import (
    CORPUS_OF,
    MeasuredKind,
    measured,
    pattern_outcome,
    register_outcome,
    reply_guard_outcome,
)
from coachbus.contracts.events import UserMessage, language_and_address
from coachbus.contracts.payloads import TIER_RANK, Language
from coachbus.llm import Message
from coachbus.memory import context_for
from coachbus.replycheck import check_reply
from coachbus.safety.judge import judge
from coachbus.safety.steps import names_any, step_screen
from evaluation.chain import Chain, Step
from evaluation.metrics import Binary, fmt, ratio, reliability, smoothed_accuracy
from evaluation.results import NONE, Answer, Report
from evaluation.tiers import Candidate, RouterTier, run_router, run_rules, spent

Raw = dict[str, Any]
# One answer on these corpora (a type only: a subscripted generic cannot build a
# frozen, slotted instance, so code builds ``Answer``).
Scored: TypeAlias = Answer[Raw]


def silent_errors(answers: Sequence[Scored], bar: float) -> dict[str, Any]:
    """The figure that matters for routing: answers that were wrong and reported a
    confidence at or above the policy's bar, so the router kept them and no model or
    human was asked. An answer without a confidence counts as sure: nothing would
    route it on."""

    def sure(a: Scored) -> bool:
        return a.confidence is None or a.confidence >= bar

    silent = sum(not a.exact and sure(a) for a in answers)
    return {
        "bar": bar,
        "count": silent,
        "share": ratio(silent, len(answers)),
        "routed_on": ratio(sum(not sure(a) for a in answers), len(answers)),
    }


def figures(
    rep: Report[Scored],
    *,
    list_items: bool,
    bar: float | None = None,
    decided: Sequence[Scored] | None = None,
) -> dict[str, Any]:
    """One tier's figures, per label and micro-averaged over the labels other than
    "none"; ``list_items``: with the misses (on dev only); ``bar``: the policy's bar
    for this decision, for the silent errors (deterministic tier only); ``decided``:
    the answers of the decision inside a check whose confidence is measured (the
    reply guard inside the replies check), which the reliability and the silent
    errors are read from instead of the check's."""
    labels = sorted({lab for s in rep.answers for lab in s.predicted | s.expected})
    per_label = {lab: Binary() for lab in labels}
    micro = Binary()
    by_language: dict[str, Binary] = defaultdict(Binary)
    for s in rep.answers:
        for lab in labels:
            gold, pred = lab in s.expected, lab in s.predicted
            per_label[lab].add(gold, pred)
            if lab != NONE:
                micro.add(gold, pred)
                by_language[s.item["language"]].add(gold, pred)
    exact = sum(s.exact for s in rep.answers)
    measured_on = rep.answers if decided is None else decided
    pairs = [(s.confidence, s.exact) for s in measured_on if s.confidence is not None]
    out: dict[str, Any] = {
        "items": len(rep.answers),
        "exact_match": ratio(exact, len(rep.answers)),
        "micro": micro.as_dict(),
        "by_label": {k: v.as_dict() for k, v in per_label.items()},
        "by_language": {k: v.as_dict() for k, v in sorted(by_language.items())},
        "reliability": reliability(pairs) if pairs else None,
        "silent_errors": silent_errors(measured_on, bar) if bar is not None else None,
        **rep.costs(),
    }
    if list_items:
        out["misses"] = [
            {
                "id": s.item["id"],
                "expected": sorted(s.expected),
                "predicted": sorted(s.predicted),
            }
            for s in rep.answers
            if not s.exact
        ]
    return out


# --------------------------------------------------------------------------- messages


def _message(text: str, user: str, n: int, earlier: Language | None = None) -> UserMessage:
    return UserMessage.create(
        user_id=user,
        session_id=f"{user}-s",
        text=text,
        deadline_ms=20_000,
        max_tokens=0,
        wall_clock_ms=20_000,
        turn_id=f"{user}-t{n:03d}",
        earlier=earlier,
    )


def _talk(user: str, texts: Sequence[str]) -> list[Step]:
    """A short conversation through the chain of agents, each message carrying the
    language the gateway knew from the one before (a short "Okay." does not switch it)."""
    chain = Chain()
    steps: list[Step] = []
    language: Language | None = None
    for n, text in enumerate(texts, start=1):
        msg = _message(text, user, n, language)
        language = msg.language
        steps.append(chain.turn(msg))
    return steps


# --------------------------------------------------------------------------- scorers


def score_steps(items: Sequence[Raw]) -> Report[Scored]:
    def answer(_n: int, item: Raw) -> Scored:
        screen = step_screen(item["text"], set(item["conditions"]))
        return Answer(
            item=item,
            predicted=frozenset(h.spec.step_id for h in screen.hits) or frozenset({NONE}),
            expected=frozenset(item["expected"]) or frozenset({NONE}),
            confidence=screen.confidence,
            outcome=screen.outcome,
        )

    return run_rules(items, answer)


def score_register(items: Sequence[Raw]) -> Report[Scored]:
    table = measured("language_register")

    def answer(_n: int, item: Raw) -> Scored:
        language, address = language_and_address(item["text"])
        outcome = register_outcome(language, address)
        return Answer(
            confidence=table.of(outcome),
            outcome=outcome,
            item=item,
            predicted=frozenset({f"language:{language}", f"register:{address or NONE}"}),
            expected=frozenset(
                {
                    f"language:{item['expected_language']}",
                    f"register:{item['expected_register'] or NONE}",
                }
            ),
        )

    return run_rules(items, answer)


def score_patterns(items: Sequence[Raw]) -> Report[Scored]:
    table = measured("pattern_classification")

    def answer(n: int, item: Raw) -> Scored:
        steps = _talk(f"eval-p{n}", item["turns"])
        board = steps[-1].board if steps else None
        primary = board.primary_pattern if board is not None else None
        outcome = pattern_outcome(primary.value if primary is not None else None)
        return Answer(
            item=item,
            predicted=frozenset({primary.value if primary is not None else NONE}),
            expected=frozenset({item["expected"] or NONE}),
            confidence=table.of(outcome),
            outcome=outcome,
        )

    return run_rules(items, answer)


def score_conflicts(items: Sequence[Raw]) -> Report[Scored]:
    """A conflict counts when the expected rule was recorded with the expected
    winner and overruled agent; where none is expected, any recorded conflict is a
    false alarm. Other conflicts recorded beside the expected one are not counted
    against it (several rules can fire on one turn)."""

    def answer(n: int, item: Raw) -> Scored:
        exp = item["expected"]
        want = f"{exp['rule']}:{exp['winner']}>{exp['overruled']}" if exp else NONE
        last = _talk(f"eval-c{n}", item["turns"])[-1]
        seen = {f"{c.rule}:{c.winner}>{c.overruled}" for c in last.final.conflicts}
        if want != NONE:
            predicted = frozenset({want} if want in seen else {NONE})
        else:
            predicted = frozenset(seen) or frozenset({NONE})
        return Answer(item=item, predicted=predicted, expected=frozenset({want}))

    return run_rules(items, answer)


_KINDS = (
    ("blocked step", "blocked_step"),
    ("merge artefact", "merge_artefact"),
    ("wrong language", "wrong_language"),
    ("register", "wrong_register"),
)


def _check(item: Raw) -> set[str]:
    """The defect kinds the one reply checker finds in an item's reply."""
    problems = check_reply(
        item["reply"],
        language=item["language"],
        register=item["register"],
        never=item["never_say"],
    )
    return {kind for p in problems for prefix, kind in _KINDS if p.startswith(prefix)}


def score_replies(items: Sequence[Raw]) -> Report[Scored]:
    def answer(_n: int, item: Raw) -> Scored:
        kinds = _check(item)
        return Answer(
            item=item,
            predicted=frozenset(kinds) or frozenset({NONE}),
            expected=frozenset(item["expected"]) or frozenset({NONE}),
        )

    return run_rules(items, answer)


def _guard_labels(item: Raw, found: bool) -> tuple[frozenset[str], frozenset[str]]:
    want = "blocked_step" in item["expected"]
    return (
        frozenset({"blocked_step" if found else NONE}),
        frozenset({"blocked_step" if want else NONE}),
    )


def reply_guard_answers(check: Report[Scored]) -> Report[Scored]:
    """The reply guard alone (``reply_guard``), read off the replies check's answers on
    the items whose sheet blocked steps (the check ran the guard already: a step it
    found is its ``blocked_step``): whether the reply suggests one of them, with the
    confidence measured for the kind of answer it gave. What its calibration and silent
    errors are read from."""
    table = measured("reply_guard")
    guard: Report[Scored] = Report(check.tier)
    for a in check.answers:
        item = a.item
        if not item["never_say"]:
            continue
        found = "blocked_step" in a.predicted
        outcome = reply_guard_outcome(found, found or names_any(item["reply"], item["never_say"]))
        predicted, expected = _guard_labels(item, found)
        guard.answers.append(
            Answer(
                item=item,
                predicted=predicted,
                expected=expected,
                confidence=table.of(outcome),
                outcome=outcome,
                latency_s=a.latency_s,
            )
        )
    return guard


# The decision inside a check, read off the check's answers where the check's corpus
# measures it (see ``figures``).
DECIDED: dict[str, Callable[[Report[Scored]], Report[Scored]]] = {"replies": reply_guard_answers}


# --------------------------------------------------------------------------- model tiers


async def steps_with_router(items: Sequence[Raw], candidate: Candidate) -> Report[Scored]:
    """The ``blocked_steps`` decision as Stability takes it: the catalogue's triggers
    first, the policy's LLM tiers below the bar (a standing condition, or nothing
    found), a model's step kept only with the person's own words as evidence."""
    from services.stability import prompts

    async def decide(tier: RouterTier, n: int, item: Raw) -> Scored:
        conditions = set(item["conditions"])
        screen = step_screen(item["text"], conditions)
        found = {h.spec.step_id for h in screen.hits}
        conf = screen.confidence
        msg = _message(item["text"], f"eval-s{n}", 1)
        ctx = context_for(None, msg)
        instructions = prompts.steps_instructions(sorted(conditions))

        def convert(parsed: prompts.BlockedStepsCall) -> prompts.StepsDecision:
            added = [(c.step_id, c.evidence) for c in parsed.steps if c.step_id not in found]
            return prompts.StepsDecision(added=added, claims=list(parsed.steps))

        out = await tier.router.decide(
            kind="blocked_steps",
            agent="stability",
            deterministic=lambda: (prompts.StepsDecision(), conf),
            build_messages=lambda _tier, errors: prompts.messages(
                tier.prompts, ctx, instructions, errors, "blocked_steps"
            ),
            response_model=prompts.BlockedStepsCall,
            budget=tier.budget(),
            validate=lambda d: prompts.check_steps(d, item["text"]),
            convert=convert,
        )
        labels = found | {sid for sid, _ in out.value.added}
        return Answer(
            item=item,
            predicted=frozenset(labels) or frozenset({NONE}),
            expected=frozenset(item["expected"]) or frozenset({NONE}),
            **spent(out),
        )

    return await run_router(candidate, items, decide)


async def patterns_with_router(items: Sequence[Raw], candidate: Candidate) -> Report[Scored]:
    """Shadow's ``pattern_classification`` turn by turn as Shadow takes it: cue
    phrases first, the policy's LLM tiers below the bar, a model's pattern kept only
    with a verbatim quote; the board chained through the conversation."""
    from services.shadow import logic as shadow
    from services.shadow import prompts

    async def decide(tier: RouterTier, n: int, item: Raw) -> Scored:
        board: Any = None
        tokens, tiers, stops = 0, Counter[str](), Counter[str]()
        language: Language | None = None
        for t, text in enumerate(item["turns"]):
            msg = _message(text, f"eval-pr{n}", t + 1, language)
            language = msg.language
            updated, payload = shadow.observe(board, msg)
            sure = shadow.is_crisis_message(msg)
            det = prompts.ShadowDecision(updated, payload)

            def convert(
                parsed: prompts.PatternCall, msg: UserMessage = msg, updated: Any = updated
            ) -> prompts.ShadowDecision:
                found = [
                    (c.pattern, q)
                    for c in parsed.patterns
                    if (q := prompts.verbatim(c.evidence, msg.text))
                ]
                board_, payload_ = shadow.refine(updated, msg, found)
                return prompts.ShadowDecision(board_, payload_, list(parsed.patterns))

            ctx = context_for(None, msg)
            # A crisis message is never pattern material (as in Shadow's handler).
            confidence = 1.0 if sure else shadow.classification_confidence(updated)

            def deterministic(
                det: prompts.ShadowDecision = det, confidence: float = confidence
            ) -> tuple[prompts.ShadowDecision, float]:
                return det, confidence

            def build(_tier: str, errors: list[str], ctx: Any = ctx) -> list[Message]:
                return prompts.messages(tier.prompts, ctx, errors)

            def validate(d: prompts.ShadowDecision, msg: UserMessage = msg) -> list[str]:
                return prompts.check(d, msg.text)

            out = await tier.router.decide(
                kind="pattern_classification",
                agent="shadow",
                deterministic=deterministic,
                build_messages=build,
                response_model=prompts.PatternCall,
                budget=tier.budget(),
                validate=validate,
                convert=convert,
            )
            board = out.value.board
            cost = spent(out)
            tokens += cost["tokens"]
            tiers[cost["tier"]] += 1
            if cost["stop_reason"] is not None:
                stops[cost["stop_reason"]] += 1
        primary = board.primary_pattern if board is not None else None
        return Answer(
            item=item,
            predicted=frozenset({primary.value if primary is not None else NONE}),
            expected=frozenset({item["expected"] or NONE}),
            # The conversation's highest tier: what carried its last decision.
            tier=max(tiers, key=lambda k: TIER_RANK.get(k, 0)),  # type: ignore[call-overload]
            tokens=tokens,
            stop_reason=stops.most_common(1)[0][0] if stops else None,
        )

    return await run_router(candidate, items, decide)


async def replies_with_router(items: Sequence[Raw], candidate: Candidate) -> Report[Scored]:
    """The replies check as Coach and Synth run it with a model: the one reply checker,
    and on a sheet that blocked steps the ``reply_guard`` decision (a model reads a
    reply the rules passed below the bar, adding only steps it quotes from the reply;
    coachbus.safety.judge)."""

    async def decide(tier: RouterTier, n: int, item: Raw) -> Scored:
        rules = _check(item)
        # The corpus holds replies without the message they answered: the prefix
        # says so, and the reply is judged on its own words.
        msg = _message("(not recorded: the reply is judged on its own)", f"eval-r{n}", 1)
        judged = await judge(
            tier.router,
            item["reply"],
            item["never_say"],
            agent="synth",
            builder=tier.prompts,
            ctx=context_for(None, msg),
            budget=tier.budget(),
        )
        labels = rules | ({"blocked_step"} if judged.added else set())
        return Answer(
            item=item,
            predicted=frozenset(labels) or frozenset({NONE}),
            expected=frozenset(item["expected"]) or frozenset({NONE}),
            tier=judged.tier,
            tokens=judged.usage.prompt_tokens + judged.usage.completion_tokens,
            stop_reason=judged.stop_reason,
        )

    return await run_router(candidate, items, decide)


# Decisions whose LLM tiers ``coachbus eval --llm-base-url`` scores beside the rules.
ROUTED: dict[str, Callable[[Sequence[Raw], Candidate], Coroutine[Any, Any, Report[Scored]]]] = {
    "steps": steps_with_router,
    "patterns": patterns_with_router,
    "replies": replies_with_router,
}


SCORERS: dict[str, Callable[[Sequence[Raw]], Report[Scored]]] = {
    "steps": score_steps,
    "register": score_register,
    "patterns": score_patterns,
    "conflicts": score_conflicts,
    "replies": score_replies,
}


def summary(rep: dict[str, Any]) -> str:
    """A few lines per corpus for the text report."""
    lines = [
        f"{rep['corpus']}: {rep['items']} items, exact match {fmt(rep['exact_match'])}, "
        f"micro P/R/F1 {fmt(rep['micro']['precision'])} / {fmt(rep['micro']['recall'])} / "
        f"{fmt(rep['micro']['f1'])}"
    ]
    for lab, row in rep["by_label"].items():
        lines.append(
            f"  {lab:<44} P {fmt(row['precision'])}  R {fmt(row['recall'])}  "
            f"F1 {fmt(row['f1'])}  (tp {row['tp']}, fp {row['fp']}, fn {row['fn']})"
        )
    for lang, row in rep["by_language"].items():
        lines.append(f"  language {lang}: P {fmt(row['precision'])}  R {fmt(row['recall'])}")
    rel = rep.get("reliability")
    if rel:
        lines.append(f"  reliability ECE {fmt(rel['ece'])}")
    silent = rep.get("silent_errors")
    if silent:
        lines.append(
            f"  silent errors {fmt(silent['share'])} ({silent['count']} wrong at or above the "
            f"bar {silent['bar']}; {fmt(silent['routed_on'])} of answers go on to a model)"
        )
    talk = rep.get("everyday_flagged")
    if talk:
        lines.append(
            f"  everyday talk blocked {fmt(talk['share'])} ({talk['flagged']} of "
            f"{talk['messages']} ordinary messages of the other corpora; none heads for a step)"
        )
    lat = rep["latency_ms"]
    lines.append(f"  latency p50 {fmt(lat['p50'])} ms, p95 {fmt(lat['p95'])} ms")
    for m in rep.get("misses", []):
        lines.append(f"  miss {m['id']}: expected {m['expected']}, got {m['predicted']}")
    return "\n".join(lines)


def flagged_share(talk: Sequence[str]) -> dict[str, Any]:
    """How many ordinary messages the step screen blocks a step in."""
    flagged = sum(bool(step_screen(t).hits) for t in talk)
    return {"messages": len(talk), "flagged": flagged, "share": ratio(flagged, len(talk))}


# The decision each corpus measures, where its confidence is measured (the replies
# corpus measures the reply guard inside its check, see DECIDED; conflicts are a
# check, not a routed decision).
KIND_OF: dict[str, MeasuredKind] = {corpus: kind for kind, corpus in CORPUS_OF.items()}


def measure_calibration(answers: Sequence[Scored]) -> dict[str, float]:
    """Measured confidence per outcome: Laplace-smoothed accuracy on the split."""
    return smoothed_accuracy((a.outcome, a.exact) for a in answers if a.outcome is not None)


__all__ = [
    "DECIDED",
    "KIND_OF",
    "ROUTED",
    "SCORERS",
    "Raw",
    "Scored",
    "figures",
    "measure_calibration",
    "reply_guard_answers",
    "silent_errors",
    "summary",
]
