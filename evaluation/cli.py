"""``coachbus eval``: score decisions on labelled corpora (see docs/eval.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from coachbus import confidence
from coachbus.llm import Policy
from evaluation import conversations as conv
from evaluation import crisis, decisions, learn
from evaluation.corpus import DEFAULT_DATA, SPLITS, CorpusError, Split, load, load_raw, splits
from evaluation.html import render_html
from evaluation.tiers import Candidate

CORPORA = ("crisis", *decisions.SCORERS)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="coachbus eval",
        description="Score decisions on labelled data: the deterministic tier, and for the "
        "crisis screen with --llm-base-url the router's LLM tiers side by side.",
    )
    p.add_argument("corpora", nargs="*", metavar="CORPUS", help=f"{', '.join(CORPORA)} or all")
    p.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        help="dev (default), calibration, heldout or all; --calibrate reads calibration",
    )
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument("--html", type=Path, help="also write the report as one HTML page")
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"folder of the labelled corpora (default: {DEFAULT_DATA}, from the repository "
        "root; they are not installed with coachbus)",
    )
    p.add_argument("--llm-base-url", help="an OpenAI-compatible endpoint (vLLM, llama.cpp)")
    p.add_argument("--small-model", default="Qwen/Qwen3-30B-A3B")
    p.add_argument("--strong-model", default="Qwen/Qwen3-235B-A22B")
    p.add_argument("--policy", type=Path, help="router policy file (default: the shipped one)")
    p.add_argument(
        "--prompts", type=Path, help="folder of instruction overrides (<decision kind>.txt)"
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per LLM call")
    p.add_argument("--concurrency", type=int, default=4, help="items scored at once with an LLM")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="write the measured confidences of the crisis screen, blocked steps, patterns "
        "or register (from the calibration split) into coachbus/content",
    )
    p.add_argument(
        "--train",
        action="store_true",
        help="steps, crisis: fit the screen's learned reader on the dev split and write it "
        "into coachbus/content/learned",
    )
    p.add_argument(
        "--conversations",
        action="store_true",
        help="crisis: replay the labelled conversations (risk across turns, state included) "
        "and score the last turn, side by side with the single-message screen",
    )
    p.add_argument("--min-recall", type=float, help="crisis: exit 1 if flagged recall is lower")
    p.add_argument("--min-precision", type=float, help="crisis: exit 1 if precision is lower")
    return p


def _candidate(args: argparse.Namespace) -> Candidate:
    return Candidate(
        base_url=args.llm_base_url,
        small_model=args.small_model,
        strong_model=args.strong_model,
        policy_file=args.policy,
        timeout_s=args.timeout,
        prompts_dir=args.prompts,
        concurrency=args.concurrency,
    )


def _write_calibration(name: str, text: str) -> int:
    """Rewrite a measured-confidence file of the content package: a step of working
    on coachbus, done in a checkout (an installed package is usually read-only)."""
    target = Path(str(resources.files("coachbus.content").joinpath(name)))
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"coachbus eval: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {target}")
    return 0


def _conversations(args: argparse.Namespace) -> dict[str, Any] | int:
    if args.calibrate and args.split != conv.CALIBRATION_SPLIT:
        print("coachbus eval: --calibrate reads the calibration split only", file=sys.stderr)
        return 2
    if args.llm_base_url:
        print("coachbus eval: --conversations scores the deterministic tier", file=sys.stderr)
        return 2
    rows = [
        r for s in splits("conversations", args.split, args.data) for r in conv.run(s, args.data)
    ]
    if args.calibrate:
        table = conv.measure_calibration(rows)
        return _write_calibration(
            "crisis/conversation_calibration.toml", conv.calibration_toml(table, len(rows))
        )
    # Calibration and heldout items are never listed: only dev is looked at.
    rep = conv.report(args.split, rows, list_items=args.split == "dev")
    talk = [t for s in splits("conversations", args.split, args.data) for t in _talk(args, s)]
    rep["ordinary_asked"] = conv.ordinary_asked(talk)
    return rep


def _talk(args: argparse.Namespace, split: Split) -> list[str]:
    """The split's ordinary coaching talk, where the other corpora have it."""
    try:
        return learn.ordinary_talk(args.data, split)
    except CorpusError:
        return []


def _crisis(args: argparse.Namespace) -> dict[str, Any] | int:
    if args.train:
        # The message screen's reader, or with --conversations the conversation
        # reader's reader of when our reply asks.
        return _train("openers" if args.conversations else "crisis", args)
    if args.conversations:
        return _conversations(args)
    if args.calibrate and args.split != crisis.CALIBRATION_SPLIT:
        # Confidence measured on the split the rules are tuned on (dev) is not a
        # measurement, and heldout stays report-only: only the calibration split.
        print("coachbus eval: --calibrate reads the calibration split only", file=sys.stderr)
        return 2
    items = [
        i for s in splits("crisis", args.split, args.data) for i in load("crisis", s, args.data)
    ]
    tiers = [crisis.deterministic(items)]
    if args.calibrate:
        table = crisis.measure_calibration(tiers[0].answers)
        return _write_calibration(
            "crisis/calibration.toml", crisis.calibration_toml(table, len(items))
        )
    if args.llm_base_url:
        tiers.append(asyncio.run(crisis.with_router(items, _candidate(args))))
    return crisis.report(args.split, tiers)


def _train(name: str, args: argparse.Namespace) -> int:
    trainer = learn.TRAINERS.get(name)
    if trainer is None or args.split != "dev":
        # Only dev is trained on: calibration measures the result, heldout reports it.
        print(
            "coachbus eval: --train fits the steps, crisis or conversations corpus's "
            "dev split only",
            file=sys.stderr,
        )
        return 2
    model = trainer(args.data)
    print(f"learned reader: {len(model.idf)} features, bar {model.bar}")
    return _write_calibration(f"learned/{name}.json", model.to_json())


def _decision(name: str, args: argparse.Namespace) -> dict[str, Any] | int:
    if args.train:
        return _train(name, args)
    items = [i for s in splits(name, args.split, args.data) for i in load_raw(name, s, args.data)]
    listed = args.split == "dev"
    reports = [decisions.SCORERS[name](items)]
    kind = decisions.KIND_OF.get(name)
    # The decision whose confidence the corpus measures: the corpus's own, or the one
    # inside its check (the reply guard inside the replies check).
    inner = decisions.DECIDED.get(name)
    decided = inner(reports[0]).answers if inner is not None else None
    if args.calibrate:
        if kind is None:
            print(f"coachbus eval: {name} is a check, not a routed decision", file=sys.stderr)
            return 2
        measured_on = decided if decided is not None else reports[0].answers
        table = decisions.measure_calibration(measured_on)
        return _write_calibration(
            f"calibration/{kind}.toml", confidence.table_toml(kind, table, len(measured_on))
        )
    if args.llm_base_url and name in decisions.ROUTED:
        reports.append(asyncio.run(decisions.ROUTED[name](items, _candidate(args))))
    # Silent errors are judged against the bar of the policy the run uses.
    bar = Policy.load(args.policy).for_kind(kind).min_confidence if kind else None
    tiers = {
        r.tier: decisions.figures(
            r,
            list_items=listed,
            bar=bar if r.tier == "deterministic" else None,
            decided=decided if r.tier == "deterministic" else None,
        )
        for r in reports
    }
    if name == "steps":
        # Precision on a corpus dense with risk says little about ordinary talk, the
        # bulk of real traffic: how often the screen blocks a step there.
        chosen = splits(name, args.split, args.data)
        try:
            talk = [t for split in chosen for t in learn.everyday(args.data, split)]
        except CorpusError:
            talk = []  # a folder with the steps corpus alone: no ordinary talk to read
        if talk:
            tiers["deterministic"]["everyday_flagged"] = decisions.flagged_share(talk)
    return {"corpus": name, "split": args.split, "tiers": tiers}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.split is None:
        args.split = crisis.CALIBRATION_SPLIT if args.calibrate else "dev"
    names = list(CORPORA) if not args.corpora or args.corpora == ["all"] else args.corpora
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        print(f"coachbus eval: unknown corpus {unknown}; known: {CORPORA}", file=sys.stderr)
        return 2
    if args.conversations and names != ["crisis"]:
        print("coachbus eval: --conversations is for the crisis corpus", file=sys.stderr)
        return 2
    if args.calibrate and len(names) != 1:
        print("coachbus eval: --calibrate measures one corpus at a time", file=sys.stderr)
        return 2
    if args.calibrate and args.split != crisis.CALIBRATION_SPLIT:
        # Confidence measured on the split the rules are tuned on (dev) is not a
        # measurement, and heldout stays report-only: only the calibration split.
        print("coachbus eval: --calibrate reads the calibration split only", file=sys.stderr)
        return 2
    routed = {"crisis", *decisions.ROUTED}
    if args.llm_base_url and not set(names) <= routed:
        # Said, not silently skipped: the other decisions' LLM tiers are not wired yet.
        print(
            f"coachbus eval: --llm-base-url scores {sorted(routed)} only; the other "
            "decisions have no model tier in the eval yet",
            file=sys.stderr,
        )
        return 2
    if not args.data.is_dir():
        # The corpora ship with the source repository, not with the package: an
        # installed coachbus (a wheel, the image) has to be told where they are.
        print(
            f"coachbus eval: no labelled corpora at {args.data}; pass --data FOLDER "
            f"(the {DEFAULT_DATA} folder of a coachbus checkout)",
            file=sys.stderr,
        )
        return 2
    corpora: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            if name == "crisis":
                rep = _crisis(args)
                if isinstance(rep, int):
                    return rep
                corpora[conv.CORPUS if args.conversations else name] = rep
            else:
                decided = _decision(name, args)
                if isinstance(decided, int):
                    return decided
                corpora[name] = decided
    except CorpusError as exc:
        print(f"coachbus eval: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"schema_version": 1, "split": args.split, "corpora": corpora}
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for name, rep in corpora.items():
            if name == conv.CORPUS:
                print(conv.render_text(rep))
            elif name == "crisis":
                print(crisis.render_text(rep))
            else:
                print(decisions.summary({"corpus": name, **rep["tiers"]["deterministic"]}))
            print()
    if args.html:
        args.html.write_text(render_html(report), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    return _floors(args, corpora)


def _floors(args: argparse.Namespace, corpora: dict[str, dict[str, Any]]) -> int:
    if args.conversations:
        tier = corpora[conv.CORPUS]["tiers"]["conversation"]["crisis"]
        low = (args.min_recall is not None and (tier["recall"] or 0) < args.min_recall) or (
            args.min_precision is not None and (tier["precision"] or 0) < args.min_precision
        )
        if low:
            print("coachbus eval: below the floor: conversation", file=sys.stderr)
        return 1 if low else 0
    rep = corpora.get("crisis")
    if rep is None:
        return 0
    failed = [
        name
        for name, tier in rep["tiers"].items()
        if (args.min_recall is not None and (tier["flagged"]["recall"] or 0) < args.min_recall)
        or (
            args.min_precision is not None
            and (tier["flagged"]["precision"] or 0) < args.min_precision
        )
    ]
    if failed:
        print(f"coachbus eval: below the floor: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
