"""The deterministic safety layer shared by Stability, Coach and Synth.

Three things live here because more than one service needs them and services may
not import each other:

* the help resources and the crisis reply, in English and German (du/Sie);
* the catalogue of risky steps the coach must never suggest, each with its risk
  frame, its triggers in a user's message, the markers that reveal it in a reply,
  and a safer alternative to offer instead (data: content/risky_steps.toml).

The crisis screen itself lives in coachbus.crisis (its rules are data).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files as resources_files
from typing import Literal

from coachbus import content as C
from coachbus import helplines
from coachbus.content.phrases import phrase
from coachbus.contracts.payloads import BlockedStep, CheckInQuestion, CrisisCategory, Risk
from coachbus.normalize import fold_pattern, normalize
from coachbus.text import DOMAIN_ORDER, Language, Phrase, Register

# --------------------------------------------------------------------------- resources

# The help lines are data, per locale (coachbus/content/helplines.toml, or the
# operator's COACHBUS_HELPLINES_FILE); ``locale=None`` means COACHBUS_LOCALE, else
# the default of the user's language (see coachbus.helplines).


def resources(
    category: CrisisCategory, language: Language, register: Register, locale: str | None = None
) -> list[str]:
    """Help lines for a crisis category, as sentences in the user's language."""
    return helplines.lines(category, language, register, locale)


def required_numbers(
    category: CrisisCategory, language: Language, locale: str | None = None
) -> tuple[str, ...]:
    """The numbers a crisis reply must contain (what validators check)."""
    return helplines.required_numbers(category, language, locale)


_CRISIS_OPEN: dict[CrisisCategory, Phrase] = {
    CrisisCategory.SUICIDAL_IDEATION: Phrase(
        "Thank you for telling me — that took courage, and I'm taking it seriously. "
        "You don't have to get through this moment alone.",
        "Danke, dass du mir das sagst — das braucht Mut, und ich nehme es ernst. "
        "Du musst diesen Moment nicht allein durchstehen.",
        "Danke, dass Sie mir das sagen — das braucht Mut, und ich nehme es ernst. "
        "Sie müssen diesen Moment nicht allein durchstehen.",
    ),
    CrisisCategory.SELF_HARM: Phrase(
        "Thank you for telling me. Wanting to hurt yourself is a sign of how much pain "
        "you're in, and you deserve real support with it right now.",
        "Danke, dass du mir das sagst. Wenn du dir wehtun willst, zeigt das, wie groß "
        "der Schmerz gerade ist — und du verdienst jetzt echte Unterstützung.",
        "Danke, dass Sie mir das sagen. Wenn Sie sich wehtun wollen, zeigt das, wie groß "
        "der Schmerz gerade ist — und Sie verdienen jetzt echte Unterstützung.",
    ),
    CrisisCategory.ABUSE: Phrase(
        "What you describe is not okay, and it is not your fault. Your safety comes first.",
        "Was du beschreibst, ist nicht in Ordnung, und es ist nicht deine Schuld. "
        "Deine Sicherheit geht vor.",
        "Was Sie beschreiben, ist nicht in Ordnung, und es ist nicht Ihre Schuld. "
        "Ihre Sicherheit geht vor.",
    ),
    CrisisCategory.MEDICAL_EMERGENCY: Phrase(
        "This sounds like it could be a medical emergency.",
        "Das klingt nach einem möglichen medizinischen Notfall.",
        "Das klingt nach einem möglichen medizinischen Notfall.",
    ),
}
_CRISIS_CLOSE: dict[CrisisCategory, Phrase] = {
    CrisisCategory.SUICIDAL_IDEATION: Phrase(
        "If you can, let someone you trust know how you're feeling tonight, or stay near "
        "someone. Our goals can wait. Are you safe right now?",
        "Wenn es geht, sag heute noch einem Menschen, dem du vertraust, wie es dir geht, "
        "oder bleib in der Nähe von jemandem. Die Ziele können warten. Bist du gerade sicher?",
        "Wenn es geht, sagen Sie heute noch einem Menschen, dem Sie vertrauen, wie es Ihnen "
        "geht, oder bleiben Sie in der Nähe von jemandem. Die Ziele können warten. "
        "Sind Sie gerade sicher?",
    ),
    CrisisCategory.SELF_HARM: Phrase(
        "If you can, put some distance between yourself and anything you could hurt "
        "yourself with, and reach out to someone you trust. Are you safe right now?",
        "Wenn es geht, leg alles, womit du dich verletzen könntest, außer Reichweite und "
        "melde dich bei jemandem, dem du vertraust. Bist du gerade sicher?",
        "Wenn es geht, legen Sie alles, womit Sie sich verletzen könnten, außer Reichweite "
        "und melden Sie sich bei jemandem, dem Sie vertrauen. Sind Sie gerade sicher?",
    ),
    CrisisCategory.ABUSE: Phrase(
        "Please don't face this person alone; the people on these lines can help you plan "
        "a safe next step. Are you safe where you are right now?",
        "Bitte stell dich dieser Person nicht allein; die Beraterinnen und Berater dort "
        "helfen dir, einen sicheren nächsten Schritt zu planen. Bist du gerade sicher?",
        "Bitte stellen Sie sich dieser Person nicht allein; die Beraterinnen und Berater "
        "dort helfen Ihnen, einen sicheren nächsten Schritt zu planen. Sind Sie gerade sicher?",
    ),
    CrisisCategory.MEDICAL_EMERGENCY: Phrase(
        "Don't wait to see if it passes. I'm here afterwards, whenever you want to talk.",
        "Warte nicht ab, ob es vorbeigeht. Ich bin danach für dich da, wann immer du "
        "reden möchtest.",
        "Warten Sie nicht ab, ob es vorbeigeht. Ich bin danach für Sie da, wann immer Sie "
        "reden möchten.",
    ),
}


def resource_reminder(language: Language, register: Register, locale: str | None = None) -> str:
    """One sentence keeping help lines in view on the turn after a crisis."""
    return helplines.reminder(language, register, locale)


def crisis_reply(
    category: CrisisCategory, language: Language, register: Register, locale: str | None = None
) -> str:
    """The safe reply for a crisis: acknowledgement, help lines, one safety question."""
    if category is CrisisCategory.NONE:
        raise ValueError("crisis_reply needs a crisis category")
    parts = [_CRISIS_OPEN[category].get(language, register)]
    parts.extend(resources(category, language, register, locale))
    parts.append(_CRISIS_CLOSE[category].get(language, register))
    return " ".join(parts)


@cache
def _reply(name: str) -> Phrase:
    raw = resources_files("coachbus.content").joinpath("crisis/replies.toml").read_text("utf-8")
    table = tomllib.loads(raw)[name]
    return Phrase(table["en"], table["du"], table["sie"])


def _check_in() -> Phrase:
    return _reply("check_in")


def check_in_resources(language: Language, register: Register, locale: str | None = None) -> str:
    """The help line a check-in offers (a validator requires it in the reply)."""
    return helplines.lifeline(language, register, locale)


def check_in_reply(
    language: Language,
    register: Register,
    locale: str | None = None,
    *,
    again: CheckInQuestion | None = None,
) -> str:
    """The reply to an uncertain screen: a direct, calm question and a help line.

    ``again``: the question our last reply asked got no clear answer; it is asked once
    more, gently (our check-in, or "are you safe right now?" after a crisis reply)."""
    line = check_in_resources(language, register, locale)
    name = {None: "check_in", "suicide": "check_in_again", "safety": "safety_again"}[again]
    return _reply(name).get(language, register).format(lifeline=line)


def after_denial_reply(language: Language, register: Register, locale: str | None = None) -> str:
    """The caring turn after a no to our check-in: believed, thanked, door left open."""
    line = check_in_resources(language, register, locale)
    return _reply("after_denial").get(language, register).format(lifeline=line)


def crisis_risk(category: CrisisCategory) -> Risk:
    return Risk(
        risk_id=f"crisis:{category.value}",
        description=f"possible {category.value.replace('_', ' ')}",
        severity=5,
        detectability=4,
        reversibility=5,
    )


# --------------------------------------------------------------------------- risky steps


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

    def heads_for(self, text: str) -> re.Match[str] | None:
        """Whether ``text`` (a user's message, as typed) heads for this step."""
        return self.triggers.search(normalize(text))

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


def _rx(p: str) -> re.Pattern[str]:
    # Matched against coachbus.normalize's form of the message, like the crisis
    # screen: umlauts either way, typographic apostrophes, stretched letters.
    return re.compile(fold_pattern(p))


# The catalogue is data: coachbus/content/risky_steps.toml (its header explains each
# field), read and checked once at import.
_STEP_KEYS = (
    *("id", "domain", "step", "reason", "severity", "detectability", "reversibility"),
    *("needs_condition", "reveals", "approach", "triggers", "markers", "safer"),
)


def _patterns(doc: C.Doc, value: object, at: str) -> re.Pattern[str]:
    source = "|".join(C.texts(doc, value, at))
    try:
        return _rx(source)
    except re.error as exc:
        raise doc.fail(at, f"not a regular expression: {exc}") from exc


def _step(doc: C.Doc, value: object, at: str, conditions: set[str]) -> StepSpec:
    raw = C.table(doc, value, at)
    C.only(doc, raw, _STEP_KEYS, at)
    domain = raw.get("domain")
    if domain is not None and domain not in DOMAIN_ORDER:
        raise doc.fail(f"{at}.domain", f"{domain!r} is not a life domain of domains.toml")
    needs = raw.get("needs_condition", "")
    reveals = C.texts(doc, raw["reveals"], f"{at}.reveals") if "reveals" in raw else ()
    for name, where in ((needs, "needs_condition"), *((r, "reveals") for r in reveals)):
        if name and name not in conditions:
            raise doc.fail(f"{at}.{where}", f"{name!r} is not a [condition]")
    approach = raw.get("approach")
    if approach not in ("venture", "care"):
        raise doc.fail(f"{at}.approach", f'{approach!r}: must be "venture" or "care"')
    markers = C.texts(doc, raw.get("markers"), f"{at}.markers")
    for k, m in enumerate(markers):
        if m != m.strip().lower():
            raise doc.fail(f"{at}.markers[{k}]", f"{m!r}: markers are lower case, unpadded")
    frame = {
        k: C.integer(doc, raw.get(k), f"{at}.{k}", 1, 5)
        for k in ("severity", "detectability", "reversibility")
    }
    return StepSpec(
        step_id=C.text(doc, raw.get("id"), f"{at}.id"),
        domain=domain,
        step=C.text(doc, raw.get("step"), f"{at}.step"),
        reason=C.text(doc, raw.get("reason"), f"{at}.reason"),
        triggers=_patterns(doc, raw.get("triggers"), f"{at}.triggers"),
        markers=markers,
        safer=phrase(doc, raw.get("safer"), f"{at}.safer"),
        needs_condition=C.text(doc, needs, f"{at}.needs_condition") if needs else "",
        reveals=reveals,
        approach=approach,
        **frame,
    )


def _catalogue() -> tuple[dict[str, StepSpec], dict[str, int], dict[str, re.Pattern[str]]]:
    doc = C.read("coachbus.content", "risky_steps.toml")
    C.only(doc, doc.raw, ("step", "condition"), "")
    ttl: dict[str, int] = {}
    cues: dict[str, re.Pattern[str]] = {}
    for name, raw in C.table(doc, doc.raw.get("condition"), "condition").items():
        at = f"condition.{name}"
        C.only(doc, C.table(doc, raw, at), ("ttl", "cues"), at)
        ttl[name] = C.integer(doc, raw.get("ttl"), f"{at}.ttl", 1)
        if "cues" in raw:
            cues[name] = _patterns(doc, raw["cues"], f"{at}.cues")
    steps: dict[str, StepSpec] = {}
    for i, raw in enumerate(C.array(doc, doc.raw.get("step"), "step")):
        spec = _step(doc, raw, f"step[{i}]", set(ttl))
        if spec.step_id in steps:
            raise doc.fail(f"step[{i}].id", f"{spec.step_id!r} is listed twice")
        steps[spec.step_id] = spec
    return steps, ttl, cues


# The steps; how long (in turns) Stability remembers each standing condition; and
# the cues that reveal a condition in a message.
CATALOGUE, CONDITION_TTL, _CONDITIONS = _catalogue()


def detect_conditions(text: str) -> set[str]:
    return _conditions_in(normalize(text))


def _conditions_in(normalised: str) -> set[str]:
    return {name for name, rx in _CONDITIONS.items() if rx.search(normalised)}


@dataclass(frozen=True, slots=True)
class StepHit:
    spec: StepSpec
    trigger: str
    confidence: float


def screen_steps(text: str, conditions: set[str] | frozenset[str] = frozenset()) -> list[StepHit]:
    """Risky steps this message is heading toward, given the standing conditions.

    A step that needs a condition (training hard while injured) counts with the
    condition either stated now or remembered from earlier turns.
    """
    text = normalize(text)  # once, for the conditions and every trigger
    here = _conditions_in(text) | set(conditions)
    hits: list[StepHit] = []
    for spec in CATALOGUE.values():
        m = spec.triggers.search(text)
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
