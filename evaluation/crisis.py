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

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coachbus.confidence import render_table
from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.llm import Message
from coachbus.llm.prompt import instruction_override
from coachbus.safety.calibration import CLEAN, UNCERTAIN
from coachbus.safety.model import RISK_INSTRUCTIONS, RiskScreenCall, check_claim, claim_screen
from coachbus.safety.screen import assess, is_crisis, merge_screens
from evaluation.corpus import Item, Split
from evaluation.metrics import Binary, fmt, ratio, reliability, smoothed_accuracy
from evaluation.results import Answer, Report
from evaluation.tiers import Candidate, RouterTier, run_router, run_rules, spent

# The split the confidences are measured on. Not dev: the rules are tuned on dev, so
# every answer there is right and the screen would claim a certainty it does not
# have on new text. Not heldout: that stays the test set, report only.
CALIBRATION_SPLIT: Split = "calibration"
LABELS = tuple(c.value for c in CrisisCategory)
# Columns of the confusion table: the contract categories plus the uncertain outcome.
PREDICTED = (*LABELS, UNCERTAIN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction(Answer[Item]):
    """One tier's answer for one item, with the screen it gave and the outcome that
    gave it (a rule kind, "uncertain", "clean", or "tier:<tier>" from a model)."""

    screen: CrisisScreen
    outcome: str

    @property
    def flagged(self) -> bool:
        return is_crisis(self.screen) or self.screen.uncertain

    @property
    def answer(self) -> str:
        """The column of the confusion table: the category, or "uncertain"."""
        (only,) = self.predicted
        return only


def predict(item: Item, screen: CrisisScreen, outcome: str, **cost: Any) -> Prediction:
    """A screen as an answer: its category (or "uncertain") against the label;
    ``cost``: the tier, tokens and stop reason where a model was asked."""
    answer = UNCERTAIN if screen.uncertain and not is_crisis(screen) else screen.category.value
    return Prediction(
        item=item,
        predicted=frozenset({answer}),
        expected=frozenset({item.label}),
        confidence=screen.confidence,
        screen=screen,
        outcome=outcome,
        **cost,
    )


def correct(gold_label: str, screen: CrisisScreen) -> bool:
    """Whether the answer a screen gave was right, as its confidence claims.

    A crisis answer claims its category; a "none" answer (clean or uncertain)
    claims none. An uncertain screen's confidence is therefore how often "none" was
    right in that bucket, which is low: that is why it is asked again."""
    if is_crisis(screen):
        return screen.category.value == gold_label
    return gold_label == CrisisCategory.NONE.value


def deterministic(items: Sequence[Item]) -> Report[Prediction]:
    def answer(_n: int, item: Item) -> Prediction:
        finding = assess(item.text)
        return predict(item, finding.screen(), finding.outcome)

    return run_rules(items, answer)


# --------------------------------------------------------------------------- calibration


def measure_calibration(predictions: Sequence[Prediction]) -> dict[str, float]:
    """Laplace-smoothed accuracy per outcome (evaluation.metrics.smoothed_accuracy)."""
    return smoothed_accuracy((p.outcome, correct(p.item.label, p.screen)) for p in predictions)


def calibration_toml(table: dict[str, float], items: int) -> str:
    header = [
        "# Measured, not chosen: written by `coachbus eval crisis --calibrate` from the",
        f"# calibration split ({items} items). For each outcome of the deterministic screen",
        "# (a rule kind, 'uncertain', 'clean'): how often that answer was right,",
        "# Laplace-smoothed. Not from dev: the rules are tuned on dev, where every answer",
        "# is right, so dev would claim a certainty the screen does not have on new text.",
        "# Not from heldout: that is the test set. No rule is tuned on the calibration split.",
        "# A test recomputes it from the calibration split and fails when this file differs.",
    ]
    return render_table(header, table)


# --------------------------------------------------------------------------- report


@dataclass(slots=True)
class _Group:
    n: int = 0
    flagged: int = 0
    positives: int = 0


def figures(rep: Report[Prediction], *, list_items: bool) -> dict[str, Any]:
    """One tier's figures; ``list_items``: with the misses (on dev only)."""
    preds = rep.answers
    flagged = Binary()
    by_language: dict[str, Binary] = defaultdict(Binary)
    by_category: dict[str, _Group] = defaultdict(_Group)
    by_label = {label: Binary() for label in LABELS if label != "none"}
    confusion = {g: dict.fromkeys(PREDICTED, 0) for g in LABELS}
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
        confusion[p.item.label][p.answer] += 1
    categories: dict[str, dict[str, Any]] = {}
    for cat, grp in sorted(by_category.items()):
        row: dict[str, Any] = {"n": grp.n, "flagged": grp.flagged}
        if grp.positives == grp.n:
            row["recall"] = ratio(grp.flagged, grp.n)
        elif grp.positives == 0:
            row["false_alarm_rate"] = ratio(grp.flagged, grp.n)
        categories[cat] = row
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
        **rep.costs(),
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


def report(split: str, tiers: Sequence[Report[Prediction]]) -> dict[str, Any]:
    """The JSON report (schema: docs/eval.schema.json). Items are listed on dev only:
    calibration's and heldout's misses are never printed, so nobody tunes on them."""
    return {
        "corpus": "crisis",
        "split": split,
        "tiers": {t.tier: figures(t, list_items=split == "dev") for t in tiers},
        "cost": cost(tiers),
    }


def cost(tiers: Sequence[Report[Prediction]]) -> dict[str, Any]:
    """Quality and price at once: which share of the decisions each tier carried, the
    tokens the LLM tiers spent, and what sending every decision to the strong tier
    would have cost in prompt tokens (plus at most the policy's answer tokens)."""
    from coachbus.llm import Policy
    from coachbus.llm.tokens import count_messages

    preds = tiers[-1].answers
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
            f"  {key:<26}" + "  ".join(f"{fmt(rep['tiers'][n]['flagged'][key]):>24}" for n in names)
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
                cells.append(f"recall {fmt(row['recall'])} ({row['flagged']}/{row['n']})")
            else:
                cells.append(
                    f"false alarms {fmt(row.get('false_alarm_rate'))} ({row['flagged']}/{row['n']})"
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
            f"[{n}] reliability (ECE {fmt(rel['ece'])})   "
            "confidence bin: n, mean confidence, accuracy"
        )
        for b in rel["bins"]:
            lines.append(
                f"  [{b['lo']:.1f}, {b['hi']:.1f})  n={b['n']:<4} "
                f"conf {b['confidence']:.3f}  acc {b['accuracy']:.3f}"
            )
        lat = tier["latency_ms"]
        lines.append(
            f"[{n}] latency p50 {fmt(lat['p50'])} ms, p95 {fmt(lat['p95'])} ms; "
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
    return f"{fmt(row['precision'])} / {fmt(row['recall'])} / {fmt(row['f1'])}"


# --------------------------------------------------------------------------- model tier


@dataclass(slots=True)
class _Decision:
    screen: CrisisScreen
    claim: RiskScreenCall | None = None


async def with_router(items: Sequence[Item], candidate: Candidate) -> Report[Prediction]:
    """The risk_screen decision as Stability takes it: deterministic first, then the
    policy's LLM tiers when the screen is below the bar; the worse screen wins."""

    async def decide(tier: RouterTier, _n: int, item: Item) -> Prediction:
        det = assess(item.text)

        def messages(_tier: str, errors: list[str]) -> list[Message]:
            note = (
                ("\n\nYour previous answer was rejected: " + "; ".join(errors[:6]))
                if errors
                else ""
            )
            text = instruction_override(candidate.prompts_dir, "risk_screen", RISK_INSTRUCTIONS)
            return [
                Message(role="system", content=text + note),
                Message(role="user", content=item.text),
            ]

        def convert(parsed: object) -> _Decision:
            assert isinstance(parsed, RiskScreenCall)
            return _Decision(merge_screens(det.screen(), claim_screen(parsed)), parsed)

        out = await tier.router.decide(
            kind="risk_screen",
            agent="stability",
            deterministic=lambda: (_Decision(det.screen()), det.confidence),
            build_messages=messages,
            response_model=RiskScreenCall,
            budget=tier.budget(),
            validate=lambda d: check_claim(d.claim, item.text) if d.claim else [],
            convert=convert,
        )
        return predict(item, out.value.screen, f"tier:{out.tier}", **spent(out))

    return await run_router(candidate, items, decide)


__all__ = [
    "CALIBRATION_SPLIT",
    "CLEAN",
    "Prediction",
    "calibration_toml",
    "correct",
    "deterministic",
    "figures",
    "measure_calibration",
    "predict",
    "render_text",
    "report",
    "with_router",
]
