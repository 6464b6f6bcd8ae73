"""Coach's phrasing: short openers and one focused question, EN / DE-du / DE-Sie.

Placeholders: {en} is the English topic noun ("training"), {de_nom}/{de_acc}/
{de_bei}/{de_mit} are German case forms from coachbus.text.TOPIC_LABELS, and a
leading capital is applied by the caller where a sentence starts with them.
"""

from __future__ import annotations

from coachbus.contracts.payloads import PatternClass
from coachbus.text import Phrase

OPEN_PROGRESS = (
    Phrase(
        "Good to hear the {en} is moving.",
        "Schön, dass sich {de_bei} etwas bewegt.",
        "Schön, dass sich {de_bei} etwas bewegt.",
    ),
    Phrase(
        "That counts — you followed through on the {en}.",
        "Das zählt — du bist {de_bei} drangeblieben.",
        "Das zählt — Sie sind {de_bei} drangeblieben.",
    ),
    Phrase(
        "Nice, that's real movement on the {en}.",
        "Stark, {de_bei} tut sich wirklich etwas.",
        "Sehr gut, {de_bei} tut sich wirklich etwas.",
    ),
)
OPEN_SETBACK = (
    Phrase(
        "Thanks for being straight about the {en} — a missed week is information, not a verdict.",
        "Danke für die Ehrlichkeit — dass es {de_bei} gerade hakt, ist eine Information, "
        "kein Urteil.",
        "Danke für die Ehrlichkeit — dass es {de_bei} gerade hakt, ist eine Information, "
        "kein Urteil.",
    ),
    Phrase(
        "Okay, the {en} didn't happen this time. That's worth a look, not a round of self-blame.",
        "Okay, {de_bei} hat es diesmal nicht geklappt. Das lohnt einen Blick, keinen "
        "Selbstvorwurf.",
        "Okay, {de_bei} hat es diesmal nicht geklappt. Das lohnt einen Blick, keinen "
        "Selbstvorwurf.",
    ),
)
OPEN_SETBACK_AGAIN = (
    Phrase(
        "That's the {n} time the {en} has slipped — so the plan, not your willpower, "
        "needs changing.",
        "Das ist das {n_de} Mal, dass es {de_bei} nicht klappt — also muss der Plan sich "
        "ändern, nicht deine Willenskraft.",
        "Das ist das {n_de} Mal, dass es {de_bei} nicht klappt — also muss der Plan sich "
        "ändern, nicht Ihre Willenskraft.",
    ),
)
OPEN_NEW_GOAL = (
    Phrase(
        "Good — let's make the {en} concrete enough to start.",
        "Gut — lass uns {de_bei} so konkret werden, dass du anfangen kannst.",
        "Gut — lassen Sie uns {de_bei} so konkret werden, dass Sie anfangen können.",
    ),
    Phrase(
        "A clear goal for your {en} — that's a good place to begin.",
        "Ein klares Ziel {de_bei} — ein guter Anfang.",
        "Ein klares Ziel {de_bei} — ein guter Anfang.",
    ),
)
OPEN_REPEATED = (
    Phrase(
        "The {en} is back on the table — it clearly matters to you.",
        "Es geht wieder um {de_acc} — das ist dir offensichtlich wichtig.",
        "Es geht wieder um {de_acc} — das ist Ihnen offensichtlich wichtig.",
    ),
)
OPEN_NEUTRAL = (
    Phrase(
        "Thanks for the update on the {en}.",
        "Gut, dass du {de_acc} im Blick behältst.",
        "Gut, dass Sie {de_acc} im Blick behalten.",
    ),
    Phrase(
        "Got it — let's stay with the {en} for a moment.",
        "Verstanden — bleiben wir kurz {de_bei}.",
        "Verstanden — bleiben wir kurz {de_bei}.",
    ),
)
OPEN_GENERIC = (
    Phrase(
        "Thanks for telling me where things stand.",
        "Danke, dass du mir erzählst, wo du gerade stehst.",
        "Danke, dass Sie mir erzählen, wo Sie gerade stehen.",
    ),
    Phrase(
        "I'm with you — let's look at this together.",
        "Ich bin dabei — lass uns das gemeinsam anschauen.",
        "Ich bin dabei — schauen wir uns das gemeinsam an.",
    ),
)

QUESTION_BY_PATTERN: dict[PatternClass, tuple[Phrase, ...]] = {
    PatternClass.AVOIDANCE: (
        Phrase(
            "What is the very first five-minute step — and when exactly could it happen?",
            "Was ist der allererste Fünf-Minuten-Schritt — und wann genau könnte er passieren?",
            "Was ist der allererste Fünf-Minuten-Schritt — und wann genau könnte er passieren?",
        ),
        Phrase(
            "What feels hardest about starting — the first minute, or what comes after?",
            "Was ist am Anfangen am schwersten — die erste Minute oder das, was danach kommt?",
            "Was ist am Anfangen am schwersten — die erste Minute oder das, was danach kommt?",
        ),
    ),
    PatternClass.PROCRASTINATION: (
        Phrase(
            "What could you do in the next 24 hours, even if it's tiny?",
            "Was könntest du in den nächsten 24 Stunden tun, auch wenn es winzig ist?",
            "Was könnten Sie in den nächsten 24 Stunden tun, auch wenn es winzig ist?",
        ),
    ),
    PatternClass.PERFECTIONISM: (
        Phrase(
            "What would a deliberately rough version look like?",
            "Wie sähe eine absichtlich grobe Version aus?",
            "Wie sähe eine absichtlich grobe Version aus?",
        ),
    ),
    PatternClass.ALL_OR_NOTHING: (
        Phrase(
            "What's the minimum version that would still count on a bad day?",
            "Was wäre die Minimalversion, die an einem schlechten Tag trotzdem zählt?",
            "Was wäre die Minimalversion, die an einem schlechten Tag trotzdem zählt?",
        ),
    ),
    PatternClass.OVERCOMMITMENT: (
        Phrase(
            "If only one goal could get your energy this week, which would it be?",
            "Wenn diese Woche nur ein Ziel deine Energie bekommen dürfte — welches wäre es?",
            "Wenn diese Woche nur ein Ziel Ihre Energie bekommen dürfte — welches wäre es?",
        ),
    ),
    PatternClass.SELF_CRITICISM: (
        Phrase(
            "What would you say to a friend in exactly this spot?",
            "Was würdest du einer Freundin oder einem Freund in genau dieser Lage sagen?",
            "Was würden Sie einer Freundin oder einem Freund in genau dieser Lage sagen?",
        ),
    ),
    PatternClass.RESTARTING: (
        Phrase(
            "What tripped up the last attempt, and how could this one plan for it?",
            "Woran ist der letzte Anlauf gescheitert — und wie kann dieser das einplanen?",
            "Woran ist der letzte Anlauf gescheitert — und wie kann dieser das einplanen?",
        ),
    ),
    PatternClass.STEADY_PROGRESS: (
        Phrase(
            "What's making it work this time, so we can protect it?",
            "Was sorgt diesmal dafür, dass es klappt — damit wir das schützen können?",
            "Was sorgt diesmal dafür, dass es klappt — damit wir das schützen können?",
        ),
    ),
}

QUESTION_BY_TOPIC: dict[str, Phrase] = {
    "fitness": Phrase(
        "When is the next realistic slot for a session this week?",
        "Wann ist diese Woche das nächste realistische Zeitfenster für eine Einheit?",
        "Wann ist diese Woche das nächste realistische Zeitfenster für eine Einheit?",
    ),
    "writing": Phrase(
        "What's the smallest piece of the text you could write next?",
        "Was ist das kleinste Stück Text, das du als Nächstes schreiben könntest?",
        "Was ist das kleinste Stück Text, das Sie als Nächstes schreiben könnten?",
    ),
    "business": Phrase(
        "What is the riskiest assumption in the idea, and how could you test it cheaply?",
        "Was ist die riskanteste Annahme an der Idee — und wie könntest du sie günstig testen?",
        "Was ist die riskanteste Annahme an der Idee — und wie könnten Sie sie günstig testen?",
    ),
    "sleep": Phrase(
        "What usually happens in the hour before you go to bed?",
        "Was passiert meistens in der Stunde, bevor du ins Bett gehst?",
        "Was passiert meistens in der Stunde, bevor Sie ins Bett gehen?",
    ),
    "nutrition": Phrase(
        "Which meal of the day is the easiest one to change first?",
        "Welche Mahlzeit am Tag lässt sich am leichtesten zuerst verändern?",
        "Welche Mahlzeit am Tag lässt sich am leichtesten zuerst verändern?",
    ),
    "study": Phrase(
        "Which topic is next, and when could you give it 25 focused minutes?",
        "Welches Thema ist als Nächstes dran — und wann könntest du ihm 25 konzentrierte "
        "Minuten geben?",
        "Welches Thema ist als Nächstes dran — und wann könnten Sie ihm 25 konzentrierte "
        "Minuten geben?",
    ),
    "money": Phrase(
        "What number would tell you that you're financially on safe ground?",
        "Welche Zahl würde dir zeigen, dass du finanziell auf sicherem Boden stehst?",
        "Welche Zahl würde Ihnen zeigen, dass Sie finanziell auf sicherem Boden stehen?",
    ),
    "work": Phrase(
        "What part of work is costing you the most energy right now?",
        "Welcher Teil der Arbeit kostet dich gerade am meisten Energie?",
        "Welcher Teil der Arbeit kostet Sie gerade am meisten Energie?",
    ),
    "relationships": Phrase(
        "Who could be on your side with this?",
        "Wer könnte dich dabei unterstützen?",
        "Wer könnte Sie dabei unterstützen?",
    ),
    "screen_time": Phrase(
        "When does the scrolling usually start — what's happening just before?",
        "Wann fängt das Scrollen meistens an — was passiert kurz davor?",
        "Wann fängt das Scrollen meistens an — was passiert kurz davor?",
    ),
}
QUESTION_GENERIC = (
    Phrase(
        "What would make the next step feel a little easier?",
        "Was würde den nächsten Schritt ein bisschen leichter machen?",
        "Was würde den nächsten Schritt ein bisschen leichter machen?",
    ),
    Phrase(
        "What matters most to you about this right now?",
        "Was ist dir daran gerade am wichtigsten?",
        "Was ist Ihnen daran gerade am wichtigsten?",
    ),
)

# Deliberately not about the topic: the same opener has to fit "quit my job" and
# "stop my medication".
RISKY_OPEN = (
    Phrase(
        "I can hear how much you want things to change.",
        "Ich höre, wie sehr du willst, dass sich etwas ändert.",
        "Ich höre, wie sehr Sie wollen, dass sich etwas ändert.",
    ),
    Phrase(
        "Thanks for telling me what you're considering — that's worth thinking through together.",
        "Danke, dass du mir sagst, was du vorhast — das lohnt sich, gemeinsam durchzudenken.",
        "Danke, dass Sie mir sagen, was Sie vorhaben — das lohnt sich, gemeinsam durchzudenken.",
    ),
)
RISKY_STEP = Phrase(
    "Before anything that's hard to undo, a safer first step: {safer}.",
    "Bevor du etwas tust, das sich schwer rückgängig machen lässt, ein sicherer erster "
    "Schritt: {safer}.",
    "Bevor Sie etwas tun, das sich schwer rückgängig machen lässt, ein sicherer erster "
    "Schritt: {safer}.",
)
POST_CRISIS = Phrase(
    "Thank you for writing back. How are you doing right now? If things get heavy again, "
    "the help lines I mentioned are there day and night.",
    "Danke, dass du dich wieder meldest. Wie geht es dir gerade? Wenn es wieder schwer wird, "
    "sind die Nummern, die ich genannt habe, rund um die Uhr für dich da.",
    "Danke, dass Sie sich wieder melden. Wie geht es Ihnen gerade? Wenn es wieder schwer "
    "wird, sind die Nummern, die ich genannt habe, rund um die Uhr für Sie da.",
)

ORDINAL_EN = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}
ORDINAL_DE = {2: "zweite", 3: "dritte", 4: "vierte", 5: "fünfte"}
