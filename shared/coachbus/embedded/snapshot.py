"""Snapshots of the compacted state topics, for the memory-only embedded broker.

``make run`` writes one on shutdown and restores it on start, so a user of the
embedded default keeps their coaching memory; ``coachbus export`` / ``import`` do it
on demand against any broker. Erased users are absent: their records are
tombstoned in the topic, and a tombstone is never written to a snapshot. The
embedded stack also rewrites the snapshot whenever an erase completes, so a crash
(no clean stop) cannot restore an erased user from an older file.

The file holds what people told their coach: it is created readable by its owner
only (0600) and replaced atomically (temp file, fsync, rename, fsync of the folder).
The erase watermarks are not kept: a restarted memory-only broker holds no event
that one could filter, and their confirmations do not survive it either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from coachbus.bus.state import read_latest
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import COMPACTED, Topic

FORMAT = "coachbus-snapshot/1"
SNAPSHOT_TOPICS = COMPACTED - {Topic.ERASURES}
FILE_MODE = 0o600


async def export_snapshot(settings: CoachbusSettings, kafka: KafkaSettings, path: Path) -> int:
    lines = [json.dumps({"format": FORMAT, "topics": sorted(t.value for t in SNAPSHOT_TOPICS)})]
    count = 0
    for topic in sorted(SNAPSHOT_TOPICS):
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
    # Write, fsync, then rename: a crash mid-write never leaves half a snapshot
    # behind, and after the rename the new content is on disk, not in a cache.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a leftover of a crash may carry a wider mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            fd = -1
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash
    finally:
        os.close(folder)


async def import_snapshot(settings: CoachbusSettings, kafka: KafkaSettings, path: Path) -> int:
    rows = (await asyncio.to_thread(path.read_text)).splitlines()
    if not rows or json.loads(rows[0]).get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    known = {t.value for t in SNAPSHOT_TOPICS}
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
