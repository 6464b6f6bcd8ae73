"""How urgent a human review is: the one order of the severity levels.

The levels themselves are the contract's (``RiskLevel``: Stability's overall risk,
a human-review request's severity). Their order decides two things that must
agree: which decisions the LLM router puts before a human (``human_at`` in the
policy) and what the gateway's review queue shows first and may never evict.

This is not ``coachbus.safety.screen.CRISIS_RANK``: that ranks crisis *categories*
(suicidal ideation above abuse) to pick the worst match of one screen; this ranks
the *severity* a review is filed at, which ``screen.review_severity`` and the
policy produce from a screen.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, get_args

from coachbus.contracts.payloads import RiskLevel

Severity = RiskLevel

# Least to most urgent, in the order the contract's Literal lists them.
SEVERITY_RANK: Final[MappingProxyType[Severity, int]] = MappingProxyType(
    {level: rank for rank, level in enumerate(get_args(RiskLevel))}
)

__all__ = ["SEVERITY_RANK", "Severity"]
