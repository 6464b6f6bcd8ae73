"""bench.spy: samples charged to the innermost frame's package, weighted by each
process's CPU per turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import spy

ROOT = "<module> (zygote.py:1);Runner.run (asyncio/runners.py:118)"


def test_innermost_frame_decides() -> None:
    stacks = [
        # The event loop itself, nothing below it in Python.
        f"{ROOT} 5",
        # Our handler calling into httpx: the time is httpx's.
        f"{ROOT};handle (services/coach/handlers.py:40);AsyncClient.send (httpx/_client.py:1600) 3",
        # Our own function at the leaf.
        f"{ROOT};handle (services/coach/handlers.py:40);screen_crisis (coachbus/crisis.py:521) 2",
    ]
    counts = spy.shares(stacks)
    assert counts == {spy.LOOP: 5, "httpx (httpcore, h11, anyio)": 3, spy.OURS: 2}


@pytest.mark.parametrize(
    ("frame", "group"),
    [
        ("Fetcher._proc_fetch_request (aiokafka/consumer/fetcher.py:700)", "aiokafka"),
        ("deepcopy (copy.py:128)", spy.STDLIB),
        ("JSONDecoder.decode (json/decoder.py:337)", spy.STDLIB),
        ("_run_once (asyncio/base_events.py:1845)", spy.ASYNCIO),
        ("BaseModel.__init__ (pydantic/main.py:250)", "pydantic"),
        (
            "RequestResponseCycle.run_asgi (uvicorn/protocols/http/httptools_impl.py:400)",
            "uvicorn, Starlette, FastAPI",
        ),
        ("<module> (<frozen runpy>:88)", spy.STDLIB),
        ("thing (somelib/mod.py:1)", spy.OTHER),
        ("no location at all", spy.OTHER),
    ],
)
def test_groups(frame: str, group: str) -> None:
    assert spy.frame_group(frame) == group


def test_weighted_by_each_process_and_other_processes_kept_whole() -> None:
    stacks = {
        "coach": [f"{ROOT} 1", f"{ROOT};f (coachbus/x.py:1) 3"],
        "gateway": [f"{ROOT} 1"],
    }
    ms = {"coach": 8.0, "gateway": 2.0, "broker": 5.0}
    got = spy.attribute(stacks, ms)
    assert got == pytest.approx({spy.LOOP: 2.0 + 2.0, spy.OURS: 6.0, "broker (not Python)": 5.0})
    # Nothing is lost: the groups add up to the processes' CPU.
    assert sum(got.values()) == pytest.approx(sum(ms.values()))
    assert "total" in spy.table(got)


def test_a_process_without_samples_is_kept_whole() -> None:
    got = spy.attribute({"coach": ["malformed"]}, {"coach": 4.0})
    assert got == {"coach (no samples)": 4.0}


def test_report_reads_the_stacks_of_a_run(tmp_path: Path) -> None:
    (tmp_path / "coach.txt").write_text(f"{ROOT};f (coachbus/x.py:1) 1\n", encoding="utf-8")
    out = spy.report(tmp_path, {"coach": 3.0, "broker": 1.0})
    assert spy.OURS in out and "broker (not Python)" in out
    assert out.splitlines()[-1].split()[-1] == "4.0"
