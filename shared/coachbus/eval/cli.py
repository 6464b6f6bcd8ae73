"""``coachbus eval``: score decisions on labelled corpora (see docs/eval.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from coachbus.eval import crisis
from coachbus.eval.corpus import DEFAULT_DATA, SPLITS, CorpusError, Item, Split, load

CORPORA = ("crisis",)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="coachbus eval",
        description="Score a decision on labelled data: the deterministic tier, and with "
        "--llm-base-url the router's LLM tiers side by side.",
    )
    p.add_argument("corpus", choices=CORPORA)
    p.add_argument("--split", choices=[*SPLITS, "all"], default="dev")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the corpora")
    p.add_argument("--llm-base-url", help="an OpenAI-compatible endpoint (vLLM, llama.cpp)")
    p.add_argument("--small-model", default="Qwen/Qwen3-30B-A3B")
    p.add_argument("--strong-model", default="Qwen/Qwen3-235B-A22B")
    p.add_argument("--policy", type=Path, help="router policy file (default: the shipped one)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per LLM call")
    p.add_argument("--concurrency", type=int, default=4, help="items scored at once with an LLM")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="write the deterministic tier's measured confidences (dev split only)",
    )
    p.add_argument("--min-recall", type=float, help="exit 1 if a tier's flagged recall is lower")
    p.add_argument("--min-precision", type=float, help="exit 1 if flagged precision is lower")
    return p


def _items(args: argparse.Namespace) -> list[Item]:
    splits: tuple[Split, ...] = SPLITS if args.split == "all" else (args.split,)
    return [i for s in splits for i in load(args.corpus, s, args.data)]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        items = _items(args)
    except CorpusError as exc:
        print(f"coachbus eval: {exc}", file=sys.stderr)
        return 2
    tiers = [crisis.TierReport("deterministic", crisis.deterministic(items))]
    if args.calibrate:
        if args.split != "dev":
            print("coachbus eval: --calibrate reads the dev split only", file=sys.stderr)
            return 2
        table = crisis.measure_calibration(tiers[0].predictions)
        target = resources.files("coachbus.content").joinpath("crisis/calibration.toml")
        Path(str(target)).write_text(crisis.calibration_toml(table, len(items)), encoding="utf-8")
        print(f"wrote {target}")
        return 0
    if args.llm_base_url:
        decide, close = crisis.router_decider(
            args.llm_base_url, args.small_model, args.strong_model, args.policy, args.timeout
        )

        async def run() -> list[crisis.Prediction]:
            try:
                return await crisis.with_router(items, decide, args.concurrency)
            finally:
                await close()

        tiers.append(crisis.TierReport("router", asyncio.run(run())))
    rep: dict[str, Any] = crisis.report(args.split, tiers)
    print(json.dumps(rep, indent=2, ensure_ascii=False) if args.json else crisis.render_text(rep))
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
