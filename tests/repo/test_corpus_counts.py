"""Every corpus README's Counts table says it is generated from the files: it must be."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("counts", ROOT / "tests/data/eval/counts.py")
assert _SPEC is not None and _SPEC.loader is not None
counts = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(counts)


@pytest.mark.parametrize("corpus", sorted(counts.LABELS))
def test_readme_counts_match_the_files(corpus: str) -> None:
    assert counts.readme_table(corpus) == counts.table(corpus), (
        f"run: python3 tests/data/eval/counts.py {corpus} --write"
    )


@pytest.mark.parametrize("corpus", ["steps", "conflicts", "replies"])
def test_safety_corpora_hold_two_hundred_items_with_a_calibration_split(corpus: str) -> None:
    folder = ROOT / "tests/data/eval" / corpus
    sizes = {
        split: len((folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines())
        for split in ("dev", "calibration", "heldout")
    }
    assert sum(sizes.values()) >= 200, sizes
    assert min(sizes.values()) >= 60, sizes
