"""The benchmark suite runs end to end in its tiny ``--quick`` mode and writes results
of the expected shape. Timings are never asserted: the machine is shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# A whole quick benchmark run takes about a minute on two cores, a sixth of the suite:
# it runs in `make test-heavy`, which CI runs after `make test`.
pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_results(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--name", "smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "machine:" in done.stdout
    result = json.loads((tmp_path / "smoke.json").read_text(encoding="utf-8"))
    assert result["quick"] is True
    assert result["errors"] == []
    assert {"cores", "cpu_model", "python"} <= set(result["machine"])
    for key in ("cpu_loop_s_at_start", "cpu_loop_s_at_end"):
        loops = result["machine"][key]
        assert loops and all(s > 0 for s in loops)
    for key in ("overhead", "critical_path", "coach", "throughput", "cpu", "memory", "prompts"):
        assert key in result, key
    assert {"p50", "p99", "n"} <= set(result["overhead"]["overhead_ms"])
    assert result["overhead"]["overhead_ms"]["n"] >= 1
    assert set(result["throughput"]) == {"1", "2"}
    for data in result["throughput"].values():
        assert [lv["users"] for lv in data["levels"]] == list(result["plan"]["levels"])
        for level in data["levels"]:
            assert {"throughput_per_s", "ideal_per_s", "fraction_of_ideal"} <= set(level)
    assert {"idle", "half", "end"} == set(result["memory"]["rss_mib"])
    assert "gateway" in result["cpu"]["ms_per_turn"]
    assert result["profile"]["top_self"]
    assert result["prompts"]["checkpoints"]
    assert result["waterfall_turn"]["bars"][-1]["name"].startswith("synth")
    # Every printed row carries its target and baseline beside the value.
    assert all({"value", "target", "baseline"} <= set(row) for row in result["table"])
    for name in ("waterfall.png", "throughput.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_guard_bench_prints_both_paths_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.guard", "--profile", "instant", "--turns", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert {"quit_job_abruptly", "all_savings"} <= set(result["blocked_steps"])
    # Held, the model's first sentence waits for the whole reply and the guard's call.
    assert result["held_ms_p50"] >= result["streamed_full_ms_p50"]
    assert result["first_sentence_held_vs_streamed"] > 0
