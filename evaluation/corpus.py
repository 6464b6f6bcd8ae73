"""Loading labelled corpora (JSON Lines, one item per line)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# dev: tuned on. calibration: scored only to measure how often each answer is right
# (the crisis screen's confidences), never tuned on, and not the test set. heldout:
# report only. Every corpus has dev and heldout; calibration only where a decision
# reports a measured confidence (crisis), so it is optional.
Split = Literal["dev", "calibration", "heldout"]
SPLITS: tuple[Split, ...] = ("dev", "calibration", "heldout")
REQUIRED: tuple[Split, ...] = ("dev", "heldout")
DEFAULT_DATA = Path("tests/data/eval")
_KEYS = {"id", "text", "language", "label", "category", "source"}


class CorpusError(ValueError):
    """A corpus file that cannot be scored, with the file and line."""


@dataclass(frozen=True, slots=True)
class Item:
    item_id: str
    text: str
    language: Literal["en", "de"]
    label: str
    category: str
    source: str
    split: Split


# The fields each corpus adds to id, language and source (tests/data/eval/README.md).
FIELDS: dict[str, tuple[str, ...]] = {
    "crisis": ("text", "label", "category"),
    "steps": ("text", "conditions", "expected"),
    "conflicts": ("turns", "expected"),
    "patterns": ("turns", "expected"),
    "register": ("text", "expected_language", "expected_register", "stated"),
    "replies": ("reply", "register", "never_say", "expected"),
    "conversations": ("turns", "label", "kind", "category"),
}


def splits(corpus: str, split: str, data: Path = DEFAULT_DATA) -> tuple[Split, ...]:
    """The splits ``split`` names for a corpus: ``all`` is every split the corpus has
    (dev and heldout always, calibration where its file exists)."""
    if split != "all":
        if split not in SPLITS:
            raise CorpusError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        return (split,)
    return tuple(s for s in SPLITS if s in REQUIRED or (data / corpus / f"{s}.jsonl").is_file())


def load_raw(corpus: str, split: Split, data: Path = DEFAULT_DATA) -> list[dict[str, Any]]:
    """Every item of a corpus split as a dict, its keys checked against ``FIELDS``."""
    path = data / corpus / f"{split}.jsonl"
    if not path.is_file() and split not in REQUIRED and (data / corpus).is_dir():
        raise CorpusError(f"corpus {corpus} has no {split} split (no {path})")
    if not path.is_file():
        raise CorpusError(f"no corpus file {path} (run from the repository root or pass --data)")
    keys = {"id", "language", "source", *FIELDS[corpus]}
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{n}: not JSON: {exc}") from None
        if not isinstance(raw, dict) or set(raw) != keys:
            raise CorpusError(f"{path}:{n}: keys must be exactly {sorted(keys)}")
        if raw["language"] not in ("en", "de") or raw["id"] in seen:
            raise CorpusError(f"{path}:{n}: language en|de and a unique id")
        seen.add(raw["id"])
        items.append(raw)
    return items


def load(corpus: str, split: Split, data: Path = DEFAULT_DATA) -> list[Item]:
    """A classification corpus (crisis) as typed items."""
    items: list[Item] = []
    for raw in load_raw(corpus, split, data):
        if raw["source"] not in ("written", "paraphrase"):
            raise CorpusError(f"{corpus}/{split}: {raw['id']}: source written|paraphrase")
        items.append(
            Item(
                item_id=str(raw["id"]),
                text=str(raw["text"]),
                language=raw["language"],
                label=str(raw["label"]),
                category=str(raw["category"]),
                source=str(raw["source"]),
                split=split,
            )
        )
    return items
