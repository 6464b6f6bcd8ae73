"""Scores shared by every evaluation: precision/recall/F1, reliability, percentiles,
and how a figure is rounded and printed."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def smoothed_accuracy(outcomes: Iterable[tuple[str, bool]]) -> dict[str, float]:
    """Laplace-smoothed accuracy per outcome, (right + 1) / (n + 2), from (outcome,
    was it right) pairs: how a tier's confidence is measured. The smoothing keeps an
    outcome that fired three times and was right three times from claiming
    certainty (0.8, not 1.0)."""
    right: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for outcome, ok in outcomes:
        seen[outcome] += 1
        right[outcome] += ok
    return {o: round((right[o] + 1) / (seen[o] + 2), 3) for o in sorted(seen)}


def ratio(num: int, den: int) -> float | None:
    """``num / den``, or None when nothing was counted (never a made-up 0 or 1)."""
    return round(num / den, 4) if den else None


@dataclass(slots=True)
class Binary:
    """Counts of a yes/no decision against labels."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, gold: bool, predicted: bool) -> None:
        if gold and predicted:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif gold:
            self.fn += 1
        else:
            self.tn += 1

    @property
    def precision(self) -> float | None:
        return ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        return ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r == 0:
            return None
        return round(2 * p * r / (p + r), 4)

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
        }


def reliability(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> dict[str, object]:
    """Reported confidence against observed accuracy, in equal-width bins, and the
    expected calibration error (the bins' |confidence - accuracy| weighted by size)."""
    rows: list[dict[str, float | int | None]] = []
    ece = 0.0
    total = len(pairs)
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pairs if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not inside:
            continue
        conf = statistics.fmean(c for c, _ in inside)
        acc = sum(ok for _, ok in inside) / len(inside)
        ece += len(inside) / total * abs(conf - acc)
        rows.append(
            {
                "lo": lo,
                "hi": hi,
                "n": len(inside),
                "confidence": round(conf, 4),
                "accuracy": round(acc, 4),
            }
        )
    return {"bins": rows, "ece": round(ece, 4) if total else None}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[max(0, min(98, round(q) - 1))]


def round3(value: float | None) -> float | None:
    """A measured time or rate as a report keeps it: three decimals, None as None."""
    return None if value is None else round(value, 3)


def fmt(value: object, missing: str = "-") -> str:
    """A figure as the text and HTML reports print it: a float with three decimals,
    ``missing`` where nothing was counted, anything else as it is."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
