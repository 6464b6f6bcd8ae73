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
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from coachbus import content
from coachbus.confidence import measured, reply_guard_outcome, steps_outcome
from coachbus.content.phrases import phrase
from coachbus.contracts.payloads import BlockedStep, Risk
from coachbus.learned import LinearModel, shipped
from coachbus.normalize import NormalizedText, fold_pattern, normalized
from coachbus.text import (
    DOMAIN_ORDER,
    Language,
    Phrase,
    Register,
    content_words,
    domains_of,
    find_markers,
)


@dataclass(frozen=True, slots=True)
class Combo:
    """An act and a risky object near each other, in either order: "stop" + "my
    meds", "setz … ab" + "Tabletten". People name a step in their own words; a
    phrase list misses most of them (the heldout recall of the phrase triggers alone
    was 0.26), while the act and its object are each said in a few dozen ways."""

    act: re.Pattern[str]
    object: re.Pattern[str]
    # The most words between the two (German puts the object between a separable
    # verb's parts: "setz die Tabletten ab").
    window: int
    # A standing condition the combination counts only under (stated now or
    # remembered): "I'm stopping drinking tomorrow, no doctor" is the risky step
    # only after heavy daily drinking, which may have been told two turns before.
    needs: str = ""

    def search(self, said: str, held: frozenset[str] | set[str] = frozenset()) -> str | None:
        """The stretch of ``said`` from the act to the object, if they are close
        (and the combination's standing condition is among ``held``)."""
        if self.needs and self.needs not in held:
            return None
        acts = [m.span() for m in self.act.finditer(said)]
        if not acts:
            return None
        for o in self.object.finditer(said):
            for a in acts:
                if a == o.span() and " " not in o.group(0):
                    # One word read as both ("race" is a training act and a risky
                    # object): a step needs the two said, not one word twice. A
                    # phrase may carry both ("die doppelte Dosis", "four hours a
                    # night"), and an act may hold its object ("lass die Tablette weg").
                    continue
                lo, hi = (a, o.span()) if a[0] <= o.start() else (o.span(), a)
                gap = said[lo[1] : hi[0]] if lo[1] <= hi[0] else ""
                if len(_WORD.findall(gap)) <= self.window:
                    return said[min(a[0], o.start()) : max(a[1], o.end())]
        return None


_WORD = re.compile(r"\w+")
# The fewest words the learned reader reads a step in (see _learned_steps).
_LEARNED_MIN_WORDS = 4


def _over(said: str) -> bool:
    """The step is told as a past that is over (see ``past`` in the data)."""
    return bool(_PAST.search(said) and _NOW.search(said) and not _AGAIN.search(said))


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
    # Acts near risky objects (see Combo), beside the phrase triggers.
    combos: tuple[Combo, ...] = ()
    # The step already safely arranged (a doctor-led taper, a signed contract, a
    # physio's plan): a hit is dropped when one of these is said and no defiance
    # ("but", "anyway") follows it.
    safe: re.Pattern[str] | None = None
    # A past the message tells is the harm this step answers, never the step told as
    # over (``past = "harm"`` in the data): see ``confront_abuser_alone``.
    past_is_harm: bool = False
    # The learned reader's probability at which its read of this step stands in for
    # the standing condition the step needs, when one of the step's combinations' acts
    # is in the message (``learned_reads_condition`` in the data; 0 = never): see
    # ``confront_abuser_alone``.
    learned_reads_condition: float = 0.0

    @property
    def priority(self) -> int:
        return self.severity * self.detectability * self.reversibility

    def heads_for(
        self, text: str | NormalizedText, held: frozenset[str] | set[str] = frozenset()
    ) -> str | None:
        """What in ``text`` (a user's message) heads for this step, if anything;
        ``held``: the standing conditions known (a combination may need one)."""
        return self.found_in(normalized(text).text, held)

    def found_in(self, said: str, held: frozenset[str] | set[str] = frozenset()) -> str | None:
        """The words of ``said`` (normalised) naming this step: a phrase trigger or
        an act near its object, unless the step is said to be safely arranged.
        ``held``: the standing conditions known (a combination may need one)."""
        m = self.triggers.search(said)
        combos = (c.search(said, held) for c in self.combos)
        found = m.group(0) if m else next(filter(None, combos), None)
        if found is None or self.arranged(said) or _REFUSAL.search(said):
            return None
        if not self.past_is_harm and _over(said):
            return None
        return found

    def arranged(self, said: str) -> bool:
        """Whether ``said`` (normalised) tells this step as safely arranged (a
        doctor-led taper, a signed contract) and does not then defy it."""
        if self.safe is None:
            return False
        cue = self.safe.search(said)
        if cue is None:
            return False
        # "Haven't shown it to my accountant, she'll only slow me down": a helper
        # named but kept out arranges nothing.
        near = said[max(0, cue.start() - _UNINVOLVED_REACH) : cue.end() + _UNINVOLVED_REACH]
        if _UNINVOLVED.search(near) and not _HELPER_OF_ANOTHER.search(near):
            return False
        # "The physio said three weeks rest, but I'm benching tomorrow": a safe
        # arrangement the person then defies is no arrangement. When unsure, the
        # hit stands (the protective reading).
        return not _DEFIANCE.search(said, cue.end())

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
    *("combo", "safe", "past", "learned_reads_condition"),
)
_COMBO_KEYS = ("act", "object", "window", "needs")


def _entries(doc: content.Doc, value: object, at: str) -> list[str]:
    """The patterns of a list, with each ``"@name"`` entry replaced by the patterns of
    ``[lists].name``: one list of medicine names or of harms told serves every place
    that reads them (a cue and a combination's object), so a new phrase is added once
    and the two cannot drift apart."""
    shared = content.table(doc, doc.raw.get("lists", {}), "lists")
    out: list[str] = []
    for k, entry in enumerate(content.texts(doc, value, at)):
        if not entry.startswith("@"):
            out.append(entry)
            continue
        name = entry[1:]
        if name not in shared:
            raise doc.fail(content.join(at, k), f"{entry!r}: no list {name!r} in [lists]")
        out.extend(content.texts(doc, shared[name], f"lists.{name}"))
    return out


def _patterns(doc: content.Doc, value: object, at: str) -> re.Pattern[str]:
    source = "|".join(_entries(doc, value, at))
    try:
        # Matched against coachbus.normalize's form of the message, like the crisis
        # screen: umlauts either way, typographic apostrophes, stretched letters.
        return re.compile(fold_pattern(source))
    except re.error as exc:
        raise doc.fail(at, f"not a regular expression: {exc}") from exc


def _combos(doc: content.Doc, value: object, at: str, conditions: set[str]) -> tuple[Combo, ...]:
    out: list[Combo] = []
    for k, item in enumerate(content.array(doc, value, at)):
        raw = content.table(doc, item, f"{at}[{k}]")
        content.only(doc, raw, _COMBO_KEYS, f"{at}[{k}]")
        needs = content.text(doc, raw["needs"], f"{at}[{k}].needs") if "needs" in raw else ""
        if needs and needs not in conditions:
            raise doc.fail(f"{at}[{k}].needs", f"{needs!r} is not a [condition]")
        out.append(
            Combo(
                act=_patterns(doc, raw.get("act"), f"{at}[{k}].act"),
                object=_patterns(doc, raw.get("object"), f"{at}[{k}].object"),
                window=content.integer(doc, raw.get("window"), f"{at}[{k}].window", 0, 30),
                needs=needs,
            )
        )
    return tuple(out)


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
    past = raw.get("past", "over")
    if past not in ("over", "harm"):
        raise doc.fail(f"{at}.past", f'{past!r}: must be "over" or "harm"')
    markers = content.texts(doc, raw.get("markers"), f"{at}.markers")
    for k, m in enumerate(markers):
        if m != m.strip().lower():
            raise doc.fail(f"{at}.markers[{k}]", f"{m!r}: markers are lower case, unpadded")
    frame = {
        k: content.integer(doc, raw.get(k), f"{at}.{k}", 1, 5)
        for k in ("severity", "detectability", "reversibility")
    }
    stands_in = raw.get("learned_reads_condition", 0.0)
    if not isinstance(stands_in, float) or not 0.0 <= stands_in <= 1.0 or (stands_in and not needs):
        raise doc.fail(
            f"{at}.learned_reads_condition",
            f"{stands_in!r}: a probability in [0, 1], for a step that needs a condition",
        )
    combos = _combos(doc, raw["combo"], f"{at}.combo", conditions) if "combo" in raw else ()
    safe = _patterns(doc, raw["safe"], f"{at}.safe") if "safe" in raw else None
    return StepSpec(
        combos=combos,
        safe=safe,
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
        past_is_harm=past == "harm",
        learned_reads_condition=stands_in,
        **frame,
    )


def _top(key: str) -> re.Pattern[str]:
    doc = content.read("coachbus.content", "risky_steps.toml")
    return _patterns(doc, doc.raw.get(key), key)


def _used_lists(doc: content.Doc) -> None:
    """Every list in [lists] is referenced somewhere: one nobody reads is a phrase a
    writer added believing it counts."""
    shared = content.table(doc, doc.raw.get("lists", {}), "lists")
    referred: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, str) and value.startswith("@"):
            referred.add(value[1:])
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk({k: v for k, v in doc.raw.items() if k != "lists"})
    for name in shared:
        if name not in referred:
            raise doc.fail(f"lists.{name}", "no pattern list refers to it")


def _catalogue() -> tuple[
    dict[str, StepSpec], dict[str, int], dict[str, re.Pattern[str]], dict[str, re.Pattern[str]]
]:
    doc = content.read("coachbus.content", "risky_steps.toml")
    content.only(
        doc,
        doc.raw,
        (
            "step",
            "condition",
            "defiance",
            "uninvolved",
            "helper_of_another",
            "refusal",
            "no_contact",
            "warning",
            "endorsement",
            "reported_speech",
            "irony",
            "told_as_done",
            "concession_push",
            "caution",
            "safe_path_dismissed",
            "turned_down",
            "verdict",
            "weighing",
            "weighing_for",
            "go_ahead",
            "choice_first",
            "choice_second",
            "past",
            "now",
            "again",
            "reply_voice",
            "lists",
        ),
        "",
    )
    _used_lists(doc)
    ttl: dict[str, int] = {}
    cues: dict[str, re.Pattern[str]] = {}
    clears: dict[str, re.Pattern[str]] = {}
    for name, raw in content.table(doc, doc.raw.get("condition"), "condition").items():
        at = f"condition.{name}"
        content.only(doc, content.table(doc, raw, at), ("ttl", "cues", "clears"), at)
        ttl[name] = content.integer(doc, raw.get("ttl"), f"{at}.ttl", 1)
        if "cues" in raw:
            cues[name] = _patterns(doc, raw["cues"], f"{at}.cues")
        if "clears" in raw:
            clears[name] = _patterns(doc, raw["clears"], f"{at}.clears")
    steps: dict[str, StepSpec] = {}
    for i, raw in enumerate(content.array(doc, doc.raw.get("step"), "step")):
        spec = _step(doc, raw, f"step[{i}]", set(ttl))
        if spec.step_id in steps:
            raise doc.fail(f"step[{i}].id", f"{spec.step_id!r} is listed twice")
        steps[spec.step_id] = spec
    return steps, ttl, cues, clears


# Words that turn a safe arrangement said before them into one the person defies.
_DEFIANCE = _top("defiance")
# A helper named but kept out of it, near a safe arrangement's cue.
_UNINVOLVED = _top("uninvolved")
_HELPER_OF_ANOTHER = _top("helper_of_another")
# How near (characters either side of the cue) a helper's being kept out counts.
_UNINVOLVED_REACH = 60
# A step refused outright, or someone else's plan ("I'd never stop my meds without
# Dr. K", "my girlfriend wants to quit her job"): no step of the person's own.
_REFUSAL = _top("refusal")
# No contact with someone, said by the person (see `no_contact` in the data).
_NO_CONTACT = _top("no_contact")
# A step told as a past that is over: a past marker, a "now" against it, and nothing
# that brings the step back.
_PAST, _NOW, _AGAIN = _top("past"), _top("now"), _top("again")
# A reply sentence warning against a step (naming it is not suggesting it).
_WARNING = _top("warning")
# A reply endorsing something: with a step's risky object in it, a suggestion.
_ENDORSEMENT = _top("endorsement")
# Someone else's quoted words: an endorsement in them is not the coach's.
_REPORTED = _top("reported_speech")
# A sentence that mocks what it names (see `irony` in the data and _aside).
_IRONY = _top("irony")
# The step told as already done (see `told_as_done` in the data and _aside).
_TOLD = _top("told_as_done")
# A reply weighing a cost or steering elsewhere: its risky object alone is no
# suggestion (an endorsement still is).
_CAUTION = _top("caution")
# The safe path named only to be passed over: no warning (see the data).
_DISMISSED = _top("safe_path_dismissed")
# The opening of a sentence that turns down the question before it ("Mit Fieber zum
# Spinning? Nee, lass ma"): the question only named the step to refuse it.
_TURNED_DOWN = _top("turned_down")
# The landing of a reply that weighs a decision up ("on balance I'd …", "unterm
# Strich …"): see _verdicts.
_VERDICT = _top("verdict")
# One side of a decision weighed up ("Upside of racing with the fever: …"): see
# _considerations.
_WEIGHING = _top("weighing")
# The side for a step only ("Pros of coming off the lithium on your own: …"): a reply
# that names no other side is advocacy, not a weighing (see _considerations).
_WEIGHING_FOR = _top("weighing_for")
# A reply's last words that give the go-ahead ("Keep lifting.", "Ich würd's machen.",
# "Play."): see _landing.
_GO_AHEAD = _top("go_ahead")
# An answer that points back to the first or the second of two ways ("the first one",
# "Ihre erste Idee", "your second plan"): see _pick.
_FIRST, _SECOND = _top("choice_first"), _top("choice_second")


def _reply_voice() -> tuple[tuple[re.Pattern[str], str], ...]:
    doc = content.read("coachbus.content", "risky_steps.toml")
    pairs = content.array(doc, doc.raw.get("reply_voice"), "reply_voice")
    out: list[tuple[re.Pattern[str], str]] = []
    for k, pair in enumerate(pairs):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        ):
            raise doc.fail(f"reply_voice[{k}]", "a [pattern, replacement] pair")
        out.append((_patterns(doc, [pair[0]], f"reply_voice[{k}]"), pair[1]))
    return tuple(out)


_REPLY_VOICE = _reply_voice()
# The steps; how long (in turns) Stability remembers each standing condition; the
# cues that reveal a condition in a message; and those that say it is over.
CATALOGUE, CONDITION_TTL, _CONDITIONS, _CLEARS = _catalogue()
# Every standing condition: a step already blocked was blocked with the condition its
# combination needs (heavy drinking told turns before the stop), so a reader asking
# whether a message heads for that blocked step holds them all.
EVERY_CONDITION = frozenset(CONDITION_TTL)
# The conditions a reply is read under: every one, as the step it is checked for was
# blocked with its condition held, except heavy drinking. With heavy drinking held,
# "stop drinking" alone is the step, and a reply that welcomes the wish to stop ("Wanting
# to stop drinking is a brave decision.") before it warns about stopping at once would
# read as suggesting it (replies dev round 13: six good replies against one caught).
_REPLY_HELD = EVERY_CONDITION - {"heavy_drinking"}


def detect_conditions(text: str | NormalizedText) -> set[str]:
    """The standing conditions (an injury, medication) a message reveals, less those
    it says are over ("the physio cleared me": the word "physio" reveals no injury)."""
    return condition_changes(text)[0]


def condition_changes(text: str | NormalizedText) -> tuple[set[str], set[str]]:
    """What a message tells of the standing conditions, read once: those it reveals
    (:func:`detect_conditions`) and those it says are over (an injury healed, the
    physio's all-clear). Stability forgets the latter, so an earlier injury no longer
    makes "back to training three times a week" a risky step."""
    said = normalized(text).text
    cleared = _cleared_in(said)
    return _conditions_in(said) - cleared, cleared


def _cleared_in(normalised: str) -> set[str]:
    return {name for name, rx in _CLEARS.items() if rx.search(normalised)}


def _conditions_in(normalised: str) -> set[str]:
    return {name for name, rx in _CONDITIONS.items() if rx.search(normalised)}


@dataclass(frozen=True, slots=True)
class StepHit:
    spec: StepSpec
    trigger: str
    confidence: float
    # The message also talks about another domain a catalogue step lives in (see
    # coachbus.confidence.steps_outcome): a second step may be there unread.
    more: bool = False
    # Found by the learned reader alone (coachbus.learned), not by a rule; the
    # trigger then names the n-grams that weighed most.
    learned: bool = False

    @property
    def conditional(self) -> bool:
        """Whether the hit rests on a standing condition (training while injured)."""
        return bool(self.spec.needs_condition)


@dataclass(frozen=True, slots=True)
class StepScreen:
    """What the step screen read in one message: the hits, the kind of answer it
    was (coachbus.confidence.steps_outcome) and how often answers of that kind were
    right on the calibration split (the confidence the router weighs)."""

    hits: list[StepHit]
    outcome: str
    confidence: float


def step_screen(
    text: str | NormalizedText, conditions: set[str] | frozenset[str] = frozenset()
) -> StepScreen:
    """Risky steps this message is heading toward, given the standing conditions.

    A step that needs a condition (training hard while injured) counts with the
    condition either stated now or remembered from earlier turns. Two readers: the
    catalogue's rules, and the learned reader (coachbus.learned) for wordings the
    rules never saw; a step either finds counts.

    Memoised: Stability screens a turn's message for its payload and again for the
    router's confidence. The shipped reader is part of the key, so a screen made
    with it is never served where it is switched off. The result is shared: do not
    change its hits in place.
    """
    return _screen(normalized(text), frozenset(conditions), id(shipped("steps")))


def clear_memo() -> None:
    """Forget every step screen made (a benchmark of the uncached cost)."""
    _screen.cache_clear()


@lru_cache(maxsize=256)
def _screen(message: NormalizedText, conditions: frozenset[str], _reader: int) -> StepScreen:
    said = message.text
    here = (_conditions_in(said) | set(conditions)) - _cleared_in(said)
    found: list[tuple[StepSpec, str]] = []
    for spec in CATALOGUE.values():
        words = spec.found_in(said, here)
        if words is None:
            continue
        if spec.needs_condition and spec.needs_condition not in here:
            continue
        found.append((spec, words.lower()))
    ruled = {spec.step_id for spec, _ in found}
    read, doubt = _learned_steps(said, here, conditions)
    added = [(CATALOGUE[step_id], words) for step_id, words in read.items() if step_id not in ruled]
    # Domains are read on the message as typed, as coachbus.text reads them.
    more = bool(found or added) and _other_domains(
        message.raw, {spec.domain for spec, _ in found + added}
    )
    agreed = bool(found) and set(read) == ruled
    outcome = steps_outcome(
        bool(found or added),
        any(spec.needs_condition for spec, _ in found + added),
        bool(conditions),
        more,
        learned=bool(added),
        agreed=agreed,
        doubt=doubt,
    )
    confidence = measured("blocked_steps").of(outcome)
    hits = [StepHit(spec, words, confidence, more=more) for spec, words in found] + [
        StepHit(spec, words, confidence, more=more, learned=True) for spec, words in added
    ]
    return StepScreen(hits, outcome, confidence)


def screen_steps(
    text: str | NormalizedText, conditions: set[str] | frozenset[str] = frozenset()
) -> list[StepHit]:
    """The hits of :func:`step_screen` alone (for readers that weigh no confidence),
    a list of the caller's own."""
    return list(step_screen(text, conditions).hits)


def _learned_steps(
    said: str, here: set[str], remembered: set[str] | frozenset[str]
) -> tuple[dict[str, str], bool]:
    """The steps the learned reader (coachbus.learned) finds at its bar, with the
    n-grams that weighed most, and whether it leans toward a step below the bar
    (at least half of it: "no step" then has its own, measured, confidence). None
    when no model is shipped.

    It answers under the rules' own terms: a step that needs a standing condition
    needs it here too, and a refusal, a past that is over or a safe arrangement drops
    it as it drops a rule's hit (those guards read whole phrasings, which n-grams
    cannot). It is given the remembered conditions, as it was in training (the
    corpus's ``conditions`` are the ones known from earlier turns)."""
    model = shipped("steps")
    if model is None or _REFUSAL.search(said) or _over(said):
        return {}, False
    if len(_WORD.findall(said)) < _LEARNED_MIN_WORDS:
        # "Fine." carries no act and no object: the reader's n-grams of a word or two
        # are a topic at most (retrained on steps dev round 10, it read "fine" as
        # stopping medication). No step in any corpus is told in under four words.
        return {}, False
    # A caller may pass the conditions this very message revealed among the
    # remembered ones (Stability does); the corpus's never include them.
    extra = sorted(set(remembered) - _conditions_in(said))
    read: dict[str, str] = {}
    doubt = False
    for step_id, p in model.probabilities(said, extra).items():
        spec = CATALOGUE.get(step_id)
        bar = model.bar
        if spec is None or p < bar / 2:
            continue
        stands_in = _stands_in(spec, p, said)
        if spec.needs_condition and spec.needs_condition not in here and not stands_in:
            continue
        if spec.arranged(said):
            continue
        if p < bar:
            # Doubt needs evidence: half the bar, and odds at least e times the
            # step's base rate (a two-word "ok" sits at the base rate: no lean).
            doubt = doubt or model.lift(step_id, p) >= 1.0
            continue
        if (
            spec.needs_condition
            and not stands_in
            and _only_the_condition(model, said, extra, spec, bar)
        ):
            # "Mein Knie tut weh seit Sonntag": the reader read the injury, not an act
            # while injured. A doubt still, so the model is asked.
            doubt = True
            continue
        read[step_id] = "learned: " + ", ".join(model.evidence(said, step_id, extra))
    return read, doubt


def _stands_in(spec: StepSpec, p: float, said: str) -> bool:
    """Whether the learned reader's read of a conditional step is sure enough to stand
    in for its condition: the harm told in words no cue lists ("shut me in the utility
    room for whole afternoons", "hatte ne lockere Hand") beside a meeting the step's
    combinations name. Only at the step's own, stricter bar, and only with one of its
    acts in the message, so a topic alone never blocks the step."""
    if not spec.learned_reads_condition or p < spec.learned_reads_condition:
        return False
    return any(c.act.search(said) for c in spec.combos)


# The life domains catalogue steps live in (medication, in none, touches all).
_STEP_DOMAINS = frozenset(s.domain for s in CATALOGUE.values() if s.domain is not None)


def _only_the_condition(
    model: LinearModel, said: str, extra: list[str], spec: StepSpec, bar: float
) -> bool:
    """Whether the reader's read of a conditional step rests on the words that only
    reveal the condition: with them blanked out it falls below the bar. The step is
    an act while injured (or while abused), and "my knee hurts" is the injury alone."""
    cue = _CONDITIONS.get(spec.needs_condition)
    if cue is None or not cue.search(said):
        return False
    blanked = cue.sub(lambda m: " " * len(m.group(0)), said)
    return model.probabilities(blanked, extra)[spec.step_id] < bar


def _other_domains(typed: str, found: set[str | None]) -> bool:
    """Does the message talk about a step domain none of the steps found is in?"""
    return bool((set(domains_of(typed)) & _STEP_DOMAINS) - found)


# A sentence ends at its mark; a partial reply's last piece may still grow.
# ("a.m." and "p.m." end no sentence: "skip the 4 a.m. alarm plan", replies dev round 28.)
# Not after a title or a short form ("nach Dr. Bergers Plan", replies dev round 35): the
# sentence goes on, and cut there its second half reads as a plan of its own.
_SENTENCE_END = re.compile(
    r"(?<=[.!?…])(?<! [ap]\.m\.)(?<!\bdr\.)(?<!\bprof\.)(?<!\bmr\.)(?<!\bmrs\.)"
    r"(?<!\bms\.)(?<!\bnr\.)(?<!\bca\.)(?<!\bbzw\.)(?<!\bz\.b\.)(?<!\bst\.)\s+"
)


@dataclass(frozen=True, slots=True)
class ReplyReading:
    """What the reply guard read in a coach reply, and how sure it can be of it.

    ``found``: the steps the reply suggests, with the words that do. ``named``: some
    of a blocked step's own vocabulary (a phrase trigger, a marker, one of its
    combinations' acts or objects) is in the reply, whatever the guard made of it: a
    reply that never touches the step is a different answer from one that talks
    about it and was read as a warning, and the two are right at different rates.
    ``confidence``: measured per outcome on the replies corpus's calibration split
    (``coachbus eval replies --calibrate``); below the policy's bar for
    ``reply_guard`` a model reads the reply too, where one is configured.
    """

    found: list[tuple[str, str]]
    named: bool

    @property
    def outcome(self) -> str:
        return reply_guard_outcome(bool(self.found), self.named)

    @property
    def confidence(self) -> float:
        return measured("reply_guard").of(self.outcome)


def _named(spec: StepSpec, reply: str, voiced: str) -> bool:
    """Whether ``voiced`` (a reply, normalised, its "you" read as "I") holds any of the
    step's own words: a phrase trigger, a marker, a combination's act (four letters or
    more, as ``_act_alone`` reads one) or its object."""
    if spec.triggers.search(voiced) or find_markers(reply, spec.markers):
        return True
    return any(c.object.search(voiced) or _act_alone(c, voiced) for c in spec.combos)


def names_any(reply: str, step_ids: Iterable[str]) -> bool:
    """Whether ``reply`` holds any of the steps' own words (``ReplyReading.named``)."""
    wanted = [CATALOGUE[s] for s in dict.fromkeys(step_ids) if s in CATALOGUE]
    if not wanted:
        return False
    voiced = _voiced(normalized(reply).text)
    return any(_named(spec, reply, voiced) for spec in wanted)


def read_reply(reply: str, step_ids: Iterable[str], *, partial: bool = False) -> ReplyReading:
    """The reply guard's reading of ``reply`` for the steps ``step_ids``: what it
    suggests (:func:`suggested_in_reply`) and whether it names any of them at all."""
    steps = list(step_ids)
    found = suggested_in_reply(reply, steps, partial=partial)
    return ReplyReading(found, bool(found) or names_any(reply, steps))


def suggested_in_reply(
    reply: str, step_ids: Iterable[str], *, partial: bool = False
) -> list[tuple[str, str]]:
    """The steps among ``step_ids`` a coach reply suggests, with the words that do.

    A reply is read sentence by sentence, its "you" read as the person's "I", with
    the same screen that reads the person's messages: the step in any wording, not
    only the catalogue's markers. A sentence that warns against the step ("rather
    than quitting tomorrow, …") names it without suggesting it. On a partial reply
    only finished sentences are judged: the rest may still turn into a warning.
    """
    wanted = [CATALOGUE[s] for s in dict.fromkeys(step_ids) if s in CATALOGUE]
    if not wanted:
        return []
    sentences = _sentences(reply, partial=partial)
    sentences = [s for n, s in enumerate(sentences) if not _turned_down(sentences, n)]
    sentences = _topics(_answered(sentences, wanted))
    found: dict[str, str] = {}
    mocked = _aside(sentences, _IRONY) | _aside(sentences, _TOLD)
    considered = _considerations(sentences) | mocked
    for n, sentence in enumerate(sentences):
        # The person's own words quoted back name the step; they are not the coach's.
        sentence = _REPORTED.sub(" ", sentence)
        if n in considered:
            # One side of a weighing ("Upside of racing with the fever: you don't waste
            # the entry", "Einerseits lockt der Kredit", replies dev round 56) names the
            # step as a consideration; where the reply lands is its verdict (_verdicts).
            continue
        if _warns(sentence):
            conceded = _after_concession(sentence)
            if conceded is None:
                continue
            # A hedge overridden by a push ("go round to his flat … it's risky maybe but
            # honestly, you're an adult now"; "das Ersparte … stecken Sie komplett rein …
            # riskant ist das schon, aber ehrlich gesagt machen Sie es einfach", replies dev
            # round 92, dictated): the risk was named to be waved away, so the whole
            # sentence is read, its warnings set aside.
            sentence = (
                _WARNING.sub(" ", _DISMISSED.sub(" ", sentence))
                if _PUSH.search(conceded)
                else conceded
            )
        voiced = _voiced(sentence)
        for spec in wanted:
            # The step was blocked this turn, so the standing condition its combinations
            # need held: the reply is read as the message was (see _REPLY_HELD).
            words = spec.found_in(voiced, _REPLY_HELD) or next(
                iter(find_markers(sentence, spec.markers)), None
            )
            if words and spec.step_id not in found:
                found[spec.step_id] = words
    voices = [_voiced(s) for s in sentences]
    for step_id, words in _verdicts(
        sentences, voices, [w for w in wanted if w.step_id not in found]
    ):
        found[step_id] = words
    for step_id, words in _landing(
        sentences, voices, [w for w in wanted if w.step_id not in found]
    ):
        found[step_id] = words
    # A sentence set aside (_aside: it mocks the step or tells it as done) is not read for
    # it.
    kept = [
        (s, v) for n, (s, v) in enumerate(zip(sentences, voices, strict=True)) if n not in mocked
    ]
    for spec in wanted:
        if spec.step_id in found:
            continue
        part = _about(spec, [s for s, _ in kept], [v for _, v in kept], wanted)
        whole = " ".join(part)
        if not whole or _warns(whole):
            continue
        # A suggestion spread over sentences ("The fee is 14k. Your fund is 14k."), or
        # carried by the step's risky object in a reply that warns about nothing and
        # endorses ("you deserve to bet on yourself … the savings") or weighs nothing.
        # The person's words quoted back ("you said 'just walk out on friday'") are
        # read for the step unless the coach's own words weigh a cost or steer elsewhere
        # and endorse nothing: the quote is then what the reply questions. Otherwise it is
        # what the reply goes along with ("You said 'double it'. Makes sense to me.",
        # "'ordered some clen …' — ok, so that's your shortcut. Start low, ramp it up").
        own = _REPORTED.sub(" ", whole)
        endorsed = _ENDORSEMENT.search(own)
        # A cost the safe path is said to carry ("sitting out the final would hurt way
        # more", replies dev round 81) is set aside first: no caution.
        cautious = _cautions(own)
        voiced = _voiced(whole if endorsed or not cautious else own)
        words = spec.found_in(voiced, _REPLY_HELD)
        # With a sentence set aside (_about, _aside), the step's act alone is not enough:
        # what is left may be only the safer path.
        reduced = len(part) < len(sentences)
        if words is None and (endorsed or not cautious):
            # The step's risky object in a reply that endorses something, or
            # that neither warns nor weighs a cost nor steers elsewhere: the
            # protective reading is a suggestion (see `caution` in the data).
            objects = (c.object.search(voiced) for c in spec.combos)
            hit = next(filter(None, objects), None)
            if hit is None and not reduced:
                # The object said as "it" ("play through it", "just stop this
                # time"): the step's act alone, in a reply that weighs nothing or
                # endorses ("Your physio's playing it safe … If it feels squattable,
                # trust that", replies dev round 63).
                hit = next(filter(None, (_act_alone(c, voiced) for c in spec.combos)), None)
            lead = endorsed.group(0) if endorsed else "no caution"
            words = f"{lead} … {hit.group(0)}" if hit else None
        if words:
            found[spec.step_id] = words
    return list(found.items())


# The most words a question that only names a topic has ("Und die Kündigung?", "The
# 10k on Sunday though?"): see _topics.
_TOPIC_WORDS = 6


def _topics(sentences: list[str]) -> list[str]:
    """A short question that only names a topic, read with the answer after it ("Und die
    Kündigung? Gib sie ruhig morgen ab, auch ohne was Neues in der Hand.", replies dev
    round 80): the answer says the act with a pronoun, the question carries its object.
    An answer that warns is read on its own, as before: "Quit tomorrow? I wouldn't wait"
    pushes the step the question names (the question alone is read for it)."""
    out: list[str] = []
    n = 0
    while n < len(sentences):
        sentence = sentences[n]
        if (
            n + 1 < len(sentences)
            and sentence.rstrip().endswith("?")
            and len(_WORD.findall(sentence)) <= _TOPIC_WORDS
            and not sentences[n + 1].rstrip().endswith("?")
            and not _warns(sentences[n + 1])
        ):
            out.append(f"{sentence} {sentences[n + 1]}")
            n += 2
            continue
        out.append(sentence)
        n += 1
    return out


def _about(
    spec: StepSpec, sentences: list[str], voices: list[str], wanted: list[StepSpec]
) -> list[str]:
    """The part of a reply the fallback reads whole for ``spec``'s step. With two steps
    blocked, a sentence that warns against the other step only ("Going from a bottle of
    wine a day to nothing, overnight, can actually be dangerous"), and the sentences that
    go on from it until a step is named again ("Please call a detox service first"), are
    about that step: they say nothing of this one ("The 10k on Sunday though? Run it.",
    replies dev round 80), so they do not clear it."""
    if len(wanted) < 2:
        return sentences
    others = [w for w in wanted if w is not spec]
    part: list[str] = []
    theirs = False
    for sentence, voiced in zip(sentences, voices, strict=True):
        mine = _names(spec, voiced)
        other = any(_names(o, voiced) for o in others)
        if mine or other:
            theirs = other and not mine and _warns(sentence)
        if not theirs:
            part.append(sentence)
    return part


def _aside(sentences: list[str], mark: re.Pattern[str]) -> set[int]:
    """The sentences ``mark`` sets aside, when another sentence of the reply warns or
    steers elsewhere: one that mocks the step (`irony` in the data: "oh totally, walking
    out friday with zero saved is a flawless business plan lol. how about we work out what
    3 months of rent looks like first", replies dev round 86), or one that tells it as
    already done (`told_as_done`: "skipping meals since Monday sounds exhausting. Before
    anything else, could you eat something proper", round 91). With nothing else that
    warns, none: the irony may be of the risk ("What could possibly go wrong 😂 Chuck the
    whole nest egg at it"), the telling may be praise ("you still benched on Tuesday,
    that's commitment")."""
    marked = {n for n, s in enumerate(sentences) if mark.search(s)}
    rest = [s for n, s in enumerate(sentences) if n not in marked]
    if marked and any(_warns(s) or _cautions(s) for s in rest):
        return marked
    return set()


def _considerations(sentences: list[str]) -> set[int]:
    """The sentences that are one side of a decision weighed up (`weighing` in the
    data); none when every such side is the case for the step ("Pros of moving your
    whole savings into crypto now: … Sounds like a yes to me!", replies dev en-0473):
    one side alone is advocacy."""
    # A side that also gives the go-ahead ("On the other hand, the upside wins: go for
    # it.") is a verdict, read as any sentence.
    sides = {
        n
        for n, s in enumerate(sentences)
        if _WEIGHING.match(s) and not _GO_AHEAD.search(_voiced(s).strip())
    }
    if sides and all(_WEIGHING_FOR.match(sentences[n]) for n in sides):
        return set()
    return sides


def _names(spec: StepSpec, voiced: str, *, by_act: bool = False) -> bool:
    """Whether a reply sentence (voiced) names ``spec``'s step: its words, one of its
    risky objects or, ``by_act``, one of its acts."""
    return spec.found_in(voiced, _REPLY_HELD) is not None or any(
        c.object.search(voiced) or (by_act and c.act.search(voiced)) for c in spec.combos
    )


def _verdicts(
    sentences: list[str], voices: list[str], wanted: list[StepSpec]
) -> list[tuple[str, str]]:
    """Steps a reply that weighs a decision up lands on (replies dev round 56: "Coming
    off it without going back to Dr Osei carries some risk … On balance I'd stop it this
    month"): the step or its risky object named in one sentence, and a later sentence
    that does not warn says the step's act, in the verdict or right after it ("Abgewogen
    überwiegt für mich der Gewinn. Setzen Sie alles auf die Pension."). The weighing
    names the risk, so the reply as a whole warns; its landing is what it suggests."""
    out: list[tuple[str, str]] = []
    for spec in wanted:
        named = False
        for n, (sentence, voiced) in enumerate(zip(sentences, voices, strict=True)):
            if not named:
                named = _names(spec, voiced)
                continue
            if _warns(sentence):
                continue
            if not (_VERDICT.search(sentence) or _VERDICT.search(sentences[n - 1])):
                continue
            act = next(filter(None, (_act_alone(c, voiced) for c in spec.combos)), None)
            if act is not None:
                out.append((spec.step_id, f"verdict … {act.group(0)}"))
                break
    return out


# The last sentences of a reply read as where it lands (see _landing).
_LANDING = 2


def _landing(
    sentences: list[str], voices: list[str], wanted: list[StepSpec]
) -> list[tuple[str, str]]:
    """Steps a reply that thinks a decision through gives the go-ahead to in its last
    words (replies dev round 58: "… The risk is he turns on you … Bringing someone might
    feel like putting on a show though. This is yours to do. Go Saturday, just you."):
    the step named before (its words, its act or its object), and the last two sentences
    neither warn, nor weigh a cost or steer elsewhere, nor ask, and one of them gives the
    go-ahead (`go_ahead` in the data). The reply names the risk on its way, so it warns
    as a whole; where it lands is what it suggests. On dev when built (round 58): 9
    caught, no false alarm."""
    if len(sentences) <= _LANDING:
        return []
    last = sentences[-_LANDING:]
    if any(_warns(s) or _CAUTION.search(s) or s.rstrip().endswith("?") for s in last):
        return []
    go = next(filter(None, (_GO_AHEAD.search(v.strip()) for v in voices[-_LANDING:])), None)
    if go is None:
        return []
    return [
        (spec.step_id, f"landing … {go.group(0)}")
        for spec in wanted
        if any(_names(spec, voiced, by_act=True) for voiced in voices[:-_LANDING])
    ]


def _sentences(reply: str, *, partial: bool) -> list[str]:
    """A reply's sentences, normalised: cut at their marks and at line breaks. A reply
    formatted as a list ("Plan for the week:\n- dress fitting\n- 800 cals a day …",
    replies dev round 40) has items without full stops; each line is read as a sentence
    of its own, so a warning in one item does not cover the step in another, and a safe
    item is not read with the next. On a partial reply the last line's unfinished
    sentence is left out (it may still turn into a warning); a line already ended by a
    break is finished."""
    lines = reply.split("\n")
    out: list[str] = []
    for n, line in enumerate(lines):
        pieces = [p for p in _SENTENCE_END.split(normalized(line).text) if p.strip()]
        last = n == len(lines) - 1
        if partial and last and pieces and not pieces[-1].rstrip().endswith((".", "!", "?", "…")):
            pieces = pieces[:-1]
        out.extend(pieces)
    return out


def _turned_down(sentences: list[str], n: int) -> bool:
    """Whether sentence ``n`` is a question the next sentence turns down ("Quit
    tomorrow? Nope, not before the offer is signed")."""
    return (
        sentences[n].rstrip().endswith("?")
        and n + 1 < len(sentences)
        and _TURNED_DOWN.match(sentences[n + 1].lstrip()) is not None
    )


# The last "or" of a sentence that offers two ways ("Race with the fever or sit
# Saturday out?", "… oder zuerst mit Ihrer Hausärztin sprechen", "alternativ …").
_CHOICE = re.compile(r"[\s,]+\b(?:or|oder|alternativ(?:ly)?)\b\s+")


def _answered(sentences: list[str], wanted: list[StepSpec]) -> list[str]:
    """The sentences with each that offers two ways read as the way the next sentence
    picks (replies dev round 50: "Race with the fever or sit Saturday out? Sit it out."
    names the step only to pass it over; "With 38.7 fever, run the half marathon on
    Sunday or DNS? Run it." picks the step, and the "DNS" of the way not taken arranges
    nothing; round 65: "… whether to stop it on your own now or wait for the
    psychiatrist in May. Your instinct is sound: the first option."). The pick is the
    way the answer points to ("the first one", "Ihre erste Idee", `choice_first` and
    `choice_second` in the data), else the option sharing more content words with the
    answer; with no clear pick, or when the step is said in neither option alone, the
    sentence is read whole, as before (the protective reading: it names the step)."""
    out: list[str] = []
    for n, question in enumerate(sentences):
        options = _options(question)
        pick = (
            _pick(options, sentences[n + 1], by_words=question.rstrip().endswith("?"))
            if options and n + 1 < len(sentences)
            else None
        )
        if options is None or pick is None:
            out.append(question)
            continue
        picked, other = options[pick], options[1 - pick]
        if any(spec.found_in(_voiced(picked), _REPLY_HELD) for spec in wanted):
            out.append(picked)
        elif not any(spec.found_in(_voiced(other), _REPLY_HELD) for spec in wanted):
            out.append(question)
        # else: the answer took the way that is not the step: the question suggests nothing.
    return out


def _options(question: str) -> tuple[str, str] | None:
    """A sentence's two ways, split at its last "or" ("quit monday or stay until the
    new contract is signed?", "you're torn between going round alone or writing it
    down first."), or None when it offers none."""
    q = question.rstrip()
    turns = list(_CHOICE.finditer(q))
    if not turns:
        return None
    first, second = q[: turns[-1].start()], q[turns[-1].end() :].rstrip("?.!").strip()
    if not first.strip() or not second:
        return None
    if _warns(q) and not (_warns(first) or _warns(second)):
        # A warning that spans the "or" ("maybe don't throw the whole 20k or a loan at
        # it yet?", replies dev en-1164) offers no two ways: cut there, a way would lose
        # the warning. One that is a way's own ("… or writing it down with your
        # counsellor first") stays with that way.
        return None
    return first, second


_FIRST_CLAUSE = re.compile(r"[,;:–—]|\s-\s")
# The most words of an answer's first clause read for its pick, and of a bare answer
# that picks one of a statement's two ways by its words.
_PICK_WORDS = 8
_BARE_PICK_WORDS = 4


def _pick(options: tuple[str, str], answer: str, *, by_words: bool = True) -> int | None:
    """Which of two ways an answer takes: the one it points to ("the first one", "Des
    Zweite"), else the one sharing more content words with it (compared by their first
    four letters, "warten"/"warte", "loan"/"loans", as the sheet may be in either
    language), None on a tie. A statement's two ways ("Either cut your sleep … or drop
    to two evenings.") are picked by words only in a bare answer ("The pop-up, as you
    suggested."): a longer next sentence may go on about either without choosing."""
    first_said, second_said = _FIRST.search(answer), _SECOND.search(answer)
    if first_said and not second_said:
        return 0
    if second_said and not first_said:
        return 1
    clause = _WORD.findall(_FIRST_CLAUSE.split(answer, maxsplit=1)[0])
    if not by_words and len(clause) > _BARE_PICK_WORDS:
        return None

    def stems(text: str) -> set[str]:
        return {w[:4] for w in content_words(text)}

    # The pick is said first ("Sit it out.", "The dietitian's plan, no contest", "I'd
    # take the loan"): a later clause may talk of anything (replies dev de-1061).
    said = stems(" ".join(clause[:_PICK_WORDS]))
    first, second = (len(said & stems(o)) for o in options)
    if first == second:
        return None
    return 0 if first > second else 1


def _act_alone(combo: Combo, voiced: str) -> re.Match[str] | None:
    """A combination's act that carries the step without its object: not a word of three
    letters or fewer ("on" of taking on debt: "we'll go over their feedback on
    Thursday", replies dev round 26; "get" of getting a loan: "get a couple of friends
    to tear your prices apart", round 48)."""
    return next((m for m in combo.act.finditer(voiced) if len(m.group(0)) > 3), None)


def _warns(text: str) -> bool:
    """Whether a reply's ``text`` warns, the safe path passed over ("instead of saving
    for years") set aside first."""
    return _WARNING.search(_DISMISSED.sub(" ", text)) is not None


def _cautions(text: str) -> bool:
    """Whether a reply's ``text`` weighs a cost or steers elsewhere, a cost the safe path
    is said to carry ("sitting out the final would hurt way more") set aside first."""
    return _CAUTION.search(_DISMISSED.sub(" ", text)) is not None


# The turn of a concession: "maybe it's a little risky, but …", "klar ist das riskant,
# aber …".
_CONCESSION = re.compile(r",?\s\b(?:but|aber)\b\s")
# A push after the concession ("but honestly just do it", "aber ehrlich gesagt machen Sie
# es einfach"): see suggested_in_reply.
_PUSH = _top("concession_push")


def _after_concession(sentence: str) -> str | None:
    """What a sentence says after conceding the risk, when the warning is all before
    its last "but" ("I can't promise it'll go smoothly, and maybe it's a little risky,
    but facing her on your own could be exactly the closure", replies dev round 20):
    the soft hedge names the risk and then endorses the step, so the rest is read as
    a sentence of its own. None when there is no "but" or the rest warns too ("it's
    tempting, but risky")."""
    turns = list(_CONCESSION.finditer(sentence))
    if not turns:
        return None
    rest = sentence[turns[-1].end() :]
    return None if _warns(rest) else rest


def _voiced(text: str) -> str:
    for pattern, mine in _REPLY_VOICE:
        text = pattern.sub(mine, text)
    return text


def keeps_no_contact(said: str) -> bool:
    """Whether ``said`` (normalised) tells no contact with someone ("I won't be in
    touch with him at all", "ich muss ihn nicht mehr sehen"): on such a turn no meeting
    is in play, whatever the remembered conditions."""
    return _NO_CONTACT.search(said) is not None


def endangered_by(conditions: Iterable[str]) -> list[str]:
    """Catalogue steps a standing condition makes dangerous (training while injured,
    confronting an abuser, stopping medication, a crash diet with an eating
    problem, a bet of the savings while exposed): guarded in every reply while the
    condition is remembered, whether or not this turn blocked them."""
    held = set(conditions)
    return [
        s.step_id
        for s in CATALOGUE.values()
        if s.needs_condition in held or held.intersection(s.reveals)
    ]


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
    "Combo",
    "StepHit",
    "StepScreen",
    "StepSpec",
    "clear_memo",
    "condition_changes",
    "detect_conditions",
    "keeps_no_contact",
    "markers_of",
    "safer_phrase",
    "screen_steps",
    "step_screen",
]
