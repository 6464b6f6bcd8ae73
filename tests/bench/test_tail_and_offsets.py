"""bench.tail and bench.offsets run end to end in tiny runs and print their tables.
Timings are never asserted: the machine is shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.heavy
def test_tail_measures_post_to_final_for_one_user(tmp_path: Path) -> None:
    out = tmp_path / "tail.json"
    args = ["-m", "bench.tail", "--turns", "4", "--warmup", "1", "--rounds", "1"]
    done = subprocess.run(
        [sys.executable, *args, "--think-ms", "50", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "POST -> final, one user" in done.stdout
    table = json.loads(out.read_text())
    row = table["this checkout"]
    assert row["turns"] == 4 and 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]


def test_offsets_counts_list_offsets_against_the_fetch_high_watermark() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.offsets", "--seconds", "3", "--writers", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ListOffsets' end behind the reader's position" in done.stdout
    assert "the fetch responses' high watermark behind it: 0 (0%)" in done.stdout
