"""A small process supervisor: one OS process per service, restarted when it crashes.

Used by ``coachbus run`` (and so ``make run``) and by the tests that kill services
mid-turn. Each child is ``python -m faststream run services.<name>.main:app``. On
POSIX those children are forked from a zygote that has already imported the
libraries every service needs (:mod:`coachbus.embedded.zygote`): a stack starts, and
a killed service comes back, without seven interpreters importing the same code.
``preload=False`` starts each as its own interpreter instead (``ps`` then shows the
service's module on its command line; forked children show the zygote's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from coachbus.embedded.zygote import ForkedProcess, Zygote
from coachbus.roster import SERVICES as SERVICES

log = logging.getLogger(__name__)


@dataclass
class ServiceSpec:
    name: str
    port: int
    env: dict[str, str] = field(default_factory=dict)
    module: str | None = None
    # A process that is not a FastStream service (the LLM simulator): its own argv.
    command: list[str] | None = None
    health_path: str = "/healthz"

    def argv(self) -> list[str]:
        if self.command is not None:
            return list(self.command)
        target = self.module or f"services.{self.name}.main:app"
        return [
            sys.executable,
            "-m",
            "faststream",
            "run",
            target,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]

    def python_module(self) -> tuple[str, list[str]] | None:
        """``(module, args)`` when the child is ``python -m module args...``: a child
        the zygote can fork."""
        argv = self.argv()
        if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m":
            return argv[2], argv[3:]
        return None


@dataclass
class _Child:
    spec: ServiceSpec
    proc: asyncio.subprocess.Process | ForkedProcess | None = None
    restarts: int = 0
    started_at: float = 0.0
    stopping: bool = False


class Supervisor:
    def __init__(
        self,
        specs: list[ServiceSpec],
        *,
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        restart: bool = True,
        max_backoff_s: float = 10.0,
        preload: bool = True,
    ) -> None:
        self._children = {s.name: _Child(s) for s in specs}
        self._env = {**os.environ, **(env or {})}
        self._log_dir = log_dir
        self._restart = restart
        self._max_backoff_s = max_backoff_s
        self._watchers: list[asyncio.Task[None]] = []
        self._closing = False
        self._preload = preload and hasattr(os, "fork")
        self._zygote: Zygote | None = None

    @property
    def names(self) -> list[str]:
        return list(self._children)

    def restarts(self, name: str) -> int:
        return self._children[name].restarts

    def pid(self, name: str) -> int | None:
        proc = self._children[name].proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        if self._preload and any(c.spec.python_module() for c in self._children.values()):
            log_path = self._log_dir / "zygote.log" if self._log_dir is not None else None
            self._zygote = Zygote(log_path)
            await self._zygote.start()
        for child in self._children.values():
            await self._spawn(child)
            self._watchers.append(asyncio.create_task(self._watch(child)))

    async def _spawn(self, child: _Child) -> None:
        env = {**self._env, **child.spec.env}
        log_path = None
        if self._log_dir is not None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            log_path = self._log_dir / f"{child.spec.name}.log"
        forkable = child.spec.python_module()
        if forkable is not None and self._zygote is not None and self._zygote.alive:
            module, args = forkable
            child.proc = await self._zygote.spawn(
                module, args, env=env, cwd=os.getcwd(), log_path=log_path
            )
        else:
            # Opening a local log file is instant; no need for a thread.
            out = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115, ASYNC230
            try:
                child.proc = await asyncio.create_subprocess_exec(
                    *child.spec.argv(),
                    env=env,
                    stdout=out if out is not None else asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                # The child has its own copy of the descriptor; ours would leak one
                # per restart.
                if out is not None:
                    out.close()
        child.started_at = time.monotonic()

    async def _watch(self, child: _Child) -> None:
        backoff = 0.5
        while True:
            assert child.proc is not None
            code = await child.proc.wait()
            if self._closing or child.stopping or not self._restart:
                return
            # A crash loop backs off; a service that ran a while restarts at once.
            if time.monotonic() - child.started_at > 30:
                backoff = 0.5
            log.warning("%s exited with %s; restarting in %.1fs", child.spec.name, code, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff_s)
            if self._closing:
                return
            child.restarts += 1
            await self._spawn(child)

    async def stop_service(self, name: str, timeout_s: float = 20.0) -> None:
        """Stop one service for good (until :meth:`start_service`): no restart."""
        child = self._children[name]
        child.stopping = True
        proc = child.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout_s)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    async def start_service(self, name: str) -> None:
        child = self._children[name]
        if child.proc is not None and child.proc.returncode is None:
            return
        child.stopping = False
        await self._spawn(child)
        self._watchers.append(asyncio.create_task(self._watch(child)))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send a signal (kill -9 by default); the watcher restarts the service."""
        proc = self._children[name].proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(sig)

    async def wait_healthy(self, name: str | None = None, timeout_s: float = 60.0) -> None:
        names = [name] if name else self.names
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            for n in names:
                spec = self._children[n].spec
                url = f"http://127.0.0.1:{spec.port}{spec.health_path}"
                while True:
                    with contextlib.suppress(httpx.HTTPError):
                        if (await client.get(url)).status_code < 300:
                            break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{n} not healthy after {timeout_s}s")
                    await asyncio.sleep(0.1)

    async def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM everyone (services finish their work in hand), SIGKILL stragglers."""
        self._closing = True
        procs = [c.proc for c in self._children.values() if c.proc and c.proc.returncode is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        if procs:
            _done, _pending = await asyncio.wait(
                [asyncio.create_task(p.wait()) for p in procs], timeout=timeout_s
            )
            for proc in procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        if self._zygote is not None:
            await self._zygote.stop()
            self._zygote = None
