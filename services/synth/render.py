"""Deterministic prose from a DecisionSheet (the fallback the LLM prose must beat).

The reply is assembled from parts in a fixed order — acknowledgement, safety
redirect, pattern observation, calibrated follow-through note, one concrete step
chosen by strategy and topic, an optional stretch, a closing question — and each
part is a hand-written sentence in English, German-du and German-Sie. Specificity
comes from the sheet (topic, signal, pattern, the user's own short quote, the
safer alternative), not from pasting the user's message back.

Parts are dropped or added to hit the sheet's word budget, and any sentence that
would contain a blocked step's marker is skipped, so the rendering cannot leak a
step Stability blocked.
"""

from __future__ import annotations

from dataclasses import dataclass

from coachbus.contracts.payloads import (
    CoachingStrategy,
    DecisionSheet,
    PatternClass,
    TurnSignal,
)
from coachbus.safety import CATALOGUE, check_in_reply, crisis_reply
from coachbus.text import Phrase, TopicLabel, find_markers, pick, topic_label, word_count

S = CoachingStrategy

# --------------------------------------------------------------------------- per-topic content


@dataclass(frozen=True, slots=True)
class TopicSteps:
    # First-person plan sentences are the same for du and Sie, which is why the
    # German variants below are written as the user's own words.
    if_then: tuple[str, str]  # (en, de)
    anchor: tuple[str, str]  # habit stacking: "After my morning coffee, I …"
    rough: tuple[str, str]  # a deliberately small or imperfect version
    stretch: tuple[str, str]  # raising the bar when things go well


TOPIC_STEPS: dict[str, TopicSteps] = {
    "fitness": TopicSteps(
        (
            "If it's Tuesday or Thursday at 6 pm, then I put on my running shoes and go out "
            "for 20 minutes, however slow.",
            "Wenn es Dienstag oder Donnerstag 18 Uhr ist, dann ziehe ich die Laufschuhe an und "
            "bin 20 Minuten draußen, egal wie langsam.",
        ),
        (
            "After I get home from work, I change straight into my training clothes.",
            "Wenn ich von der Arbeit nach Hause komme, ziehe ich direkt die Sportsachen an.",
        ),
        (
            "Ten minutes of easy movement counts as a session.",
            "Zehn Minuten lockere Bewegung zählen als Einheit.",
        ),
        (
            "make one session a week a little longer, or sign up for a local 5k as a marker",
            "eine Einheit pro Woche etwas verlängern oder sich für einen 5-km-Lauf in der Nähe "
            "anmelden",
        ),
    ),
    "writing": TopicSteps(
        (
            "If it's 8 pm on a weekday, then I open the document and write 150 words before "
            "anything else.",
            "Wenn es werktags 20 Uhr ist, dann öffne ich das Dokument und schreibe 150 Wörter, "
            "bevor ich irgendetwas anderes mache.",
        ),
        (
            "After I make my morning coffee, I write for ten minutes before opening my phone.",
            "Nachdem ich mir morgens Kaffee gemacht habe, schreibe ich zehn Minuten, bevor ich "
            "aufs Handy schaue.",
        ),
        (
            "A messy page you can fix later is worth more than a perfect sentence you keep "
            "rewriting.",
            "Eine unordentliche Seite, die man später überarbeiten kann, ist mehr wert als ein "
            "perfekter Satz, den man immer wieder umschreibt.",
        ),
        (
            "share one finished scene with a single trusted reader this month",
            "diesen Monat eine fertige Szene einer einzigen vertrauten Person zum Lesen geben",
        ),
    ),
    "business": TopicSteps(
        (
            "If it's Tuesday or Thursday evening, then I spend 90 minutes on the idea — one "
            "customer conversation or one small test.",
            "Wenn es Dienstag- oder Donnerstagabend ist, dann arbeite ich 90 Minuten an der "
            "Idee — ein Kundengespräch oder ein kleiner Test.",
        ),
        (
            "After dinner on two fixed weekdays, I work on the idea for one focused hour.",
            "Nach dem Abendessen an zwei festen Wochentagen arbeite ich eine konzentrierte "
            "Stunde an der Idee.",
        ),
        (
            "Five honest conversations with potential customers tell you more than a "
            "polished business plan.",
            "Fünf ehrliche Gespräche mit möglichen Kundinnen und Kunden sagen mehr als ein "
            "ausgefeilter Businessplan.",
        ),
        (
            "set a date for the first paid pilot customer",
            "einen Termin für die erste zahlende Pilotkundin setzen",
        ),
    ),
    "sleep": TopicSteps(
        (
            "If it's 10:30 pm, then I put my phone on the charger outside the bedroom.",
            "Wenn es 22:30 Uhr ist, dann lege ich das Handy zum Laden außerhalb des Schlafzimmers.",
        ),
        (
            "After I brush my teeth, I switch off all screens.",
            "Nachdem ich mir die Zähne geputzt habe, schalte ich alle Bildschirme aus.",
        ),
        (
            "Going to bed 15 minutes earlier is already a change your body notices.",
            "15 Minuten früher ins Bett zu gehen, ist schon eine Veränderung, die der Körper "
            "merkt.",
        ),
        (
            "keep the same wake-up time on weekends too",
            "auch am Wochenende zur gleichen Zeit aufstehen",
        ),
    ),
    "nutrition": TopicSteps(
        (
            "If I get hungry in the afternoon, then I eat the fruit or nuts I packed in the "
            "morning.",
            "Wenn ich nachmittags Hunger bekomme, dann esse ich das Obst oder die Nüsse, die ich "
            "morgens eingepackt habe.",
        ),
        (
            "After I make coffee in the morning, I also prepare a proper breakfast.",
            "Nachdem ich morgens Kaffee gemacht habe, mache ich mir auch ein richtiges Frühstück.",
        ),
        (
            "One better meal a day is a real change, not a half measure.",
            "Eine bessere Mahlzeit am Tag ist eine echte Veränderung, keine halbe Sache.",
        ),
        ("cook one new healthy recipe each week", "jede Woche ein neues gesundes Rezept kochen"),
    ),
    "study": TopicSteps(
        (
            "If it's 5 pm, then I do one 25-minute block on the next topic with my phone in "
            "another room.",
            "Wenn es 17 Uhr ist, dann mache ich einen 25-Minuten-Block zum nächsten Thema, das "
            "Handy in einem anderen Raum.",
        ),
        (
            "After lunch, I review yesterday's notes for ten minutes.",
            "Nach dem Mittagessen wiederhole ich zehn Minuten lang die Notizen von gestern.",
        ),
        (
            "One focused block beats three hours of half-attention.",
            "Ein konzentrierter Block schlägt drei Stunden halbe Aufmerksamkeit.",
        ),
        (
            "do one full practice exam under real conditions",
            "eine komplette Probeklausur unter echten Bedingungen schreiben",
        ),
    ),
    "money": TopicSteps(
        (
            "If it's the first Sunday of the month, then I spend 20 minutes going through "
            "last month's spending.",
            "Wenn der erste Sonntag im Monat ist, dann gehe ich 20 Minuten lang die Ausgaben "
            "des letzten Monats durch.",
        ),
        (
            "When my salary arrives, I move a fixed amount to savings first.",
            "Wenn das Gehalt kommt, überweise ich zuerst einen festen Betrag aufs Sparkonto.",
        ),
        (
            "Knowing one number — monthly costs — is a solid start.",
            "Eine einzige Zahl zu kennen — die monatlichen Fixkosten — ist ein solider Anfang.",
        ),
        (
            "raise the automatic savings amount a little",
            "den automatischen Sparbetrag etwas erhöhen",
        ),
    ),
    "work": TopicSteps(
        (
            "If it's 9 am, then I spend the first 45 minutes on the most important task "
            "before checking email.",
            "Wenn es 9 Uhr ist, dann arbeite ich die ersten 45 Minuten an der wichtigsten "
            "Aufgabe, bevor ich E-Mails lese.",
        ),
        (
            "After my first coffee at work, I write down the one task that matters today.",
            "Nach dem ersten Kaffee bei der Arbeit schreibe ich die eine Aufgabe auf, die heute "
            "zählt.",
        ),
        (
            "Finishing one important thing beats touching ten.",
            "Eine wichtige Sache abzuschließen ist besser, als zehn anzufangen.",
        ),
        (
            "ask for one piece of visible, stretching work",
            "um eine sichtbare, fordernde Aufgabe bitten",
        ),
    ),
    "screen_time": TopicSteps(
        (
            "If I pick up my phone without a reason, then I put it back and take three breaths.",
            "Wenn ich das Handy ohne Grund in die Hand nehme, dann lege ich es zurück und atme "
            "dreimal durch.",
        ),
        (
            "After dinner, the phone goes into a drawer until the next morning.",
            "Nach dem Abendessen kommt das Handy bis zum nächsten Morgen in eine Schublade.",
        ),
        (
            "Moving one app off the home screen is enough to start.",
            "Eine App vom Startbildschirm zu nehmen, reicht für den Anfang.",
        ),
        (
            "try one screen-free evening a week",
            "einen bildschirmfreien Abend pro Woche ausprobieren",
        ),
    ),
    "relationships": TopicSteps(
        (
            "If it's Sunday evening, then I message one person I've been meaning to call.",
            "Wenn es Sonntagabend ist, dann schreibe ich einer Person, bei der ich mich schon "
            "lange melden wollte.",
        ),
        (
            "After dinner, I take ten phone-free minutes with the people I live with.",
            "Nach dem Abendessen nehme ich mir zehn handyfreie Minuten für die Menschen, mit "
            "denen ich lebe.",
        ),
        (
            "A short, honest message counts more than the perfect conversation you never have.",
            "Eine kurze, ehrliche Nachricht zählt mehr als das perfekte Gespräch, das nie "
            "stattfindet.",
        ),
        (
            "plan one shared activity for this month",
            "eine gemeinsame Unternehmung für diesen Monat planen",
        ),
    ),
    "household": TopicSteps(
        (
            "If it's 7 pm, then I set a timer and tidy one surface for ten minutes.",
            "Wenn es 19 Uhr ist, dann stelle ich einen Timer und räume zehn Minuten eine Fläche "
            "auf.",
        ),
        (
            "After I make my coffee, I put away five things.",
            "Nachdem ich Kaffee gemacht habe, räume ich fünf Dinge weg.",
        ),
        (
            "One clear table is a win, not a failure to do the whole flat.",
            "Ein freier Tisch ist ein Erfolg, kein Versagen an der ganzen Wohnung.",
        ),
        ("clear out one cupboard completely this week", "diese Woche einen Schrank ganz ausmisten"),
    ),
}
GENERIC_STEPS = TopicSteps(
    (
        "If it's a set time on a set day, then I do the first five minutes of it — nothing "
        "more required.",
        "Wenn ein fester Zeitpunkt an einem festen Tag kommt, dann mache ich die ersten fünf "
        "Minuten — mehr muss nicht sein.",
    ),
    (
        "After something I already do every morning, I add the first small step.",
        "Nach etwas, das ich ohnehin jeden Morgen mache, hänge ich den ersten kleinen Schritt an.",
    ),
    (
        "A small version done beats a big version planned.",
        "Eine kleine Version, die passiert, schlägt eine große, die nur geplant ist.",
    ),
    ("raise the bar by one notch", "die Messlatte um eine Stufe anheben"),
)


def _steps(topic: str | None) -> TopicSteps:
    return TOPIC_STEPS.get(topic or "", GENERIC_STEPS)


# --------------------------------------------------------------------------- sentence library

ACK: dict[TurnSignal, tuple[Phrase, ...]] = {
    TurnSignal.PROGRESS: (
        Phrase(
            "You kept going with your {en} — that's exactly the kind of evidence that matters.",
            "Du bist {de_bei} drangeblieben — genau solche Belege zählen.",
            "Sie sind {de_bei} drangeblieben — genau solche Belege zählen.",
        ),
        Phrase(
            "Real progress on your {en}: worth pausing on before rushing to the next thing.",
            "Echter Fortschritt {de_bei} — es lohnt sich, kurz dabei zu bleiben, bevor es "
            "weitergeht.",
            "Echter Fortschritt {de_bei} — es lohnt sich, kurz dabei zu bleiben, bevor es "
            "weitergeht.",
        ),
    ),
    TurnSignal.SETBACK: (
        Phrase(
            "It didn't happen with your {en} this time, and you said so plainly — that makes "
            "it workable.",
            "{De_bei} hat es diesmal nicht geklappt, und du sagst das offen — damit lässt "
            "sich arbeiten.",
            "{De_bei} hat es diesmal nicht geklappt, und Sie sagen das offen — damit lässt "
            "sich arbeiten.",
        ),
        Phrase(
            "A week where the {en} slipped isn't a verdict on you; it's information about the "
            "plan.",
            "Eine Woche, in der es {de_bei} nicht lief, ist kein Urteil über dich, sondern "
            "eine Information über den Plan.",
            "Eine Woche, in der es {de_bei} nicht lief, ist kein Urteil über Sie, sondern "
            "eine Information über den Plan.",
        ),
    ),
    TurnSignal.REPEATED_GOAL: (
        Phrase(
            "Your {en} keeps coming back across our conversations, which tells me it matters "
            "to you.",
            "{De_nom} taucht in unseren Gesprächen immer wieder auf — das zeigt mir, dass dir "
            "das wichtig ist.",
            "{De_nom} taucht in unseren Gesprächen immer wieder auf — das zeigt mir, dass Ihnen "
            "das wichtig ist.",
        ),
    ),
    TurnSignal.NEW_GOAL: (
        Phrase(
            "A goal for your {en} — good, let's give it a shape you can start on this week.",
            "Ein Ziel {de_bei} — gut, geben wir ihm eine Form, mit der du diese Woche "
            "anfangen kannst.",
            "Ein Ziel {de_bei} — gut, geben wir ihm eine Form, mit der Sie diese Woche "
            "anfangen können.",
        ),
        Phrase(
            "Let's turn the {en} goal into something concrete enough to actually begin.",
            "Machen wir das Ziel {de_bei} so konkret, dass du wirklich anfangen kannst.",
            "Machen wir das Ziel {de_bei} so konkret, dass Sie wirklich anfangen können.",
        ),
    ),
    TurnSignal.NONE: (
        Phrase(
            "Thanks for filling me in on your {en}.",
            "Danke, dass du mich {de_bei} auf dem Laufenden hältst.",
            "Danke, dass Sie mich {de_bei} auf dem Laufenden halten.",
        ),
        Phrase(
            "Let's stay with your {en} for a moment.",
            "Bleiben wir einen Moment {de_bei}.",
            "Bleiben wir einen Moment {de_bei}.",
        ),
    ),
}
ACK_GENERIC = (
    Phrase(
        "Thanks for telling me where things stand.",
        "Danke, dass du mir sagst, wo du gerade stehst.",
        "Danke, dass Sie mir sagen, wo Sie gerade stehen.",
    ),
    Phrase(
        "I hear you — let's look at this together.",
        "Ich höre dich — schauen wir uns das gemeinsam an.",
        "Ich verstehe — schauen wir uns das gemeinsam an.",
    ),
)

SAFETY_INTRO = (
    Phrase(
        "I can hear how much you want this to move, and I'm taking the idea seriously. "
        "Big steps that are hard to undo deserve a safety net first.",
        "Ich höre, wie sehr du willst, dass sich etwas bewegt, und ich nehme die Idee ernst. "
        "Große Schritte, die sich schwer rückgängig machen lassen, brauchen zuerst ein "
        "Sicherheitsnetz.",
        "Ich höre, wie sehr Sie wollen, dass sich etwas bewegt, und ich nehme die Idee ernst. "
        "Große Schritte, die sich schwer rückgängig machen lassen, brauchen zuerst ein "
        "Sicherheitsnetz.",
    ),
    Phrase(
        "The drive behind this is a real strength. Let's point it at something that keeps "
        "your options open.",
        "Der Antrieb dahinter ist eine echte Stärke. Lass ihn uns auf etwas richten, das dir "
        "Optionen offenhält.",
        "Der Antrieb dahinter ist eine echte Stärke. Richten wir ihn auf etwas, das Ihnen "
        "Optionen offenhält.",
    ),
)
# Health-related blocks (medication, injury, diet, sleep) need a different opening
# than a risky venture: the drive to feel better is met with care, not strategy.
SAFETY_INTRO_HEALTH = (
    Phrase(
        "It's good that you want to look after yourself — and with your health, the careful "
        "route is usually the faster one.",
        "Gut, dass du auf dich achten willst — bei der Gesundheit ist der vorsichtige Weg "
        "meist auch der schnellere.",
        "Gut, dass Sie auf sich achten wollen — bei der Gesundheit ist der vorsichtige Weg "
        "meist auch der schnellere.",
    ),
)
_VENTURE_STEPS = frozenset({"quit_job_abruptly", "all_savings", "debt_for_venture"})
SAFETY_QUESTIONS: dict[str, Phrase] = {
    "stop_medication": Phrase(
        "When could you talk to your doctor about how you've been feeling?",
        "Wann könntest du mit deiner Ärztin oder deinem Arzt darüber sprechen, wie es dir "
        "gerade geht?",
        "Wann könnten Sie mit Ihrer Ärztin oder Ihrem Arzt darüber sprechen, wie es Ihnen "
        "gerade geht?",
    ),
    "train_through_injury": Phrase(
        "Who could take a look at the injury this week — a doctor or a physio?",
        "Wer könnte sich die Verletzung diese Woche ansehen — Ärztin, Arzt oder Physio?",
        "Wer könnte sich die Verletzung diese Woche ansehen — Ärztin, Arzt oder Physio?",
    ),
    "crash_diet": Phrase(
        "Which one small change would you be willing to keep for a month?",
        "Welche eine kleine Änderung würdest du einen Monat lang beibehalten wollen?",
        "Welche eine kleine Änderung würden Sie einen Monat lang beibehalten wollen?",
    ),
    "sleep_deprivation": Phrase(
        "What could come off your list to protect your sleep?",
        "Was könnte von deiner Liste fliegen, damit dein Schlaf geschützt bleibt?",
        "Was könnte von Ihrer Liste fliegen, damit Ihr Schlaf geschützt bleibt?",
    ),
}

CARE_OPEN = Phrase(
    "Thank you for writing back, and for letting me know how you are.",
    "Danke, dass du dich wieder meldest und mir sagst, wie es dir geht.",
    "Danke, dass Sie sich wieder melden und mir sagen, wie es Ihnen geht.",
)
CARE_MIDDLE = Phrase(
    "There's no need to think about goals right now — rest and the people around you come first.",
    "Um Ziele musst du dich gerade nicht kümmern — Ruhe und die Menschen um dich herum gehen vor.",
    "Um Ziele müssen Sie sich gerade nicht kümmern — Ruhe und die Menschen um Sie herum gehen vor.",
)
CARE_QUESTION = Phrase(
    "How are you feeling right now?",
    "Wie geht es dir gerade?",
    "Wie geht es Ihnen gerade?",
)

SAFER = Phrase(
    "A safer way to move forward: {safer}.",
    "Ein sichererer Weg nach vorn: {safer}.",
    "Ein sichererer Weg nach vorn: {safer}.",
)
SAFER_MORE = Phrase(
    "And alongside that: {safer}.",
    "Und parallel dazu: {safer}.",
    "Und parallel dazu: {safer}.",
)

PATTERN: dict[PatternClass, Phrase] = {
    PatternClass.AVOIDANCE: Phrase(
        "I notice a pattern: the {en} gets announced, then quietly pushed aside as soon as "
        "something else takes over.",
        "Mir fällt ein Muster auf: {de_nom} wird angekündigt und dann leise zur Seite "
        "geschoben, sobald etwas anderes Vorrang bekommt.",
        "Mir fällt ein Muster auf: {de_nom} wird angekündigt und dann leise zur Seite "
        "geschoben, sobald etwas anderes Vorrang bekommt.",
    ),
    PatternClass.PROCRASTINATION: Phrase(
        "The start keeps moving to 'later' — that's a signal the first step is still too big "
        "or too vague.",
        "Der Anfang rutscht immer wieder auf 'später' — ein Zeichen, dass der erste Schritt "
        "noch zu groß oder zu vage ist.",
        "Der Anfang rutscht immer wieder auf 'später' — ein Zeichen, dass der erste Schritt "
        "noch zu groß oder zu vage ist.",
    ),
    PatternClass.OVERCOMMITMENT: Phrase(
        "There's a lot on your plate at once, and every goal is competing for the same evenings.",
        "Gerade liegt sehr viel gleichzeitig auf dem Tisch, und alle Ziele konkurrieren um "
        "dieselben Abende.",
        "Gerade liegt sehr viel gleichzeitig auf dem Tisch, und alle Ziele konkurrieren um "
        "dieselben Abende.",
    ),
    PatternClass.PERFECTIONISM: Phrase(
        "It sounds like the bar is set at 'perfect', and that bar makes starting feel risky.",
        "Es klingt, als läge die Messlatte bei 'perfekt' — und genau das macht das Anfangen "
        "so schwer.",
        "Es klingt, als läge die Messlatte bei 'perfekt' — und genau das macht das Anfangen "
        "so schwer.",
    ),
    PatternClass.ALL_OR_NOTHING: Phrase(
        "I hear a lot of all-or-nothing in how you frame this: either fully on, or it "
        "doesn't count.",
        "Ich höre viel Alles-oder-nichts darin: entweder ganz, oder es zählt nicht.",
        "Ich höre viel Alles-oder-nichts darin: entweder ganz, oder es zählt nicht.",
    ),
    PatternClass.SELF_CRITICISM: Phrase(
        "You're being hard on yourself. Harsh self-talk tends to make the next attempt less "
        "likely, not more.",
        "Du gehst gerade hart mit dir ins Gericht. Strenge Selbstkritik macht den nächsten "
        "Versuch eher unwahrscheinlicher, nicht wahrscheinlicher.",
        "Sie gehen gerade hart mit sich ins Gericht. Strenge Selbstkritik macht den nächsten "
        "Versuch eher unwahrscheinlicher, nicht wahrscheinlicher.",
    ),
    PatternClass.RESTARTING: Phrase(
        "This is another fresh start on the {en}. Restarting is fine — what helps is "
        "planning for the moment the last attempt stalled.",
        "Das ist ein neuer Anlauf {de_bei}. Neu anfangen ist in Ordnung — hilfreich ist, den "
        "Moment einzuplanen, an dem der letzte Versuch ins Stocken kam.",
        "Das ist ein neuer Anlauf {de_bei}. Neu anfangen ist in Ordnung — hilfreich ist, den "
        "Moment einzuplanen, an dem der letzte Versuch ins Stocken kam.",
    ),
    PatternClass.STEADY_PROGRESS: Phrase(
        "Across our check-ins there's a steady line forming — that consistency is the real "
        "achievement.",
        "Über unsere Gespräche hinweg entsteht eine stetige Linie — diese Beständigkeit ist "
        "der eigentliche Erfolg.",
        "Über unsere Gespräche hinweg entsteht eine stetige Linie — diese Beständigkeit ist "
        "der eigentliche Erfolg.",
    ),
}
QUOTE_BACK = Phrase(
    "Earlier you put it like this: “{quote}”",
    "Vorhin hast du es so gesagt: „{quote}“",
    "Vorhin haben Sie es so gesagt: „{quote}“",
)

FOLLOW_LOW = Phrase(
    "Honestly, set up the way it is now, this plan is more likely to slip than to stick — "
    "so let's make it smaller rather than try harder.",
    "Ehrlich gesagt: So wie der Plan jetzt aufgebaut ist, rutscht er eher weg, als dass er "
    "hält — also machen wir ihn kleiner, statt uns mehr anzustrengen.",
    "Ehrlich gesagt: So wie der Plan jetzt aufgebaut ist, rutscht er eher weg, als dass er "
    "hält — also machen wir ihn kleiner, statt uns mehr anzustrengen.",
)
FOLLOW_HIGH = Phrase(
    "Your track record on this is good — the odds are on your side.",
    "Deine bisherige Bilanz dabei ist gut — die Chancen stehen auf deiner Seite.",
    "Ihre bisherige Bilanz dabei ist gut — die Chancen stehen auf Ihrer Seite.",
)

STEP_INTRO: dict[CoachingStrategy, Phrase] = {
    S.IMPLEMENTATION_INTENTIONS: Phrase(
        "Try fixing when and where in advance, as an if-then plan: “{step}”",
        "Probier, Zeit und Ort vorher festzulegen, als Wenn-dann-Plan: „{step}“",
        "Probieren Sie, Zeit und Ort vorher festzulegen, als Wenn-dann-Plan: „{step}“",
    ),
    S.HABIT_STACKING: Phrase(
        "Attach it to something you already do every day, so it doesn't depend on willpower: "
        "“{step}”",
        "Häng es an etwas, das du sowieso schon machst, damit es nicht an der Willenskraft "
        "hängt: „{step}“",
        "Hängen Sie es an etwas, das Sie sowieso schon machen, damit es nicht an der "
        "Willenskraft hängt: „{step}“",
    ),
    S.COGNITIVE_REFRAMING: Phrase(
        "A different way to look at it: {step}",
        "Eine andere Sicht darauf: {step}",
        "Eine andere Sicht darauf: {step}",
    ),
    S.SOLUTION_FOCUSED: Phrase(
        "Look at what was different on the days it worked — time, place, mood, who was "
        "around — and do more of exactly that.",
        "Schau dir an, was an den Tagen anders war, an denen es geklappt hat — Uhrzeit, Ort, "
        "Stimmung, wer dabei war — und mach genau davon mehr.",
        "Schauen Sie sich an, was an den Tagen anders war, an denen es geklappt hat — "
        "Uhrzeit, Ort, Stimmung, wer dabei war — und machen Sie genau davon mehr.",
    ),
    S.SELF_COMPASSION: Phrase(
        "For now, try talking to yourself the way you'd talk to a good friend in the same "
        "spot — then pick the smallest version: {step}",
        "Versuch für den Moment, mit dir so zu reden, wie du mit einer guten Freundin in "
        "derselben Lage reden würdest — und dann nimm die kleinste Version: {step}",
        "Versuchen Sie für den Moment, mit sich so zu reden, wie Sie mit einer guten Freundin "
        "in derselben Lage reden würden — und nehmen Sie dann die kleinste Version: {step}",
    ),
    S.VALUES_CLARIFICATION: Phrase(
        "Before deciding how, it helps to be clear on why: write down what this would make "
        "possible for you, and which part of that matters most.",
        "Bevor es ums Wie geht, hilft das Warum: Schreib auf, was das für dich möglich "
        "machen würde — und welcher Teil davon am meisten zählt.",
        "Bevor es ums Wie geht, hilft das Warum: Schreiben Sie auf, was das für Sie möglich "
        "machen würde — und welcher Teil davon am meisten zählt.",
    ),
    S.MOTIVATIONAL_INTERVIEWING: Phrase(
        "On a scale from 0 to 10, how important is this to you right now — and why isn't "
        "it a lower number?",
        "Auf einer Skala von 0 bis 10: Wie wichtig ist dir das gerade — und warum ist es "
        "keine niedrigere Zahl?",
        "Auf einer Skala von 0 bis 10: Wie wichtig ist Ihnen das gerade — und warum ist es "
        "keine niedrigere Zahl?",
    ),
}
STRETCH = Phrase(
    "Since this is going well, you could raise the bar a notch: {stretch}.",
    "Weil das gut läuft, könntest du die Messlatte eine Stufe höher legen: {stretch}.",
    "Weil das gut läuft, könnten Sie die Messlatte eine Stufe höher legen: {stretch}.",
)

QUESTION: dict[CoachingStrategy, tuple[Phrase, ...]] = {
    S.IMPLEMENTATION_INTENTIONS: (
        Phrase(
            "Which day and time would work for you this week?",
            "Welcher Tag und welche Uhrzeit würden diese Woche für dich passen?",
            "Welcher Tag und welche Uhrzeit würden diese Woche für Sie passen?",
        ),
        Phrase(
            "What would you change in that plan so it fits your real week?",
            "Was würdest du an dem Plan ändern, damit er zu deiner echten Woche passt?",
            "Was würden Sie an dem Plan ändern, damit er zu Ihrer echten Woche passt?",
        ),
    ),
    S.HABIT_STACKING: (
        Phrase(
            "Which daily routine of yours would be the most reliable anchor?",
            "Welche deiner täglichen Routinen wäre der verlässlichste Anker?",
            "Welche Ihrer täglichen Routinen wäre der verlässlichste Anker?",
        ),
    ),
    S.COGNITIVE_REFRAMING: (
        Phrase(
            "What would 'good enough' look like this week?",
            "Wie sähe 'gut genug' diese Woche aus?",
            "Wie sähe 'gut genug' diese Woche aus?",
        ),
    ),
    S.SOLUTION_FOCUSED: (
        Phrase(
            "What do you think made the difference?",
            "Was hat deiner Meinung nach den Unterschied gemacht?",
            "Was hat Ihrer Meinung nach den Unterschied gemacht?",
        ),
    ),
    S.SELF_COMPASSION: (
        Phrase(
            "What would make the next attempt feel kinder and easier?",
            "Was würde den nächsten Versuch freundlicher und leichter machen?",
            "Was würde den nächsten Versuch freundlicher und leichter machen?",
        ),
    ),
    S.VALUES_CLARIFICATION: (
        Phrase(
            "What would have to be true for you to feel ready for the next step?",
            "Was müsste erfüllt sein, damit du dich für den nächsten Schritt bereit fühlst?",
            "Was müsste erfüllt sein, damit Sie sich für den nächsten Schritt bereit fühlen?",
        ),
    ),
    S.MOTIVATIONAL_INTERVIEWING: (
        Phrase(
            "What would a small first step look like, if you decided to take one?",
            "Wie sähe ein kleiner erster Schritt aus, falls du dich für einen entscheidest?",
            "Wie sähe ein kleiner erster Schritt aus, falls Sie sich für einen entscheiden?",
        ),
    ),
}
SAFETY_QUESTION = Phrase(
    "What would you need to see from a small test to feel confident about a bigger move?",
    "Was müsste ein kleiner Test zeigen, damit du dich bei einem größeren Schritt sicher fühlst?",
    "Was müsste ein kleiner Test zeigen, damit Sie sich bei einem größeren Schritt sicher fühlen?",
)

# Reframes for cognitive reframing, by pattern (first-person-free, register-neutral).
REFRAME: dict[PatternClass | None, tuple[str, str]] = {
    PatternClass.ALL_OR_NOTHING: (
        "a missed day isn't a ruined week, and a ten-minute version still counts.",
        "Ein verpasster Tag ist keine verlorene Woche, und eine Zehn-Minuten-Version zählt "
        "trotzdem.",
    ),
    PatternClass.PERFECTIONISM: (
        "a rough version you can improve beats a perfect one that doesn't exist yet.",
        "Eine grobe Version, die man verbessern kann, schlägt eine perfekte, die es noch "
        "nicht gibt.",
    ),
    None: (
        "progress is measured in repetitions, not in how impressive any single day looks.",
        "Fortschritt misst sich an Wiederholungen, nicht daran, wie beeindruckend ein "
        "einzelner Tag aussieht.",
    ),
}


# --------------------------------------------------------------------------- assembly


def _fmt(ph: Phrase, sheet: DecisionSheet, label: TopicLabel, **extra: str) -> str:
    s = ph.get(sheet.language, sheet.formality).format(
        en=label.en,
        de_nom=label.de_nom,
        De_nom=label.de_nom[:1].upper() + label.de_nom[1:],
        de_acc=label.de_acc,
        de_bei=label.de_bei,
        De_bei=label.de_bei[:1].upper() + label.de_bei[1:],
        **extra,
    )
    return s[:1].upper() + s[1:]


def _pick_lang(pair: tuple[str, str], sheet: DecisionSheet) -> str:
    return pair[1] if sheet.language == "de" else pair[0]


def _topic(sheet: DecisionSheet) -> str | None:
    if sheet.focus_goal is not None and sheet.focus_goal.topic is not None:
        return sheet.focus_goal.topic
    return sheet.message_topics[0] if sheet.message_topics else None


def _step_text(sheet: DecisionSheet, topic: str | None) -> str:
    steps = _steps(topic)
    st = sheet.strategy
    if st is S.IMPLEMENTATION_INTENTIONS:
        return _pick_lang(steps.if_then, sheet)
    if st is S.HABIT_STACKING:
        return _pick_lang(steps.anchor, sheet)
    if st is S.COGNITIVE_REFRAMING:
        key = sheet.pattern if sheet.pattern in REFRAME else None
        return _pick_lang(REFRAME[key], sheet)
    return _pick_lang(steps.rough, sheet)


@dataclass(slots=True)
class _Part:
    key: str
    text: str
    essential: bool


def parts(sheet: DecisionSheet) -> list[_Part]:
    """All candidate sentences for this sheet, in reading order."""
    topic = _topic(sheet)
    label = topic_label(topic)
    seed = sheet.seed
    out: list[_Part] = []

    # Acknowledgement (on a risky turn the safety intro acknowledges instead).
    if sheet.mode == "safety":
        pass
    elif topic is None:
        out.append(_Part("ack", pick(ACK_GENERIC, seed).get(sheet.language, sheet.formality), True))
    else:
        out.append(_Part("ack", _fmt(pick(ACK[sheet.signal], seed), sheet, label), True))

    # Safety redirect: only steps the message is heading for now get a safer path.
    current = [b for b in sheet.never_say if b.confidence >= 0.75] or sheet.never_say[:1]
    if sheet.mode == "safety":
        venture = any(b.step_id in _VENTURE_STEPS for b in current[:1])
        intro = pick(SAFETY_INTRO if venture else SAFETY_INTRO_HEALTH, seed, 1)
        out.append(_Part("safety", intro.get(sheet.language, sheet.formality), True))
        for i, b in enumerate(current[:2]):
            spec = CATALOGUE.get(b.step_id)
            safer = spec.safer.get(sheet.language, sheet.formality) if spec else b.safer_alternative
            if not safer:
                continue
            ph = SAFER if i == 0 else SAFER_MORE
            out.append(_Part(f"safer{i}", _fmt(ph, sheet, label, safer=safer), True))

    # Pattern observation, with the user's own earlier words when they are short.
    if sheet.pattern is not None and sheet.pattern in PATTERN:
        out.append(_Part("pattern", _fmt(PATTERN[sheet.pattern], sheet, label), False))
        q = sheet.pattern_evidence
        if q and len(q) <= 110:
            out.append(_Part("quote", _fmt(QUOTE_BACK, sheet, label, quote=q.rstrip()), False))

    # Follow-through, said plainly only when the evidence is clear either way.
    ft = sheet.focus_goal.follow_through if sheet.focus_goal else None
    if ft is not None and sheet.mode == "coach" and not sheet.gentle:
        # Never deflate a progress report with a low forecast; name it on other turns.
        if ft < 35 and sheet.signal is not TurnSignal.PROGRESS:
            out.append(_Part("follow", FOLLOW_LOW.get(sheet.language, sheet.formality), False))
        elif ft >= 70:
            out.append(_Part("follow", FOLLOW_HIGH.get(sheet.language, sheet.formality), False))

    # The concrete step (not while the user is weighing a risky move: the safer path
    # above is the step then).
    if sheet.mode == "coach":
        step = _step_text(sheet, topic)
        out.append(_Part("step", _fmt(STEP_INTRO[sheet.strategy], sheet, label, step=step), True))
        if sheet.stretch:
            stretch = _pick_lang(_steps(topic).stretch, sheet)
            out.append(_Part("stretch", _fmt(STRETCH, sheet, label, stretch=stretch), False))

    # Close with one question (autonomy-supportive), unless the step already asks one.
    if sheet.mode == "safety":
        first = current[0].step_id if current else ""
        q_safe = SAFETY_QUESTIONS.get(first, SAFETY_QUESTION)
        out.append(_Part("question", q_safe.get(sheet.language, sheet.formality), True))
    elif sheet.strategy is not S.MOTIVATIONAL_INTERVIEWING:
        q_ph = pick(QUESTION[sheet.strategy], seed, 3)
        out.append(_Part("question", q_ph.get(sheet.language, sheet.formality), False))
    return out


# Optional parts are dropped in this order when the reply runs over its budget.
_DROP_ORDER = ("stretch", "quote", "follow", "pattern", "question")


def render(sheet: DecisionSheet) -> str:
    """Deterministic prose from the sheet alone, within its word budget."""
    if sheet.mode == "crisis":
        return crisis_reply(sheet.crisis.category, sheet.language, sheet.formality)
    if sheet.mode == "check_in":
        return check_in_reply(sheet.language, sheet.formality)
    if sheet.mode == "care":
        lang, reg = sheet.language, sheet.formality
        return " ".join(
            [
                CARE_OPEN.get(lang, reg),
                CARE_MIDDLE.get(lang, reg),
                *sheet.resources,
                CARE_QUESTION.get(lang, reg),
            ]
        )
    markers = [m for b in sheet.never_say for m in b.markers]
    cands = [p for p in parts(sheet) if not (markers and find_markers(p.text, markers))]
    for key in _DROP_ORDER:
        if sum(word_count(p.text) for p in cands) <= sheet.max_words:
            break
        if sheet.length == "long" and key in ("question", "pattern"):
            continue
        cands = [p for p in cands if p.key != key]
    if sum(word_count(p.text) for p in cands) > sheet.max_words:
        cands = [p for p in cands if p.essential]
    return " ".join(p.text for p in cands)
