"""Risk read across the conversation, not one message at a time.

The crisis screen (coachbus.safety.screen) reads one message. Two kinds of risk never
show in one message:

* **An answer to our own question.** When a message is uncertain, the reply asks
  directly: "are you having thoughts of ending your life?"; a crisis reply ends with
  "are you safe right now?". The answer ("ja", "a bit, yeah", "😔") carries no risk
  word, so screened alone it is a normal turn. The question asked is therefore state
  (``SafetyState.open_check_in``), and the next message is read as its answer first.
* **WarningPattern signs that add up.** "Nothing matters much these days." → "I gave my
  guitar and my books to my sister." → "It'll all be sorted by the weekend.": each
  message alone is harmless or vague, together they are hopelessness, putting affairs
  in order and a decided time. Signs are kept with their time
  (``SafetyState.risk_cues``), decay, and a message that completes a warning pattern
  with one of its own signs escalates.

The patterns, answers, window and decay are data (``content/crisis/conversation.toml``,
with the clinical reasons beside them). Coach, Stability and the eval call
:func:`read_turn` with the same state and message and so get the same answer;
Stability alone folds the result into the state (:func:`fold_turn`), as the one
writer of the safety topic. The confidence of each outcome is measured on the
calibration split of the labelled conversations, like the message screen's
(coachbus.safety.calibration).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

from coachbus.contracts.payloads import (
    CheckInAnswer,
    CheckInQuestion,
    CrisisCategory,
    CrisisScreen,
    Language,
)
from coachbus.contracts.state import (
    MAX_CHECK_INS,
    MAX_RISK_CUES,
    ClosedCheckIn,
    OpenCheckIn,
    RiskCue,
    SafetyState,
    TurnReading,
)
from coachbus.learned import shipped
from coachbus.normalize import NormalizedText, fold_pattern, normalized
from coachbus.safety.calibration import CLEAN, LEARNED, conversation_confidence
from coachbus.safety.screen import (
    CRISIS_RANK,
    LEARNED_MIN_WORDS,
    Finding,
    assess,
    is_crisis,
    needs_check_in,
)

# Families a single-message crisis adds to the trajectory, by the rule kind that fired
# (coachbus.safety.rulebook): every suicidal or self-harm crisis is a sign of its own
# ("crisis"), and a burden, hopelessness or farewell rule is also a sign of that family.
_KIND_FAMILY = {"burden": "burden", "hopelessness": "hopelessness", "farewell": "farewell"}
_SIGN_CATEGORIES = (CrisisCategory.SUICIDAL_IDEATION, CrisisCategory.SELF_HARM)
# The crisis replies that end with "are you safe right now?" (coachbus.safety.replies):
# a medical emergency's reply asks nothing back.
_ASKS_SAFETY = (CrisisCategory.SUICIDAL_IDEATION, CrisisCategory.SELF_HARM, CrisisCategory.ABUSE)
_EVIDENCE_CHARS = 80
# The label of the conversation reader's learned reader of when our reply asks
# (content/learned/openers.json, trained by `coachbus eval crisis --conversations
# --train` on the dev splits): a message its writers had us ask the direct question.
ASK = "ask"
# The outcome of a turn asked about on that reader's read.
LEARNED_ASK = "learned_ask"


@dataclass(frozen=True, slots=True)
class WarningPattern:
    name: str
    needs: tuple[frozenset[str], ...]
    plan: bool
    why: str

    def complete(self, present: set[str]) -> bool:
        return all(group & present for group in self.needs)

    def completed_by(self, present: set[str], own: set[str]) -> bool:
        """Complete, and one of this message's own signs fills one of its groups."""
        return self.complete(present) and any(group & own for group in self.needs)


@dataclass(frozen=True, slots=True)
class ConversationBook:
    """``content/crisis/conversation.toml``, compiled: how answers are read, the
    warning-sign cues and patterns, how long signs count."""

    window: timedelta
    max_asks: int
    affirm_start: re.Pattern[str]
    affirm_half: re.Pattern[str]
    affirm_word: re.Pattern[str]
    affirm_anywhere: re.Pattern[str]
    affirm_emoji: tuple[str, ...]
    deny_start: re.Pattern[str]
    deny_hedged: re.Pattern[str]
    explained: re.Pattern[str]
    coaching_yes: re.Pattern[str]
    unsafe_start: re.Pattern[str]
    unsafe_half: re.Pattern[str]
    unsafe_anywhere: re.Pattern[str]
    safe_start: re.Pattern[str]
    safe_said: re.Pattern[str]
    safe_hedged: re.Pattern[str]
    calm: re.Pattern[str]
    unsafe_emoji: tuple[str, ...]
    cues: dict[str, re.Pattern[str]]
    harmless: re.Pattern[str]
    half_life_hours: float
    present_at: float
    warnings: tuple[WarningPattern, ...]
    # Our questions as the model double-checking a turn is told them (see
    # coachbus.safety.model), by the question our last reply asked.
    model_questions: dict[str, str]


def _either(patterns: list[str], *, start: bool = False) -> re.Pattern[str]:
    body = "|".join(f"(?:{fold_pattern(p)})" for p in patterns)
    # An answer starts after any leading punctuation, emoji or filler ("hmm", "uh").
    lead = (
        r"^[\W_]*(?:(?:hm+|mm+|uh+|um+|ehm|aeh+|oh|well|naja|na ja|also|ok(?:ay)?|haha|lol|ach)"
        r"[\W_]+)?"
        if start
        else ""
    )
    return re.compile(f"{lead}(?:{body})")


# A half answer counts as the answer when it is the whole first clause ("maybe.",
# "schon, irgendwie") or the message is this short.
_SHORT_ANSWER_WORDS = 5
# Where a yes-word still answers the question: the first words of the message, where
# people put the answer even after a hedge; further on it is about something else.
_HEAD_WORDS = 15
_CLAUSE_END = re.compile(r"\s*(?:[.!?,;:…)-]|$)")


def _half_answer(rx: re.Pattern[str], said: str, short: bool) -> bool:
    """A half answer ("maybe", "schon") at the start, as the answer itself: the whole
    first clause, or a short message ("Maybe I should try mornings" moves on)."""
    found = rx.search(said)
    return found is not None and (short or _CLAUSE_END.match(said, found.end()) is not None)


def parse_conversation_book(text: str) -> ConversationBook:
    raw: dict[str, Any] = tomllib.loads(text)
    suicide = raw["answers"]["suicide"]
    safety = raw["answers"]["safety"]
    cues = dict(raw["cues"])
    harmless = cues.pop("harmless")
    return ConversationBook(
        window=timedelta(minutes=int(raw["check_in"]["window_minutes"])),
        max_asks=int(raw["check_in"]["max_asks"]),
        affirm_start=_either(suicide["affirm_start"], start=True),
        affirm_half=_either(suicide["affirm_half"], start=True),
        affirm_word=_either(suicide["affirm_word"]),
        affirm_anywhere=_either(suicide["affirm_anywhere"]),
        affirm_emoji=tuple(suicide["affirm_emoji"]),
        deny_start=_either(suicide["deny_start"], start=True),
        deny_hedged=_either(suicide["deny_hedged"], start=True),
        explained=_either(suicide["explained"]),
        coaching_yes=_either(suicide["coaching_yes"]),
        unsafe_start=_either(safety["unsafe_start"], start=True),
        unsafe_half=_either(safety["unsafe_half"], start=True),
        unsafe_anywhere=_either(safety["unsafe_anywhere"]),
        safe_start=_either(safety["safe_start"], start=True),
        safe_said=_either(safety["safe_said"]),
        safe_hedged=_either(safety["safe_hedged"]),
        calm=_either(safety["calm"]),
        unsafe_emoji=tuple(safety["unsafe_emoji"]),
        cues={family: _either(list(patterns)) for family, patterns in cues.items()},
        harmless=_either(harmless),
        half_life_hours=float(raw["decay"]["half_life_hours"]),
        present_at=float(raw["decay"]["present_at"]),
        warnings=tuple(
            WarningPattern(
                name=w["name"],
                needs=tuple(frozenset(g) for g in w["needs"]),
                plan=bool(w["plan"]),
                why=w["why"],
            )
            for w in raw["warning"]
        ),
        model_questions={str(k): str(v) for k, v in raw["model"]["question"].items()},
    )


@cache
def conversation_book() -> ConversationBook:
    path = resources.files("coachbus.content").joinpath("crisis/conversation.toml")
    return parse_conversation_book(path.read_text("utf-8"))


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class Reading:
    """One message read in its conversation."""

    screen: CrisisScreen  # the turn's screen: the message's, raised by the conversation
    message_screen: CrisisScreen  # the message alone (what the screen said before)
    answered: CheckInAnswer | None  # how it answered the open question, if one was open
    question: CheckInQuestion | None  # the question that was open
    signs: tuple[tuple[str, str], ...]  # (family, evidence) this message shows
    warning: str | None  # the warning pattern this message completed
    outcome: str  # the calibration outcome ("message", "check_in:affirmed", …)
    # A no that explained the words that made us ask ("I meant my thesis").
    explained: bool = False


# Families that, in an answer, show risk of their own: a time, a means, a farewell.
_PLAN_FAMILIES = frozenset({"time", "means"})
_RISK_FAMILIES = frozenset(
    {"time", "means", "farewell", "hopelessness", "burden", "crisis", "thoughts"}
)
# Signs that keep a "no" to our check-in from being believed when the answer shows
# them itself ("no. nothing is going to change anyway"): the no is read as unclear
# and asked again (or, with a time, a means or a farewell, as a yes). An explanation
# ("no, I meant the training plan is pointless") is believed before this applies.
_NOT_A_NO = frozenset({"time", "means", "farewell", "hopelessness", "burden"})
# Signs a harmless reason explains (a move explains giving things away and a date).
_EXPLAINABLE = frozenset({"farewell", "time", "day", "ready"})
# How many turns around a harmless reason its explanation reaches.
_HARMLESS_REACH = 3
HARMLESS = "harmless"


def classify_answer(
    question: CheckInQuestion,
    text: str | NormalizedText,
    book: ConversationBook | None = None,
    signs: Sequence[tuple[str, str]] | None = None,
) -> CheckInAnswer:
    """How ``text`` answers ``question``: the protective reading where it is unclear
    whether the person said yes ("maybe" to our check-in is yes, "I don't know" to "are
    you safe?" is not safe, a "no" that names a day or a means is not believed)."""
    book = book or conversation_book()
    message = normalized(text)
    said = message.text.strip()
    families = {f for f, _ in (signs if signs is not None else signs_in(message, book))}
    risky = bool(families & _RISK_FAMILIES)
    short = len(re.findall(r"\w+", said)) <= _SHORT_ANSWER_WORDS
    # An explanation restates the words it explains ("I meant there's no point in this
    # training plan"): hopelessness words in it do not make it risky.
    # A harmless reason in the answer ("the tiler comes Friday, then it's all done")
    # explains the words that made us ask just as "I meant" does, unless the answer
    # names a day, a farewell or a means beside it ("after my daughter's birthday on
    # Tuesday it's over" is no explanation).
    if book.explained.search(said) and not families & (_RISK_FAMILIES - {"hopelessness"}):
        return "safe" if question == "safety" else "denied"
    yes_first = book.affirm_start.search(said) is not None
    if HARMLESS in families and not risky and (question == "safety" or not yes_first):
        # Not behind a yes to our suicide question ("Yes. I've decided it'll be after
        # my sister's wedding", conversations dev round 13): the wedding dates the
        # plan, it explains nothing.
        return "safe" if question == "safety" else "denied"
    if question == "safety":
        if book.unsafe_anywhere.search(said):
            return "unsafe"
        if book.calm.search(said):
            return "unclear"
        if book.safe_said.search(said):
            return "safe"
        if book.unsafe_start.search(said) or any(e in said for e in book.unsafe_emoji):
            return "unsafe"
        if _half_answer(book.unsafe_half, said, short):
            return "unsafe"
        if risky or families & {"day", "ready"} or book.affirm_anywhere.search(said):
            return "unsafe"
        if book.safe_hedged.search(said):
            return "unclear"
        if book.safe_start.search(said):
            return "safe"
        return "unclear"
    if book.coaching_yes.search(said) and not risky and not book.affirm_anywhere.search(said):
        # "yes please, let's do that" accepts a coaching offer: nobody answers "are you
        # having thoughts of ending your life?" with it. Not believed as a yes or a no:
        # asked again.
        return "unclear"
    if book.affirm_anywhere.search(said) or book.affirm_start.search(said):
        return "affirmed"
    if _half_answer(book.affirm_half, said, short):
        return "affirmed"
    # The first word is the half-answer rule's above ("Maybe I should try mornings"
    # moves on); after it, a yes-word answers even behind a hedge.
    if book.affirm_word.search(" ".join(said.split()[1:_HEAD_WORDS])):
        return "affirmed"
    if book.deny_hedged.search(said):
        # "not really" to "are you having thoughts of ending your life?": a minimised
        # answer, asked again rather than closed as a no (see deny_hedged).
        return "unclear"
    if book.deny_start.search(said) and not families & _NOT_A_NO:
        return "denied"
    if families & (_PLAN_FAMILIES | {"farewell", "ready"}):
        # A day or a means given in answer to "are you having thoughts of ending your
        # life?" answers it: yes, with a plan; so does a farewell act (giving things
        # away, a goodbye), preparatory behaviour on the C-SSRS, and everything said to
        # be ready ("hab alles, was ich brauch"; conversations dev round 11).
        return "affirmed"
    # An emoji answer: only where no word of the answer says otherwise.
    if any(e in said for e in book.affirm_emoji) and len(re.findall(r"\w+", said)) <= 3:
        return "affirmed"
    return "unclear"


def _sudden_calm(asked: OpenCheckIn, message: NormalizedText, book: ConversationBook) -> bool:
    """A calm said in answer to our crisis reply's "are you safe right now?"."""
    return asked.question == "safety" and bool(book.calm.search(message.text))


def signs_in(
    text: str | NormalizedText, book: ConversationBook | None = None
) -> list[tuple[str, str]]:
    """The warning-sign families ``text`` shows, with the words that show them; a
    harmless reason (a move, a wedding) takes out its own farewell and time signs and
    is itself kept (family ``harmless``) to explain those of the messages around it."""
    book = book or conversation_book()
    said = normalized(text).text
    out: list[tuple[str, str]] = []
    reason = book.harmless.search(said)
    for family, rx in book.cues.items():
        if reason is not None and family in _EXPLAINABLE:
            continue
        m = rx.search(said)
        if m is not None:
            out.append((family, m.group(0)[:_EVIDENCE_CHARS]))
    if reason is not None:
        out.append((HARMLESS, reason.group(0)[:_EVIDENCE_CHARS]))
    return out


def _weight(cue: RiskCue, now: datetime, book: ConversationBook) -> float:
    hours = max(0.0, (now - cue.at).total_seconds() / 3600)
    return float(0.5 ** (hours / book.half_life_hours))


def present_families(
    state: SafetyState | None,
    now: datetime,
    book: ConversationBook | None = None,
    own: Sequence[tuple[str, str]] = (),
) -> set[str]:
    """The families whose recent signs still weigh enough to count, this message's
    ``own`` signs included; a farewell or time sign near a harmless reason does not."""
    book = book or conversation_book()
    turn = (state.turn_count if state is not None else 0) + 1
    cues = [
        (c.family, c.turn)
        for c in (state.risk_cues if state is not None else [])
        if _weight(c, now, book) >= book.present_at
    ]
    cues += [(f, turn) for f, _ in own]
    reasons = [t for f, t in cues if f == HARMLESS]
    return {
        f
        for f, t in cues
        if f != HARMLESS
        and not (f in _EXPLAINABLE and any(abs(t - r) < _HARMLESS_REACH for r in reasons))
    }


def open_question(
    state: SafetyState | None, now: datetime, book: ConversationBook | None = None
) -> OpenCheckIn | None:
    """The question the next message answers: open, and asked within the window."""
    book = book or conversation_book()
    if state is None or state.open_check_in is None:
        return None
    asked = state.open_check_in
    return asked if now - asked.asked_at <= book.window else None


def read_turn(
    state: SafetyState | None,
    text: str | NormalizedText,
    turn_id: str,
    now: datetime,
    *,
    book: ConversationBook | None = None,
) -> Reading:
    """Read one message in its conversation (pure: the state is not changed).

    ``state`` is the user's safety state before this turn; a state that already
    applied this turn (a reader whose view is ahead) hands back the reading it was
    folded with."""
    book = book or conversation_book()
    message = normalized(text)
    found = assess(message)
    message_screen = found.screen()
    if state is not None and state.last_reading is not None:
        last = state.last_reading
        if last.turn_id == turn_id and state.has_applied(turn_id):
            # Its signs were folded in already: a reader needs the screen and answer.
            return Reading(
                last.screen,
                message_screen,
                last.answered,
                last.screen.question,
                (),
                None,
                "replayed",
            )

    signs = _own_signs(found.category, found.outcome, message_screen, message, book)
    families = {f for f, _ in signs}
    asked = open_question(state, now, book)
    answered: CheckInAnswer | None = None
    if asked is not None:
        answered = classify_answer(asked.question, message, book, signs)
    if asked is not None and answered in ("affirmed", "unsafe"):
        screen, outcome = _answered_yes(asked, answered, message_screen, families)
        question = asked.question
        return Reading(screen, message_screen, answered, question, tuple(signs), None, outcome)

    explained = answered in ("denied", "safe") and (
        bool(book.explained.search(message.text)) or HARMLESS in families
    )
    screen = message_screen
    warning: WarningPattern | None = None
    outcome = "message"
    # A denial is believed for this turn: the person just told us no.
    if answered not in ("denied", "safe"):
        present = present_families(state, now, book, signs)
        own = families & present
        warning = next((w for w in book.warnings if w.completed_by(present, own)), None)
    if warning is not None:
        if is_crisis(message_screen):
            if warning.plan and not message_screen.plan:
                screen = message_screen.model_copy(update={"plan": True})
        else:
            # One calibration bucket for every pattern: each fires a few times on the
            # calibration split, too few for a rate of its own.
            outcome = "trajectory"
            screen = CrisisScreen(
                category=CrisisCategory.SUICIDAL_IDEATION,
                confidence=conversation_confidence(outcome),
                matched=[f"warning signs: {warning.name}", *(e for _, e in signs)][:6],
                escalated=True,
                basis="trajectory",
                plan=warning.plan,
            )
    elif asked is not None and answered == "unclear" and not is_crisis(message_screen):
        outcome = "check_in:unclear"
        if _sudden_calm(asked, message, book):
            # Asked afresh, and about the thoughts themselves: "are you safe?" again
            # would take the calm at its word (see `calm` in the data).
            screen = CrisisScreen(
                category=CrisisCategory.NONE,
                confidence=conversation_confidence(outcome),
                matched=["a sudden calm after our crisis reply"],
                escalated=True,
                uncertain=True,
                basis="check_in_answer",
            )
        elif asked.asks < book.max_asks:
            screen = CrisisScreen(
                category=CrisisCategory.NONE,
                confidence=conversation_confidence(outcome),
                matched=[f"no clear answer to our {asked.question} question"],
                escalated=True,
                uncertain=True,
                basis="check_in_answer",
                question=asked.question,
            )
        # Asked enough times: no third question. The review stays open from the asks
        # before; the reply is a caring one.
    elif (
        asked is None
        and not is_crisis(message_screen)
        and _asks_for(families, state, now, book, message)
    ):
        # Hopelessness or feeling a burden in words no rule reads, or a major loss
        # with a low state: ask directly, as the screen does for its own risk cues.
        # Asking costs little, and it is what turns the next "ja" into an answer we
        # can read.
        outcome = "sign"
        screen = CrisisScreen(
            category=CrisisCategory.NONE,
            confidence=conversation_confidence(outcome),
            matched=[f"{f}: {e}" for f, e in signs if f in _ASKING_FAMILIES],
            escalated=True,
            uncertain=True,
        )
    elif asked is None and (read := _asks_learned(found, message)) is not None:
        # A heavy message in words no rule reads ("14 years there and they let me
        # go on a zoom call, my wife thinks I'm at work"): the writers of the
        # conversations corpus had a careful coach ask the direct question here.
        # Asked, never a crisis or a sign on n-grams alone (like the message
        # screen's learned reader, whose corpus calls such a week "no crisis").
        # Not precise (out of fold on dev about 0.4 of its asks were the writers'
        # own; docs/eval.md): a check-in asked of someone who did not need it
        # costs a question, one not asked leaves the next "yes" unread.
        outcome = LEARNED_ASK
        screen = CrisisScreen(
            category=CrisisCategory.NONE,
            confidence=conversation_confidence(outcome),
            matched=[read],
            escalated=True,
            uncertain=True,
        )
    if answered == "denied" and explained and not is_crisis(screen) and screen.uncertain:
        # "No, I meant the physio exercises feel pointless": the risk words that
        # remain are the ones the person just explained. Believed, like the no.
        screen = screen.model_copy(update={"uncertain": False, "escalated": False})
    if answered is not None and outcome == "message":
        outcome = f"check_in:{answered}"
        if not is_crisis(screen) and not screen.uncertain:
            # How often a believed "no" (or "I'm safe") was right, measured on the
            # conversations' calibration split: the router's bar then means what it
            # says for the answer, not for the bare message's clean bucket.
            screen = screen.model_copy(update={"confidence": conversation_confidence(outcome)})
    return Reading(
        screen,
        message_screen,
        answered,
        asked.question if asked is not None else None,
        tuple(signs),
        warning.name if warning is not None else None,
        outcome,
        explained=explained,
    )


# The families that make the reply ask our check-in: hopelessness or a burden alone;
# two major losses told together; one only with a low state (in this message, or the
# loss a recent message told: "my wife left" yesterday, "the flat is so quiet" today);
# a means at hand only with a loss or a low state (a rope bought for a climbing
# course asks nothing).
_ASKING_FAMILIES = ("hopelessness", "burden", "thoughts", "admission", "loss", "low", "means")


def _learned_may_read(found: Finding, message: NormalizedText) -> bool:
    """Whether the learned reader of when we ask may read ``message``: the screen
    found it clean, no guard set words aside, and it is long enough to carry evidence."""
    return (
        found.outcome == CLEAN
        and not found.set_aside
        and len(message.text.split()) >= LEARNED_MIN_WORDS
    )


# Any instant: a first message is read without a state, so no window depends on it.
_FIRST_READ_AT = datetime(2026, 1, 1, tzinfo=UTC)


def left_to_learned(text: str | NormalizedText, book: ConversationBook | None = None) -> bool:
    """Whether the first message of a conversation is one that only the learned reader
    of when we ask decides: the screen and every rule of the conversation reader saw
    nothing in it (no crisis, no sign that asks, no warning pattern) and the reader
    may read it. The messages on which that reader's precision is measured when it
    is trained (`coachbus eval crisis --conversations --train`): on the others the
    rules have decided before it is asked."""
    message = normalized(text)
    if not _learned_may_read(assess(message), message):
        return False
    return read_turn(None, message, "first", _FIRST_READ_AT, book=book).outcome in (
        "message",
        LEARNED_ASK,
    )


def _asks_learned(found: Finding, message: NormalizedText) -> str | None:
    """The learned read that our reply asks about a message the screen found clean
    (its evidence), or None: too short, words set aside by a guard, no reader shipped
    or a read under its bar."""
    if not _learned_may_read(found, message):
        return None
    reader = shipped("openers")
    if reader is None or reader.probabilities(message.text)[ASK] < reader.bar:
        return None
    return f"learned: {', '.join(reader.evidence(message.text, ASK))}"


def _distinct(family: str, message: NormalizedText, book: ConversationBook) -> int:
    """How many signs of ``family`` ``message`` tells ("exmatrikuliert, und meine
    Freundin hat Schluss gemacht" is two losses), counted apart only where they are
    different words."""
    rx = book.cues.get(family)
    if rx is None:
        return 0
    return len({m.group(0) for m in rx.finditer(message.text)})


def _asks_for(
    families: set[str],
    state: SafetyState | None,
    now: datetime,
    book: ConversationBook,
    message: NormalizedText,
) -> bool:
    if families & {"hopelessness", "burden", "thoughts", "admission"}:
        # Thoughts of an unnamed "it" that come back ("ja, ich denke oft daran in der
        # Nacht"), or an admission of how often ("more than I'd like to admit"), are
        # asked about like hopelessness: the direct question is how a clinician learns
        # what "it" is, and a coach who meant something else answers it in a word.
        return True
    if "loss" in families and _distinct("loss", message, book) >= 2:
        # Losses piling up in one message (the job and the flat, the course and the
        # partner on the same day): the risk factor the screening notes name
        # first, with the direct question after it.
        return True
    if "low" in families and _distinct("low", message, book) >= 2:
        # Several signs of a low state in one message (no sleep, no appetite, not
        # leaving the flat, everything grey): the cluster of depressive symptoms
        # after which the screening notes ask the direct question, even with no
        # loss told. Protective: one sign alone is ordinary talk, two are asked.
        return True
    if not families & {"low", "means"}:
        return False
    # A means at hand ("the old shotgun is still in the cabinet", tablets put aside)
    # with a loss or a low state is access to means in distress: asked about at once.
    distress = {"loss", "low"} if "means" in families else {"loss"}
    seen = families | present_families(state, now, book)
    return bool(seen & distress)


def _own_signs(
    category: CrisisCategory,
    outcome: str,
    screen: CrisisScreen,
    message: NormalizedText,
    book: ConversationBook,
) -> list[tuple[str, str]]:
    signs = signs_in(message, book)
    evidence = ", ".join(screen.matched)[:_EVIDENCE_CHARS]
    if category in _SIGN_CATEGORIES:
        signs.append(("crisis", evidence))
        family = _KIND_FAMILY.get(outcome)
        if family is not None and all(f != family for f, _ in signs):
            signs.append((family, evidence))
    elif needs_check_in(screen) and outcome != LEARNED:
        # Risk words no rule could read: what made us ask. A sign until denied.
        # (Not the learned reader's read: its n-grams are the words that already
        # gave their own signs, "letters" a farewell; counted twice, one message
        # would complete a warning pattern on its own.)
        signs.append(("check_in", evidence))
    return signs


def _answered_yes(
    asked: OpenCheckIn,
    answered: CheckInAnswer,
    message_screen: CrisisScreen,
    families: set[str],
) -> tuple[CrisisScreen, str]:
    """The crisis a yes to our check-in (or "not safe" after a crisis reply) is."""
    outcome = f"check_in:{answered}"
    category = (
        asked.category
        if answered == "unsafe" and asked.category is not CrisisCategory.NONE
        else CrisisCategory.SUICIDAL_IDEATION
    )
    # Yes, with a way, a means or a time: C-SSRS level 5 (critical). "Not safe right
    # now" after a crisis reply is critical too: the person told us so.
    # In answer to our question any day or readiness is a time: "yes, this weekend".
    plan = (
        answered == "unsafe"
        or bool(families & (_PLAN_FAMILIES | {"day", "ready"}))
        or message_screen.plan
    )
    if is_crisis(message_screen) and CRISIS_RANK[message_screen.category] > CRISIS_RANK[category]:
        # The message names a more urgent crisis of its own: that one leads.
        return message_screen.model_copy(update={"plan": plan}), "message"
    said = "not safe" if answered == "unsafe" else "yes"
    screen = CrisisScreen(
        category=category,
        confidence=conversation_confidence(outcome),
        matched=[f"answered {said} to our {asked.question} question"],
        escalated=True,
        basis="check_in_answer",
        plan=plan,
    )
    return screen, outcome


# --------------------------------------------------------------------------- folding


def fold_turn(
    state: SafetyState,
    reading: Reading,
    final: CrisisScreen,
    *,
    turn: int,
    turn_id: str,
    language: Language,
    now: datetime,
    book: ConversationBook | None = None,
) -> None:
    """Fold one turn into the (copied) state: close the question it answered, keep
    its signs, and open the question this turn's reply asks.

    ``final`` is the turn's screen after every tier (the model may have settled an
    uncertain reading). Coach asks our check-in whenever the reading is uncertain, at
    once and before any model answers, so a check-in is recorded as open when either
    ``final`` or the reading asks it: the person saw the question either way."""
    book = book or conversation_book()
    asked = open_question(state, now, book)
    if state.open_check_in is not None and asked is None:
        _close(state, state.open_check_in.question, "expired", turn, now)
        state.risk_cues.append(
            RiskCue(family="check_in", turn=turn, at=now, evidence="check-in expired")
        )
    state.open_check_in = None
    if asked is not None and reading.answered is not None:
        if reading.answered == "denied":
            # Believed, and kept (check_ins). Our question no longer counts as a sign;
            # with an explanation ("I meant the job centre") neither do the words
            # that made us ask, only a crisis the message itself showed.
            keep = {"crisis"} if reading.explained else _RISK_FAMILIES | {HARMLESS}
            state.risk_cues = [
                c for c in state.risk_cues if c.turn != asked.turn or c.family in keep
            ]
        _close(state, asked.question, reading.answered, turn, now)
    for family, evidence in reading.signs:
        state.risk_cues.append(RiskCue(family=family, turn=turn, at=now, evidence=evidence))
    asking = crisis_question(final)
    if asking is not None:
        state.open_check_in = OpenCheckIn(
            question=asking,
            category=final.category,
            turn=turn,
            turn_id=turn_id,
            language=language,
            asked_at=now,
        )
    elif needs_check_in(final) or needs_check_in(reading.screen):
        asks = 1
        if (
            asked is not None
            and reading.answered == "unclear"
            and reading.screen.question == asked.question
        ):
            asks = asked.asks + 1
        state.open_check_in = OpenCheckIn(
            question=reading.screen.question or "suicide",
            category=CrisisCategory.NONE,
            turn=turn,
            turn_id=turn_id,
            language=language,
            asked_at=now,
            asks=asks,
        )
    # Drop what no longer weighs anything, and keep the record small.
    state.risk_cues = recent_signs(state, now, book)[-MAX_RISK_CUES:]
    state.last_reading = TurnReading(turn_id=turn_id, screen=final, answered=reading.answered)


def crisis_question(screen: CrisisScreen) -> CheckInQuestion | None:
    """The question the reply to a crisis ``screen`` asks back, which the person's
    next message answers: our check-in's after a burden or hopelessness message (the
    screen's ``asks``), "are you safe right now?" after the others, nothing after a
    medical emergency or when ``screen`` is no crisis."""
    if not is_crisis(screen) or screen.category not in _ASKS_SAFETY:
        return None
    if screen.asks == "suicide" and screen.category is CrisisCategory.SUICIDAL_IDEATION:
        return "suicide"
    return "safety"


def _close(
    state: SafetyState, question: CheckInQuestion, answer: Any, turn: int, now: datetime
) -> None:
    state.check_ins.append(ClosedCheckIn(question=question, answer=answer, turn=turn, at=now))
    del state.check_ins[:-MAX_CHECK_INS]


def recent_signs(
    state: SafetyState, now: datetime, book: ConversationBook | None = None
) -> list[RiskCue]:
    """The state's signs that still weigh enough to count, oldest first."""
    book = book or conversation_book()
    return [c for c in state.risk_cues if _weight(c, now, book) >= book.present_at]


__all__ = [
    "ASK",
    "HARMLESS",
    "LEARNED_ASK",
    "ConversationBook",
    "Reading",
    "WarningPattern",
    "classify_answer",
    "conversation_book",
    "crisis_question",
    "fold_turn",
    "left_to_learned",
    "open_question",
    "parse_conversation_book",
    "present_families",
    "read_turn",
    "recent_signs",
    "signs_in",
]
