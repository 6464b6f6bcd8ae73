"""Shared fixtures. The real-broker fixture picks, in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set (an external Kafka);
2. a Kafka container when ``COACHBUS_TEST_KAFKA=container`` (needs a Docker engine;
   skipped cleanly without one);
3. the embedded Tansu broker (default; no Docker, no JVM).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from coachbus.embedded.broker import EmbeddedBroker, free_port


def _docker_engine() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    if os.environ.get("COACHBUS_TEST_KAFKA") == "container":
        if not _docker_engine():
            pytest.skip("COACHBUS_TEST_KAFKA=container but no Docker engine is running")
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("apache/kafka:3.9.1") as container:
            yield container.get_bootstrap_server()
        return
    broker = EmbeddedBroker(port=free_port())
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def topic_prefix() -> str:
    """A fresh prefix per test: tests share one broker but never each other's topics."""
    return f"t{uuid.uuid4().hex[:10]}."
