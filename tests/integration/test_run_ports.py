"""``coachbus run`` (so ``make run``) listens where the settings say, on every port.

The stack used to write its own default for the gateway's internal port over the
operator's ``COACHBUS_GATEWAY_INTERNAL_PORT``, so a machine where 9000 was taken could
not run it. Here every port setting the docs name is moved off its default at once,
the real command is started, and each port is asked what it serves.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from coachbus.bus.admin import wait_for_broker
from coachbus.embedded.broker import free_port
from coachbus.roster import AGENT_SERVICES
from coachbus.settings import KafkaSettings

pytestmark = pytest.mark.slow


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"coachbus run exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not healthy in {timeout_s} s")


@pytest.mark.heavy
def test_every_documented_port_setting_is_used(tmp_path: Path) -> None:
    ports = {
        "COACHBUS_EMBEDDED_BROKER_PORT": free_port(),
        "COACHBUS_GATEWAY_PORT": free_port(),
        "COACHBUS_GATEWAY_INTERNAL_PORT": free_port(),
    }
    services = {name: free_port() for name in AGENT_SERVICES}
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COACHBUS_", "KAFKA_")) and k != "OTEL_EXPORTER_OTLP_ENDPOINT"
    }
    env.update({k: str(v) for k, v in ports.items()})
    env["COACHBUS_SERVICE_PORTS"] = json.dumps(services)
    proc = subprocess.Popen(
        [sys.executable, "-m", "coachbus.cli", "run", "--no-snapshot", "--log-dir", "logs"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        public = f"http://127.0.0.1:{ports['COACHBUS_GATEWAY_PORT']}"
        internal = f"http://127.0.0.1:{ports['COACHBUS_GATEWAY_INTERNAL_PORT']}"
        _wait_healthy(f"{public}/healthz", proc, timeout_s=120)
        for name, port in services.items():
            _wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, timeout_s=30)
            assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200, name
        # The internal port carries what the public one must not.
        assert httpx.get(f"{internal}/metrics").status_code == 200
        assert httpx.get(f"{public}/metrics").status_code == 404
        broker = f"127.0.0.1:{ports['COACHBUS_EMBEDDED_BROKER_PORT']}"
        asyncio.run(wait_for_broker(KafkaSettings(bootstrap_servers=broker), timeout_s=10))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
