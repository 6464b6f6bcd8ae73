"""Snapshots of the compacted state topics, for the memory-only embedded broker.

``make run`` writes one on shutdown and restores it on start, so a user of the
embedded default keeps their coaching memory; ``coachbus export`` / ``import`` do it
on demand against any broker. Erased users are absent: their records are
tombstoned in the topic, and a tombstone is never written to a snapshot.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from coachbus.bus.state import read_latest
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import COMPACTED

FORMAT = "coachbus-snapshot/1"


async def export_snapshot(settings: CoachbusSettings, kafka: KafkaSettings, path: Path) -> int:
    lines = [json.dumps({"format": FORMAT, "topics": sorted(t.value for t in COMPACTED)})]
    count = 0
    for topic in sorted(COMPACTED):
        latest = await read_latest(kafka, settings.topic(topic.value))
        for key, (_partition, value) in sorted(latest.items()):
            if value is None:
                continue
            record: dict[str, Any] = {"topic": topic.value, "key": key}
            record["value"] = json.loads(value)
            lines.append(json.dumps(record, separators=(",", ":")))
            count += 1
    await asyncio.to_thread(_write_atomically, path, "\n".join(lines) + "\n")
    return count


def _write_atomically(path: Path, text: str) -> None:
    # Write then rename: a crash mid-write never leaves half a snapshot behind.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def import_snapshot(settings: CoachbusSettings, kafka: KafkaSettings, path: Path) -> int:
    rows = (await asyncio.to_thread(path.read_text)).splitlines()
    if not rows or json.loads(rows[0]).get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    known = {t.value for t in COMPACTED}
    producer = AIOKafkaProducer(bootstrap_servers=kafka.servers, **kafka.client_kwargs())
    await producer.start()
    count = 0
    try:
        for row in rows[1:]:
            if not row.strip():
                continue
            record = json.loads(row)
            if record["topic"] not in known:
                raise ValueError(f"unknown topic in snapshot: {record['topic']!r}")
            await producer.send_and_wait(
                settings.topic(record["topic"]),
                json.dumps(record["value"]).encode(),
                key=str(record["key"]).encode(),
            )
            count += 1
    finally:
        await producer.stop()
    return count
