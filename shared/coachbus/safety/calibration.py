"""Measured confidence: how often each outcome of the screens was right.

A screen reports the share of its answers of that kind that were right on labelled
text no rule was fitted to, never a number someone chose, so the router's bar means
what it says. Two tables, both written by ``coachbus eval crisis --calibrate``:

* ``content/crisis/calibration.toml``: the message screen's outcomes (each rule kind,
  the uncertain bucket and the clean bucket), measured on the crisis corpus's
  calibration split (on dev, which the rules are tuned on, every answer looks right);
* ``content/crisis/conversation_calibration.toml``: the conversation's outcomes (an
  answer to our check-in, a warning pattern; ``--conversations``).

A test fails when a committed table differs from what its split measures.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

# Outcome names of the "none" buckets of the message screen: no risk read, a risk
# cue the rules could not settle, and a message only the learned reader
# (coachbus.learned) reads as risk, where the rules saw nothing at all.
CLEAN = "clean"
UNCERTAIN = "uncertain"
LEARNED = "learned"


@dataclass(frozen=True, slots=True)
class Calibration:
    """Measured confidence per outcome (rule kind, "uncertain", "clean")."""

    confidence: dict[str, float]
    # The value used for an outcome the calibration split never produced: the screen
    # has no evidence for it, so it reports the lowest confidence it knows.
    unseen: float

    def of(self, outcome: str) -> float:
        return self.confidence.get(outcome, self.unseen)


@cache
def calibration() -> Calibration:
    """The message screen's table."""
    path = resources.files("coachbus.content").joinpath("crisis/calibration.toml")
    raw = tomllib.loads(path.read_text("utf-8"))
    table = {str(k): float(v) for k, v in raw["confidence"].items()}
    return Calibration(confidence=table, unseen=min(table.values(), default=0.5))


@cache
def conversation_calibration() -> dict[str, float]:
    """Measured confidence per conversation outcome (``coachbus eval crisis
    --conversations --calibrate``); an outcome never measured reports the lowest."""
    path = resources.files("coachbus.content").joinpath("crisis/conversation_calibration.toml")
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in raw["confidence"].items()}


def conversation_confidence(outcome: str) -> float:
    table = conversation_calibration()
    if outcome in table:
        return table[outcome]
    # Unmeasured: as unsure as the least sure outcome we know (0.5 with no table),
    # so the router asks a model rather than trusting a number nobody measured.
    return min(table.values(), default=0.5)


__all__ = [
    "CLEAN",
    "LEARNED",
    "UNCERTAIN",
    "Calibration",
    "calibration",
    "conversation_calibration",
    "conversation_confidence",
]
