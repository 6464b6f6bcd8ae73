"""Shared fixtures, and the tier of every test.

The real-broker fixture picks, in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set (an external Kafka);
2. a Kafka container when ``COACHBUS_TEST_KAFKA=container`` (needs a Docker engine;
   skipped cleanly without one);
3. the embedded Tansu broker (default; no Docker, no JVM).

One broker serves the whole session, and one whole stack (``running_stack``) serves
every test that can share it: tests keep apart by user, session and turn id, and a
test that reads a whole topic filters by its own keys or turns. A test that kills,
restarts or reconfigures something starts a private stack on the same broker under
its own topic prefix (or its own broker, when the broker itself is what it restarts).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from coachbus.embedded.broker import FREE_PORT_RANGE, EmbeddedBroker, free_port
from coachbus.embedded.stack import Stack, StackConfig
from tests.integration.conftest import KEYS, REVIEWERS, RunningStack

TIERS = ("unit", "inmemory", "broker")
TESTS = Path(__file__).parent
# The tier of a test without a tier mark of its own, by its folder under tests/.
# A file that mixes tiers marks the exceptions itself (an explicit mark wins).
# The unit tests mirror the code: tests/shared/... for the library, tests/services/<name>/
# for a service (and tests/services/ itself for what crosses services in process),
# tests/evaluation/ for the eval runner, tests/repo/ for the repository as a whole.
FOLDER_TIERS = {
    "shared": "unit",
    "services": "unit",
    "evaluation": "unit",
    "repo": "unit",
    "deploy": "unit",
    "inmemory": "inmemory",
    "integration": "broker",
    "fault": "broker",
    "browser": "broker",
    "bench": "broker",
}
# The one deadline of the shared stack: long enough for healthy agents on a loaded
# two-core machine (a turn takes well under 2 s there even with two test workers;
# the fault modules' bursts carry their own deadlines), short enough for the tests
# that stop an agent and wait for the degraded final.
SHARED_DEADLINE_MS = 8_000


def pytest_configure(config: pytest.Config) -> None:
    # Every stack the suite starts (and every process they start) polls less while
    # idle: a consumer with nothing in hand for 5 s waits 1 s per fetch instead of
    # 250 ms. The suite keeps several stacks alive that mostly wait (for deadlines,
    # restarts, the other worker), and their polling was CPU the running tests lacked;
    # the first hop after an idle spell pays up to 1 s, inside every deadline here.
    os.environ.setdefault("KAFKA_FETCH_MAX_WAIT_IDLE_MS", "1000")
    # Parallel workers (pytest-xdist, `make test`) each start stacks; a port one
    # worker checked free could be taken by the other's service before its own
    # binds. Each worker (and every process it starts) draws from its own slice.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and "COACHBUS_FREE_PORTS" not in os.environ:
        index, count = int(worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        low, high = FREE_PORT_RANGE
        size = (high - low) // max(count, 1)
        start = low + index * size
        os.environ["COACHBUS_FREE_PORTS"] = f"{start}-{start + size - 1}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier from its folder; a test with no tier fails collection.
    Runs before ``-m`` selects, so ``-m unit`` sees the folder's marks."""
    unmarked: list[str] = []
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        try:
            folder = item.path.relative_to(TESTS).parts[0]
        except ValueError:
            folder = ""
        tier = FOLDER_TIERS.get(folder)
        if tier is None:
            unmarked.append(item.nodeid)
            continue
        item.add_marker(tier)
    if unmarked:
        raise pytest.UsageError(
            f"no tier for {', '.join(unmarked)}: mark it {' / '.join(TIERS)} "
            "or put it under a folder of FOLDER_TIERS (tests/conftest.py)"
        )
    # The modules on the shared stack run last, in their usual order: it starts after
    # every private stack has stopped (an idle stack still burns CPU) and stops at
    # the end of the session.
    sharing = {item.path for item in items if "running_stack" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: item.path in sharing)


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


@pytest_asyncio.fixture(scope="session")
async def running_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningStack]:
    """The whole pipeline as separate processes, shared by the session.

    A test may stop an agent (to prove the deadline, or that the agent's state comes
    back from its topics) if it starts it again and waits for it to be healthy before
    it ends; anything else it changes needs a private stack. A test that needs a
    shorter deadline publishes its user messages itself, each with its own deadline
    (tests/fault/test_deadline_and_duplicates.py)."""
    prefix = f"sh{uuid.uuid4().hex[:8]}."
    log_dir = tmp_path_factory.mktemp("shared-stack-logs")
    config = StackConfig.ephemeral(
        bootstrap=kafka_bootstrap,
        log_dir=log_dir,
        env={
            "COACHBUS_TOPIC_PREFIX": prefix,
            "COACHBUS_PARTITIONS": "3",
            "COACHBUS_API_KEYS": ",".join(
                f"{u}:{k}:reviewer" if u in REVIEWERS else f"{u}:{k}" for u, k in KEYS.items()
            ),
            "COACHBUS_TURN_DEADLINE_MS": str(SHARED_DEADLINE_MS),
            # Many modules' bursts on the same keys; the per-key limit has its own
            # stack (tests/integration/test_erase.py).
            "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
            "COACHBUS_LOG_LEVEL": "INFO",
        },
    )
    stack = Stack(config)
    await stack.start()
    try:
        yield RunningStack(stack, stack.gateway_url, prefix, kafka_bootstrap)
    finally:
        await stack.stop()
        _dump_logs_on_failure(log_dir)


def _dump_logs_on_failure(log_dir: Path) -> None:
    # Keep the service logs visible in CI output when something went wrong.
    for path in sorted(log_dir.glob("*.log")):
        text = path.read_text(errors="replace")
        if "Traceback" in text or "ERROR" in text:
            print(f"\n===== {path.name} (tail) =====\n{text[-4000:]}")
