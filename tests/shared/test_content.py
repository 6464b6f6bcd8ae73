"""Completeness of the content files: every sentence fills in every language and
register, every life domain has its label and steps, every risky step its markers
and safer phrase; and a broken file names the place of the mistake."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import re
import tomllib
from collections.abc import Callable, Iterator
from importlib import resources
from types import ModuleType
from typing import Any, get_args

import pytest

from coachbus import content as C
from coachbus import text
from coachbus.content.phrases import DOMAIN, phrase, variants
from coachbus.safety import steps
from coachbus.text import (
    DOMAIN_LABELS,
    DOMAIN_ORDER,
    GENERIC_LABEL,
    PLACEHOLDERS,
    SLOTS,
    DomainLabel,
    Language,
    Phrase,
    Register,
    detect_register,
)
from services.coach import phrases as coach_phrases
from services.synth import render

pytestmark = pytest.mark.unit

FORMS: list[tuple[Language, Register]] = [
    (lang, reg) for lang in get_args(Language) for reg in get_args(Register)
]
# Domains whose steps are the generic ones until someone writes theirs (adding steps
# changes replies, so it is a content change of its own). Remove a domain from here
# when domain_steps.toml gets its section.
GENERIC_STEPS_FOR = {"music", "mindfulness", "substances"}


def _walk(value: object, at: str) -> Iterator[tuple[str, Phrase]]:
    if isinstance(value, Phrase):
        yield at, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{at}[{getattr(k, 'value', k)!r}]")
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            yield from _walk(v, f"{at}[{i}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{at}.{f.name}")


def _phrases(module: ModuleType) -> dict[str, Phrase]:
    found: dict[str, Phrase] = {}
    for name, value in vars(module).items():
        if not name.startswith("_"):
            found.update(_walk(value, f"{module.__name__}.{name}"))
    return found


ALL: dict[str, Phrase] = {
    **_phrases(coach_phrases),
    **_phrases(render),
    **{f"steps.CATALOGUE[{k!r}].safer": s.safer for k, s in steps.CATALOGUE.items()},
}


def test_the_sentences_were_found() -> None:
    # Coach's and Synth's libraries and the catalogue's safer phrases, at least.
    assert len(ALL) > 150
    assert any(k.startswith("services.coach") for k in ALL)
    assert any(k.startswith("services.synth") for k in ALL)


@pytest.mark.parametrize("where", sorted(ALL))
def test_every_placeholder_resolves_in_every_language_and_register(where: str) -> None:
    ph = ALL[where]
    used = ph.placeholders()
    assert used <= PLACEHOLDERS, f"{where}: {sorted(used - PLACEHOLDERS)}"
    slots: dict[str, str | Phrase] = {s: f"<{s}>" for s in used & set(SLOTS)}
    for label in (*DOMAIN_LABELS.values(), GENERIC_LABEL):
        for lang, reg in FORMS:
            filled = ph.fill(lang, reg, label, **slots)
            assert filled.strip() and "{" not in filled and "}" not in filled, (where, lang, reg)
            assert filled[:1] == filled[:1].upper()


@pytest.mark.parametrize("where", sorted(ALL))
def test_every_phrase_has_english_du_and_sie(where: str) -> None:
    ph = ALL[where]
    assert ph.en.strip() and ph.du.strip() and ph.sie.strip(), where
    if ph.du != ph.sie:
        # Written out by hand per register: the du form addresses with du, the Sie form
        # with Sie (or neither), never the other way round.
        assert detect_register(ph.du) != "formal", (where, ph.du)
        assert detect_register(ph.sie) != "informal", (where, ph.sie)


def test_every_life_domain_has_its_label_and_steps() -> None:
    assert set(DOMAIN_LABELS) == set(DOMAIN_ORDER)
    assert all(isinstance(lab, DomainLabel) for lab in DOMAIN_LABELS.values())
    assert set(render.DOMAIN_STEPS) == set(DOMAIN_ORDER) - GENERIC_STEPS_FOR
    for label in (*DOMAIN_LABELS.values(), GENERIC_LABEL):
        assert all(label.forms().values())
    # Every domain's regex and its place in the priority order.
    assert set(text.DOMAIN_REGEX) == set(DOMAIN_ORDER)
    # Coach's per-domain questions and the catalogue name only known domains.
    assert set(coach_phrases.QUESTION_BY_DOMAIN) <= set(DOMAIN_ORDER)
    assert {s.domain for s in steps.CATALOGUE.values()} - {None} <= set(DOMAIN_ORDER)


@pytest.mark.parametrize("step_id", sorted(steps.CATALOGUE))
def test_every_risky_step_has_markers_and_a_safer_phrase(step_id: str) -> None:
    spec = steps.CATALOGUE[step_id]
    assert spec.markers and all(m == m.strip().lower() for m in spec.markers)
    for lang, reg in FORMS:
        assert spec.safer.get(lang, reg).strip()
        assert not spec.safer.placeholders()
    assert spec.needs_condition in ("", *steps.CONDITION_TTL)
    assert set(spec.reveals) <= set(steps.CONDITION_TTL)


def test_one_placeholder_vocabulary() -> None:
    # The slots a renderer fills and the domain label's forms make up the vocabulary;
    # the same Phrase.fill serves Coach and Synth.
    assert set(DOMAIN) == set(GENERIC_LABEL.forms())
    assert set(SLOTS) | DOMAIN == PLACEHOLDERS
    ph = Phrase("the {nth} time, {en}", "das {nth} Mal {de_bei}", "das {nth} Mal {de_bei}")
    nth = Phrase("second", "zweite", "zweite")
    label = DOMAIN_LABELS["fitness"]
    assert ph.fill("en", "informal", label, nth=nth) == "The second time, training"
    assert ph.fill("de", "formal", label, nth=nth) == "Das zweite Mal beim Training"
    with pytest.raises(KeyError):
        ph.fill("en", "informal", label, nht="x")
    with pytest.raises(KeyError):
        ph.fill("en", "informal", label)  # {nth} has no value


# --------------------------------------------------------------------------- errors


def _doc(raw: dict[str, object]) -> C.Doc:
    return C.Doc("example.toml", raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"en": "Hi {en}", "de": "Hallo {safer}"}, "example.toml: g[1].de: unknown placeholders"),
        ({"en": "Hi", "du": "Hallo", "sie": "Hallo"}, "g[1]: the du and Sie forms are the same"),
        ({"en": "Hi", "du": "Hallo du"}, "g[1].sie: must be a non-empty string"),
        ({"en": "Hi"}, "g[1]: needs en, and de (or du and sie)"),
        ({"en": "Hi", "de": "Hallo", "fr": "Salut"}, "g[1]: unknown keys ['fr']"),
        ({"en": "Hi {", "de": "Hallo"}, "g[1].en: Single '{'"),
    ],
)
def test_a_mistake_names_the_file_and_the_place(raw: dict[str, object], message: str) -> None:
    doc = _doc({"g": [{"en": "ok", "de": "ok"}, raw]})
    with pytest.raises(C.ContentError, match=re.escape(message)):
        variants(doc, doc.raw["g"], "g", DOMAIN)


def test_a_phrase_reads_the_shared_german_form_for_both_registers() -> None:
    ph = phrase(_doc({}), {"en": "Thanks.", "de": "Danke."}, "x")
    assert (ph.en, ph.du, ph.sie) == ("Thanks.", "Danke.", "Danke.")


def test_a_bad_regex_names_its_place() -> None:
    with pytest.raises(C.ContentError, match=r"example.toml: cues: not a regular expression"):
        C.pattern(_doc({}), "(unclosed", "cues")


def _broken(monkeypatch: pytest.MonkeyPatch, name: str, edit: Callable[[Any], None]) -> None:
    """Make the loaders read ``name`` with ``edit`` applied (the others as shipped)."""
    read = C.read

    def patched(package: str, file: str) -> C.Doc:
        doc = read(package, file)
        if file != name:
            return doc
        raw = copy.deepcopy(doc.raw)
        edit(raw)
        return C.Doc(doc.source, raw)

    monkeypatch.setattr(C, "read", patched)


def test_a_broken_catalogue_names_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    _broken(monkeypatch, "risky_steps.toml", lambda raw: raw["step"][2]["safer"].pop("en"))
    with pytest.raises(C.ContentError, match=r"risky_steps.toml: step\[2\].safer.en: must be"):
        steps._catalogue()
    _broken(monkeypatch, "risky_steps.toml", lambda raw: raw["step"][0].update(reveals=["x"]))
    with pytest.raises(C.ContentError, match=r"step\[0\].reveals: 'x' is not a \[condition\]"):
        steps._catalogue()
    # A combination's `needs` names a condition too.
    monkeypatch.undo()
    _broken(
        monkeypatch, "risky_steps.toml", lambda raw: raw["step"][0]["combo"][0].update(needs="y")
    )
    with pytest.raises(C.ContentError, match=r"step\[0\].combo\[0\].needs: 'y' is not a \["):
        steps._catalogue()
    # A step's past is read as over or as the harm: anything else names its place.
    monkeypatch.undo()
    _broken(monkeypatch, "risky_steps.toml", lambda raw: raw["step"][0].update(past="later"))
    with pytest.raises(C.ContentError, match=r"step\[0\].past: 'later': must be \"over\" or"):
        steps._catalogue()
    # The learned reader's bar for standing in for a condition: a probability, and only
    # on a step that needs a condition (step 0, quitting a job, needs none).
    monkeypatch.undo()
    _broken(
        monkeypatch,
        "risky_steps.toml",
        lambda raw: raw["step"][0].update(learned_reads_condition=0.7),
    )
    with pytest.raises(C.ContentError, match=r"step\[0\].learned_reads_condition: 0.7: a prob"):
        steps._catalogue()


def test_a_shared_pattern_list_must_exist_and_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # "@name" stands for lists.name; a name with no list is a typo that would drop
    # every phrase of it, a list nobody names is phrases a writer believes count.
    _broken(
        monkeypatch,
        "risky_steps.toml",
        lambda raw: raw["condition"]["abuse"]["cues"].append("@harm_tld"),
    )
    with pytest.raises(C.ContentError, match=r"condition.abuse.cues\[\d+\]: '@harm_tld': no list"):
        steps._catalogue()
    monkeypatch.undo()
    _broken(monkeypatch, "risky_steps.toml", lambda raw: raw["lists"].update(spare=["x"]))
    with pytest.raises(C.ContentError, match=r"lists.spare: no pattern list refers to it"):
        steps._catalogue()


def test_a_domain_without_a_label_form_names_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    _broken(monkeypatch, "domains.toml", lambda raw: raw["domain"][5]["label"].pop("bei"))
    with pytest.raises(C.ContentError, match=r"domains.toml: domain\[5\].label.bei: must be"):
        text._domains()


def test_synth_will_not_start_with_a_missing_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    _broken(monkeypatch, "render.toml", lambda raw: raw["step"].pop("habit_stacking"))
    with pytest.raises(C.ContentError, match=r"render.toml: step: missing \['habit_stacking'\]"):
        importlib.reload(render)
    monkeypatch.undo()
    importlib.reload(render)


def _pattern_strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _pattern_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pattern_strings(value)


# An end-of-message anchor that is not looked ahead at ("\W*$" rather than "(?=\W*$)"),
# in a pattern that closes on a word boundary: after "yes." the boundary can never hold
# at the end of the message, so the alternative matches only messages without closing
# punctuation. Six conversation cues were dead that way ("…, yes.", "wozu auch?").
_BARE_END = re.compile(r"(?<!\(\?=)\\W\*\$")


def test_no_pattern_anchors_the_message_end_before_a_closing_word_boundary() -> None:
    root = resources.files("coachbus.content")
    files = [root / "risky_steps.toml", *(root / "crisis").iterdir()]
    found = []
    for path in files:
        if not path.name.endswith(".toml"):
            continue
        for pattern in _pattern_strings(tomllib.loads(path.read_text("utf-8"))):
            if pattern.rstrip().endswith(r"\b") and _BARE_END.search(pattern):
                found.append(f"{path.name}: {pattern[:80]}")
    assert not found, found
