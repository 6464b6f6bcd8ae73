"""The whole pipeline on one machine: broker (embedded unless one is configured),
topics, and the seven services under the supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from coachbus.bus.admin import ensure_topics, wait_for_broker
from coachbus.bus.erasure import Erasures
from coachbus.bus.state import tail_batches
from coachbus.contracts import EraseConfirmation
from coachbus.embedded.broker import EmbeddedBroker, free_port
from coachbus.embedded.snapshot import export_snapshot, import_snapshot
from coachbus.embedded.supervisor import SERVICES, ServiceSpec, Supervisor
from coachbus.settings import CoachbusSettings, KafkaSettings, generate_dev_key
from coachbus.topics import Topic

log = logging.getLogger(__name__)


class EraseWatch:
    """Calls ``on_complete`` whenever an erase completes (every owner of the user's
    state confirmed its tombstones): the embedded stack then rewrites its snapshot,
    so a crash after the erase cannot restore the user from an older file."""

    def __init__(
        self,
        settings: CoachbusSettings,
        kafka: KafkaSettings,
        on_complete: Callable[[], Awaitable[object]],
    ) -> None:
        self._kafka = kafka
        self._erasures_topic = settings.topic(Topic.ERASURES.value)
        self._confirmations_topic = settings.topic(Topic.ERASE_CONFIRMATIONS.value)
        self._on_complete = on_complete
        self.erasures = Erasures(topic=self._erasures_topic)
        self._confirmed: dict[tuple[str, str], set[str]] = {}
        self._done: set[str] = set()
        self.completed = 0
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kafka = self._kafka
        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.servers,
            enable_auto_commit=False,
            fetch_max_wait_ms=250,
            **kafka.client_kwargs(),
        )
        await consumer.start()
        await consumer._client.force_metadata_update()
        tps = [
            TopicPartition(topic, p)
            for topic in (self._erasures_topic, self._confirmations_topic)
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        self._task = asyncio.create_task(self._run(consumer), name="stack-erase-watch")

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        async for batch in tail_batches(consumer):
            touched: set[str] = set()
            for tp, records in batch.items():
                for record in records:
                    if tp.topic == self._erasures_topic:
                        self.erasures.apply_raw(record.key, record.value)
                    elif record.value:
                        try:
                            done = EraseConfirmation.model_validate_json(record.value)
                        except ValidationError:
                            continue
                        key = (done.user_id, done.request_id)
                        self._confirmed.setdefault(key, set()).add(done.owner)
                    if record.key is not None:
                        touched.add(record.key.decode("utf-8", "replace"))
            if any(self._complete(user) for user in touched):
                try:
                    await self._on_complete()
                    log.info("an erase completed: the state snapshot was rewritten")
                except Exception:
                    log.exception("could not rewrite the state snapshot after an erase")

    def _complete(self, user_id: str) -> bool:
        watermark = self.erasures.get(user_id)
        if watermark is None or watermark.request_id in self._done:
            return False
        confirmed = self._confirmed.get((user_id, watermark.request_id), set())
        if not set(watermark.owners) <= confirmed:
            return False
        self._done.add(watermark.request_id)
        self.completed += 1
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._consumer is not None:
            # With the broker gone (a crash), aiokafka's stop ends in its own fetch
            # task's CancelledError: run it apart so that is not taken for ours.
            stopping = asyncio.ensure_future(self._consumer.stop())
            self._consumer = None
            await asyncio.wait([stopping])
            if not stopping.cancelled() and stopping.exception() is not None:
                log.info("erase watch: consumer stopped uncleanly: %s", stopping.exception())


@dataclass
class StackConfig:
    bootstrap: str | None = None  # None: start the embedded broker
    # Ports: None takes the setting (COACHBUS_EMBEDDED_BROKER_PORT, COACHBUS_GATEWAY_PORT,
    # COACHBUS_GATEWAY_INTERNAL_PORT, COACHBUS_SERVICE_PORTS) from ``env`` or the
    # process environment, so an operator's setting is never overridden by a default
    # here; a value pins the port (tests, ``--port``). Resolved in ``Stack.start``.
    broker_port: int | None = None
    gateway_port: int | None = None
    # The gateway's /metrics and API docs (never on the public port).
    gateway_internal_port: int | None = None
    service_ports: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    services: tuple[str, ...] = SERVICES
    restart: bool = True
    # Where the embedded broker's state is kept across runs (None: not kept).
    snapshot: Path | None = None
    # none: deterministic tier (or whatever COACHBUS_LLM_* says); sim: the LLM
    # simulator as the small and strong tier; local: a real small model on this CPU.
    llm: str = "none"
    llm_port: int | None = None
    # Extra replicas per service (same consumer group: partitions are shared out).
    replicas: dict[str, int] = field(default_factory=dict)
    # Fork the Python services from one process that has imported their libraries
    # (coachbus.embedded.zygote); False: one fresh interpreter each.
    preload: bool = True

    @classmethod
    def ephemeral(cls, **kwargs: object) -> StackConfig:
        """Free ports everywhere: for tests and benchmarks beside a running stack."""
        ports = {name: free_port() for name in SERVICES}
        return cls(
            broker_port=free_port(),
            gateway_port=ports["gateway"],
            gateway_internal_port=free_port(),
            service_ports=ports,
            **kwargs,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class StackPorts:
    broker: int
    gateway: int
    gateway_internal: int
    services: dict[str, int]

    @classmethod
    def resolve(cls, config: StackConfig, env: dict[str, str]) -> StackPorts:
        from coachbus.bus.app import DEFAULT_PORTS

        settings = CoachbusSettings(**_coachbus_from(env))
        internal = config.gateway_internal_port
        if internal is None:
            # 0 means "any free port" to the gateway; the stack picks it here so it
            # can say where /metrics is.
            internal = settings.gateway_internal_port or free_port()
        return cls(
            broker=config.broker_port or settings.embedded_broker_port,
            gateway=config.gateway_port or settings.gateway_port,
            gateway_internal=internal,
            services={
                name: config.service_ports.get(name)
                or settings.service_ports.get(name, DEFAULT_PORTS[name])
                for name in DEFAULT_PORTS
            },
        )


def embedded_partitions(replicas: dict[str, int]) -> int:
    """Partitions per topic on the embedded broker: room for two replicas, or more
    if a service runs more."""
    return max(2, *replicas.values()) if replicas else 2


class Stack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.broker: EmbeddedBroker | None = None
        self.supervisor: Supervisor | None = None
        self.api_key: str | None = None
        self.env: dict[str, str] = {}
        self._settings: CoachbusSettings | None = None
        self.local_model: Any = None
        self._kafka: KafkaSettings | None = None
        self.erase_watch: EraseWatch | None = None
        self._ports: StackPorts | None = None

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.gateway}"

    @property
    def gateway_internal_url(self) -> str:
        """The gateway's /metrics, /openapi.json and /docs."""
        return f"http://127.0.0.1:{self.ports.gateway_internal}"

    def metrics_url(self, service: str) -> str:
        """Where a service's /metrics is served (the gateway's on its internal port)."""
        if service == "gateway":
            return f"{self.gateway_internal_url}/metrics"
        return f"http://127.0.0.1:{self.ports.services[service]}/metrics"

    @property
    def ports(self) -> StackPorts:
        """Every port this stack listens on: the config's, else the settings'."""
        if self._ports is None:
            self._ports = StackPorts.resolve(self.config, {**os.environ, **self.config.env})
        return self._ports

    async def start(self) -> None:
        cfg = self.config
        env = dict(cfg.env)
        bootstrap = cfg.bootstrap or env.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            log_file = cfg.log_dir / "broker.log" if cfg.log_dir else None
            if cfg.log_dir:
                cfg.log_dir.mkdir(parents=True, exist_ok=True)
            self.broker = EmbeddedBroker(port=self.ports.broker, log_file=log_file)
            await asyncio.to_thread(self.broker.start)
            bootstrap = self.broker.bootstrap
        env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
        # The gateway reads its internal port from this; resolved above from the
        # config or the operator's setting, never a default over the setting.
        env["COACHBUS_GATEWAY_INTERNAL_PORT"] = str(self.ports.gateway_internal)
        if self.broker is not None and not (
            env.get("COACHBUS_PARTITIONS") or os.environ.get("COACHBUS_PARTITIONS")
        ):
            # Partitions bound how many replicas can share a service's work, and
            # the embedded broker pays for each one on every fetch (Tansu checks
            # every partition of a request, ~200 requests a second per consumer).
            # One broker on one machine needs no more than its replicas.
            env["COACHBUS_PARTITIONS"] = str(embedded_partitions(cfg.replicas))
        if not (env.get("COACHBUS_API_KEYS") or os.environ.get("COACHBUS_API_KEYS")):
            self.api_key = generate_dev_key()
            env["COACHBUS_API_KEYS"] = f"dev:{self.api_key}"
        self.env = env
        merged = {**os.environ, **env}
        settings = CoachbusSettings(**_coachbus_from(merged))
        kafka = KafkaSettings(bootstrap_servers=bootstrap)
        await wait_for_broker(kafka)
        await ensure_topics(settings, kafka)
        self._settings, self._kafka = settings, kafka
        if self.broker is not None and cfg.snapshot is not None and cfg.snapshot.exists():
            restored = await import_snapshot(settings, kafka, cfg.snapshot)
            log.info("restored %d state records from %s", restored, cfg.snapshot)
        specs: list[ServiceSpec] = []
        if cfg.llm == "sim":
            port = cfg.llm_port or free_port()
            specs.append(
                ServiceSpec(
                    name="llm-sim",
                    port=port,
                    command=[
                        sys.executable,
                        "-m",
                        "coachbus.cli",
                        "llm-sim",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                    ],
                    health_path="/health",
                )
            )
            env["COACHBUS_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        elif cfg.llm == "local":
            from coachbus.llm.local import LocalModelServer

            log_file = cfg.log_dir / "llm-local.log" if cfg.log_dir else None
            self.local_model = LocalModelServer(port=cfg.llm_port, log_path=log_file)
            log.info("starting the local model server (first start loads the model)…")
            await asyncio.to_thread(self.local_model.start)
            env.update(self.local_model.env())
        for name in cfg.services:
            service_port = self.ports.gateway if name == "gateway" else self.ports.services[name]
            specs.append(ServiceSpec(name=name, port=service_port))
            for n in range(2, cfg.replicas.get(name, 1) + 1):
                specs.append(
                    ServiceSpec(
                        name=f"{name}-{n}",
                        port=free_port(),
                        module=f"services.{name}.main:app",
                    )
                )
        self.supervisor = Supervisor(
            specs, env=env, log_dir=cfg.log_dir, restart=cfg.restart, preload=cfg.preload
        )
        await self.supervisor.start()
        try:
            await self.supervisor.wait_healthy(timeout_s=90)
            if self.broker is not None and cfg.snapshot is not None:
                # The embedded broker forgets on a crash; the file must not remember
                # an erased user: rewrite it as each erase completes.
                self.erase_watch = EraseWatch(settings, kafka, self.snapshot)
                await self.erase_watch.start()
        except BaseException:
            await self.stop()
            raise

    async def snapshot(self) -> int | None:
        """Write the compacted state to the configured snapshot file."""
        if self.config.snapshot is None or self._settings is None or self._kafka is None:
            return None
        return await export_snapshot(self._settings, self._kafka, self.config.snapshot)

    async def stop(self) -> None:
        if self.erase_watch is not None:
            await self.erase_watch.stop()
            self.erase_watch = None
        if self.supervisor is not None:
            await self.supervisor.stop()
            self.supervisor = None
        if self.broker is not None and self.broker.running and self.config.snapshot is not None:
            # The embedded broker forgets everything when it stops: keep the state.
            try:
                saved = await self.snapshot()
                log.info("saved %s state records to %s", saved, self.config.snapshot)
            except Exception:
                log.exception("could not write the state snapshot")
        if self.broker is not None:
            await asyncio.to_thread(self.broker.stop)
            self.broker = None
        if self.local_model is not None:
            await asyncio.to_thread(self.local_model.stop)
            self.local_model = None


def _coachbus_from(env: dict[str, str]) -> dict[str, Any]:
    """Settings values given as COACHBUS_* variables, as keyword arguments."""
    prefix = "COACHBUS_"
    fields = CoachbusSettings.model_fields
    out: dict[str, Any] = {}
    for key, value in env.items():
        if key.startswith(prefix) and value:
            name = key[len(prefix) :].lower()
            if name in fields:
                out[name] = value
    return out
