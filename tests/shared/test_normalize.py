"""The one normaliser every screen reads (coachbus.normalize)."""

from __future__ import annotations

import re

import pytest

from coachbus.normalize import fold_pattern, normalize

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        # typographic apostrophes and quotes, the iOS/macOS default
        ("I can’t do this", "i cannot do this"),
        ("I don’t know", "i do not know"),
        ("„Ich will nicht“", '"ich will nicht"'),
        # umlauts written either way are one word; ß folds to ss
        ("Ich möchte", "ich moechte"),
        ("Ich moechte", "ich moechte"),
        ("Das heißt", "das heisst"),
        # stretched letters, capitals, no punctuation
        ("i wanna dieeee", "i want to die"),
        ("SOOOO TIRED", "so tired"),
        # slang and abbreviations
        ("kms rn", "kill myself right now"),
        ("ran 5 kms, then 10kms", "ran 5 km, then 10 km"),
        # contractions are spelled out before apostrophes go: "he'll" is not "hell"
        ("he’ll find me", "he will find me"),
        ("I'm done, I'd go, they're here", "i am done, i would go, they are here"),
        ("I've been, won't, can't", "i have been, will not, cannot"),
        ("hab nich geschlafen", "habe nicht geschlafen"),
        # full-width forms, zero-width characters, dashes, white space
        ("Ｉ　ｃａｎ’ｔ", "i cannot"),
        ("kill\u200bmyself", "killmyself"),
        ("end — it", "end - it"),
        ("  a \n\t b  ", "a b"),
    ],
)
def test_every_way_of_typing_reads_the_same(typed: str, read: str) -> None:
    assert normalize(typed) == read


def test_words_with_a_reading_of_their_own_are_not_expanded() -> None:
    # "im" is German ("in dem"), "ill" and "id" are English words.
    assert normalize("Ich bin im Büro, I feel ill, my ID") == "ich bin im buero, i feel ill, my id"


def test_patterns_fold_like_text_and_keep_their_escapes() -> None:
    rx = re.compile(fold_pattern(r"\bMÖCHTE\W+Straße\S"))
    assert rx.search(normalize("ich Möchte, strasse!"))
    assert fold_pattern(r"\W\S\D\B") == r"\W\S\D\B"


def test_an_umlaut_inside_a_character_class_is_refused() -> None:
    with pytest.raises(ValueError, match="character classes"):
        fold_pattern("[äö]x")
