"""The deterministic safety layer shared by Stability, Coach and Synth.

Three things live here because more than one service needs them and services may
not import each other:

* the help resources and the crisis reply, in English and German (du/Sie);
* the catalogue of risky steps the coach must never suggest, each with its risk
  frame, its triggers in a user's message, the markers that reveal it in a reply,
  and a safer alternative to offer instead.

The crisis screen itself lives in coachbus.crisis (its rules are data).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files as resources_files

from coachbus import helplines
from coachbus.contracts.payloads import BlockedStep, CrisisCategory, Risk
from coachbus.normalize import fold_pattern, normalize
from coachbus.text import Language, Phrase, Register

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
def _check_in() -> Phrase:
    raw = resources_files("coachbus.content").joinpath("crisis/replies.toml").read_text("utf-8")
    table = tomllib.loads(raw)["check_in"]
    return Phrase(table["en"], table["du"], table["sie"])


def check_in_resources(language: Language, register: Register, locale: str | None = None) -> str:
    """The help line a check-in offers (a validator requires it in the reply)."""
    return helplines.lifeline(language, register, locale)


def check_in_reply(language: Language, register: Register, locale: str | None = None) -> str:
    """The reply to an uncertain screen: a direct, calm question and a help line."""
    line = check_in_resources(language, register, locale)
    return _check_in().get(language, register).format(lifeline=line)


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
    topic: str | None
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
            topic=self.topic,
            safer_alternative=self.safer.en,
            confidence=round(confidence, 3),
        )


def _rx(p: str) -> re.Pattern[str]:
    # Matched against coachbus.normalize's form of the message, like the crisis
    # screen: umlauts either way, typographic apostrophes, stretched letters.
    return re.compile(fold_pattern(p))


CATALOGUE: dict[str, StepSpec] = {
    s.step_id: s
    for s in (
        StepSpec(
            step_id="quit_job_abruptly",
            topic="work",
            step="quitting the job abruptly, without income secured",
            reason="losing the income before the new plan earns anything is hard to undo",
            triggers=_rx(
                r"\bquit(?:ting)? (?:my|the|this) job|hand in my notice|"
                r"resign(?:ing)? (?:tomorrow|today|now|next week|on monday)|walk out on my job|"
                r"(?:meinen job|meine stelle|meine arbeit)\s+(?:\w+\s+){0,3}kündigen|"
                r"ich kündige|job (?:\w+\s+)?hin(?:zu)?schmeißen|hinschmeißen|"
                r"(?:job|stelle) an den nagel"
            ),
            markers=(
                "quit your job",
                "quit the job",
                "quit tomorrow",
                "quit now",
                "hand in your notice",
                "resign",
                "walk out",
                "kündige",
                "kündigen",
                "kündigung",
                "hinschmeißen",
                "an den nagel",
            ),
            severity=4,
            detectability=2,
            reversibility=4,
            safer=Phrase(
                "keep the income for now and test the idea in protected hours — say two "
                "evenings a week — with a runway figure (months of expenses covered) written "
                "down before any decision about the job",
                "das Einkommen vorerst behalten und die Idee in festen Zeitfenstern testen — "
                "etwa an zwei Abenden pro Woche — und vor jeder Entscheidung über die Stelle "
                "aufschreiben, wie viele Monate Lebenshaltung du abgesichert hast",
                "das Einkommen vorerst behalten und die Idee in festen Zeitfenstern testen — "
                "etwa an zwei Abenden pro Woche — und vor jeder Entscheidung über die Stelle "
                "aufschreiben, wie viele Monate Lebenshaltung Sie abgesichert haben",
            ),
        ),
        StepSpec(
            step_id="all_savings",
            topic="money",
            step="putting all savings into one venture",
            reason="a single bet with all reserves can wipe out the safety net for years",
            triggers=_rx(
                r"\ball (?:of )?my (?:savings|money)|(?:my )?entire savings|every (?:penny|cent) "
                r"i (?:have|own)|go(?:ing)? all[- ]in|bet everything|put everything (?:in|into|on)|"
                r"(?:mein )?(?:ganzes|gesamtes) erspartes|alle (?:meine )?ersparnisse|"
                r"alles auf eine karte|alles (?:rein)?stecken|alles investieren"
            ),
            markers=(
                "all your savings",
                "all of your savings",
                "entire savings",
                "all in",
                "all-in",
                "bet everything",
                "put everything",
                "invest everything",
                "ganzes erspartes",
                "gesamtes erspartes",
                "alle ersparnisse",
                "alles auf eine karte",
                "alles investieren",
            ),
            severity=5,
            detectability=3,
            reversibility=5,
            safer=Phrase(
                "ring-fence a sum you could lose without it changing your life, and keep "
                "the rest as your safety net",
                "einen Betrag festlegen, dessen Verlust dein Leben nicht umwirft, und den "
                "Rest als Sicherheitsnetz unangetastet lassen",
                "einen Betrag festlegen, dessen Verlust Ihr Leben nicht umwirft, und den "
                "Rest als Sicherheitsnetz unangetastet lassen",
            ),
            reveals=("financial_exposure",),
        ),
        StepSpec(
            step_id="debt_for_venture",
            topic="money",
            step="taking on debt to fund a risky plan",
            reason="debt keeps costing long after a plan fails",
            triggers=_rx(
                r"take (?:out )?a (?:big |huge )?loan|max(?:ing)? out (?:my )?credit cards?|"
                r"borrow (?:money|from)|kredit aufnehmen|dispo (?:ausreizen|überziehen)|"
                r"schulden machen"
            ),
            markers=(
                "take out a loan",
                "take a loan",
                "max out",
                "credit card",
                "borrow",
                "kredit aufnehmen",
                "schulden machen",
                "dispo",
            ),
            severity=4,
            detectability=3,
            reversibility=4,
            safer=Phrase(
                "start with what the idea can prove on a small budget before any money is borrowed",
                "erst mit kleinem Budget zeigen, was die Idee kann, bevor Geld geliehen wird",
                "erst mit kleinem Budget zeigen, was die Idee kann, bevor Geld geliehen wird",
            ),
        ),
        StepSpec(
            step_id="crash_diet",
            topic="nutrition",
            step="a crash diet or skipping meals",
            reason="severe restriction harms health and usually ends in rebound",
            triggers=_rx(
                r"crash[- ]?diet|stop eating|only (?:drink )?water|[5-9]00 (?:kcal|calories)|"
                r"skip(?:ping)? (?:all )?(?:my )?meals|starv\w*|"
                r"fast(?:ing)? for (?:a|one|two|three|\d+) (?:week|weeks|days)|"
                r"crash-?diät|nichts (?:mehr )?(?:zu )?essen|nur (?:noch )?wasser|"
                r"\bhunger(?:n|e)\b|"
                r"mahlzeiten (?:weg|aus)lassen"
            ),
            markers=(
                "crash diet",
                "stop eating",
                "only water",
                "skip meals",
                "skip your meals",
                "starve",
                "fast for",
                "calories a day",
                "crash-diät",
                "crashdiät",
                "nichts essen",
                "nur wasser",
                "mahlzeiten auslassen",
                "hungern",
            ),
            severity=4,
            detectability=3,
            reversibility=3,
            safer=Phrase(
                "one modest change you could keep for months — a regular breakfast or one "
                "less sugary snack a day — and a doctor's advice if weight is a health issue",
                "eine kleine Änderung, die du monatelang durchhalten kannst — ein regelmäßiges "
                "Frühstück oder eine süße Zwischenmahlzeit weniger — und ärztlichen Rat, wenn "
                "das Gewicht gesundheitlich wichtig ist",
                "eine kleine Änderung, die Sie monatelang durchhalten können — ein "
                "regelmäßiges Frühstück oder eine süße Zwischenmahlzeit weniger — und "
                "ärztlichen Rat, wenn das Gewicht gesundheitlich wichtig ist",
            ),
            reveals=("eating",),
        ),
        StepSpec(
            step_id="stop_medication",
            topic=None,
            step="stopping or changing medication without the prescribing doctor",
            reason="stopping some medicines abruptly causes withdrawal or relapse",
            triggers=_rx(
                r"(?:stop|quit|come off|get off|ditch|drop)(?:ping)? (?:taking )?(?:my |the )?"
                r"(?:meds|medication|medicine|pills|antidepressants|tablets|insulin)|"
                r"(?:medikamente|tabletten|antidepressiva|medikation)\s+(?:\w+\s+){0,2}"
                r"(?:absetzen|weglassen|nicht mehr nehmen)|setze? (?:die |meine )?"
                r"(?:medikamente|tabletten|antidepressiva) ab"
            ),
            markers=(
                "stop taking",
                "stop your medication",
                "stop the medication",
                "stop your meds",
                "come off your",
                "come off the",
                "get off your meds",
                "ditch the pills",
                "without your medication",
                "absetzen",
                "setz sie ab",
                "medikamente weglassen",
                "tabletten weglassen",
                "nicht mehr nehmen",
            ),
            severity=5,
            detectability=4,
            reversibility=4,
            safer=Phrase(
                "talk it through with the doctor who prescribed it — if a change is right, "
                "they can plan it safely",
                "das mit der Ärztin oder dem Arzt besprechen, die es verschrieben haben — "
                "wenn eine Änderung sinnvoll ist, lässt sie sich dort sicher planen",
                "das mit der Ärztin oder dem Arzt besprechen, die es verschrieben haben — "
                "wenn eine Änderung sinnvoll ist, lässt sie sich dort sicher planen",
            ),
            reveals=("medication",),
        ),
        StepSpec(
            step_id="train_through_injury",
            topic="fitness",
            step="daily or hard training while injured",
            reason="loading an injury every day turns a weeks-long problem into a months-long one",
            triggers=_rx(
                r"every (?:single )?day|7 days a week|seven days a week|twice a day|"
                r"push(?:ing)? through (?:the )?pain|run(?:ning)? through (?:the )?pain|"
                r"no rest days?|ignore the pain|jeden tag|sieben tage|7 tage|zweimal am tag|"
                r"durchbeißen|trotz (?:der )?schmerzen|ohne pause|keine ruhetage"
            ),
            markers=(
                "every day",
                "every single day",
                "7 days a week",
                "seven days a week",
                "twice a day",
                "push through",
                "through the pain",
                "no rest days",
                "ignore the pain",
                "jeden tag",
                "täglich",
                "sieben tage",
                "7 tage",
                "durchbeißen",
                "trotz schmerzen",
                "trotz der schmerzen",
                "ohne pause",
            ),
            severity=4,
            detectability=4,
            reversibility=4,
            safer=Phrase(
                "have the injury checked, keep moving in ways that don't hurt (walking, "
                "mobility work) and build back up gradually",
                "die Verletzung abklären lassen, dich schmerzfrei bewegen (Spazierengehen, "
                "Mobilität) und erst dann schrittweise wieder aufbauen",
                "die Verletzung abklären lassen, sich schmerzfrei bewegen (Spazierengehen, "
                "Mobilität) und erst dann schrittweise wieder aufbauen",
            ),
            needs_condition="injury",
        ),
        StepSpec(
            step_id="confront_abuser_alone",
            topic="relationships",
            step="confronting an abusive person alone",
            reason="confrontation alone can escalate violence",
            triggers=_rx(
                r"confront (?:him|her|them|my (?:ex|partner|husband|wife|father|dad|boyfriend|"
                r"girlfriend))|have it out with|stell\w* (?:ihn|sie) zur rede|konfrontier\w*"
            ),
            markers=(
                "confront him",
                "confront her",
                "confront them",
                "confront your",
                "face him alone",
                "talk to him alone",
                "meet him alone",
                "have it out",
                "zur rede",
                "konfrontier",
                "konfrontieren",
                "allein treffen",
                "alleine treffen",
            ),
            severity=5,
            detectability=4,
            reversibility=5,
            safer=Phrase(
                "make a safety plan with a specialised helpline or someone you trust, and "
                "don't meet the person alone",
                "mit einer spezialisierten Beratungsstelle oder einer Vertrauensperson einen "
                "Sicherheitsplan machen und die Person nur in Begleitung sehen",
                "mit einer spezialisierten Beratungsstelle oder einer Vertrauensperson einen "
                "Sicherheitsplan machen und die Person nur in Begleitung sehen",
            ),
            needs_condition="abuse",
        ),
        StepSpec(
            step_id="sleep_deprivation",
            topic="sleep",
            step="cutting sleep to make time",
            reason="chronic sleep loss erodes exactly the focus the plan depends on",
            triggers=_rx(
                r"sleep (?:only )?(?:[2-5]|two|three|four|five) hours|all-?nighters?|"
                r"skip(?:ping)? sleep|sleep less|nur (?:noch )?(?:[2-5]|zwei|drei|vier|fünf) "
                r"stunden (?:zu )?schlafen|durchmachen|nächte durch(?:arbeiten)?|weniger schlafen"
            ),
            markers=(
                "all-nighter",
                "all nighter",
                "sleep less",
                "skip sleep",
                "four hours of sleep",
                "weniger schlafen",
                "durchmachen",
                "nächte durch",
            ),
            severity=3,
            detectability=3,
            reversibility=2,
            safer=Phrase(
                "protect seven hours of sleep and take the time from something lower on the list",
                "sieben Stunden Schlaf schützen und die Zeit lieber bei etwas Unwichtigerem holen",
                "sieben Stunden Schlaf schützen und die Zeit lieber bei etwas Unwichtigerem holen",
            ),
        ),
    )
}

# Standing conditions and how long (in turns) Stability remembers them.
CONDITION_TTL: dict[str, int] = {
    "injury": 30,
    "medication": 400,
    "abuse": 400,
    "eating": 120,
    "financial_exposure": 60,
}
_CONDITIONS: dict[str, re.Pattern[str]] = {
    "injury": _rx(
        r"injur\w*|sprain\w*|(?:knee|back|ankle|shin|hip|shoulder|foot|achilles)\s+"
        r"(?:hurts|is hurting|pain|injury|is killing me)|pulled a muscle|torn (?:ligament|muscle)|"
        r"stress fracture|physio\w*|verletz\w*|zerrung|bänderriss|"
        r"(?:knie|rücken|knöchel|schienbein|hüfte|schulter|fuß|achillessehne)\s+(?:tut|schmerzt)"
        r"|schmerzen im (?:knie|rücken|knöchel|fuß)"
    ),
    "medication": _rx(
        r"\b(?:my )?(?:meds|medication|antidepressants|insulin|prescription)\b|"
        r"medikament\w*|tabletten|antidepressiva"
    ),
    "eating": _rx(r"binge\w*|purg\w*|eating disorder|essstörung|fressattack\w*|erbrech\w*"),
}


def detect_conditions(text: str) -> set[str]:
    n = normalize(text)
    return {name for name, rx in _CONDITIONS.items() if rx.search(n)}


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
    here = detect_conditions(text) | set(conditions)
    text = normalize(text)
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
