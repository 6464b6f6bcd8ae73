"""The whole pipeline on one machine: broker (embedded unless one is configured),
topics, and the seven services under the supervisor."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coachbus.bus.admin import ensure_topics, wait_for_broker
from coachbus.embedded.broker import EmbeddedBroker, free_port
from coachbus.embedded.snapshot import export_snapshot, import_snapshot
from coachbus.embedded.supervisor import SERVICES, ServiceSpec, Supervisor
from coachbus.settings import CoachbusSettings, KafkaSettings, generate_dev_key

log = logging.getLogger(__name__)


@dataclass
class StackConfig:
    bootstrap: str | None = None  # None: start the embedded broker
    broker_port: int = 9092
    gateway_port: int = 8000
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

    @classmethod
    def ephemeral(cls, **kwargs: object) -> StackConfig:
        """Free ports everywhere: for tests and benchmarks beside a running stack."""
        ports = {name: free_port() for name in SERVICES}
        return cls(
            broker_port=free_port(),
            gateway_port=ports["gateway"],
            service_ports=ports,
            **kwargs,  # type: ignore[arg-type]
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

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.config.gateway_port}"

    async def start(self) -> None:
        cfg = self.config
        env = dict(cfg.env)
        bootstrap = cfg.bootstrap or env.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            log_file = cfg.log_dir / "broker.log" if cfg.log_dir else None
            if cfg.log_dir:
                cfg.log_dir.mkdir(parents=True, exist_ok=True)
            self.broker = EmbeddedBroker(port=cfg.broker_port, log_file=log_file)
            await asyncio.to_thread(self.broker.start)
            bootstrap = self.broker.bootstrap
        env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
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
        from coachbus.bus.service import DEFAULT_PORTS

        for name in cfg.services:
            if name == "gateway":
                service_port = cfg.gateway_port
            else:
                service_port = cfg.service_ports.get(name, DEFAULT_PORTS[name])
            specs.append(ServiceSpec(name=name, port=service_port))
            for n in range(2, cfg.replicas.get(name, 1) + 1):
                specs.append(
                    ServiceSpec(
                        name=f"{name}-{n}",
                        port=free_port(),
                        module=f"services.{name}.main:app",
                    )
                )
        self.supervisor = Supervisor(specs, env=env, log_dir=cfg.log_dir, restart=cfg.restart)
        await self.supervisor.start()
        try:
            await self.supervisor.wait_healthy(timeout_s=90)
        except BaseException:
            await self.stop()
            raise

    async def snapshot(self) -> int | None:
        """Write the compacted state to the configured snapshot file."""
        if self.config.snapshot is None or self._settings is None or self._kafka is None:
            return None
        return await export_snapshot(self._settings, self._kafka, self.config.snapshot)

    async def stop(self) -> None:
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
