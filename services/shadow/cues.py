"""Shadow's phrase cues: progress, setbacks, time spent, and the pattern taxonomy.

The taxonomy and its rules are documented in docs/patterns.md; keep both in step.
Each cue is a compiled regex over one sentence, English and German together.
"""

from __future__ import annotations

import re

from coachbus.contracts.payloads import PatternClass
from coachbus.text import PROGRESS_RX, SETBACK_RX


def _rx(p: str) -> re.Pattern[str]:
    return re.compile(p, re.I)


# Progress and setback cues are shared with Coach (coachbus.text).
SETBACK = SETBACK_RX
PROGRESS = PROGRESS_RX

# Reported time spent on something weighs more than a passing mention.
TIME_SPENT = _rx(
    r"\bspent (?:the (?:whole|entire) )?(?:\w+ ){0,2}(?:hours?|evenings?|weekend|day|night)|"
    r"\b(?:all|whole) (?:day|evening|weekend|night)\b|\bfor hours\b|\d+ hours\b|"
    r"(?:den ganzen|das ganze) (?:tag|abend|wochenende)|stundenlang|\d+ stunden"
)

# The fixed taxonomy: one regex per pattern (see docs/patterns.md for the rules).
PATTERN_CUES: dict[PatternClass, re.Pattern[str]] = {
    PatternClass.AVOIDANCE: _rx(
        r"\bavoid\w*|couldn'?t face|can'?t face|can'?t bring myself|ignor(?:e|ed|ing) (?:it|the)|"
        r"(?:scroll\w*|cleaned|tidied|watched \w+|gamed|played) instead|instead of (?:writing|"
        r"running|studying|working on|practi[sc]ing)|didn'?t (?:even )?open|pretend(?:ed)? it|"
        r"look(?:ed)? away|drücke? mich|gedrückt|vermeide\w*|aus dem weg|verdrängt?|"
        r"statt(?:dessen)? (?:zu )?(?:schreiben|laufen|lernen)|nicht mal (?:aufgemacht|geöffnet|"
        r"angeschaut)|stattdessen"
    ),
    PatternClass.PROCRASTINATION: _rx(
        r"procrastinat\w*|put(?:ting)? (?:it )?off|postpon\w*|\bnext week\b|\bon monday\b|"
        r"later\b.{0,20}\b(?:start|do it)|start tomorrow|tomorrow i(?:'ll| will)|"
        r"last minute|kept delaying|aufgeschoben|verschoben|prokrastin\w*|nächste woche|"
        r"ab montag|morgen fange ich|morgen fang ich|auf morgen|auf später|in letzter minute"
    ),
    PatternClass.OVERCOMMITMENT: _rx(
        r"too much on my plate|said yes to|no time (?:for|to)|stretched (?:too )?thin|"
        r"juggl\w*|(?:too|so) many (?:things|projects|goals)|on top of (?:that|everything)|"
        r"überfordert|zu viel(?:e)? (?:auf einmal|projekte|baustellen)|keine zeit|zugesagt|"
        r"übernommen|tausend dinge|alles gleichzeitig"
    ),
    PatternClass.PERFECTIONISM: _rx(
        r"perfect\w*|not good enough|has to be (?:right|perfect)|flawless|until it'?s ready|"
        r"rewr(?:ote|ite|iting) (?:it|the|that|chapter)|start(?:ed)? over (?:again )?because|"
        r"(?:isn'?t|wasn'?t|not) ready (?:yet )?to|polish\w*|perfekt\w*|nicht gut genug|"
        r"muss (?:alles |es )?(?:stimmen|perfekt)|neu geschrieben|fehlerfrei|"
        r"noch nicht fertig genug"
    ),
    PatternClass.ALL_OR_NOTHING: _rx(
        r"all[- ]in\b|all or nothing|never again|every single day|100 ?%|a hundred percent|"
        r"from now on (?:i'?ll )?(?:always|never|every)|might as well|(?:ruined|blew) "
        r"(?:it|the whole|everything)|whole week is ruined|now or never|"
        r"alles oder nichts|ganz oder gar nicht|nie wieder|jeden einzelnen tag|"
        r"ab sofort (?:immer|nie|jeden)|hundert prozent|sowieso egal|"
        r"jetzt oder nie|alles auf eine karte"
    ),
    PatternClass.SELF_CRITICISM: _rx(
        r"(?:i'?m|i am) (?:so |such an? |just |a )?(?:lazy|useless|pathetic|failure|loser|"
        r"idiot|hopeless|weak|disappointment)|what'?s wrong with me|i always fail|typical me|"
        r"i suck|ich bin (?:so |einfach |echt |ein )?(?:faul|nutzlos|versager|erbärmlich|"
        r"hoffnungslos|schwach|zu blöd|zu dumm)|typisch ich|was stimmt nicht mit mir|"
        r"ich kriege? nichts hin|ich versage"
    ),
    PatternClass.STEADY_PROGRESS: _rx(
        r"again this week|\bstill going\b|kept it up|\bstreak\b|"
        r"(?:second|third|fourth|\d+(?:nd|rd|th)) (?:week|time) in a row|"
        r"step by step|little by little|"
        r"dranbleiben|drangeblieben|wieder geschafft|(?:zweite|dritte|vierte) (?:woche|mal) "
        r"(?:in folge|hintereinander)|schritt für schritt"
    ),
    PatternClass.RESTARTING: _rx(
        r"start(?:ing)? (?:again|over|from scratch)|back to square one|fresh start|"
        r"this time (?:for real|it'?s different|i mean it)|new attempt|one more try|"
        r"von vorne|neu anfangen|wieder angefangen|neuer versuch|diesmal wirklich|"
        r"noch ein(?:mal)? (?:anlauf|versuch)|neustart"
    ),
}
