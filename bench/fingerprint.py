"""``python -m bench.fingerprint [--out FILE]``: everything coachbus renders, as one digest.

A refactor that claims "no behaviour change" shows it here: run this on the commit
before and on the candidate, and the digests (per section and overall) must match;
``--out`` writes the full rendered text so a difference can be read with ``diff``.

Sections:

- ``chain``: every scripted conversation (tests/fixtures/conversation.py) and every
  labelled conversation of the conversation corpus, each user message run through the
  six agents' pure functions in order, state chained turn by turn; per turn the
  final reply, the decision sheet and the conflicts recorded.
- ``eval``: ``coachbus eval all --json`` on every split, and the conversation eval.

The environment is pinned (locale, help-lines file) so the digest does not depend on
the machine it runs on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Pinned before any coachbus import: help lines and replies depend on them.
_PINNED = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_UNSET = ("COACHBUS_HELPLINES_FILE", "COACHBUS_POLICY_FILE")


def _pin_environment() -> None:
    os.environ.update(_PINNED)
    for name in _UNSET:
        os.environ.pop(name, None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def _chain_lines() -> Iterator[str]:
    from tests.fixtures.conversation import USERS
    from tests.fixtures.replay import replay

    for user in USERS:
        for step in replay(user):
            yield _render(step.msg.turn_id, step.final)
    yield from _corpus_chain()


def _corpus_chain() -> Iterator[str]:
    """The conversation corpus's user turns through the chain, one user per item."""
    from datetime import UTC, datetime, timedelta

    from coachbus.contracts.events import TurnBudget, UserMessage
    from evaluation.chain import Chain

    folder = ROOT / "tests" / "data" / "eval" / "conversations"
    epoch = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
    for split in ("dev", "calibration", "heldout"):
        for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            chain = Chain()
            texts = [t["text"] for t in item["turns"] if t["role"] == "user"]
            for n, text in enumerate(texts):
                created = epoch + timedelta(minutes=2 * n)
                deadline = created + timedelta(seconds=60)
                step = chain.turn(
                    UserMessage(
                        turn_id=f"{item['id']}-{n}",
                        session_id=f"{item['id']}-s",
                        user_id=f"{item['id']}-u",
                        created_at=created,
                        text=text,
                        deadline_at=deadline,
                        budget=TurnBudget(max_tokens=4_000, deadline_at=deadline),
                    )
                )
                yield "coach " + step.coach.model_dump_json()
                yield _render(step.msg.turn_id, step.final)


def _render(turn_id: str, final: object) -> str:
    dump = getattr(final, "model_dump_json")  # noqa: B009 - any pydantic outcome
    return f"{turn_id} {dump()}"


def _eval_lines() -> Iterator[str]:
    runs = [["eval", "all", "--split", s, "--json"] for s in ("dev", "heldout")]
    runs.append(["eval", "crisis", "--split", "calibration", "--json"])
    runs.append(["eval", "crisis", "--conversations", "--split", "all", "--json"])
    for argv in runs:
        # A process per run, as a user calls it: the command's own output is the product.
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                "from coachbus.cli import main; raise SystemExit(main())",
                *argv,
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=os.environ.copy(),
        )
        yield " ".join(argv)
        # Wall-clock fields differ run to run; everything else is rendered output.
        yield json.dumps(_without_timings(json.loads(run.stdout)), sort_keys=True)


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {
            k: _without_timings(v)
            for k, v in value.items()
            if not any(t in k for t in ("latency", "elapsed", "seconds", "generated_at", "_ms"))
        }
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the rendered text here")
    args = parser.parse_args(argv)
    _pin_environment()
    sections = {"chain": list(_chain_lines()), "eval": list(_eval_lines())}
    whole = hashlib.sha256()
    for name, lines in sections.items():
        text = "\n".join(lines)
        whole.update(text.encode())
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        print(f"{name:6} {len(lines):6} lines  {digest}")
    print(f"all    {sum(map(len, sections.values())):6} lines  {whole.hexdigest()[:16]}")
    if args.out:
        args.out.write_text(
            "\n".join(f"[{n}] {line}" for n, ls in sections.items() for line in ls) + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
