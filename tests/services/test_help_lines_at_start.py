"""A service that shows help lines (Coach, Synth, the gateway) reads and checks the
help-lines file as it starts: with a broken file, or a locale the file does not
know, it does not start, and says why; with the shipped file it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "shared" / "coachbus" / "content" / "helplines.toml"
SERVICES = ("coach", "synth", "gateway")


def _start(service: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Import the service's app, as ``faststream run services.<name>.main:app`` does
    first (a fresh interpreter: the services build their runtime at import)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COACHBUS_", "KAFKA_"))}
    return subprocess.run(
        [sys.executable, "-c", f"import services.{service}.main"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**clean, **env},
    )


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_with_a_broken_help_lines_file_does_not_start(
    service: str, tmp_path: Path
) -> None:
    broken = tmp_path / "helplines.toml"
    broken.write_text(SHIPPED.read_text("utf-8").replace('number = "142"', 'number = "call us"'))
    started = _start(service, COACHBUS_HELPLINES_FILE=str(broken))
    assert started.returncode != 0
    assert "HelplinesError" in started.stderr
    assert f"help lines {broken}: locale.de-AT.lifeline[0].number" in started.stderr
    assert "not a phone number" in started.stderr


def test_a_locale_the_file_does_not_know_stops_the_start() -> None:
    started = _start("coach", COACHBUS_LOCALE="fr-FR")
    assert started.returncode != 0
    assert "unknown help-line locale 'fr-FR'" in started.stderr


def test_with_the_shipped_file_the_services_start() -> None:
    for service in SERVICES:
        started = _start(service, COACHBUS_LOCALE="de-AT")
        assert started.returncode == 0, started.stderr
