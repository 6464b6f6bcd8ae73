"""The one reply checker: what makes a reply unfit to show, for Coach and Synth alike.

Coach checks its streamed reply (``partial=True`` while it grows) and Synth checks
its prose against the decision sheet; both call :func:`check_reply`, so a reply
one of them accepts the other does not reject for the same reason. What only one
of them knows stays with it (Synth's help lines on a crisis turn).

The du/Sie rule, in German only:

* a formal (Sie) reply has no du-form (du, dich, dein…, any case);
* an informal (du) reply has no capitalised Sie-form (Sie, Ihnen, Ihr…) that can
  only be the formal "you": a sentence-initial "Sie" or "Ihr" may as well be
  "she/they" or "her/their" ("Ihr Rat war gut" about the user's doctor), so it is
  not counted;
* quoted speech is the user's or someone else's words, not our address: what
  stands inside „…“, "…", “…”, «…» or »…« is not judged (a quoted „Sie schaffen
  das." in a du reply is fine, and so is a quoted „Du schaffst das“ in a Sie reply).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from coachbus.safety.steps import suggested_in_reply
from coachbus.text import (
    Language,
    Register,
    detect_language,
    find_markers,
    foreign_sentence,
    word_count,
)

# Words needed before the language of a partial reply can be judged.
LANGUAGE_AFTER_WORDS = 6

# Merge artefacts: what must never reach a user — our agents' names and labels,
# field names, JSON, placeholders. One list for every reply.
_ARTEFACTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:shadow|persona|plasticity|synth|coachbus)\b", re.I), "agent name"),
    # "stability" and "coach" are ordinary words ("a bit more stability at home", "your
    # coach at the club says"); flag them only as labels or speakers: followed by a colon
    # or by what an agent does ("Stability blocked …", "Coach thinks you should …",
    # "Coach meint: …"), not after "your", "my", "the" (replies dev round 42: ten good
    # replies with "stability" as a word were flagged, five labels were right).
    (
        re.compile(
            r"(?<!\byour )(?<!\bmy )(?<!\bthe )(?<!\bdein )(?<!\bmein )(?<!\bihr )"
            r"(?<!\bdeine )(?<!\bmeine )(?<!\bihre )(?<!\bder )(?<!\bdie )"
            r"\b(?:stability|coach)\b(?=\s*:|\s+(?:agent|says|said|thinks|notes|suggests|"
            r"recommends|blocked|flagged|found|meint|sagt|findet|empfiehlt|notiert)\b)",
            re.I,
        ),
        "agent label",
    ),
    (
        re.compile(
            r"\b[a-z]+_[a-z0-9_]+\b|\b(?:BFI-?10|JSON|payload|blackboard|decision sheet)\b",
            re.I,
        ),
        "field name",
    ),
    # OCEAN only as the acronym: "the ocean waits" is the sea (replies dev round 51).
    (re.compile(r"\bOCEAN\b"), "field name"),
    # "null" only as JSON has it (": null", "null]"): in German it is the number zero
    # ("von fünf Flaschen auf null", replies dev round 6).
    (re.compile(r"[{}]|\"\w+\"\s*:|:\s*null\b|\bnull\s*[\]}]"), "JSON fragment"),
    (re.compile(r"[\[\]<>]|\bTODO\b|\bN/A\b|\bTBD\b"), "bracketed marker"),
)

# Not the first part of a compound ("Du-Kultur", "Du-Form", replies dev de-1112): a
# word about the du, not an address.
_DU_FORMS = re.compile(r"\b(?:du|dich|dir|dein|deine|deinen|deinem|deiner|deines)\b(?!-\w)", re.I)
_SIE_FORMS = re.compile(r"\b(?:Sie|Ihnen|Ihr|Ihre|Ihren|Ihrem|Ihrer|Ihres)\b")
# What may stand right before a sentence-initial word: a sentence end, a colon, an
# opening quote or a dash (or nothing: the start of the reply).
_SENTENCE_OPENERS = frozenset('.!?:„"“”«»—–-')
# Quoted speech, closed. A partial reply may end inside a quote that is still open.
_QUOTED = re.compile(r'„[^“”"]*[“”"]|"[^"]*"|“[^”]*”|«[^»]*»|»[^«]*«')
_QUOTE_OPEN_AT_END = re.compile(r'[„"“«»][^„"“”«»]*$')


def _unquoted(text: str, *, partial: bool) -> str:
    """``text`` with quoted speech blanked out (same length, so positions hold)."""
    out = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
    if partial:
        out = _QUOTE_OPEN_AT_END.sub(lambda m: " " * len(m.group(0)), out)
    return out


def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in _SENTENCE_OPENERS


def register_problem(text: str, register: Register, *, partial: bool = False) -> str | None:
    """The du/Sie rule of a German reply (see the module doc); None if it holds."""
    plain = _unquoted(text, partial=partial)
    if register == "formal":
        du = _DU_FORMS.search(plain)
        return f"register: du-form in a Sie reply ({du.group(0)!r})" if du else None
    for m in _SIE_FORMS.finditer(plain):
        # Judged in the original text: the quote before a word opens a sentence.
        if not _sentence_initial(text, m.start()):
            return f"register: Sie-form in a du reply ({m.group(0)!r})"
    return None


def artefact_problems(text: str) -> list[str]:
    """Merge artefacts in ``text``, one problem per kind."""
    out: list[str] = []
    for rx, what in _ARTEFACTS:
        if any(f"({what})" in p for p in out):
            continue
        m = rx.search(text)
        if m:
            out.append(f"merge artefact ({what}): {m.group(0)!r}")
    return out


def check_reply(
    text: str,
    *,
    language: Language,
    register: Register,
    markers: Sequence[str] = (),
    never: Sequence[str] = (),
    min_words: int = 0,
    max_words: int | None = None,
    partial: bool = False,
) -> list[str]:
    """What is wrong with a reply; empty means it may be shown.

    ``never``: the catalogue steps the reply must not suggest, found in any wording
    (the step screen reads the reply; a sentence warning against a step may name
    it). ``markers``: bare phrases that must not appear at all.

    On a partial reply (still streaming) only what more text cannot undo is judged:
    a blocked step in a finished sentence, a marker, an artefact, the language once
    there are enough words to tell, the register. Length is judged on the whole reply.
    """
    out = [f"blocked step mentioned: {m!r}" for m in find_markers(text, list(markers))]
    out.extend(
        f"blocked step suggested: {step} ({words!r})"
        for step, words in suggested_in_reply(text, never, partial=partial)
    )
    out.extend(artefact_problems(text))
    words = word_count(text)
    if not partial or words >= LANGUAGE_AFTER_WORDS:
        # Quoted speech is someone's words ("„just do it“", a friend's English in a
        # German reply) and stays out of the language's count, unless it is most of it.
        own = _unquoted(text, partial=partial)
        lang = detect_language(own if word_count(own) >= LANGUAGE_AFTER_WORDS else text)
        if lang != language:
            out.append(f"wrong language: {lang}, expected {language}")
        else:
            # A reply in its language that switches for a sentence.
            switched = foreign_sentence(own, language)
            if switched is not None:
                out.append(f"wrong language: a sentence in {switched}, expected {language}")
    if language == "de":
        problem = register_problem(text, register, partial=partial)
        if problem is not None:
            out.append(problem)
    if not partial:
        if words < min_words:
            out.append(f"too short: {words} words, minimum {min_words}")
        if max_words is not None and words > max_words:
            out.append(f"too long: {words} words, maximum {max_words}")
    return out
