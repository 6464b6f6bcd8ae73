"""The risky steps the coach must never suggest, and the conditions they depend on.

Each step in the catalogue has its risk frame (FMEA: severity, detectability,
reversibility), the triggers that show a user's message heading for it, the markers
that reveal it in a reply, and a safer alternative to offer instead. Some steps are
only risky under a standing condition (training hard while injured), which a
message reveals and Stability remembers for a while. All of it is data:
``content/risky_steps.toml`` (its header explains each field), read and checked
once at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from coachbus import content
from coachbus.content.phrases import phrase
from coachbus.contracts.payloads import BlockedStep, Risk
from coachbus.normalize import NormalizedText, fold_pattern, normalized
from coachbus.text import DOMAIN_ORDER, Language, Phrase, Register


@dataclass(frozen=True, slots=True)
class StepSpec:
    """A step the coach must never suggest, with everything needed to police it."""

    step_id: str
    domain: str | None
    step: str
    reason: str
    triggers: re.Pattern[str]
    markers: tuple[str, ...]
    severity: int
    detectability: int
    reversibility: int
    safer: Phrase
    # The step only counts as risky when this standing condition holds (e.g. training
    # hard is fine unless injured); "" means always.
    needs_condition: str = ""
    # Conditions this step's trigger reveals and Stability should remember.
    reveals: tuple[str, ...] = field(default_factory=tuple)
    # How a reply opens the safer path: "venture" (a risky bet on a plan: job, savings,
    # debt) meets the drive with strategy, "care" (health, safety) with care.
    approach: Literal["venture", "care"] = "care"

    @property
    def priority(self) -> int:
        return self.severity * self.detectability * self.reversibility

    def heads_for(self, text: str | NormalizedText) -> re.Match[str] | None:
        """Whether ``text`` (a user's message) heads for this step."""
        return self.triggers.search(normalized(text).text)

    def risk(self) -> Risk:
        return Risk(
            risk_id=self.step_id,
            description=self.reason,
            severity=self.severity,
            detectability=self.detectability,
            reversibility=self.reversibility,
        )

    def blocked(self, confidence: float) -> BlockedStep:
        return BlockedStep(
            step=self.step,
            reason=self.reason,
            markers=list(self.markers),
            step_id=self.step_id,
            domain=self.domain,
            safer_alternative=self.safer.en,
            confidence=round(confidence, 3),
        )


_STEP_KEYS = (
    *("id", "domain", "step", "reason", "severity", "detectability", "reversibility"),
    *("needs_condition", "reveals", "approach", "triggers", "markers", "safer"),
)


def _patterns(doc: content.Doc, value: object, at: str) -> re.Pattern[str]:
    source = "|".join(content.texts(doc, value, at))
    try:
        # Matched against coachbus.normalize's form of the message, like the crisis
        # screen: umlauts either way, typographic apostrophes, stretched letters.
        return re.compile(fold_pattern(source))
    except re.error as exc:
        raise doc.fail(at, f"not a regular expression: {exc}") from exc


def _step(doc: content.Doc, value: object, at: str, conditions: set[str]) -> StepSpec:
    raw = content.table(doc, value, at)
    content.only(doc, raw, _STEP_KEYS, at)
    domain = raw.get("domain")
    if domain is not None and domain not in DOMAIN_ORDER:
        raise doc.fail(f"{at}.domain", f"{domain!r} is not a life domain of domains.toml")
    needs = raw.get("needs_condition", "")
    reveals = content.texts(doc, raw["reveals"], f"{at}.reveals") if "reveals" in raw else ()
    for name, where in ((needs, "needs_condition"), *((r, "reveals") for r in reveals)):
        if name and name not in conditions:
            raise doc.fail(f"{at}.{where}", f"{name!r} is not a [condition]")
    approach = raw.get("approach")
    if approach not in ("venture", "care"):
        raise doc.fail(f"{at}.approach", f'{approach!r}: must be "venture" or "care"')
    markers = content.texts(doc, raw.get("markers"), f"{at}.markers")
    for k, m in enumerate(markers):
        if m != m.strip().lower():
            raise doc.fail(f"{at}.markers[{k}]", f"{m!r}: markers are lower case, unpadded")
    frame = {
        k: content.integer(doc, raw.get(k), f"{at}.{k}", 1, 5)
        for k in ("severity", "detectability", "reversibility")
    }
    return StepSpec(
        step_id=content.text(doc, raw.get("id"), f"{at}.id"),
        domain=domain,
        step=content.text(doc, raw.get("step"), f"{at}.step"),
        reason=content.text(doc, raw.get("reason"), f"{at}.reason"),
        triggers=_patterns(doc, raw.get("triggers"), f"{at}.triggers"),
        markers=markers,
        safer=phrase(doc, raw.get("safer"), f"{at}.safer"),
        needs_condition=content.text(doc, needs, f"{at}.needs_condition") if needs else "",
        reveals=reveals,
        approach=approach,
        **frame,
    )


def _catalogue() -> tuple[dict[str, StepSpec], dict[str, int], dict[str, re.Pattern[str]]]:
    doc = content.read("coachbus.content", "risky_steps.toml")
    content.only(doc, doc.raw, ("step", "condition"), "")
    ttl: dict[str, int] = {}
    cues: dict[str, re.Pattern[str]] = {}
    for name, raw in content.table(doc, doc.raw.get("condition"), "condition").items():
        at = f"condition.{name}"
        content.only(doc, content.table(doc, raw, at), ("ttl", "cues"), at)
        ttl[name] = content.integer(doc, raw.get("ttl"), f"{at}.ttl", 1)
        if "cues" in raw:
            cues[name] = _patterns(doc, raw["cues"], f"{at}.cues")
    steps: dict[str, StepSpec] = {}
    for i, raw in enumerate(content.array(doc, doc.raw.get("step"), "step")):
        spec = _step(doc, raw, f"step[{i}]", set(ttl))
        if spec.step_id in steps:
            raise doc.fail(f"step[{i}].id", f"{spec.step_id!r} is listed twice")
        steps[spec.step_id] = spec
    return steps, ttl, cues


# The steps; how long (in turns) Stability remembers each standing condition; and
# the cues that reveal a condition in a message.
CATALOGUE, CONDITION_TTL, _CONDITIONS = _catalogue()


def detect_conditions(text: str | NormalizedText) -> set[str]:
    """The standing conditions (an injury, medication) a message reveals."""
    return _conditions_in(normalized(text).text)


def _conditions_in(normalised: str) -> set[str]:
    return {name for name, rx in _CONDITIONS.items() if rx.search(normalised)}


@dataclass(frozen=True, slots=True)
class StepHit:
    spec: StepSpec
    trigger: str
    confidence: float


def screen_steps(
    text: str | NormalizedText, conditions: set[str] | frozenset[str] = frozenset()
) -> list[StepHit]:
    """Risky steps this message is heading toward, given the standing conditions.

    A step that needs a condition (training hard while injured) counts with the
    condition either stated now or remembered from earlier turns.
    """
    said = normalized(text).text
    here = _conditions_in(said) | set(conditions)
    hits: list[StepHit] = []
    for spec in CATALOGUE.values():
        m = spec.triggers.search(said)
        if not m:
            continue
        if spec.needs_condition and spec.needs_condition not in here:
            continue
        hits.append(StepHit(spec, m.group(0).lower(), 0.9 if not spec.needs_condition else 0.75))
    return hits


def markers_of(step_ids: list[str] | set[str]) -> list[str]:
    out: list[str] = []
    for sid in step_ids:
        spec = CATALOGUE.get(sid)
        if spec:
            out.extend(spec.markers)
    return out


def safer_phrase(step_id: str, language: Language, register: Register) -> str | None:
    spec = CATALOGUE.get(step_id)
    return spec.safer.get(language, register) if spec else None


__all__ = [
    "CATALOGUE",
    "CONDITION_TTL",
    "StepHit",
    "StepSpec",
    "detect_conditions",
    "markers_of",
    "safer_phrase",
    "screen_steps",
]
