"""Paths and helpers shared by the deployment tests (compose, Helm, Prometheus, Grafana).

External tools (promtool, Helm's engine) are optional on a developer's machine:
a test that needs one skips with the reason. In CI (env var CI set) a missing
tool fails instead, so that a CI image without them cannot turn the checks into
silent skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coachbus.roster import AGENT_SERVICES, GATEWAY, WORKERS

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "coachbus"
DASHBOARD = CHART / "dashboards" / "coachbus.json"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPO / "deploy" / "prometheus" / "alerts_test.yml"
PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
COMPOSE = REPO / "docker-compose.yml"

# Every coachbus service: one module `services.<name>.main:app` each.
SERVICES = (GATEWAY, *AGENT_SERVICES)
AGENTS = WORKERS


def missing_tool(reason: str) -> None:
    """Skip, or fail under CI where every tool must be installed."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: .ci/run must install it)")
    pytest.skip(reason)
