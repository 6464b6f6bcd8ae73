"""Shadow's phrase cues: progress, setbacks, time spent, and the pattern taxonomy.

The taxonomy and its rules are documented in docs/patterns.md; keep both in step.
Each cue is a compiled regex over one sentence, English and German together. The
cue lists are data (services/shadow/content/cues.toml, beside the only code that
reads them), compiled once at import; a list that is missing or does not compile
stops Shadow at start-up with the place of the mistake.
"""

from __future__ import annotations

import re

from coachbus import content as C
from coachbus.contracts.payloads import PatternClass
from coachbus.text import PROGRESS_RX, SETBACK_RX

_DOC = C.read("services.shadow.content", "cues.toml")
C.only(_DOC, _DOC.raw, ("time_spent", "pattern"), "")


def _rx(value: object, at: str) -> re.Pattern[str]:
    source = "|".join(C.texts(_DOC, value, at))
    return re.compile(C.pattern(_DOC, source, at, re.I), re.I)


# Progress and setback cues are shared with Coach (coachbus.text).
SETBACK = SETBACK_RX
PROGRESS = PROGRESS_RX

# Reported time spent on something weighs more than a passing mention.
TIME_SPENT = _rx(_DOC.raw.get("time_spent"), "time_spent")

# The fixed taxonomy: one regex per pattern (see docs/patterns.md for the rules), in
# the file's order (the order ties are broken in).
_patterns = C.table(_DOC, _DOC.raw.get("pattern"), "pattern")
C.only(_DOC, _patterns, (p.value for p in PatternClass), "pattern")
if _missing := [p.value for p in PatternClass if p.value not in _patterns]:
    raise _DOC.fail("pattern", f"missing {_missing} (every pattern needs its cues)")
PATTERN_CUES: dict[PatternClass, re.Pattern[str]] = {
    PatternClass(k): _rx(v, f"pattern.{k}") for k, v in _patterns.items()
}
