"""Ports for local servers: outside the ephemeral range, or in the range the
environment gives (parallel test workers each get their own)."""

from __future__ import annotations

import socket

import pytest

from coachbus.embedded.broker import free_port


def test_ports_come_from_the_configured_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COACHBUS_FREE_PORTS", "23000-23099")
    ports = {free_port() for _ in range(20)}
    assert all(23_000 <= p <= 23_099 for p in ports)
    assert len(ports) == 20  # never the same port twice in one process


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("COACHBUS_FREE_PORTS", f"{port}-{port + 1}")
        # 200 draws from two ports: the taken one is never handed out.
        assert free_port() != port


@pytest.mark.parametrize("bad", ["20000", "a-b", "30000-20000", "80-90", "60000-70000"])
def test_a_bad_range_is_refused_with_its_value(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("COACHBUS_FREE_PORTS", bad)
    with pytest.raises(ValueError, match="COACHBUS_FREE_PORTS"):
        free_port()
