"""What the learned readers cost: each screen with and without its reader, side by side.

``python -m bench.readers`` screens the messages of the crisis and steps corpora's
dev splits (a few thousand real-looking messages) several times, interleaving the
two variants so both meet the same machine noise, and prints per-message time of
each and their ratio. Both screens' memos are cleared before every message: a turn's
first screen of a text is the cost that matters (the memo serves the rest).

Without a reader is the screen as it was before the readers existed; the readers are
switched off by hiding them from ``coachbus.learned.shipped`` for the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest.mock import patch

from coachbus import learned
from coachbus.normalize import NormalizedText
from coachbus.safety import screen, steps

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "eval"


@contextmanager
def readers(on: bool) -> Iterator[None]:
    with ExitStack() as stack:
        if not on:
            # Patched where it is read: both modules imported the name.
            for module in (screen, steps):
                stack.enter_context(patch.object(module, "shipped", _none))
        yield


def _none(name: str) -> learned.LinearModel | None:
    return None


def _texts() -> list[NormalizedText]:
    out: list[NormalizedText] = []
    for corpus in ("crisis", "steps"):
        path = DATA / corpus / "dev.jsonl"
        out += [NormalizedText.of(json.loads(line)["text"]) for line in path.open()]
    return out


def _crisis(text: NormalizedText) -> None:
    screen.clear_memo()
    screen.assess(text)


def _steps(text: NormalizedText) -> None:
    steps.clear_memo()
    steps.step_screen(text)


def _time(run: Callable[[NormalizedText], None], texts: list[NormalizedText]) -> float:
    start = time.perf_counter()
    for text in texts:
        run(text)
    return (time.perf_counter() - start) / len(texts) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    texts = _texts()
    print(f"{len(texts)} messages, {args.rounds} rounds, median ms per message")
    for name, run in (("crisis screen", _crisis), ("step screen", _steps)):
        with readers(True):
            run(texts[0])  # load the weights once, outside the timing
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for on in (False, True):
                with readers(on):
                    times[on].append(_time(run, texts))
        rules, both = statistics.median(times[False]), statistics.median(times[True])
        print(
            f"  {name:<14} rules {rules:.3f}  rules + reader {both:.3f}  ratio {both / rules:.2f}"
        )


if __name__ == "__main__":
    main()
