"""``coachbus replay``: recorded turns run again against a candidate model or policy.

A team changes a prompt, a policy or a model and wants to know what that did to the
turns real people sent. Replay reads turns recorded on the bus (or a file saved from
them), runs them through the whole pipeline in a **sandbox** — its own topic
prefix, the candidate policy and LLM, no gateway — and writes, per turn, what the
candidate decided differently from what production decided then:

* it never writes to the live topics, never sends a reply to a user (there is no
  gateway in the sandbox, and its replies topic has its own prefix) and never reads
  or writes the live state topics: each user's state is rebuilt in the sandbox from
  their recorded history, in order, one turn after the other;
* it honours erasure: turns of a user older than that user's erase watermark are
  not replayed (they are gone from the live view too);
* the output folder gets ``diff.json`` (schema: docs/replay.schema.json) and
  ``report.html`` (final replies side by side, differences marked), and a
  ``checkpoint.jsonl`` of the users whose history was replayed whole: an
  interrupted run resumes after them (a user cut off mid-history is replayed from
  their first turn, so their state is rebuilt in order);
* **guard**: a candidate that misses a crisis the recorded turn caught, or whose
  final reply names a step its turn blocked, makes the command exit 1 and say which
  turns — so a replay can gate a deploy in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from coachbus.bus.state import read_to_end
from coachbus.contracts import UserMessage
from coachbus.roster import AGENT_SERVICES
from coachbus.topics import AGENT_TOPICS, Topic

_RECORDED = (Topic.USER_MESSAGES, Topic.REPLIES, Topic.ERASURES, *AGENT_TOPICS.values())


# --------------------------------------------------------------------------- recording


@dataclass(slots=True)
class Recorded:
    """One recorded turn: the message as it came in, and what production answered."""

    message: dict[str, Any]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> result
    final: dict[str, Any] | None = None

    @property
    def turn_id(self) -> str:
        return str(self.message["turn_id"])

    @property
    def user_id(self) -> str:
        return str(self.message["user_id"])

    @property
    def created_at(self) -> datetime:
        return datetime.fromisoformat(str(self.message["created_at"]))


def assemble(
    lines: Iterable[tuple[str, dict[str, Any]]],
    *,
    users: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
) -> list[Recorded]:
    """Recorded turns from (topic suffix, value) pairs, oldest first, filtered; turns
    older than their user's erase watermark are dropped."""
    turns: dict[str, Recorded] = {}
    erased: dict[str, datetime] = {}
    later: list[tuple[str, dict[str, Any]]] = []
    for topic, value in lines:
        if topic == Topic.USER_MESSAGES.value:
            if value.get("kind", "message") != "message" or "text" not in value:
                continue  # an erase request, not a turn
            turns[str(value["turn_id"])] = Recorded(message=value)
        elif topic == Topic.ERASURES.value:
            at = datetime.fromisoformat(str(value["erased_at"]))
            user = str(value["user_id"])
            erased[user] = max(at, erased.get(user, at))
        else:
            later.append((topic, value))
    for topic, value in later:
        turn = turns.get(str(value.get("turn_id")))
        if turn is None:
            continue
        if topic == Topic.REPLIES.value:
            if value.get("kind") == "final":
                turn.final = value
        elif topic.startswith("agent."):
            turn.results[topic.removeprefix("agent.")] = value
    out = [
        t
        for t in turns.values()
        if (not users or t.user_id in users)
        and (since is None or t.created_at >= since)
        and (until is None or t.created_at < until)
        and not (t.user_id in erased and t.created_at < erased[t.user_id])
    ]
    out.sort(key=lambda t: t.created_at)
    return out[:limit] if limit is not None else out


async def read_topics(bootstrap: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    """Everything on the recorded topics of ``prefix``, from the beginning."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from coachbus.settings import KafkaSettings

    kafka = KafkaSettings(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.servers,
        enable_auto_commit=False,
        fetch_max_wait_ms=20,
        **kafka.client_kwargs(),
    )
    await consumer.start()
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        await consumer._client.force_metadata_update()
        names = {prefix + t.value: t.value for t in _RECORDED}
        tps = [
            TopicPartition(name, p)
            for name in names
            for p in sorted(consumer.partitions_for_topic(name) or ())
        ]
        if not tps:
            return out
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        # To the end the broker's fetches report, not ListOffsets' (it may answer
        # behind the records served: coachbus.bus.state.at_end).
        async for tp, records in read_to_end(consumer, tps, timeout_ms=500):
            for r in records:
                if r.value:
                    with contextlib.suppress(ValueError):
                        out.append((names[tp.topic], json.loads(r.value)))
    finally:
        await consumer.stop()
    return out


def save(lines: Sequence[tuple[str, dict[str, Any]]], path: Path) -> None:
    path.write_text(
        "".join(json.dumps({"topic": t, "value": v}) + "\n" for t, v in lines), encoding="utf-8"
    )


def load_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                raw = json.loads(line)
                out.append((str(raw["topic"]), dict(raw["value"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not a recorded line ({exc})") from None
    return out


# --------------------------------------------------------------------------- diff


def _crisis(result: dict[str, Any] | None) -> tuple[str, bool]:
    crisis = ((result or {}).get("payload") or {}).get("crisis") or {}
    return str(crisis.get("category", "none")), bool(crisis.get("uncertain", False))


def _steps(result: dict[str, Any] | None) -> list[str]:
    blocked = ((result or {}).get("payload") or {}).get("blocked_steps") or []
    return sorted({str(b.get("step_id") or b.get("step")) for b in blocked})


def _conflicts(final: dict[str, Any] | None) -> list[str]:
    return sorted(
        f"{c['rule']}:{c['winner']}>{c['overruled']}" for c in (final or {}).get("conflicts", [])
    )


def _tokens(results: dict[str, dict[str, Any]], final: dict[str, Any] | None) -> int:
    usage = (final or {}).get("usage") or {}
    if usage:
        return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    return sum(
        int((r.get("usage") or {}).get("prompt_tokens", 0))
        + int((r.get("usage") or {}).get("completion_tokens", 0))
        for r in results.values()
    )


def turn_diff(
    base: Recorded,
    cand_results: dict[str, dict[str, Any]],
    cand_final: dict[str, Any] | None,
    latency_s: float | None,
) -> dict[str, Any]:
    """What the candidate decided differently on one recorded turn."""
    from coachbus.safety.steps import markers_of
    from coachbus.text import find_markers

    b_crisis, c_crisis = (
        _crisis(base.results.get("stability")),
        _crisis(cand_results.get("stability")),
    )
    b_steps, c_steps = _steps(base.results.get("stability")), _steps(cand_results.get("stability"))
    decisions = {
        agent: sorted(
            k
            for k in set((base.results.get(agent) or {}).get("payload") or {})
            | set((cand_results.get(agent) or {}).get("payload") or {})
            if k not in ("text", "summary", "quotes", "evidence")
            and ((base.results.get(agent) or {}).get("payload") or {}).get(k)
            != ((cand_results.get(agent) or {}).get("payload") or {}).get(k)
        )
        for agent in sorted(set(base.results) | set(cand_results))
    }
    text = str((cand_final or {}).get("text", ""))
    leaks = find_markers(text, markers_of(set(b_steps) | set(c_steps))) if text else []
    missed = b_crisis[0] != "none" and c_crisis[0] == "none" and not c_crisis[1]
    return {
        "turn_id": base.turn_id,
        "user_id": base.user_id,
        "decisions_changed": {a: ks for a, ks in decisions.items() if ks},
        "tiers": {
            "baseline": {a: r.get("tier") for a, r in sorted(base.results.items())},
            "candidate": {a: r.get("tier") for a, r in sorted(cand_results.items())},
        },
        "crisis": {
            "baseline": b_crisis[0],
            "candidate": c_crisis[0],
            "baseline_uncertain": b_crisis[1],
            "candidate_uncertain": c_crisis[1],
            "changed": b_crisis != c_crisis,
            "missed": missed,
        },
        "blocked_steps": {"baseline": b_steps, "candidate": c_steps, "changed": b_steps != c_steps},
        "leaked_steps": sorted(set(leaks)),
        "conflicts": {
            "baseline": _conflicts(base.final),
            "candidate": _conflicts(cand_final),
            "changed": _conflicts(base.final) != _conflicts(cand_final),
        },
        "final": {
            "baseline": (base.final or {}).get("text"),
            "candidate": (cand_final or {}).get("text"),
            "changed": (base.final or {}).get("text") != (cand_final or {}).get("text"),
        },
        "tokens": {
            "baseline": _tokens(base.results, base.final),
            "candidate": _tokens(cand_results, cand_final),
        },
        "latency_s": None if latency_s is None else round(latency_s, 3),
        "answered": cand_final is not None,
    }


def totals(turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def count(pred: Any) -> int:
        return sum(1 for t in turns if pred(t))

    latencies = sorted(t["latency_s"] for t in turns if t["latency_s"] is not None)
    return {
        "turns": len(turns),
        "answered": count(lambda t: t["answered"]),
        "decisions_changed": count(lambda t: t["decisions_changed"]),
        "crisis_changed": count(lambda t: t["crisis"]["changed"]),
        "crisis_missed": count(lambda t: t["crisis"]["missed"]),
        "blocked_steps_changed": count(lambda t: t["blocked_steps"]["changed"]),
        "leaks": count(lambda t: t["leaked_steps"]),
        "conflicts_changed": count(lambda t: t["conflicts"]["changed"]),
        "finals_changed": count(lambda t: t["final"]["changed"]),
        "tokens": {
            "baseline": sum(t["tokens"]["baseline"] for t in turns),
            "candidate": sum(t["tokens"]["candidate"] for t in turns),
        },
        "latency_s_p50": latencies[len(latencies) // 2] if latencies else None,
    }


def guard(turns: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    return {
        "missed_crisis": [t["turn_id"] for t in turns if t["crisis"]["missed"]],
        "leaked_steps": [t["turn_id"] for t in turns if t["leaked_steps"]],
    }


def render_html(diff: dict[str, Any]) -> str:
    rows = []
    for t in diff["turns"]:
        base = str(t["final"]["baseline"] or "")
        cand = str(t["final"]["candidate"] or "")
        a, b = base.split(), cand.split()
        left, right = [], []
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
            if op == "equal":
                left.append(escape(" ".join(a[i1:i2])))
                right.append(escape(" ".join(b[j1:j2])))
            else:
                if i2 > i1:
                    left.append(f"<del>{escape(' '.join(a[i1:i2]))}</del>")
                if j2 > j1:
                    right.append(f"<ins>{escape(' '.join(b[j1:j2]))}</ins>")
        flags = []
        if t["crisis"]["missed"]:
            flags.append("MISSED CRISIS")
        if t["leaked_steps"]:
            flags.append("LEAK: " + ", ".join(t["leaked_steps"]))
        if t["crisis"]["changed"]:
            flags.append(f"crisis {t['crisis']['baseline']} → {t['crisis']['candidate']}")
        if t["blocked_steps"]["changed"]:
            flags.append("blocked steps changed")
        if t["conflicts"]["changed"]:
            flags.append("conflicts changed")
        rows.append(
            f"<tr><td><code>{escape(t['turn_id'])}</code><br>{escape('; '.join(flags))}</td>"
            f"<td>{' '.join(left)}</td><td>{' '.join(right)}</td></tr>"
        )
    tot = diff["totals"]
    summary = ", ".join(f"{k} {v}" for k, v in tot.items() if not isinstance(v, dict))
    return (
        "<!doctype html><html lang=en><meta charset=utf-8><title>coachbus replay</title>"
        "<style>body{font:14px/1.45 system-ui,sans-serif;margin:2rem}table{border-collapse:"
        "collapse}td,th{border:1px solid #ccd;padding:.4rem;vertical-align:top;max-width:40rem}"
        "del{background:#fdd}ins{background:#dfd;text-decoration:none}</style>"
        f"<h1>coachbus replay</h1><p>{escape(summary)}</p>"
        "<table><tr><th>turn</th><th>recorded final reply</th><th>candidate</th></tr>"
        + "".join(rows)
        + "</table></html>"
    )


# --------------------------------------------------------------------------- sandbox


class _Tap:
    """Collects the sandbox's agent results and finals by turn id."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap, self.prefix = bootstrap, prefix
        self.results: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.finals: dict[str, dict[str, Any]] = {}
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._consumer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
        )
        await consumer.start()
        await consumer._client.force_metadata_update()
        names = [self.prefix + Topic.REPLIES.value] + [
            self.prefix + t.value for t in AGENT_TOPICS.values()
        ]
        tps = [TopicPartition(n, p) for n in names for p in consumer.partitions_for_topic(n) or ()]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        reply_topic = self.prefix + Topic.REPLIES.value
        while True:
            batch = await self._consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for r in records:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        value = json.loads(r.value)
                        if tp.topic == reply_topic:
                            if value.get("kind") == "final":
                                self.finals[value["turn_id"]] = value
                        else:
                            agent = tp.topic.removeprefix(self.prefix + "agent.")
                            self.results[value["turn_id"]][agent] = value
            if batch:
                self.changed.set()

    async def final(self, turn_id: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while turn_id not in self.finals:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        # The agents' results are published before Synth's final; give a late one a beat.
        await asyncio.sleep(0.05)
        return self.finals[turn_id]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


def _fresh(message: dict[str, Any], deadline_ms: int) -> UserMessage:
    """The recorded message as a new turn of the sandbox: same user, session and
    text, a new turn id and a fresh budget (the recorded deadline has passed)."""
    from coachbus.settings import CoachbusSettings

    settings = CoachbusSettings()
    return UserMessage.create(
        user_id=str(message["user_id"]),
        session_id=str(message["session_id"]),
        text=str(message["text"]),
        deadline_ms=deadline_ms,
        max_tokens=settings.turn_token_budget,
        wall_clock_ms=settings.turn_wall_clock_ms,
        earlier=message.get("language"),
    )


async def run(args: argparse.Namespace) -> int:
    from aiokafka import AIOKafkaProducer

    from coachbus.bus.codec import encode
    from coachbus.embedded.stack import Stack, StackConfig

    out: Path = args.out
    _prepare(out)
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
    todo = {u: ts for u, ts in by_user.items() if u not in done}
    total = len(recorded)
    finished = sum(len(v) for v in done.values())

    sandbox = args.sandbox_prefix or f"replay-{uuid.uuid4().hex[:8]}."
    env = {"COACHBUS_TOPIC_PREFIX": sandbox, "COACHBUS_LOG_LEVEL": "WARNING"}
    if args.policy:
        env["COACHBUS_LLM_POLICY_FILE"] = str(args.policy.resolve())
    if args.llm_base_url:
        env["COACHBUS_LLM_BASE_URL"] = args.llm_base_url
    if args.prompts:
        env["COACHBUS_LLM_PROMPTS_DIR"] = str(args.prompts.resolve())
    agents = AGENT_SERVICES
    # The broker and the LLM (if any) from the embedded stack; the six agents in one
    # process (coachbus.embedded.together) unless --separate asks for one each.
    config = StackConfig.ephemeral(
        bootstrap=args.sandbox_bootstrap,
        env=env,
        log_dir=out / "logs",
        services=agents if args.separate else (),
        llm=args.llm,
    )
    stack = Stack(config)
    turns_out: list[dict[str, Any]] = [t for v in done.values() for t in v]
    if todo:
        await stack.start()
        assert stack.env is not None
        bootstrap = stack.env["KAFKA_BOOTSTRAP_SERVERS"]
        together = None
        if not args.separate:
            try:
                together = await _start_together(stack.env, out / "logs", agents)
            except BaseException:
                await stack.stop()
                raise
        tap = _Tap(bootstrap, sandbox)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        await tap.start()
        gate = asyncio.Semaphore(args.concurrency)

        async def one_user(user: str, history: list[Recorded]) -> None:
            nonlocal finished
            async with gate:
                mine: list[dict[str, Any]] = []
                for base in history:
                    msg = _fresh(base.message, args.turn_deadline_ms)
                    started = time.monotonic()
                    await producer.send_and_wait(
                        sandbox + Topic.USER_MESSAGES.value, encode(msg), key=user.encode()
                    )
                    final = await tap.final(msg.turn_id, args.turn_timeout)
                    latency = time.monotonic() - started if final is not None else None
                    mine.append(
                        turn_diff(base, dict(tap.results.get(msg.turn_id, {})), final, latency)
                    )
                    finished += 1
                    print(
                        f"\rreplay: {finished}/{total} turns", end="", file=sys.stderr, flush=True
                    )
                _append_checkpoint(checkpoint, user, mine)
                turns_out.extend(mine)

        try:
            await asyncio.gather(*(one_user(u, ts) for u, ts in todo.items()))
        finally:
            print(file=sys.stderr)
            await tap.stop()
            await producer.stop()
            if together is not None:
                await _stop_together(together)
            await stack.stop()
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
    _write_outputs(out, diff)
    tot = diff["totals"]
    print(
        f"replayed {tot['turns']} turns: {tot['decisions_changed']} with changed decisions, "
        f"{tot['crisis_changed']} crisis screens changed, {tot['leaks']} leaks; "
        f"wrote {out / 'diff.json'} and {out / 'report.html'}"
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


async def _start_together(
    env: dict[str, str], log_dir: Path, agents: Sequence[str]
) -> asyncio.subprocess.Process:
    """The six agents in one child process; returns once all of them consume."""
    import os

    _prepare(log_dir)
    log = _open_log(log_dir / "agents.log")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "coachbus.embedded.together",
        *agents,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    log.close()
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(120):
            while True:
                line = await proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the sandbox's agents exited; see {log_dir / 'agents.log'}")
                if line.strip() == b"ready":
                    return proc
    except BaseException:
        await _stop_together(proc)
        raise


def _open_log(path: Path) -> Any:
    return path.open("ab")


async def _stop_together(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            async with asyncio.timeout(15):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


def _prepare(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)


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


def _write_outputs(out: Path, diff: dict[str, Any]) -> None:
    (out / "diff.json").write_text(json.dumps(diff, indent=2, ensure_ascii=False), "utf-8")
    (out / "report.html").write_text(render_html(diff), encoding="utf-8")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="coachbus replay",
        description="Run recorded turns through the pipeline in a sandbox with a candidate "
        "policy or model, and write what changed (docs/eval.md).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-topic", action="store_true", help="read the recorded topics")
    src.add_argument("--from-file", type=Path, help="a file written by --save")
    p.add_argument("--bootstrap", help="the broker holding the recorded topics")
    p.add_argument("--source-prefix", default="coachbus.", help="topic prefix of the recording")
    p.add_argument("--save", type=Path, help="also write what was read to this file")
    p.add_argument("--since", type=datetime.fromisoformat, help="turns from (ISO time)")
    p.add_argument("--until", type=datetime.fromisoformat, help="turns before (ISO time)")
    p.add_argument("--user", action="append", help="only this user's turns (repeatable)")
    p.add_argument("--limit", type=int, help="at most this many turns (oldest first)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--sandbox-bootstrap", help="broker for the sandbox (default: an embedded one)")
    p.add_argument("--sandbox-prefix", help="topic prefix of the sandbox (default: new)")
    p.add_argument("--policy", type=Path, help="candidate router policy file")
    p.add_argument(
        "--prompts", type=Path, help="candidate instructions: a folder of <decision kind>.txt"
    )
    p.add_argument("--llm", choices=["none", "sim", "local"], default="none")
    p.add_argument("--llm-base-url", help="candidate OpenAI-compatible endpoint")
    p.add_argument(
        "--concurrency", type=int, default=16, help="users replayed at once (each in order)"
    )
    p.add_argument("--turn-deadline-ms", type=int, default=20_000)
    p.add_argument("--turn-timeout", type=float, default=60.0, help="seconds to wait per final")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    p.add_argument(
        "--separate",
        action="store_true",
        help="one process per agent, as deployed (default: the six in one process)",
    )
    return p


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
