"""``python3 tests/data/eval/counts.py CORPUS [--write]``: the Counts table of a corpus README.

The tables say "generated from the files"; this is the generator, and
tests/repo/test_corpus_counts.py fails when a README's table no longer matches its
files (a corpus grew and the README did not). ``--write`` replaces the table in place.
Standard library only, so it runs without the project installed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = ("dev", "calibration", "heldout")
LANGUAGES = ("en", "de")


def _steps(item: dict[str, object]) -> list[str]:
    expected = item["expected"]
    assert isinstance(expected, list)
    return [str(s) for s in expected] or ["[] (hard negative)"]


def _conflicts(item: dict[str, object]) -> list[str]:
    expected = item["expected"]
    return [str(expected["rule"])] if isinstance(expected, dict) else ["null (no conflict)"]


def _patterns(item: dict[str, object]) -> list[str]:
    expected = item["expected"]
    return [str(expected)] if expected else ["null (no pattern yet)"]


def _register(item: dict[str, object]) -> list[str]:
    labels = [f"register {item['expected_register'] or 'null'}"]
    return [*labels, "stated = true"] if item["stated"] else labels


def _replies(item: dict[str, object]) -> list[str]:
    expected = item["expected"]
    assert isinstance(expected, list)
    return [f"defect {d}" for d in expected] or ["[] (good reply)"]


def _conversations(item: dict[str, object]) -> list[str]:
    return [f"{item['kind']} / {item['category']} ({item['label']})"]


LABELS: dict[str, Callable[[dict[str, object]], list[str]]] = {
    "conversations": _conversations,
    "steps": _steps,
    "conflicts": _conflicts,
    "patterns": _patterns,
    "register": _register,
    "replies": _replies,
}


def table(corpus: str) -> str:
    """The Counts table and its summary line, as the README carries them."""
    folder = HERE / corpus
    splits = [s for s in SPLITS if (folder / f"{s}.jsonl").exists()]
    cells: Counter[tuple[str, str, str]] = Counter()
    items: Counter[tuple[str, str]] = Counter()
    for split in splits:
        for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            lang = str(item["language"])
            items[split, lang] += 1
            for label in LABELS[corpus](item):
                cells[label, split, lang] += 1
            cells[f"source = {item['source']}", split, lang] += 1
    columns = [(s, lang) for s in splits for lang in LANGUAGES]
    labels = sorted({k[0] for k in cells if not k[0].startswith("source")})
    rows = [*labels, "source = written", "source = paraphrase"]
    out = [
        "| label | " + " | ".join(f"{s} {lang}" for s, lang in columns) + " | total |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for row in rows:
        counts = [cells[row, s, lang] for s, lang in columns]
        out.append(f"| {row} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    counts = [items[c] for c in columns]
    out.append("| **all items** | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    total = sum(counts)
    dev = items["dev", "en"] + items["dev", "de"]
    out += [
        "",
        f"Dev holds {dev} of {total} items ({round(100 * dev / total)} %). Multi-label "
        "items count once per label, so label rows may add up to more than the item count.",
    ]
    return "\n".join(out)


def readme_table(corpus: str) -> str:
    """The table as the README has it now (between the Counts heading and Recompute)."""
    text = (HERE / corpus / "README.md").read_text(encoding="utf-8")
    start = text.index("| label |", text.index("## Counts"))
    end = text.index("Recompute", start)
    return text[start:end].strip()


def write(corpus: str) -> None:
    path = HERE / corpus / "README.md"
    text = path.read_text(encoding="utf-8")
    text = text.replace(readme_table(corpus), table(corpus), 1)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or sorted(LABELS)
    for name in names:
        if "--write" in sys.argv:
            write(name)
        else:
            print(f"## {name}\n\n{table(name)}\n")
