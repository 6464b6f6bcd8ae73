"""Measured confidence of the deterministic tier, for every decision a model could take.

The router trusts a rule's answer when its confidence is at or above the policy's bar
(``coachbus/llm/policy.toml``); below it, a model is asked. That is only safe when the
confidence is honest: a rule that misses three risky steps in four but reports "no
step, 0.85" keeps every miss from the model. So each decision reports, for the kind of
answer it gave (its *outcome*), how often answers of that kind were right on labelled
text no rule was fitted to: the corpus's calibration split, Laplace-smoothed
((right + 1) / (n + 2)), written by ``coachbus eval <corpus> --calibrate`` into
``coachbus/content/calibration/<decision kind>.toml``. A test recomputes every table
and fails when one is stale.

The outcome functions live here, beside the tables, so the service and the eval
bucket an answer the same way. The crisis screen has its own tables
(``coachbus.safety``) measured the same way.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final, Literal

# The decisions measured here, and the corpus each is measured on.
MeasuredKind = Literal[
    "blocked_steps", "pattern_classification", "language_register", "reply_guard"
]
CORPUS_OF: Final[dict[MeasuredKind, str]] = {
    "blocked_steps": "steps",
    "pattern_classification": "patterns",
    "language_register": "register",
    "reply_guard": "replies",
}

# An outcome the calibration split never produced (or a table not yet written):
# there is no evidence the rule is right there, so it reports no certainty and a
# model, where configured, is asked. The protective default.
UNMEASURED: Final = 0.0


@dataclass(frozen=True, slots=True)
class Calibration:
    kind: str
    confidence: dict[str, float]
    items: int

    def of(self, outcome: str) -> float:
        return self.confidence.get(outcome, UNMEASURED)


def _path(kind: str) -> str:
    return f"calibration/{kind}.toml"


@cache
def measured(kind: MeasuredKind) -> Calibration:
    """The committed table of ``kind`` (empty when none was written yet)."""
    path = resources.files("coachbus.content").joinpath(_path(kind))
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return Calibration(kind, {}, 0)
    table = {str(k): float(v) for k, v in raw.get("confidence", {}).items()}
    return Calibration(kind, table, int(raw.get("items", 0)))


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def render_table(header: list[str], table: dict[str, float], items: int | None = None) -> str:
    """A measured-confidence file: its header (comment lines saying how it was made),
    the item count when given, and the ``[confidence]`` table. The one writer for
    every table (the crisis screen's and the conversation's too)."""
    lines = [*header, ""]
    if items is not None:
        lines += [f"items = {items}", ""]
    lines.append("[confidence]")
    for key, value in sorted(table.items()):
        name = key if _BARE_KEY.match(key) else f'"{key}"'
        lines.append(f"{name} = {value}")
    return "\n".join(lines) + "\n"


def table_toml(kind: MeasuredKind, table: dict[str, float], items: int) -> str:
    """The file ``coachbus eval <corpus> --calibrate`` writes."""
    corpus = CORPUS_OF[kind]
    header = [
        f"# Measured, not chosen: written by `coachbus eval {corpus} --calibrate` from the",
        f"# {corpus} corpus's calibration split ({items} items). For each outcome of the",
        "# deterministic tier: how often an answer of that kind was right, Laplace-smoothed.",
        "# Not from dev (the rules are tuned there, every answer looks right) and not from",
        "# heldout (the test set). An outcome missing here reports no certainty.",
        "# A test recomputes it from the calibration split and fails when this file differs.",
    ]
    return render_table(header, table, items)


def table_file(kind: MeasuredKind) -> str:
    """Where the table lives inside the package (for writing it from a checkout)."""
    return str(resources.files("coachbus.content").joinpath(_path(kind)))


# --------------------------------------------------------------------------- outcomes


def steps_outcome(
    found: bool,
    conditional: bool,
    conditions: bool,
    more: bool = False,
    *,
    learned: bool = False,
    agreed: bool = False,
    doubt: bool = False,
) -> str:
    """The kind of answer the step screen gave: a step only the learned reader found
    (``learned``), steps the rules and the learned reader found alike (``agreed``:
    two readers that err on different sentences), a step found by a plain trigger,
    one that needed a standing condition, one found in a message that also talks
    about another domain a catalogue step lives in (``more``: the calibration split
    showed those wrong about one time in seven, nearly always a second step missed),
    or none (with or without a standing condition remembered, which makes a
    paraphrase the rules miss likelier to matter; ``doubt``: the learned reader
    leaned toward a step below its bar)."""
    if found:
        if learned:
            return "learned"
        if agreed:
            return "agreed"
        if more:
            return "hit_more"
        return "hit_conditional" if conditional else "hit"
    if doubt:
        return "none_doubt"
    return "none_conditions" if conditions else "none"


def pattern_outcome(primary: str | None) -> str:
    """The primary pattern on the board after the turn, or none yet."""
    return primary or "none"


def register_outcome(language: str, register: str | None) -> str:
    """The language and, in German, the du/Sie decided where the message entered."""
    return f"{language}_{register or 'none'}"


def reply_guard_outcome(found: bool, named: bool) -> str:
    """The kind of answer the reply guard gave on a turn that blocked steps: a step
    suggested (``suggested``), none though the reply uses some of a blocked step's own
    words (``named``: read as a warning, a weighing, the person's words quoted), or
    none and the reply never touches the steps (``quiet``)."""
    if found:
        return "suggested"
    return "named" if named else "quiet"


__all__ = [
    "CORPUS_OF",
    "UNMEASURED",
    "Calibration",
    "MeasuredKind",
    "measured",
    "pattern_outcome",
    "register_outcome",
    "render_table",
    "reply_guard_outcome",
    "steps_outcome",
    "table_file",
    "table_toml",
]
