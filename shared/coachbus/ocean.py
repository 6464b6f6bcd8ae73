"""Big Five (OCEAN) from text, scored item by item on the BFI-10, then derived.

Why items and not traits: zero-shot "guess the Big Five from text" correlates only
weakly with questionnaires. Scoring the ten concrete BFI-10 statements ("does a
thorough job", "gets nervous easily") from what a person says about themselves and
then deriving traits the way the questionnaire does is more transparent, and keeps
every number traceable to the phrases that moved it.

The result is a low-confidence prior: confidence grows with the amount of evidence
and saturates at ``CONFIDENCE_CAP``, well below 1, because text is a weak signal.
Persona accumulates it; Plasticity derives the same traits from Persona's profile.

BFI-10 (Rammstedt & John, 2007), "I see myself as someone who…":
  1 is reserved (E, reversed)          6 is outgoing, sociable (E)
  2 is generally trusting (A)          7 tends to find fault with others (A, reversed)
  3 tends to be lazy (C, reversed)     8 does a thorough job (C)
  4 is relaxed, handles stress (N, r)  9 gets nervous easily (N)
  5 has few artistic interests (O, r) 10 has an active imagination (O)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from coachbus.contracts.payloads import ItemScore, Trait, TraitEstimate
from coachbus.contracts.state import ItemEvidence

# item -> (trait, reversed)
BFI10: dict[int, tuple[Trait, bool]] = {
    1: (Trait.EXTRAVERSION, True),
    2: (Trait.AGREEABLENESS, False),
    3: (Trait.CONSCIENTIOUSNESS, True),
    4: (Trait.NEUROTICISM, True),
    5: (Trait.OPENNESS, True),
    6: (Trait.EXTRAVERSION, False),
    7: (Trait.AGREEABLENESS, True),
    8: (Trait.CONSCIENTIOUSNESS, False),
    9: (Trait.NEUROTICISM, False),
    10: (Trait.OPENNESS, False),
}

CONFIDENCE_CAP = 0.75
# Evidence units at which confidence reaches ~63 % of the cap.
CONFIDENCE_SCALE = 6.0
# Pseudo-observations at the scale midpoint: one phrase must not swing an item to 5.
ITEM_PRIOR_WEIGHT = 2.0
# Older evidence fades a little each session so a person can change over months.
SESSION_DECAY = 0.9

# Cues per item: (agree, disagree). "Agree" means the statement describes the user.
_CUES: dict[int, tuple[str, str]] = {
    1: (
        r"(?:i'?m|i am) (?:quite |pretty |rather |very )?(?:shy|introverted|reserved|quiet)|"
        r"keep to myself|prefer (?:to be |being )?alone|small ?talk (?:drains|exhausts)|"
        r"stayed (?:at )?home instead|skipped the party|drained (?:by|after) (?:people|socialis)|"
        r"bin (?:eher |ziemlich |sehr )?(?:schüchtern|introvertiert|zurückhaltend|still)|"
        r"lieber allein|für mich allein|smalltalk (?:strengt|nervt)|zu hause geblieben",
        r"(?:i'?m|i am) (?:not shy|an extrovert)|bin (?:nicht schüchtern|extrovertiert)",
    ),
    2: (
        r"i trust (?:people|others|my)|people are (?:mostly |generally )?good|"
        r"give people the benefit|vertraue (?:anderen|menschen|meinem|meiner)|"
        r"menschen sind (?:meist |im grunde )?gut",
        r"(?:can'?t|don'?t) trust (?:anyone|people|them)|everyone (?:lies|uses me)|"
        r"misstrau\w*|traue (?:niemandem|keinem)",
    ),
    3: (
        r"(?:i'?m|i am) (?:so |just |really )?lazy|couldn'?t be bothered|lay on the (?:couch|sofa)|"
        r"netflix all (?:day|evening|weekend)|did nothing all|"
        r"bin (?:so |einfach |echt )?faul|keine lust gehabt|auf der couch|"
        r"den ganzen (?:tag|abend) (?:nichts|serien)|hatte keine lust",
        r"never skip|always (?:finish|follow through)|ziehe? (?:das |es )?immer durch",
    ),
    4: (
        r"(?:i'?m|i am) (?:pretty |quite |fairly )?(?:relaxed|calm|chill)|handle stress well|"
        r"didn'?t stress|no stress|stayed calm|"
        r"bin (?:ziemlich |eher )?(?:entspannt|gelassen|ruhig)|"
        r"ruhig geblieben|kein stress|stress macht mir nichts",
        r"can'?t relax|never relax|kann (?:nicht|nie) abschalten",
    ),
    5: (
        r"not (?:really )?into (?:art|music|books|poetry)|art (?:is|bores) (?:boring|me)|"
        r"kunst (?:interessiert mich nicht|ist langweilig)|mit kunst kann ich nichts",
        r"love (?:art|painting|poetry|music|museums|reading|stories)|creative|"
        r"(?:write|writing|wrote) (?:a |my )?(?:novel|story|poem|songs?)|"
        r"liebe (?:kunst|musik|bücher|geschichten|malen)|kreativ\w*|"
        r"(?:schreibe|schreiben) (?:an )?(?:einem |meinem )?(?:roman|gedicht|geschichte)",
    ),
    6: (
        r"(?:i'?m|i am) (?:very |quite |pretty )?(?:outgoing|sociable|an extrovert)|"
        r"love (?:meeting|being around) people|had (?:friends|people) over|went out with|"
        r"party|hosted|bin (?:sehr |ziemlich )?(?:gesellig|kontaktfreudig|extrovertiert)|"
        r"mit freunden (?:weg|unterwegs|aus)|unter leute|feier\w*|leute eingeladen",
        r"hate parties|avoid (?:people|social)|hasse partys|meide (?:leute|menschen)",
    ),
    7: (
        r"people are (?:idiots|useless|lazy|stupid)|(?:colleagues|boss|team) (?:is|are) "
        r"(?:useless|incompetent|idiots)|(?:it'?s|was) (?:their|his|her) fault|"
        r"everyone else (?:is|was)|annoy(?:s|ed|ing) me|"
        r"(?:kollegen|chef|die anderen) (?:sind|ist) (?:unfähig|faul|dumm|idioten)|"
        r"nerv(?:en|t) mich|(?:deren|seine|ihre) schuld|die anderen sind schuld",
        r"not (?:their|his|her) fault|they did their best|nicht (?:deren|seine|ihre) schuld",
    ),
    8: (
        r"\bplan(?:ned|ning)?\b|schedul\w*|spreadsheet|checklist|to-?do list|organi[sz]ed|"
        r"thorough|prepared|calendar|tracked|step by step|"
        r"\bplan(?:e|t|en)?\b|geplant|liste|strukturiert|ordentlich|gründlich|kalender|"
        r"vorbereitet|schritt für schritt|notiert|getrackt",
        r"sloppy|chaotic|disorgani[sz]ed|all over the place|chaotisch|schlampig|unorganisiert",
    ),
    9: (
        r"anxious|nervous|worr(?:y|ied|ying)|stressed|panic\w*|overwhelm\w*|on edge|"
        r"can'?t stop thinking|freak(?:ing|ed) out|nervös|ängstlich|angst\b|gestresst|"
        r"sorgen|panik|überfordert|grübel\w*|unruhig|angespannt",
        r"not (?:worried|anxious)|nicht (?:nervös|besorgt)",
    ),
    10: (
        r"imagin\w*|ideas?\b|dream\w*|curious|new things|what if|brainstorm\w*|vision|"
        r"novel|stories|story|vorstell\w*|idee\w*|träum\w*|neugierig|neue dinge|"
        r"geschichte\w*|roman|vision\w*|was wäre wenn",
        r"no imagination|not creative|keine fantasie|nicht kreativ",
    ),
}

_COMPILED: dict[int, tuple[re.Pattern[str], re.Pattern[str]]] = {
    item: (re.compile(agree, re.I), re.compile(disagree, re.I))
    for item, (agree, disagree) in _CUES.items()
}


@dataclass(frozen=True, slots=True)
class ItemCue:
    item: int
    direction: int  # +1 agree, -1 disagree
    cue: str


def score_items(text: str) -> list[ItemCue]:
    """Item-level evidence in one message: at most one cue per item and direction."""
    cues: list[ItemCue] = []
    for item, (agree, disagree) in _COMPILED.items():
        m_dis = disagree.search(text)
        if m_dis:
            cues.append(ItemCue(item, -1, m_dis.group(0).lower()))
            continue  # "not lazy" must not also count as "lazy"
        m_ag = agree.search(text)
        if m_ag:
            cues.append(ItemCue(item, +1, m_ag.group(0).lower()))
    return cues


def apply_cues(items: dict[int, ItemEvidence], cues: list[ItemCue]) -> None:
    """Fold one message's cues into the accumulated item evidence (in place)."""
    for c in cues:
        ev = items.setdefault(c.item, ItemEvidence())
        if c.direction > 0:
            ev.agree += 1.0
        else:
            ev.disagree += 1.0
        ev.count += 1
        ev.last_cue = c.cue[:60]


def decay(items: dict[int, ItemEvidence], factor: float = SESSION_DECAY) -> None:
    """Fade old evidence (called once per new session); counts are kept for confidence."""
    for ev in items.values():
        ev.agree *= factor
        ev.disagree *= factor


def item_score(ev: ItemEvidence | None) -> float:
    """1..5: the midpoint 3 pulled toward 5 (agree) or 1 (disagree) by the evidence."""
    if ev is None:
        return 3.0
    total = ev.agree + ev.disagree
    return 3.0 + 2.0 * (ev.agree - ev.disagree) / (total + ITEM_PRIOR_WEIGHT)


def confidence(evidence_count: int) -> float:
    """Saturating confidence: rises with evidence, never above CONFIDENCE_CAP."""
    return round(CONFIDENCE_CAP * (1.0 - math.exp(-evidence_count / CONFIDENCE_SCALE)), 4)


def item_scores(items: Mapping[int, ItemEvidence]) -> list[ItemScore]:
    return [
        ItemScore(
            item=i,
            score=round(item_score(items.get(i)), 3),
            evidence_count=items[i].count if i in items else 0,
        )
        for i in range(1, 11)
    ]


def derive_traits(items: Mapping[int, ItemEvidence]) -> dict[Trait, TraitEstimate]:
    """BFI-10 scoring: mean of the trait's two items (reversed ones as 6 - x), to 0..1."""
    acc: dict[Trait, list[float]] = {t: [] for t in Trait}
    counts: dict[Trait, int] = dict.fromkeys(Trait, 0)
    for i, (trait, reverse) in BFI10.items():
        ev = items.get(i)
        s = item_score(ev)
        acc[trait].append(6.0 - s if reverse else s)
        counts[trait] += ev.count if ev else 0
    return {
        t: TraitEstimate(
            value=round((sum(v) / len(v) - 1.0) / 4.0, 4),
            confidence=confidence(counts[t]),
            evidence_count=counts[t],
        )
        for t, v in acc.items()
    }


def shrunk(est: TraitEstimate | None, full_at: float = 0.5) -> float:
    """The trait value pulled toward 0.5 in proportion to how unsure we are.

    Downstream mappings use this so that a barely-evidenced trait cannot swing a
    decision: with no evidence every trait reads as exactly average.
    """
    if est is None:
        return 0.5
    w = min(1.0, est.confidence / full_at)
    return 0.5 + w * (est.value - 0.5)


def mean_confidence(traits: Mapping[Trait, TraitEstimate]) -> float:
    if not traits:
        return 0.0
    return round(sum(t.confidence for t in traits.values()) / len(traits), 4)
