"""What production recorded: turns read from the bus (or a file saved from it), each
with the agents' results and the final reply production sent then."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from coachbus.bus.state import read_to_end
from coachbus.topics import AGENT_TOPICS, Topic

# The topics a recording is read from (their names without the prefix).
RECORDED_TOPICS = (Topic.USER_MESSAGES, Topic.REPLIES, Topic.ERASURES, *AGENT_TOPICS.values())


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
        names = {prefix + t.value: t.value for t in RECORDED_TOPICS}
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
