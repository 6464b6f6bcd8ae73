"""The coaching vocabulary every agent works with, sent once in the shared prompt.

Shadow names behaviour patterns, Persona and the Coach speak about them; Stability
flags risky steps, the Coach and Synth must never suggest them. The lists are the
same for every agent and every turn, so they belong in the briefing that opens
every prompt: the parallel calls of a turn then share one long prefix (the server's
prefix cache computes it once), and each agent's own instructions, which come
last, stay short.
"""

from __future__ import annotations

from coachbus.contracts.payloads import PatternClass
from coachbus.safety.steps import CATALOGUE

PATTERN_DEFINITIONS: dict[PatternClass, str] = {
    PatternClass.AVOIDANCE: "a stated goal repeatedly not acted on, excuses, putting it off",
    PatternClass.OVERCOMMITMENT: "taking on more goals or tasks than time allows",
    PatternClass.PERFECTIONISM: "not starting or finishing unless it is perfect",
    PatternClass.ALL_OR_NOTHING: "all or nothing rules; one slip means the whole plan failed",
    PatternClass.PROCRASTINATION: "delaying until later, tomorrow, next week",
    PatternClass.SELF_CRITICISM: "harsh judgements of oneself (lazy, useless, a failure)",
    PatternClass.STEADY_PROGRESS: "doing it regularly, small consistent steps",
    PatternClass.RESTARTING: "announcing the same fresh start again after stalling",
}


def _vocabulary_text() -> str:
    patterns = "\n".join(f"- {p.value}: {d}" for p, d in PATTERN_DEFINITIONS.items())
    steps = "\n".join(f"- {sid}: {spec.step}" for sid, spec in sorted(CATALOGUE.items()))
    return (
        "Behaviour patterns (the only classes used):\n"
        f"{patterns}\n"
        "Risky steps (never to be suggested; flagged when a person heads toward one):\n"
        f"{steps}"
    )


# The "Reference" section of the shared briefing (coachbus.memory.BRIEFING).
VOCABULARY = _vocabulary_text()
