"""``coachbus replay``: its flags, the checkpoint that resumes a run, the summary
and the exit code (1 when the guard fails, 2 on bad input, 130 on Ctrl-C)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from coachbus.replay.diff import guard, totals, write_outputs
from coachbus.replay.record import Recorded, assemble, load_file, read_topics, save
from coachbus.replay.sandbox import candidate_env, replay_users


async def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    _make_folder(out)
    lines = (
        load_file(args.from_file)
        if args.from_file
        else await read_topics(args.bootstrap, args.source_prefix)
    )
    if args.save:
        save(lines, args.save)
    recorded = assemble(
        lines,
        users=args.user or (),
        since=args.since,
        until=args.until,
        limit=args.limit,
    )
    checkpoint = out / "checkpoint.jsonl"
    done = {} if args.fresh else _load_checkpoint(checkpoint)
    by_user: dict[str, list[Recorded]] = defaultdict(list)
    for turn in recorded:
        by_user[turn.user_id].append(turn)
    todo = {u: turns for u, turns in by_user.items() if u not in done}
    total = len(recorded)
    finished = sum(len(v) for v in done.values())

    sandbox = args.sandbox_prefix or f"replay-{uuid.uuid4().hex[:8]}."
    turns_out: list[dict[str, Any]] = [t for v in done.values() for t in v]

    def on_turn() -> None:
        nonlocal finished
        finished += 1
        print(f"\rreplay: {finished}/{total} turns", end="", file=sys.stderr, flush=True)

    def on_user(user: str, diffs: list[dict[str, Any]]) -> None:
        _append_checkpoint(checkpoint, user, diffs)
        turns_out.extend(diffs)

    if todo:
        try:
            await replay_users(
                todo,
                prefix=sandbox,
                env=candidate_env(
                    sandbox,
                    policy=args.policy,
                    prompts=args.prompts,
                    llm_base_url=args.llm_base_url,
                ),
                bootstrap=args.sandbox_bootstrap,
                llm=args.llm,
                separate=args.separate,
                log_dir=out / "logs",
                concurrency=args.concurrency,
                turn_deadline_ms=args.turn_deadline_ms,
                turn_timeout=args.turn_timeout,
                on_turn=on_turn,
                on_user=on_user,
            )
        finally:
            print(file=sys.stderr)
    order = {t.turn_id: n for n, t in enumerate(recorded)}
    turns_out.sort(key=lambda t: order.get(t["turn_id"], 0))
    diff: dict[str, Any] = {
        "schema_version": 1,
        "source": str(args.from_file) if args.from_file else f"topics:{args.source_prefix}",
        "sandbox_prefix": sandbox,
        "candidate": {
            "policy": str(args.policy) if args.policy else None,
            "prompts": str(args.prompts) if args.prompts else None,
            "llm": args.llm_base_url or args.llm,
        },
        "turns": turns_out,
        "totals": totals(turns_out),
        "guard": guard(turns_out),
    }
    write_outputs(out, diff)
    summary = diff["totals"]
    print(
        f"replayed {summary['turns']} turns: {summary['decisions_changed']} with changed "
        f"decisions, {summary['crisis_changed']} crisis screens changed, {summary['leaks']} "
        f"leaks; wrote {out / 'diff.json'} and {out / 'report.html'}"
    )
    bad = diff["guard"]
    if bad["missed_crisis"] or bad["leaked_steps"]:
        print(
            f"coachbus replay: guard failed: missed crises {bad['missed_crisis']}, "
            f"leaked blocked steps {bad['leaked_steps']}",
            file=sys.stderr,
        )
        return 1
    return 0


def _make_folder(path: Path) -> None:
    # A one-off local call before anything runs: not worth a worker thread.
    path.mkdir(parents=True, exist_ok=True)


def _load_checkpoint(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Users whose whole history was replayed, with their turns' diffs."""
    done: dict[str, list[dict[str, Any]]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            done[entry["user_id"]] = entry["turns"]
    return done


def _append_checkpoint(path: Path, user: str, turns: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"user_id": user, "turns": turns}) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coachbus replay",
        description="Run recorded turns through the pipeline in a sandbox with a candidate "
        "policy or model, and write what changed (docs/eval.md).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-topic", action="store_true", help="read the recorded topics")
    source.add_argument("--from-file", type=Path, help="a file written by --save")
    parser.add_argument("--bootstrap", help="the broker holding the recorded topics")
    parser.add_argument(
        "--source-prefix", default="coachbus.", help="topic prefix of the recording"
    )
    parser.add_argument("--save", type=Path, help="also write what was read to this file")
    parser.add_argument("--since", type=datetime.fromisoformat, help="turns from (ISO time)")
    parser.add_argument("--until", type=datetime.fromisoformat, help="turns before (ISO time)")
    parser.add_argument("--user", action="append", help="only this user's turns (repeatable)")
    parser.add_argument("--limit", type=int, help="at most this many turns (oldest first)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument(
        "--sandbox-bootstrap", help="broker for the sandbox (default: an embedded one)"
    )
    parser.add_argument("--sandbox-prefix", help="topic prefix of the sandbox (default: new)")
    parser.add_argument("--policy", type=Path, help="candidate router policy file")
    parser.add_argument(
        "--prompts", type=Path, help="candidate instructions: a folder of <decision kind>.txt"
    )
    parser.add_argument("--llm", choices=["none", "sim", "local"], default="none")
    parser.add_argument("--llm-base-url", help="candidate OpenAI-compatible endpoint")
    parser.add_argument(
        "--concurrency", type=int, default=16, help="users replayed at once (each in order)"
    )
    parser.add_argument("--turn-deadline-ms", type=int, default=20_000)
    parser.add_argument(
        "--turn-timeout", type=float, default=60.0, help="seconds to wait per final"
    )
    parser.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    parser.add_argument(
        "--separate",
        action="store_true",
        help="one process per agent, as deployed (default: the six in one process)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.from_topic and not args.bootstrap:
        print("coachbus replay: --from-topic needs --bootstrap", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        print("\ncoachbus replay: interrupted; the checkpoint resumes it", file=sys.stderr)
        return 130
    except ValueError as exc:
        print(f"coachbus replay: {exc}", file=sys.stderr)
        return 2
