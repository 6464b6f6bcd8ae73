"""Coach's phrasing: short openers and one focused question, EN / DE-du / DE-Sie.

The sentences are data (services/coach/content/phrases.toml, beside the only code
that reads them), loaded once at import into Phrases and checked: every group is
present, and each sentence uses only the placeholders Coach fills there (see
coachbus.text.PLACEHOLDERS; ``Phrase.fill`` fills them and capitalises the first
letter).
"""

from __future__ import annotations

from coachbus import content as C
from coachbus.content.phrases import DOMAIN, NONE, keyed, phrase, variants
from coachbus.contracts.payloads import PatternClass
from coachbus.text import DOMAIN_ORDER, Phrase

_DOC = C.read("services.coach.content", "phrases.toml")
C.only(_DOC, _DOC.raw, ("open", "question", "risky", "post_crisis", "ordinal"), "")

# The openers, and the placeholders Coach fills in each: the domain label's forms, and
# the ordinal of the setback ({nth}) where a setback repeats.
_OPEN = {
    "progress": DOMAIN,
    "setback": DOMAIN,
    "setback_again": DOMAIN | {"nth"},
    "new_goal": DOMAIN,
    "repeated": DOMAIN,
    "neutral": DOMAIN,
    "generic": DOMAIN,
}
_open = keyed(
    _DOC,
    _DOC.raw.get("open"),
    "open",
    _OPEN,
    lambda d, v, at: variants(d, v, at, _OPEN[at.removeprefix("open.")]),
)
OPEN_PROGRESS = _open["progress"]
OPEN_SETBACK = _open["setback"]
OPEN_SETBACK_AGAIN = _open["setback_again"]  # {nth}: ORDINALS[setbacks]
OPEN_NEW_GOAL = _open["new_goal"]
OPEN_REPEATED = _open["repeated"]
OPEN_NEUTRAL = _open["neutral"]
OPEN_GENERIC = _open["generic"]

_question = C.table(_DOC, _DOC.raw.get("question"), "question")
C.only(_DOC, _question, ("pattern", "domain", "generic"), "question")
QUESTION_BY_PATTERN: dict[PatternClass, tuple[Phrase, ...]] = {
    PatternClass(k): v
    for k, v in keyed(
        _DOC,
        _question.get("pattern"),
        "question.pattern",
        (p.value for p in PatternClass),
        variants,
    ).items()
}
# Domains without a question of their own get a generic one.
QUESTION_BY_DOMAIN: dict[str, Phrase] = keyed(
    _DOC, _question.get("domain"), "question.domain", DOMAIN_ORDER, phrase, every=False
)
QUESTION_GENERIC = variants(_DOC, _question.get("generic"), "question.generic")

_risky = C.table(_DOC, _DOC.raw.get("risky"), "risky")
C.only(_DOC, _risky, ("open", "step"), "risky")
RISKY_OPEN = variants(_DOC, _risky.get("open"), "risky.open", DOMAIN)
RISKY_STEP = phrase(_DOC, _risky.get("step"), "risky.step", {"safer"})
POST_CRISIS = phrase(_DOC, _DOC.raw.get("post_crisis"), "post_crisis", NONE)

ORDINALS: dict[int, Phrase] = {
    int(k): v
    for k, v in keyed(
        _DOC, _DOC.raw.get("ordinal"), "ordinal", ("2", "3", "4", "5"), phrase
    ).items()
}
