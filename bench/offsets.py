"""``python -m bench.offsets``: what a broker answers to ListOffsets while a reader
tails a topic under a steady write load, beside the high watermark of the reader's
own fetch responses.

A reader that trusted ListOffsets' end (``end_offsets``) took a live topic for a
recreated one whenever that end lay behind its position (coachbus.bus.state used to
rewind then); a loader that stopped there started from an old record. This counts,
over a bounded run on the embedded broker (or ``--bootstrap``), how often and how far
each answer lags behind the reader's position. Traffic only to the broker given or
the one it starts on 127.0.0.1; bounded in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coachbus.bus.admin import ensure_topics
from coachbus.embedded.broker import EmbeddedBroker, free_port
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic


async def measure(bootstrap: str, seconds: float, writers: int, every_s: float) -> dict[str, float]:
    settings = CoachbusSettings(topic_prefix=f"off{uuid.uuid4().hex[:6]}.", partitions=2)
    await ensure_topics(settings, KafkaSettings(bootstrap_servers=bootstrap))
    topic = settings.topic(Topic.BLACKBOARD.value)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=250
    )
    await producer.start()
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    stop = asyncio.Event()
    checks = behind_list = behind_fetch = 0
    list_lag: list[int] = []

    async def write(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            await producer.send(topic, b"{}", key=f"user{n}-{i % 7}".encode())
            await asyncio.sleep(0.02)

    async def read() -> None:
        while not stop.is_set():
            await consumer.getmany(timeout_ms=200)

    tasks = [asyncio.create_task(write(n)) for n in range(writers)]
    tasks.append(asyncio.create_task(read()))
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    try:
        while loop.time() < end:
            await asyncio.sleep(every_s)
            listed = await consumer.end_offsets(tps)
            for tp in tps:
                position = await consumer.position(tp)
                high = consumer.highwater(tp)
                if high is None:
                    continue
                checks += 1
                if listed[tp] < position:
                    behind_list += 1
                    list_lag.append(position - listed[tp])
                if high < position:
                    behind_fetch += 1
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await consumer.stop()
        await producer.stop()
    return {
        "checks": checks,
        "list_offsets_behind_position": behind_list,
        "fetch_highwater_behind_position": behind_fetch,
        "list_offsets_lag_median": statistics.median(list_lag) if list_lag else 0,
        "list_offsets_lag_max": max(list_lag, default=0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.offsets", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--writers", type=int, default=16, help="keys written at once")
    parser.add_argument("--every-ms", type=float, default=100.0, help="one check per period")
    parser.add_argument("--bootstrap", help="a running broker (default: an embedded one)")
    args = parser.parse_args(argv)
    seconds = min(max(args.seconds, 1.0), 600.0)
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = EmbeddedBroker(port=free_port())
        broker.start()
        bootstrap = broker.bootstrap
    try:
        figures = asyncio.run(measure(bootstrap, seconds, args.writers, args.every_ms / 1000))
    finally:
        if broker is not None:
            broker.stop()
    n = figures["checks"] or 1
    listed, fetched = (
        figures["list_offsets_behind_position"],
        figures["fetch_highwater_behind_position"],
    )
    print(f"{figures['checks']:.0f} checks of a reader tailing under load ({seconds:.0f} s):")
    print(
        f"  ListOffsets' end behind the reader's position: {listed:.0f} ({listed / n:.0%}), "
        f"by {figures['list_offsets_lag_median']:.0f} records (median), "
        f"{figures['list_offsets_lag_max']:.0f} at most"
    )
    print(f"  the fetch responses' high watermark behind it: {fetched:.0f} ({fetched / n:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
