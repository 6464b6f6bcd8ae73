"""``coachbus eval crisis --conversations``: risk read across a conversation.

Each labelled conversation (tests/data/eval/conversations/) is replayed turn by turn
through the code Stability runs on the safety state (coachbus.safety.conversation:
:func:`read_turn`, then :func:`fold_turn` into the state, with the state carried
from turn to turn as the compacted topic carries it), and the last turn's screen is
scored against the label. The assistant turns in the files say what the writer
assumed our reply asked; they are not fed in (our own replies follow from the
screen), but the report counts how often our reply asked what the writer assumed.

Side by side: the single-message screen of the last message alone, which is what
coachbus did before the conversation was read.

Scores on the last turn:

* **crisis** — a crisis reply with help lines and a review at high or critical.
  Recall is the share of conversations labelled ``suicidal_ideation`` that got one;
  precision the share of crisis replies that were labelled so (a crisis reply on an
  "asked again" item counts against precision).
* **asked again** — for ``uncertain`` items (no clear answer to our check-in): the
  share that got a check-in again (or a crisis reply, the protective side).
* **critical** — for ``affirmed_with_plan`` and ``not_safe``: the share of caught
  items whose review is critical.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from coachbus.confidence import render_table
from coachbus.contracts.payloads import CrisisScreen, Language
from coachbus.contracts.state import SafetyState
from coachbus.safety.conversation import Reading, fold_turn, read_turn
from coachbus.safety.screen import is_crisis, needs_check_in, review_severity, screen_crisis
from evaluation.corpus import DEFAULT_DATA, CorpusError, Split, load_raw
from evaluation.metrics import Binary, fmt, ratio, smoothed_accuracy

CORPUS = "conversations"
CALIBRATION_SPLIT: Split = "calibration"
POSITIVE = "suicidal_ideation"
LABELS = ("suicidal_ideation", "uncertain", "none")
KINDS = ("check_in_answer", "trajectory", "hard_negative")
# The moment the first message of every replayed conversation is sent; later ones
# follow a minute apart unless the item says how long the person was away.
_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PLAN_CATEGORIES = ("affirmed_with_plan", "not_safe")


@dataclass(frozen=True, slots=True)
class Conversation:
    item_id: str
    language: str
    user_turns: tuple[tuple[str, timedelta], ...]  # (text, time since the previous one)
    assumed: tuple[str | None, ...]  # per user turn: what the writer's assistant asked before it
    label: str
    kind: str
    category: str
    split: Split


def load(split: Split, data: Path = DEFAULT_DATA) -> list[Conversation]:
    out: list[Conversation] = []
    for raw in load_raw(CORPUS, split, data):
        where = f"{CORPUS}/{split}: {raw['id']}"
        if raw["label"] not in LABELS or raw["kind"] not in KINDS:
            raise CorpusError(f"{where}: label must be one of {LABELS}, kind one of {KINDS}")
        turns = raw["turns"]
        if not isinstance(turns, list) or not turns:
            raise CorpusError(f"{where}: turns must be a non-empty list")
        users: list[tuple[str, timedelta]] = []
        assumed: list[str | None] = []
        said: str | None = None
        for t in turns:
            if t.get("role") == "assistant":
                said = str(t.get("says"))
                continue
            if t.get("role") != "user" or not str(t.get("text", "")).strip():
                raise CorpusError(f"{where}: a turn is a user text or an assistant's 'says'")
            gap = timedelta(minutes=int(t.get("minutes_since_previous", 1)))
            users.append((str(t["text"]), gap if users else timedelta(0)))
            assumed.append(said)
            said = None
        if turns[-1].get("role") != "user":
            raise CorpusError(f"{where}: the last turn is the person's")
        out.append(
            Conversation(
                item_id=str(raw["id"]),
                language=str(raw["language"]),
                user_turns=tuple(users),
                assumed=tuple(assumed),
                label=str(raw["label"]),
                kind=str(raw["kind"]),
                category=str(raw["category"]),
                split=split,
            )
        )
    return out


# --------------------------------------------------------------------------- replay


@dataclass(slots=True)
class Replayed:
    item: Conversation
    reading: Reading  # the last turn's
    single: CrisisScreen  # the last message screened alone
    asked: list[str | None] = field(default_factory=list)  # what we asked before each turn

    @property
    def screen(self) -> CrisisScreen:
        """The last turn's screen (deterministic tier: the reading's)."""
        return self.reading.screen

    @property
    def predicted(self) -> str:
        if is_crisis(self.screen):
            return POSITIVE
        return "uncertain" if needs_check_in(self.screen) else "none"

    @property
    def single_predicted(self) -> str:
        if is_crisis(self.single):
            return POSITIVE
        return "uncertain" if needs_check_in(self.single) else "none"

    @property
    def right(self) -> bool:
        return self.predicted == self.item.label


def replay(item: Conversation) -> Replayed:
    """One conversation through the safety state's code, the deterministic tier only
    (Stability's ``assess`` does the same for each message, see its equivalence test)."""
    state: SafetyState | None = None
    now = _START
    asked: list[str | None] = []
    reading: Reading | None = None
    language: Language = "de" if item.language == "de" else "en"
    for i, (text, gap) in enumerate(item.user_turns):
        now += gap
        asked.append(state.open_check_in.question if state and state.open_check_in else None)
        turn_id = f"{item.item_id}-t{i + 1}"
        s = state.model_copy(deep=True) if state is not None else SafetyState(user_id=item.item_id)
        reading = read_turn(state, text, turn_id, now)
        s.turn_count += 1
        fold_turn(
            s,
            reading,
            reading.screen,
            turn=s.turn_count,
            turn_id=turn_id,
            language=language,
            now=now,
        )
        s.mark_applied(turn_id)
        state = s
    assert reading is not None
    return Replayed(item, reading, screen_crisis(item.user_turns[-1][0]), asked)


# --------------------------------------------------------------------------- report


def _assumed_question(assumed: str | None) -> str | None:
    return {"check_in": "suicide", "crisis_reply": "safety"}.get(assumed or "")


def _score(rows: Sequence[Replayed], pick: str) -> dict[str, Any]:
    crisis = Binary()
    by_language: dict[str, Binary] = defaultdict(Binary)
    by_kind: dict[str, Binary] = defaultdict(Binary)
    by_category: dict[str, Counter[str]] = defaultdict(Counter)
    again = Counter[str]()
    for r in rows:
        predicted = r.predicted if pick == "conversation" else r.single_predicted
        gold = r.item.label == POSITIVE
        hit = predicted == POSITIVE
        crisis.add(gold, hit)
        by_language[r.item.language].add(gold, hit)
        by_kind[r.item.kind].add(gold, hit)
        cat = by_category[r.item.category]
        cat["n"] += 1
        cat["right"] += predicted == r.item.label
        cat["crisis"] += hit
        if r.item.label == "uncertain":
            again["n"] += 1
            again["asked"] += predicted in ("uncertain", POSITIVE)
    return {
        "crisis": crisis.as_dict(),
        "by_language": {k: v.as_dict() for k, v in sorted(by_language.items())},
        "by_kind": {k: v.as_dict() for k, v in sorted(by_kind.items())},
        "by_category": {
            k: {"n": v["n"], "right": ratio(v["right"], v["n"]), "crisis": v["crisis"]}
            for k, v in sorted(by_category.items())
        },
        "asked_again": ratio(again["asked"], again["n"]),
    }


def report(split: str, rows: Sequence[Replayed], *, list_items: bool) -> dict[str, Any]:
    conv = _score(rows, "conversation")
    plan = [r for r in rows if r.item.category in PLAN_CATEGORIES and r.predicted == POSITIVE]
    conv["critical_when_plan"] = ratio(
        sum(review_severity(r.screen) == "critical" for r in plan), len(plan)
    )
    affirmed = [r for r in rows if r.item.category in ("affirmed", "affirmed_with_plan")]
    conv["affirmed_recall"] = ratio(sum(r.predicted == POSITIVE for r in affirmed), len(affirmed))
    # Did our reply ask what the writer assumed, before the last turn?
    assumed = [r for r in rows if _assumed_question(r.item.assumed[-1]) is not None]
    asked_as_assumed = ratio(
        sum(r.asked[-1] == _assumed_question(r.item.assumed[-1]) for r in assumed), len(assumed)
    )
    out: dict[str, Any] = {
        "corpus": CORPUS,
        "split": split,
        "items": len(rows),
        "tiers": {"conversation": conv, "single_message": _score(rows, "single")},
        "asked_as_assumed": asked_as_assumed,
        "outcomes": dict(sorted(Counter(r.reading.outcome for r in rows).items())),
    }
    if list_items:
        out["misses"] = [
            {
                "id": r.item.item_id,
                "category": r.item.category,
                "label": r.item.label,
                "predicted": r.predicted,
                "outcome": r.reading.outcome,
                "asked": r.asked,
                "matched": r.screen.matched,
            }
            for r in rows
            if not r.right
        ]
    return out


def ordinary_asked(talk: Sequence[str]) -> dict[str, Any]:
    """How often our reply would ask the direct question (or answer a crisis) on the
    first message of ordinary coaching talk: the conversation reader's cost, beside
    the message screen's own. A check-in asked of someone planning their week intrudes
    and wears out trust in the question."""
    asked = screened = 0
    for text in talk:
        reading = read_turn(None, text, "ordinary", _START)
        asked += is_crisis(reading.screen) or needs_check_in(reading.screen)
        screened += is_crisis(reading.message_screen) or needs_check_in(reading.message_screen)
    return {"messages": len(talk), "asked": asked, "message_screen": screened}


def measure_calibration(rows: Sequence[Replayed]) -> dict[str, float]:
    """Laplace-smoothed accuracy of each conversation outcome, as the message screen's
    calibration measures it. "message" is left out: a turn the conversation did not
    change reports the message screen's own measured confidence."""
    return smoothed_accuracy(
        (r.reading.outcome, r.right)
        for r in rows
        if r.reading.outcome not in ("message", "replayed")
    )


def calibration_toml(table: dict[str, float], items: int) -> str:
    header = [
        "# Measured, not chosen: written by `coachbus eval crisis --conversations",
        f"# --calibrate` from the conversations' calibration split ({items} items). For each",
        "# outcome of reading a message in its conversation (an answer to our check-in or to",
        "# 'are you safe right now?', or a warning pattern completed): how often the last",
        "# turn's answer was right, Laplace-smoothed. No rule is tuned on this split; a test",
        "# recomputes it and fails when this file differs.",
    ]
    return render_table(header, table)


def _fmt(v: float | None) -> str:
    return fmt(v, missing="—")


def render_text(rep: dict[str, Any]) -> str:
    conv, single = rep["tiers"]["conversation"], rep["tiers"]["single_message"]
    lines = [
        f"crisis across the conversation — {rep['split']} ({rep['items']} conversations)",
        "",
        f"{'':28}{'conversation':>16}{'single message':>18}",
    ]

    def row(name: str, a: dict[str, Any], b: dict[str, Any]) -> str:
        pa = f"{_fmt(a['recall'])} / {_fmt(a['precision'])}"
        pb = f"{_fmt(b['recall'])} / {_fmt(b['precision'])}"
        return f"{name:28}{pa:>16}{pb:>18}"

    lines.append(row("recall / precision", conv["crisis"], single["crisis"]))
    for lang in conv["by_language"]:
        lines.append(row(f"  {lang}", conv["by_language"][lang], single["by_language"][lang]))
    for kind in conv["by_kind"]:
        lines.append(row(f"  {kind}", conv["by_kind"][kind], single["by_kind"][kind]))
    lines += [
        "",
        f"affirmed check-ins caught: {_fmt(conv['affirmed_recall'])}; asked again when "
        f"unclear: {_fmt(conv['asked_again'])}; critical when a plan is known: "
        f"{_fmt(conv['critical_when_plan'])}",
        f"our reply asked what the writer assumed: {_fmt(rep['asked_as_assumed'])}",
    ]
    talk = rep.get("ordinary_asked")
    if talk and talk["messages"]:
        lines.append(
            f"asked of ordinary coaching messages: {talk['asked']} of {talk['messages']} "
            f"(the message screen alone: {talk['message_screen']})"
        )
    lines += [
        "",
        f"{'category':24}{'n':>4}{'right':>8}{'single':>8}",
    ]
    for cat, v in conv["by_category"].items():
        s = single["by_category"][cat]
        lines.append(f"{cat:24}{v['n']:>4}{_fmt(v['right']):>8}{_fmt(s['right']):>8}")
    for m in rep.get("misses", []):
        lines.append(
            f"  miss {m['id']} {m['category']}: {m['label']} -> {m['predicted']} ({m['outcome']})"
        )
    return "\n".join(lines)


def run(split: Split, data: Path = DEFAULT_DATA) -> list[Replayed]:
    return [replay(c) for c in load(split, data)]
