"""The zygote forks children that behave like ``python -m module args...``: their own
environment, working directory, session, log and exit code; and the supervisor
restarts a killed one through it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from coachbus.embedded.supervisor import ServiceSpec, Supervisor
from coachbus.embedded.zygote import Zygote

CHILD = """
import os, sys, time
print("args", sys.argv[1:])
print("env", os.environ.get("ZYGOTE_TEST"))
print("cwd", os.getcwd())
print("session", os.getsid(0) == os.getpid())
sys.stdout.flush()
if sys.argv[1] == "sleep":
    time.sleep(60)
raise SystemExit(int(sys.argv[1]))
"""


@pytest.fixture
def child_module(tmp_path: Path) -> Path:
    (tmp_path / "zygote_child.py").write_text(CHILD)
    return tmp_path


async def test_a_child_is_python_dash_m_with_its_own_env_cwd_and_log(
    child_module: Path, tmp_path: Path
) -> None:
    zygote = Zygote(tmp_path / "zygote.log")
    await zygote.start()
    try:
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
        with pytest.raises(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)  # reaped: its pid is not ours to signal
    finally:
        await zygote.stop()


async def test_a_killed_child_reports_the_signal(child_module: Path, tmp_path: Path) -> None:
    zygote = Zygote()
    await zygote.start()
    try:
        log = tmp_path / "child.log"
        proc = await zygote.spawn(
            "zygote_child", ["sleep"], env={}, cwd=str(child_module), log_path=log
        )
        for _ in range(300):
            if log.exists() and "session" in log.read_text():
                break
            await asyncio.sleep(0.05)
        proc.kill()
        assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
    finally:
        await zygote.stop()


async def test_a_missing_module_fails_in_the_child_not_the_zygote(
    child_module: Path, tmp_path: Path
) -> None:
    zygote = Zygote()
    await zygote.start()
    try:
        log = tmp_path / "bad.log"
        bad = await zygote.spawn("no_such_module_here", [], env={}, cwd=str(tmp_path), log_path=log)
        assert await asyncio.wait_for(bad.wait(), 30) == 1
        assert "No module named no_such_module_here" in log.read_text()
        # The zygote serves on.
        good = await zygote.spawn(
            "zygote_child", ["0"], env={}, cwd=str(child_module), log_path=None
        )
        assert await asyncio.wait_for(good.wait(), 30) == 0
    finally:
        await zygote.stop()


async def test_children_of_a_dead_zygote_are_still_seen_to_end(
    child_module: Path, tmp_path: Path
) -> None:
    """A zygote killed (the OOM killer, an operator) leaves its children running:
    their ends are then polled, so a supervisor still notices and restarts them."""
    zygote = Zygote()
    await zygote.start()
    try:
        log = tmp_path / "child.log"
        proc = await zygote.spawn(
            "zygote_child", ["sleep"], env={}, cwd=str(child_module), log_path=log
        )
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
    finally:
        await zygote.stop()


async def test_the_supervisor_restarts_a_forked_service_after_kill_9(tmp_path: Path) -> None:
    # The LLM simulator is a small python -m server with a health path: a real child.
    from coachbus.embedded.broker import free_port

    port = free_port()
    spec = ServiceSpec(
        name="llm-sim",
        port=port,
        command=[sys.executable, "-m", "coachbus.cli", "llm-sim", "--port", str(port)],
        health_path="/health",
    )
    supervisor = Supervisor([spec], log_dir=tmp_path, max_backoff_s=0.5)
    await supervisor.start()
    try:
        await supervisor.wait_healthy(timeout_s=60)
        first = supervisor.pid("llm-sim")
        assert first is not None
        assert (tmp_path / "zygote.log").exists()  # it was forked, not exec'd
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
