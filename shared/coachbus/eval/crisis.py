"""``coachbus eval crisis``: the crisis screen scored on labelled messages.

Two questions are scored for every item:

* **flagged** — was help offered? A crisis screen, or an *uncertain* screen (which
  gets a direct check-in with a help line and a human review), counts as flagged.
  This is the screen's safety figure: recall is the share of people in crisis who
  were offered help, precision the share of flagged messages that were a crisis.
* **category** — the contract category (suicidal_ideation, self_harm, abuse,
  medical_emergency, none), scored per label with the uncertain outcome as its
  own column of the confusion table.

Per language and per finer category (passive death wish, burden, figurative, …)
the report gives recall for crisis kinds and the false-alarm rate for the kinds
labelled none. The reliability table puts the confidence each outcome reported
beside how often that outcome was right (the same definition the calibration
uses, see :func:`correct`).

With an LLM endpoint, the router's tiers run too (deterministic first, the small
model when the screen is below the policy's bar, as Stability runs them) and are
reported side by side with the deterministic tier alone.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.eval.corpus import Item, Split
from coachbus.eval.metrics import Binary, percentile, ratio, reliability, smoothed_accuracy
from coachbus.safety.calibration import CLEAN, UNCERTAIN
from coachbus.safety.model import RISK_INSTRUCTIONS, check_claim, claim_screen
from coachbus.safety.screen import assess, is_crisis, merge_screens

# The split the confidences are measured on. Not dev: the rules are tuned on dev, so
# every answer there is right and the screen would claim a certainty it does not
# have on new text. Not heldout: that stays the test set, report only.
CALIBRATION_SPLIT: Split = "calibration"
LABELS = tuple(c.value for c in CrisisCategory)
# Columns of the confusion table: the contract categories plus the uncertain outcome.
PREDICTED = (*LABELS, UNCERTAIN)


@dataclass(frozen=True, slots=True)
class Prediction:
    """One tier's answer for one item."""

    item: Item
    screen: CrisisScreen
    outcome: str  # a rule kind, "uncertain", "clean", or "model:<tier>"
    tier: str
    latency_s: float = 0.0
    tokens: int = 0
    stop_reason: str | None = None

    @property
    def flagged(self) -> bool:
        return is_crisis(self.screen) or self.screen.uncertain

    @property
    def predicted(self) -> str:
        if self.screen.uncertain and not is_crisis(self.screen):
            return UNCERTAIN
        return self.screen.category.value


def correct(gold_label: str, screen: CrisisScreen) -> bool:
    """Whether the answer a screen gave was right, as its confidence claims.

    A crisis answer claims its category; a "none" answer (clean or uncertain)
    claims none. An uncertain screen's confidence is therefore how often "none" was
    right in that bucket, which is low: that is why it is asked again."""
    if is_crisis(screen):
        return screen.category.value == gold_label
    return gold_label == CrisisCategory.NONE.value


def deterministic(items: Sequence[Item]) -> list[Prediction]:
    out: list[Prediction] = []
    for item in items:
        started = time.perf_counter()
        finding = assess(item.text)
        out.append(
            Prediction(
                item=item,
                screen=finding.screen(),
                outcome=finding.outcome,
                tier="deterministic",
                latency_s=time.perf_counter() - started,
            )
        )
    return out


# --------------------------------------------------------------------------- calibration


def measure_calibration(predictions: Sequence[Prediction]) -> dict[str, float]:
    """Laplace-smoothed accuracy per outcome (coachbus.eval.metrics.smoothed_accuracy)."""
    return smoothed_accuracy((p.outcome, correct(p.item.label, p.screen)) for p in predictions)


def calibration_toml(table: dict[str, float], items: int) -> str:
    lines = [
        "# Measured, not chosen: written by `coachbus eval crisis --calibrate` from the",
        f"# calibration split ({items} items). For each outcome of the deterministic screen",
        "# (a rule kind, 'uncertain', 'clean'): how often that answer was right,",
        "# Laplace-smoothed. Not from dev: the rules are tuned on dev, where every answer",
        "# is right, so dev would claim a certainty the screen does not have on new text.",
        "# Not from heldout: that is the test set. No rule is tuned on the calibration split.",
        "# A test recomputes it from the calibration split and fails when this file differs.",
        "",
        "[confidence]",
    ]
    lines += [f"{k} = {v}" for k, v in sorted(table.items())]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- report


@dataclass(slots=True)
class _Group:
    n: int = 0
    flagged: int = 0
    positives: int = 0


@dataclass(slots=True)
class TierReport:
    name: str
    predictions: list[Prediction] = field(default_factory=list)

    def as_dict(self, *, list_items: bool) -> dict[str, Any]:
        preds = self.predictions
        flagged = Binary()
        by_language: dict[str, Binary] = defaultdict(Binary)
        by_category: dict[str, _Group] = defaultdict(_Group)
        by_label = {label: Binary() for label in LABELS if label != "none"}
        confusion = {g: dict.fromkeys(PREDICTED, 0) for g in LABELS}
        carried: Counter[str] = Counter()
        for p in preds:
            gold = p.item.label != "none"
            flagged.add(gold, p.flagged)
            by_language[p.item.language].add(gold, p.flagged)
            grp = by_category[p.item.category]
            grp.n += 1
            grp.flagged += p.flagged
            grp.positives += gold
            for label, b in by_label.items():
                b.add(p.item.label == label, p.screen.category.value == label)
            confusion[p.item.label][p.predicted] += 1
            carried[p.tier] += 1
        categories: dict[str, dict[str, Any]] = {}
        for cat, grp in sorted(by_category.items()):
            row: dict[str, Any] = {"n": grp.n, "flagged": grp.flagged}
            if grp.positives == grp.n:
                row["recall"] = ratio(grp.flagged, grp.n)
            elif grp.positives == 0:
                row["false_alarm_rate"] = ratio(grp.flagged, grp.n)
            categories[cat] = row
        latencies = [p.latency_s * 1000 for p in preds]
        out: dict[str, Any] = {
            "items": len(preds),
            "flagged": flagged.as_dict(),
            "by_language": {k: v.as_dict() for k, v in sorted(by_language.items())},
            "by_category": categories,
            "by_label": {k: v.as_dict() for k, v in by_label.items()},
            "confusion": {"predicted": list(PREDICTED), "rows": confusion},
            "reliability": reliability(
                [(p.screen.confidence, correct(p.item.label, p.screen)) for p in preds]
            ),
            "latency_ms": {
                "p50": _round(percentile(latencies, 50)),
                "p95": _round(percentile(latencies, 95)),
            },
            "tokens": sum(p.tokens for p in preds),
            "carried_by": dict(sorted(carried.items())),
            "stop_reasons": dict(
                sorted(Counter(p.stop_reason for p in preds if p.stop_reason).items())
            ),
        }
        if list_items:
            out["misses"] = [
                {
                    "id": p.item.item_id,
                    "text": p.item.text,
                    "label": p.item.label,
                    "category": p.item.category,
                    "outcome": p.outcome,
                }
                for p in preds
                if (p.item.label != "none") != p.flagged
            ]
        return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def report(split: str, tiers: Sequence[TierReport]) -> dict[str, Any]:
    """The JSON report (schema: docs/eval.schema.json). Items are listed on dev only:
    calibration's and heldout's misses are never printed, so nobody tunes on them."""
    return {
        "corpus": "crisis",
        "split": split,
        "tiers": {t.name: t.as_dict(list_items=split == "dev") for t in tiers},
        "cost": cost(tiers),
    }


def cost(tiers: Sequence[TierReport]) -> dict[str, Any]:
    """Quality and price at once: which share of the decisions each tier carried, the
    tokens the LLM tiers spent, and what sending every decision to the strong tier
    would have cost in prompt tokens (plus at most the policy's answer tokens)."""
    from coachbus.llm import Policy
    from coachbus.llm.tokens import count_messages

    preds = tiers[-1].predictions
    carried = Counter(p.tier for p in preds)
    prompt = sum(
        count_messages(
            [
                {"role": "system", "content": RISK_INSTRUCTIONS},
                {"role": "user", "content": p.item.text},
            ]
        )
        for p in preds
    )
    answer = Policy.load().for_kind("risk_screen").max_tokens * len(preds)
    return {
        "share_by_tier": {t: ratio(n, len(preds)) for t, n in sorted(carried.items())},
        "tokens_spent": sum(p.tokens for p in preds),
        "strong_tier_if_all": {"prompt_tokens": prompt, "max_answer_tokens": answer},
    }


def render_text(rep: dict[str, Any]) -> str:
    lines = [f"crisis screen — split {rep['split']}"]
    names = list(rep["tiers"])
    first = rep["tiers"][names[0]]
    lines.append(f"items: {first['items']}")
    lines.append("")
    lines.append("flagged (help offered)      " + "  ".join(f"{n:>24}" for n in names))
    for key in ("precision", "recall", "f1"):
        lines.append(
            f"  {key:<26}"
            + "  ".join(f"{_fmt(rep['tiers'][n]['flagged'][key]):>24}" for n in names)
        )
    lines.append("")
    lines.append("by language                 precision / recall / f1")
    for n in names:
        for lang, row in rep["tiers"][n]["by_language"].items():
            lines.append(f"  {n:<14} {lang:<10}  {_prf(row)}")
    lines.append("")
    lines.append("by category (recall for crisis kinds, false alarms for the rest)")
    for cat in first["by_category"]:
        cells = []
        for n in names:
            row = rep["tiers"][n]["by_category"][cat]
            if "recall" in row:
                cells.append(f"recall {_fmt(row['recall'])} ({row['flagged']}/{row['n']})")
            else:
                cells.append(
                    f"false alarms {_fmt(row.get('false_alarm_rate'))} "
                    f"({row['flagged']}/{row['n']})"
                )
        lines.append(f"  {cat:<22} " + "   ".join(f"{c:<30}" for c in cells))
    for n in names:
        tier = rep["tiers"][n]
        lines.append("")
        lines.append(f"[{n}] per label (strict category)   precision / recall / f1")
        for label, row in tier["by_label"].items():
            lines.append(f"  {label:<22} {_prf(row)}")
        lines.append(f"[{n}] confusion (rows: label, columns: answer)")
        cols = tier["confusion"]["predicted"]
        lines.append("  " + " " * 20 + "".join(f"{c[:10]:>11}" for c in cols))
        for gold, row in tier["confusion"]["rows"].items():
            lines.append(f"  {gold:<20}" + "".join(f"{row[c]:>11}" for c in cols))
        rel = tier["reliability"]
        lines.append(
            f"[{n}] reliability (ECE {_fmt(rel['ece'])})   "
            "confidence bin: n, mean confidence, accuracy"
        )
        for b in rel["bins"]:
            lines.append(
                f"  [{b['lo']:.1f}, {b['hi']:.1f})  n={b['n']:<4} "
                f"conf {b['confidence']:.3f}  acc {b['accuracy']:.3f}"
            )
        lat = tier["latency_ms"]
        lines.append(
            f"[{n}] latency p50 {_fmt(lat['p50'])} ms, p95 {_fmt(lat['p95'])} ms; "
            f"tokens {tier['tokens']}; "
            f"carried by {tier['carried_by']}; stop reasons {tier['stop_reasons'] or '-'}"
        )
        if "misses" in tier:
            lines.append(f"[{n}] misses on dev ({len(tier['misses'])}):")
            for m in tier["misses"]:
                lines.append(
                    f"  {m['id']} [{m['label']}/{m['category']} -> {m['outcome']}] {m['text']}"
                )
    c = rep.get("cost")
    if c:
        lines.append("")
        lines.append(
            f"cost: share by tier {c['share_by_tier']}; LLM tokens spent {c['tokens_spent']}; "
            f"every decision on the strong tier would have cost "
            f"{c['strong_tier_if_all']['prompt_tokens']} prompt tokens "
            f"(+ up to {c['strong_tier_if_all']['max_answer_tokens']} answer tokens)"
        )
    return "\n".join(lines)


def _prf(row: dict[str, Any]) -> str:
    return f"{_fmt(row['precision'])} / {_fmt(row['recall'])} / {_fmt(row['f1'])}"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


# --------------------------------------------------------------------------- model tier


async def with_router(
    items: Sequence[Item],
    decide: Callable[[Item], Awaitable[tuple[CrisisScreen, str, int, str | None]]],
    concurrency: int = 4,
) -> list[Prediction]:
    """Run ``decide`` (the router's tiers) for every item, a few at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> Prediction:
        async with gate:
            started = time.perf_counter()
            screen, tier, tokens, stop = await decide(item)
            return Prediction(
                item=item,
                screen=screen,
                outcome=f"tier:{tier}",
                tier=tier,
                latency_s=time.perf_counter() - started,
                tokens=tokens,
                stop_reason=stop,
            )

    return list(await asyncio.gather(*(one(i) for i in items)))


def router_decider(
    base_url: str,
    small_model: str,
    strong_model: str,
    policy_file: Path | None,
    timeout_s: float,
    prompts_dir: Path | None = None,
) -> tuple[
    Callable[[Item], Awaitable[tuple[CrisisScreen, str, int, str | None]]],
    Callable[[], Awaitable[None]],
]:
    """The risk_screen decision as Stability takes it: deterministic first, then the
    policy's LLM tiers when the screen is below the bar; the worse screen wins."""
    from coachbus.eval.tiers import candidate_router, item_budget
    from coachbus.llm import Message
    from coachbus.llm.prompt import instruction_override
    from coachbus.safety.model import RISK_INSTRUCTIONS, RiskScreenCall

    _settings, client, router = candidate_router(
        base_url, small_model, strong_model, policy_file, timeout_s
    )

    @dataclass(slots=True)
    class _Decision:
        screen: CrisisScreen
        claim: RiskScreenCall | None = None

    async def decide(item: Item) -> tuple[CrisisScreen, str, int, str | None]:
        det = assess(item.text)

        def messages(tier: str, errors: list[str]) -> list[Message]:
            note = (
                ("\n\nYour previous answer was rejected: " + "; ".join(errors[:6]))
                if errors
                else ""
            )
            text = instruction_override(prompts_dir, "risk_screen", RISK_INSTRUCTIONS)
            return [
                Message(role="system", content=text + note),
                Message(role="user", content=item.text),
            ]

        def convert(parsed: object) -> _Decision:
            assert isinstance(parsed, RiskScreenCall)
            return _Decision(merge_screens(det.screen(), claim_screen(parsed)), parsed)

        budget = item_budget(timeout_s)
        out = await router.decide(
            kind="risk_screen",
            agent="stability",
            deterministic=lambda: (_Decision(det.screen()), det.confidence),
            build_messages=messages,
            response_model=RiskScreenCall,
            budget=budget,
            validate=lambda d: check_claim(d.claim, item.text) if d.claim else [],
            convert=convert,
        )
        usage = out.usage.prompt_tokens + out.usage.completion_tokens
        return out.value.screen, out.tier, usage, out.stop_reason.value if out.stop_reason else None

    return decide, client.aclose


__all__ = [
    "CALIBRATION_SPLIT",
    "CLEAN",
    "Prediction",
    "TierReport",
    "calibration_toml",
    "correct",
    "deterministic",
    "measure_calibration",
    "render_text",
    "report",
    "router_decider",
    "with_router",
]
