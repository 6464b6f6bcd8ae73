"""Fork the stack's Python services from one process that has imported their libraries.

Every service runs as ``python -m faststream run services.<name>.main:app``: seven
interpreters, each importing the same FastStream, pydantic, aiokafka, FastAPI and
our library before it can serve, about 0.8 CPU-seconds apiece. The zygote imports
those once and forks a child per service, so a stack starts (and a killed service
comes back) for the cost of the service's own modules, and the children share the
libraries' memory pages until they write to them.

The zygote is started by :class:`coachbus.embedded.supervisor.Supervisor` and speaks
JSON lines: the supervisor writes ``{"spawn": id, "module": m, "args": [...], "env":
{...}, "cwd": dir, "log": path-or-null}`` on its stdin; the zygote answers ``{"spawned":
id, "pid": n}`` or ``{"failed": id, "error": text}``, and ``{"exited": pid, "code": c}``
when a child ends (``code`` negative for a signal, as in :mod:`subprocess`). A child is
exactly ``python -m <module> <args...>`` in its own session, with the environment and
working directory it was asked for, stdout and stderr appended to its log.

Only libraries are preloaded, never a service's own modules: those read their settings
from the environment when imported, and the environment is the child's, not the
zygote's. What the zygote imported stays as it was when it started: after editing the
shared library, restart the stack (the supervisor does not restart the zygote).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import runpy
import selectors
import signal
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# What every service imports before its own code (measured with ``python -X
# importtime``): the framework, the client libraries and our library's bus core.
PRELOAD: tuple[str, ...] = (
    "pydantic",
    "pydantic_settings",
    "httpx",
    "prometheus_client",
    "aiokafka",
    "uvicorn",
    "fastapi",
    "faststream",
    "faststream.kafka",
    "faststream.asgi",
    "faststream._internal.cli.main",
    "coachbus.settings",
    "coachbus.contracts",
    "coachbus.bus.service",
    "coachbus.llm.client",
)


def _preload(modules: tuple[str, ...]) -> None:
    for name in modules:
        # A library missing here is only slower to start in the child; the child's
        # own import reports the real error if it matters.
        with contextlib.suppress(ImportError):
            __import__(name)


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become ``python -m module args...``; never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # As `python -m` starts: SIGPIPE ignored, so a write to a socket the peer
        # closed raises BrokenPipeError in the one request instead of killing the
        # service (a gateway writing a keep-alive to a client that went away).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        out = os.open(request["log"] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(null)
        # As ``python -m`` would: the working directory first, then PYTHONPATH.
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:1] = [os.getcwd(), *(p for p in extra if p not in sys.path)]
        sys.argv = [request["module"], *request["args"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# The protocol's own descriptor: stdout itself is pointed at stderr, so a library
# that prints while it is preloaded cannot corrupt the protocol.
_PROTOCOL_FD = 1


def _send(message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(_PROTOCOL_FD, data) :]


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def serve() -> None:
    """The zygote's loop: spawn on request, report exits, end when stdin closes."""
    # The supervisor stops the zygote by closing its stdin; a Ctrl-C in the terminal
    # is the supervisor's to handle, not ours.
    global _PROTOCOL_FD
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _PROTOCOL_FD = os.dup(1)
    os.dup2(2, 1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    # A Python-level handler is what makes the wakeup fd fire on SIGCHLD.
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    _preload(PRELOAD)
    stdin = sys.stdin.fileno()
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    buffer = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
                _reap()
                continue
            chunk = os.read(stdin, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    _spawn(json.loads(line), [wake_r, wake_w, selector.fileno(), _PROTOCOL_FD])
        # A SIGCHLD that landed between two selects is reaped here too.
        _reap()


def _spawn(request: dict[str, Any], fds: list[int]) -> None:
    # What the parent buffered must not be written twice, once by each process.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        _send({"failed": request["spawn"], "error": str(exc)})
        return
    if pid == 0:
        _child(request, fds)
    _send({"spawned": request["spawn"], "pid": pid})


# --------------------------------------------------------------------------- the client


def _running(pid: int) -> bool:
    """The process exists and has not ended (a zombie has ended: an init that does
    not reap, as in some containers, would otherwise keep it "alive" for ever)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, and someone else's now
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) state ...": the state follows the last closing bracket.
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc: signal 0 is all we can know


class ForkedProcess:
    """A child of the zygote, seen from the supervisor: the part of
    :class:`asyncio.subprocess.Process` the supervisor uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # Once reaped, the pid may belong to someone else: never signal it.
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """Runs ``python -m coachbus.embedded.zygote`` and asks it for children."""

    def __init__(self, log_path: Path | None = None) -> None:
        self._log_path = log_path
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[ForkedProcess]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._next = 0
        self._orphans: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        proc, reader = self._proc, self._reader
        return (
            proc is not None
            and proc.returncode is None
            and reader is not None
            and not reader.done()
        )

    async def start(self) -> None:
        err: Any = asyncio.subprocess.DEVNULL
        if self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            err = open(self._log_path, "ab")  # noqa: SIM115, ASYNC230
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "coachbus.embedded.zygote",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            # A service's environment can be large; so can one line of the protocol.
            limit=1 << 20,
        )
        if err is not asyncio.subprocess.DEVNULL:
            err.close()
        self._reader = asyncio.create_task(self._read())

    async def spawn(
        self,
        module: str,
        args: list[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        log_path: Path | None,
    ) -> ForkedProcess:
        """Start ``python -m module args...`` as a fork of the zygote."""
        if not self.alive or self._proc is None or self._proc.stdin is None:
            raise RuntimeError("the zygote is not running")
        self._next += 1
        ident = self._next
        future: asyncio.Future[ForkedProcess] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        request = {
            "spawn": ident,
            "module": module,
            "args": args,
            "env": dict(env),
            "cwd": cwd,
            "log": str(log_path) if log_path is not None else None,
        }
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        await self._proc.stdin.drain()
        return await future

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        try:
            while line := await stdout.readline():
                message = json.loads(line)
                if "spawned" in message:
                    child = ForkedProcess(message["pid"])
                    self._children[child.pid] = child
                    self._resolve(message["spawned"], child)
                elif "failed" in message:
                    self._resolve(message["failed"], RuntimeError(message["error"]))
                elif "exited" in message:
                    gone = self._children.pop(message["exited"], None)
                    if gone is not None:
                        gone._exit(message["code"])
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RuntimeError("the zygote exited"))
            self._pending.clear()
            if self._children:
                # The children keep running, adopted by init, which reaps them: their
                # exits can only be seen by polling from here on.
                log.error("the zygote exited with %d children still running", len(self._children))
                self._orphans = asyncio.create_task(self._poll_orphans())

    async def _poll_orphans(self, every_s: float = 0.5) -> None:
        """Report each orphaned child's end (its exit code is lost with the zygote:
        reported as -SIGKILL) so the supervisor still restarts it."""
        while self._children:
            await asyncio.sleep(every_s)
            for pid in list(self._children):
                if not _running(pid):
                    self._children.pop(pid)._exit(-signal.SIGKILL)

    def _resolve(self, ident: int, outcome: ForkedProcess | Exception) -> None:
        future = self._pending.pop(ident, None)
        if future is None or future.done():
            return
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """End the zygote (its children are the supervisor's to stop first)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        if self._orphans is not None:
            self._orphans.cancel()
            await asyncio.gather(self._orphans, return_exceptions=True)
            self._orphans = None


if __name__ == "__main__":
    serve()
    # Tearing down every preloaded module takes a third of a second and helps nobody.
    sys.stderr.flush()
    os._exit(0)
