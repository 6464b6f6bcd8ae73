"""The zygote forks children that behave like ``python -m module args...``: their own
environment, working directory, session, log and exit code; and the supervisor
restarts a killed one through it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from coachbus.embedded.supervisor import ServiceSpec, Supervisor
from coachbus.embedded.zygote import ForkedProcess, Zygote

CHILD = """
import os, sys, time
print("args", sys.argv[1:])
print("env", os.environ.get("ZYGOTE_TEST"))
print("cwd", os.getcwd())
print("session", os.getsid(0) == os.getpid())
import signal
print("sigpipe", signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN)
sys.stdout.flush()
if sys.argv[1] == "sleep":
    time.sleep(60)
raise SystemExit(int(sys.argv[1]))
"""


@pytest.fixture
def child_module(tmp_path: Path) -> Path:
    (tmp_path / "zygote_child.py").write_text(CHILD)
    return tmp_path


@pytest_asyncio.fixture
async def zygote(tmp_path: Path) -> AsyncIterator[Zygote]:
    started = Zygote(tmp_path / "zygote.log")
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


def _has_started(log: Path) -> bool:
    return log.exists() and "session" in log.read_text()


async def _sleeper(zygote: Zygote, child_module: Path, log: Path) -> ForkedProcess:
    """A child that sleeps, once it has started (its log says so)."""
    proc = await zygote.spawn(
        "zygote_child", ["sleep"], env={}, cwd=str(child_module), log_path=log
    )
    for _ in range(300):
        if _has_started(log):
            break
        await asyncio.sleep(0.05)
    return proc


async def test_a_child_is_python_dash_m_with_its_own_env_cwd_and_log(
    zygote: Zygote, child_module: Path, tmp_path: Path
) -> None:
    log = tmp_path / "child.log"
    proc = await zygote.spawn(
        "zygote_child",
        ["3"],
        env={"ZYGOTE_TEST": "from-the-request", "PATH": os.environ.get("PATH", "")},
        cwd=str(child_module),
        log_path=log,
    )
    assert await asyncio.wait_for(proc.wait(), 30) == 3
    text = log.read_text()
    assert "args ['3']" in text
    assert "env from-the-request" in text
    assert f"cwd {child_module}" in text
    assert "session True" in text  # a Ctrl-C in the terminal is not the child's
    # SIGPIPE ignored, as in `python -m`: a closed client socket is an error in one
    # request, never the death of the service.
    assert "sigpipe True" in text
    with pytest.raises(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)  # reaped: its pid is not ours to signal


async def test_a_killed_child_reports_the_signal(
    zygote: Zygote, child_module: Path, tmp_path: Path
) -> None:
    proc = await _sleeper(zygote, child_module, tmp_path / "child.log")
    proc.kill()
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL


async def test_a_missing_module_fails_in_the_child_not_the_zygote(
    zygote: Zygote, child_module: Path, tmp_path: Path
) -> None:
    log = tmp_path / "bad.log"
    bad = await zygote.spawn("no_such_module_here", [], env={}, cwd=str(tmp_path), log_path=log)
    assert await asyncio.wait_for(bad.wait(), 30) == 1
    assert "No module named no_such_module_here" in log.read_text()
    # The zygote serves on.
    good = await zygote.spawn("zygote_child", ["0"], env={}, cwd=str(child_module), log_path=None)
    assert await asyncio.wait_for(good.wait(), 30) == 0


async def test_children_of_a_dead_zygote_are_still_seen_to_end(
    zygote: Zygote, child_module: Path, tmp_path: Path
) -> None:
    """A zygote killed (the OOM killer, an operator) leaves its children running:
    their ends are then polled, so a supervisor still notices and restarts them."""
    proc = await _sleeper(zygote, child_module, tmp_path / "child.log")
    assert zygote._proc is not None
    zygote._proc.kill()
    for _ in range(100):
        if not zygote.alive:
            break
        await asyncio.sleep(0.05)
    assert not zygote.alive
    with pytest.raises(RuntimeError):
        await zygote.spawn("zygote_child", ["0"], env={}, cwd=str(child_module), log_path=None)
    os.kill(proc.pid, signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL  # the code is lost


@pytest.mark.parametrize("preload", [True, False], ids=["forked", "exec"])
async def test_the_supervisor_restarts_a_service_after_kill_9(
    tmp_path: Path, preload: bool
) -> None:
    # The LLM simulator is a small python -m server with a health path: a real child.
    from coachbus.embedded.broker import free_port

    port = free_port()
    spec = ServiceSpec(
        name="llm-sim",
        port=port,
        command=[sys.executable, "-m", "coachbus.cli", "llm-sim", "--port", str(port)],
        health_path="/health",
    )
    supervisor = Supervisor([spec], log_dir=tmp_path, max_backoff_s=0.5, preload=preload)
    await supervisor.start()
    try:
        await supervisor.wait_healthy(timeout_s=60)
        first = supervisor.pid("llm-sim")
        assert first is not None
        # Forked from the zygote, or its own interpreter (the fallback path).
        assert (tmp_path / "zygote.log").exists() is preload
        supervisor.kill("llm-sim")
        for _ in range(600):
            if supervisor.restarts("llm-sim") and supervisor.pid("llm-sim") not in (None, first):
                break
            await asyncio.sleep(0.05)
        assert supervisor.restarts("llm-sim") == 1
        await supervisor.wait_healthy(timeout_s=60)
    finally:
        await supervisor.stop()
    assert supervisor.pid("llm-sim") is None


def test_a_zombie_is_not_running() -> None:
    from coachbus.embedded.zygote import _running

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        for _ in range(200):  # until it has exited (and, not reaped, is a zombie)
            if not _running(pid):
                break
            time.sleep(0.01)
        assert not _running(pid)
        assert _running(os.getpid())
    finally:
        os.waitpid(pid, 0)
    assert not _running(pid)
