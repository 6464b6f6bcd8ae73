"""The result model of every scorer: one tier's answer for each item, and a tier's
answers on a corpus with what they cost."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from evaluation.metrics import percentile, round3

# The label of "nothing": no step blocked, no pattern, no conflict, no defect.
NONE = "none"

ItemT = TypeVar("ItemT")


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer(Generic[ItemT]):
    """One tier's answer for one item: the labels it predicted and the labels expected
    (sets, so a multi-label decision is scored like a single-label one; ``{"none"}``
    for no label), the confidence it reported, and what answering cost."""

    item: ItemT
    predicted: frozenset[str]
    expected: frozenset[str]
    confidence: float | None = None
    # The kind of answer the deterministic tier gave (coachbus.confidence): what its
    # confidence is measured per, on the calibration split.
    outcome: str | None = None
    tier: str = "deterministic"  # the tier that carried the answer
    latency_s: float = 0.0
    tokens: int = 0
    stop_reason: str | None = None

    @property
    def exact(self) -> bool:
        return self.predicted == self.expected


AnswerT = TypeVar("AnswerT", bound=Answer[Any])


@dataclass(slots=True)
class Report(Generic[AnswerT]):
    """One tier's answers on a corpus: ``deterministic`` (the rules alone) or
    ``router`` (the policy's tiers on a candidate endpoint, as the service runs them)."""

    tier: str
    answers: list[AnswerT] = field(default_factory=list)

    def costs(self) -> dict[str, Any]:
        """Latency, tokens, the tiers that carried the answers and why repair loops
        stopped: the same figures for every corpus."""
        latencies = [a.latency_s * 1000 for a in self.answers]
        return {
            "latency_ms": {
                "p50": round3(percentile(latencies, 50)),
                "p95": round3(percentile(latencies, 95)),
            },
            "tokens": sum(a.tokens for a in self.answers),
            "carried_by": dict(sorted(Counter(a.tier for a in self.answers).items())),
            "stop_reasons": dict(
                sorted(Counter(a.stop_reason for a in self.answers if a.stop_reason).items())
            ),
        }


__all__ = ["NONE", "Answer", "Report"]
