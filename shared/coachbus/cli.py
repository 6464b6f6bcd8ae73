"""The ``coachbus`` command: run the pipeline, manage topics, serve the LLM simulator."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import signal
import sys
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    from coachbus.embedded.stack import Stack, StackConfig
    from coachbus.llm import LLMSettings
    from coachbus.logs import setup_logging

    setup_logging("coachbus", "INFO")
    log = logging.getLogger("coachbus.run")
    config = StackConfig(
        broker_port=args.broker_port,
        gateway_port=args.port,
        log_dir=Path(args.log_dir),
        snapshot=None if args.no_snapshot else Path(args.snapshot),
        llm=args.llm,
    )

    async def main() -> None:
        stack = Stack(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stack.start()
        where = "embedded broker" if stack.broker else stack.env["KAFKA_BOOTSTRAP_SERVERS"]
        print(f"\ncoachbus is running on {where}")
        print(f"  gateway:  {stack.gateway_url}")
        if stack.api_key:
            print(f"  API key:  {stack.api_key}   (user 'dev'; set COACHBUS_API_KEYS to choose)")
        print(f"  logs:     {config.log_dir}/")
        llm = {
            "none": "LLM tiers from COACHBUS_LLM_*"
            if LLMSettings().enabled
            else "deterministic tier only (set COACHBUS_LLM_BASE_URL for LLM tiers)",
            "sim": "LLM simulator (coachbus llm-sim) as small and strong tier",
            "local": "SmolLM2-135M on this CPU (llama.cpp) as the small tier",
        }[args.llm]
        print(f"  thinking: {llm}")
        print(
            "  try:     curl -s -X POST -H 'Authorization: Bearer <key>' "
            "-H 'content-type: application/json' "
            f'-d \'{{"text":"I keep putting off my thesis"}}\' '
            f"{stack.gateway_url}/v1/sessions/s1/messages"
        )
        print("Ctrl-C stops everything.\n", flush=True)
        await stop.wait()
        log.info("stopping: services first, then the broker")
        await stack.stop()

    asyncio.run(main())
    return 0


def _topics(args: argparse.Namespace) -> int:
    from coachbus.bus.admin import config_drift, ensure_topics, fix_config_drift, wait_for_broker
    from coachbus.settings import CoachbusSettings, KafkaSettings

    settings, kafka = CoachbusSettings(), KafkaSettings()

    async def main() -> int:
        await wait_for_broker(kafka, timeout_s=args.wait)
        created = await ensure_topics(settings, kafka)
        print(f"topics ready ({len(created)} created)")
        # Topics made before retention was set (or changed by hand) keep their old
        # settings: report them, and fix them when asked.
        drift = await config_drift(settings, kafka)
        for item in drift:
            print(f"config drift: {item}")
        if drift and args.fix_configs:
            await fix_config_drift(settings, kafka, drift)
            drift = await config_drift(settings, kafka)
            print(f"config drift fixed ({len(drift)} left)")
        if drift:
            print("topic settings differ from coachbus.topics; run with --fix-configs")
            return 2
        return 0

    return asyncio.run(main())


def _snapshot(args: argparse.Namespace) -> int:
    from coachbus.embedded.snapshot import export_snapshot, import_snapshot
    from coachbus.settings import CoachbusSettings, KafkaSettings

    settings, kafka = CoachbusSettings(), KafkaSettings()
    path = Path(args.file)
    if args.command == "export":
        count = asyncio.run(export_snapshot(settings, kafka, path))
        print(f"exported {count} state records to {path}")
    else:
        count = asyncio.run(import_snapshot(settings, kafka, path))
        print(f"imported {count} state records from {path}")
    return 0


def _llm_sim(argv: list[str]) -> int:
    from coachbus.llm import sim

    return int(sim.main(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["llm-sim"]:
        # The simulator owns its flags; hand them over untouched.
        return _llm_sim(argv[1:])
    if argv[:1] == ["docs"]:
        from coachbus.docs import main as docs

        return docs(argv[1:])
    if argv[:1] == ["eval"]:
        # A tool package beside the library (it runs the services' decision
        # functions); loaded by name so the library itself imports no service.
        evaluate = importlib.import_module("evaluation.cli")
        return int(evaluate.main(argv[1:]))
    if argv[:1] == ["replay"]:
        from coachbus.replay.command import main as replay

        return replay(argv[1:])
    if argv[:1] == ["chat"]:
        from coachbus.chat import main as chat

        return chat(argv[1:])
    parser = argparse.ArgumentParser(prog="coachbus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the whole pipeline (embedded broker by default)")
    run.add_argument("--port", type=int, help="gateway port (default: COACHBUS_GATEWAY_PORT, 8000)")
    run.add_argument(
        "--broker-port",
        type=int,
        help="embedded broker port (default: COACHBUS_EMBEDDED_BROKER_PORT, 9092)",
    )
    run.add_argument("--log-dir", default=".coachbus/logs", help="one log file per service")
    run.add_argument("--llm", choices=["none", "sim", "local"], default="none")
    run.add_argument(
        "--snapshot",
        default=".coachbus/state.jsonl",
        help="embedded broker only: state restored on start and saved on stop",
    )
    run.add_argument("--no-snapshot", action="store_true", help="start empty, save nothing")
    run.set_defaults(fn=_run)
    topics = sub.add_parser("topics", help="topic administration")
    topics_sub = topics.add_subparsers(dest="action", required=True)
    create = topics_sub.add_parser("create", help="create missing topics (idempotent)")
    create.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the broker")
    create.add_argument(
        "--fix-configs",
        action="store_true",
        help="alter existing topics whose retention/compaction settings drifted (else exit 2)",
    )
    create.set_defaults(fn=_topics)
    export = sub.add_parser("export", help="write the compacted state topics to a file")
    export.add_argument("file")
    export.set_defaults(fn=_snapshot)
    imp = sub.add_parser("import", help="load a state file written by 'coachbus export'")
    imp.add_argument("file")
    imp.set_defaults(fn=_snapshot)
    sub.add_parser("docs", help="regenerate docs/asyncapi/*.json and docs/openapi.json")
    sub.add_parser("chat", help="chat with a running gateway (see --help after it)")
    sub.add_parser("eval", help="score decisions on labelled corpora (see --help after it)")
    sub.add_parser("replay", help="recorded turns against a candidate (see --help after it)")
    sub.add_parser("llm-sim", help="OpenAI-compatible LLM simulator (see --help after it)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        return int(args.fn(args))
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
