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

The services are imported lazily: this module is a tool of the command line, like
the benchmarks, and the library itself never depends on a service.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coachbus.eval.metrics import Binary, percentile, ratio, reliability

Raw = dict[str, Any]
NONE = "none"


@dataclass(slots=True)
class Scored:
    """One item's answer: the labels predicted and expected (sets, for multi-label)."""

    item: Raw
    predicted: frozenset[str]
    expected: frozenset[str]
    confidence: float | None = None
    latency_s: float = 0.0
    tier: str = "deterministic"
    tokens: int = 0
    stop_reason: str | None = None

    @property
    def exact(self) -> bool:
        return self.predicted == self.expected


@dataclass(slots=True)
class Report:
    corpus: str
    scored: list[Scored] = field(default_factory=list)

    def as_dict(self, *, list_items: bool) -> dict[str, Any]:
        labels = sorted({lab for s in self.scored for lab in s.predicted | s.expected})
        per_label = {lab: Binary() for lab in labels}
        micro = Binary()
        by_language: dict[str, Binary] = defaultdict(Binary)
        for s in self.scored:
            for lab in labels:
                gold, pred = lab in s.expected, lab in s.predicted
                per_label[lab].add(gold, pred)
                if lab != NONE:
                    micro.add(gold, pred)
                    by_language[s.item["language"]].add(gold, pred)
        exact = sum(s.exact for s in self.scored)
        pairs = [(s.confidence, s.exact) for s in self.scored if s.confidence is not None]
        latencies = [s.latency_s * 1000 for s in self.scored]
        out: dict[str, Any] = {
            "items": len(self.scored),
            "exact_match": ratio(exact, len(self.scored)),
            "micro": micro.as_dict(),
            "by_label": {k: v.as_dict() for k, v in per_label.items()},
            "by_language": {k: v.as_dict() for k, v in sorted(by_language.items())},
            "reliability": reliability(pairs) if pairs else None,
            "latency_ms": {
                "p50": _round(percentile(latencies, 50)),
                "p95": _round(percentile(latencies, 95)),
            },
            "tokens": sum(s.tokens for s in self.scored),
            "carried_by": dict(sorted(Counter(s.tier for s in self.scored).items())),
            "stop_reasons": dict(
                sorted(Counter(s.stop_reason for s in self.scored if s.stop_reason).items())
            ),
        }
        if list_items:
            out["misses"] = [
                {
                    "id": s.item["id"],
                    "expected": sorted(s.expected),
                    "predicted": sorted(s.predicted),
                }
                for s in self.scored
                if not s.exact
            ]
        return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _timed(
    fn: Callable[[], tuple[frozenset[str], float | None]],
) -> tuple[frozenset[str], float | None, float]:
    started = time.perf_counter()
    labels, confidence = fn()
    return labels, confidence, time.perf_counter() - started


# --------------------------------------------------------------------------- messages


def _message(text: str, user: str, n: int, earlier: str | None = None) -> Any:
    from coachbus.contracts.events import UserMessage

    return UserMessage.create(
        user_id=user,
        session_id=f"{user}-s",
        text=text,
        deadline_ms=20_000,
        max_tokens=0,
        wall_clock_ms=20_000,
        turn_id=f"{user}-t{n:03d}",
        earlier=earlier,  # type: ignore[arg-type]
    )


@dataclass(slots=True)
class _Conversation:
    """The agents' state chained turn by turn, as the services chain it."""

    user: str
    board: Any = None
    profile: Any = None
    safety: Any = None
    language: str | None = None
    turns: int = 0

    def turn(self, text: str) -> tuple[Any, dict[str, Any]]:
        from coachbus.contracts.events import (
            CoachResult,
            PersonaResult,
            PlasticityResult,
            ShadowResult,
            StabilityResult,
        )
        from services.coach import logic as coach
        from services.persona import logic as persona
        from services.plasticity import logic as plasticity
        from services.shadow import logic as shadow
        from services.stability import logic as stability

        self.turns += 1
        msg = _message(text, self.user, self.turns, self.language)
        self.language = msg.language
        prev_board, prev_profile = self.board, self.profile
        c = coach.quick_reply(msg, prev_board, self.safety)
        self.board, sp = shadow.observe(prev_board, msg)
        self.profile, pp = persona.observe(prev_profile, prev_board, msg)
        pl = plasticity.plan(prev_profile, msg, prev_board)
        self.safety, st = stability.assess(self.safety, prev_board, msg)
        common = {
            "turn_id": msg.turn_id,
            "session_id": msg.session_id,
            "user_id": msg.user_id,
            "tier": "deterministic",
            "latency_ms": 0.1,
        }
        results: dict[str, Any] = {
            "shadow": ShadowResult(payload=sp, **common),
            "persona": PersonaResult(payload=pp, **common),
            "plasticity": PlasticityResult(payload=pl, **common),
            "stability": StabilityResult(payload=st, **common),
            "coach": CoachResult(payload=c, **common),
        }
        return msg, results


# --------------------------------------------------------------------------- scorers


def score_steps(items: Sequence[Raw]) -> Report:
    from coachbus.safety.steps import screen_steps

    rep = Report("steps")
    for item in items:

        def run(item: Raw = item) -> tuple[frozenset[str], float | None]:
            hits = screen_steps(item["text"], set(item["conditions"]))
            conf = min((h.confidence for h in hits), default=None)
            return frozenset(h.spec.step_id for h in hits) or frozenset({NONE}), conf

        labels, conf, took = _timed(run)
        expected = frozenset(item["expected"]) or frozenset({NONE})
        rep.scored.append(Scored(item, labels, expected, conf, took))
    return rep


def score_register(items: Sequence[Raw]) -> Report:
    from coachbus.contracts.events import language_and_address

    rep = Report("register")
    for item in items:

        def run(item: Raw = item) -> tuple[frozenset[str], float | None]:
            language, address = language_and_address(item["text"])
            return frozenset({f"language:{language}", f"register:{address or NONE}"}), None

        labels, _conf, took = _timed(run)
        expected = frozenset(
            {
                f"language:{item['expected_language']}",
                f"register:{item['expected_register'] or NONE}",
            }
        )
        rep.scored.append(Scored(item, labels, expected, None, took))
    return rep


def score_patterns(items: Sequence[Raw]) -> Report:
    rep = Report("patterns")
    for n, item in enumerate(items):

        def run(item: Raw = item, n: int = n) -> tuple[frozenset[str], float | None]:
            talk = _Conversation(user=f"eval-p{n}")
            for text in item["turns"]:
                talk.turn(text)
            primary = talk.board.primary_pattern if talk.board is not None else None
            label = primary.value if primary is not None else NONE
            record = talk.board.patterns.get(primary) if primary is not None else None
            conf = getattr(record, "confidence", None) if record is not None else None
            return frozenset({label}), conf

        labels, conf, took = _timed(run)
        expected = frozenset({item["expected"] or NONE})
        rep.scored.append(Scored(item, labels, expected, conf, took))
    return rep


def score_conflicts(items: Sequence[Raw]) -> Report:
    """A conflict counts when the expected rule was recorded with the expected
    winner and overruled agent; where none is expected, any recorded conflict is a
    false alarm. Other conflicts recorded beside the expected one are not counted
    against it (several rules can fire on one turn)."""
    from services.synth import logic as synth

    rep = Report("conflicts")
    for n, item in enumerate(items):
        exp = item["expected"]
        want = f"{exp['rule']}:{exp['winner']}>{exp['overruled']}" if exp else NONE

        def run(
            item: Raw = item, n: int = n, want: str = want
        ) -> tuple[frozenset[str], float | None]:
            talk = _Conversation(user=f"eval-c{n}")
            for text in item["turns"]:
                msg, results = talk.turn(text)
            outcome = synth.synthesize(msg, results, [])
            seen = {f"{c.rule}:{c.winner}>{c.overruled}" for c in outcome.conflicts}
            if want != NONE:
                return frozenset({want} if want in seen else {NONE}), None
            return frozenset(seen) or frozenset({NONE}), None

        labels, _conf, took = _timed(run)
        rep.scored.append(Scored(item, labels, frozenset({want}), None, took))
    return rep


_KINDS = (
    ("blocked step", "blocked_step"),
    ("merge artefact", "merge_artefact"),
    ("wrong language", "wrong_language"),
    ("register", "wrong_register"),
)


def score_replies(items: Sequence[Raw]) -> Report:
    from coachbus.replycheck import check_reply
    from coachbus.safety.steps import markers_of

    rep = Report("replies")
    for item in items:

        def run(item: Raw = item) -> tuple[frozenset[str], float | None]:
            problems = check_reply(
                item["reply"],
                language=item["language"],
                register=item["register"],
                markers=markers_of(item["never_say"]),
            )
            kinds = {kind for p in problems for prefix, kind in _KINDS if p.startswith(prefix)}
            return frozenset(kinds) or frozenset({NONE}), None

        labels, _conf, took = _timed(run)
        expected = frozenset(item["expected"]) or frozenset({NONE})
        rep.scored.append(Scored(item, labels, expected, None, took))
    return rep


async def steps_with_router(
    items: Sequence[Raw],
    base_url: str,
    small_model: str,
    strong_model: str,
    policy_file: Any,
    timeout_s: float,
    prompts_dir: Any = None,
    concurrency: int = 4,
) -> Report:
    """The ``blocked_steps`` decision as Stability takes it: the catalogue's triggers
    first, the policy's LLM tiers below the bar (a standing condition, or nothing
    found), a model's step kept only with the person's own words as evidence."""
    import asyncio

    from coachbus.eval.tiers import candidate_router, item_budget
    from coachbus.llm import PromptBuilder
    from coachbus.memory import context_for
    from coachbus.safety.steps import screen_steps
    from services.stability import logic as stability
    from services.stability import prompts

    settings, client, router = candidate_router(
        base_url, small_model, strong_model, policy_file, timeout_s, prompts_dir
    )
    builder = PromptBuilder(settings)
    gate = asyncio.Semaphore(concurrency)
    rep = Report("steps")

    async def one(n: int, item: Raw) -> Scored:
        async with gate:
            started = time.perf_counter()
            conditions = set(item["conditions"])
            hits = screen_steps(item["text"], conditions)
            found = {h.spec.step_id for h in hits}
            if hits:
                conf = min(h.confidence for h in hits)
            elif conditions:
                conf = stability.NO_STEPS_CONDITIONS_CONFIDENCE
            else:
                conf = stability.NO_STEPS_CONFIDENCE
            msg = _message(item["text"], f"eval-s{n}", 1)
            ctx = context_for(None, msg)
            instructions = prompts.steps_instructions(sorted(conditions))

            def convert(parsed: prompts.BlockedStepsCall) -> prompts.StepsDecision:
                added = [(c.step_id, c.evidence) for c in parsed.steps if c.step_id not in found]
                return prompts.StepsDecision(added=added, claims=list(parsed.steps))

            budget = item_budget(timeout_s)
            out = await router.decide(
                kind="blocked_steps",
                agent="stability",
                deterministic=lambda: (prompts.StepsDecision(), conf),
                build_messages=lambda tier, errors: prompts.messages(
                    builder, ctx, instructions, errors, "blocked_steps"
                ),
                response_model=prompts.BlockedStepsCall,
                budget=budget,
                validate=lambda d: prompts.check_steps(d, item["text"]),
                convert=convert,
            )
            labels = found | {sid for sid, _ in out.value.added}
            return Scored(
                item,
                frozenset(labels) or frozenset({NONE}),
                frozenset(item["expected"]) or frozenset({NONE}),
                None,
                time.perf_counter() - started,
                out.tier,
                out.usage.prompt_tokens + out.usage.completion_tokens,
                out.stop_reason.value if out.stop_reason else None,
            )

    try:
        rep.scored = list(await asyncio.gather(*(one(n, i) for n, i in enumerate(items))))
    finally:
        await client.aclose()
    return rep


async def patterns_with_router(
    items: Sequence[Raw],
    base_url: str,
    small_model: str,
    strong_model: str,
    policy_file: Any,
    timeout_s: float,
    prompts_dir: Any = None,
    concurrency: int = 4,
) -> Report:
    """Shadow's ``pattern_classification`` turn by turn as Shadow takes it: cue
    phrases first, the policy's LLM tiers below the bar, a model's pattern kept only
    with a verbatim quote; the board chained through the conversation."""
    import asyncio

    from coachbus.contracts.payloads import TIER_RANK
    from coachbus.eval.tiers import candidate_router, item_budget
    from coachbus.llm import PromptBuilder
    from coachbus.memory import context_for
    from services.shadow import logic as shadow
    from services.shadow import prompts

    settings, client, router = candidate_router(
        base_url, small_model, strong_model, policy_file, timeout_s, prompts_dir
    )
    builder = PromptBuilder(settings)
    gate = asyncio.Semaphore(concurrency)
    rep = Report("patterns")

    async def one(n: int, item: Raw) -> Scored:
        async with gate:
            started = time.perf_counter()
            board: Any = None
            tokens, tiers, stops = 0, Counter[str](), Counter[str]()
            language: str | None = None
            for t, text in enumerate(item["turns"]):
                msg = _message(text, f"eval-pr{n}", t + 1, language)
                language = msg.language
                updated, payload = shadow.observe(board, msg)
                sure = shadow.is_crisis_message(msg)
                det = prompts.ShadowDecision(updated, payload)

                def convert(
                    parsed: prompts.PatternCall, msg: Any = msg, updated: Any = updated
                ) -> prompts.ShadowDecision:
                    found = [
                        (c.pattern, q)
                        for c in parsed.patterns
                        if (q := prompts.verbatim(c.evidence, msg.text))
                    ]
                    board_, payload_ = shadow.refine(updated, msg, found)
                    return prompts.ShadowDecision(board_, payload_, list(parsed.patterns))

                budget = item_budget(timeout_s)
                ctx = context_for(None, msg)
                # A crisis message is never pattern material (as in Shadow's handler).
                confidence = 1.0 if sure else payload.confidence

                def deterministic(
                    det: Any = det, confidence: float = confidence
                ) -> tuple[Any, float]:
                    return det, confidence

                def build(tier: str, errors: list[str], ctx: Any = ctx) -> list[Any]:
                    return prompts.messages(builder, ctx, errors)

                def validate(d: Any, msg: Any = msg) -> list[str]:
                    return prompts.check(d, msg.text)

                out = await router.decide(
                    kind="pattern_classification",
                    agent="shadow",
                    deterministic=deterministic,
                    build_messages=build,
                    response_model=prompts.PatternCall,
                    budget=budget,
                    validate=validate,
                    convert=convert,
                )
                board = out.value.board
                tokens += out.usage.prompt_tokens + out.usage.completion_tokens
                tiers[out.tier] += 1
                if out.stop_reason is not None:
                    stops[out.stop_reason.value] += 1
            primary = board.primary_pattern if board is not None else None
            return Scored(
                item,
                frozenset({primary.value if primary is not None else NONE}),
                frozenset({item["expected"] or NONE}),
                None,
                time.perf_counter() - started,
                # The conversation's highest tier: what carried its last decision.
                max(tiers, key=lambda k: TIER_RANK.get(k, 0)),  # type: ignore[call-overload]
                tokens,
                stops.most_common(1)[0][0] if stops else None,
            )

    try:
        rep.scored = list(await asyncio.gather(*(one(n, i) for n, i in enumerate(items))))
    finally:
        await client.aclose()
    return rep


# Decisions whose LLM tiers ``coachbus eval --llm-base-url`` scores beside the rules.
ROUTED = {"steps": steps_with_router, "patterns": patterns_with_router}


SCORERS: dict[str, Callable[[Sequence[Raw]], Report]] = {
    "steps": score_steps,
    "register": score_register,
    "patterns": score_patterns,
    "conflicts": score_conflicts,
    "replies": score_replies,
}


def summary(rep: dict[str, Any]) -> str:
    """A few lines per corpus for the text report."""
    lines = [
        f"{rep['corpus']}: {rep['items']} items, exact match {_fmt(rep['exact_match'])}, "
        f"micro P/R/F1 {_fmt(rep['micro']['precision'])} / {_fmt(rep['micro']['recall'])} / "
        f"{_fmt(rep['micro']['f1'])}"
    ]
    for lab, row in rep["by_label"].items():
        lines.append(
            f"  {lab:<44} P {_fmt(row['precision'])}  R {_fmt(row['recall'])}  "
            f"F1 {_fmt(row['f1'])}  (tp {row['tp']}, fp {row['fp']}, fn {row['fn']})"
        )
    for lang, row in rep["by_language"].items():
        lines.append(f"  language {lang}: P {_fmt(row['precision'])}  R {_fmt(row['recall'])}")
    rel = rep.get("reliability")
    if rel:
        lines.append(f"  reliability ECE {_fmt(rel['ece'])}")
    lat = rep["latency_ms"]
    lines.append(f"  latency p50 {_fmt(lat['p50'])} ms, p95 {_fmt(lat['p95'])} ms")
    for m in rep.get("misses", []):
        lines.append(f"  miss {m['id']}: expected {m['expected']}, got {m['predicted']}")
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


__all__ = ["SCORERS", "Report", "Scored", "summary"]
