"""`coachbus llm-sim` as its own process, the way users run it for load tests."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from coachbus.llm.local import free_port

pytestmark = pytest.mark.slow


def test_sim_serves_from_the_command_line() -> None:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "coachbus.llm.sim",
        "--port",
        str(port),
        "--model",
        "m1",
        "--ttft-ms",
        "1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 20
        while True:
            try:
                models = httpx.get(f"{base}/models", timeout=1).json()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("simulator did not start")
                time.sleep(0.1)
        assert [m["id"] for m in models["data"]] == ["m1"]
        body = {"model": "m1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
        reply = httpx.post(f"{base}/chat/completions", json=body, timeout=10).json()
        assert reply["choices"][0]["finish_reason"] == "length"
        assert reply["usage"]["completion_tokens"] == 5
    finally:
        proc.terminate()
        proc.wait(10)
