"""The Grafana dashboard shipped by the chart and provisioned by compose."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coachbus import metrics
from tests.deploy.deploy_support import DASHBOARD
from tests.deploy.promql_names import known_metric_names, metric_names_in

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text())
    assert isinstance(data, dict)
    return data


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # collapsed rows hold their panels
    return found


def exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
    ]


def test_every_expression_uses_only_existing_metrics(dashboard: dict[str, Any]) -> None:
    known = known_metric_names()
    assert len(exprs(dashboard)) > 30
    for title, expr in exprs(dashboard):
        names = metric_names_in(expr)
        assert names, f"{title}: no metric found in {expr!r}"
        assert names <= known, f"{title}: unknown metrics {names - known}"


def test_the_name_check_catches_a_typo() -> None:
    assert metric_names_in("sum(rate(coachbus_turn_latency_second_count[5m]))") - (
        known_metric_names()
    ) == {"coachbus_turn_latency_second_count"}


def test_every_coachbus_metric_is_on_the_dashboard(dashboard: dict[str, Any]) -> None:
    used = " ".join(expr for _, expr in exprs(dashboard))
    # Our own metrics only: FastStream's middleware registers its faststream_* families
    # into the same registry once a service module has been imported in the process.
    ours = [f for f in metrics.REGISTRY.collect() if f.name.startswith("coachbus_")]
    assert len(ours) >= 14
    for family in ours:
        assert family.name in used, f"{family.name} is exposed but not shown"


def test_sections_the_issue_asks_for(dashboard: dict[str, Any]) -> None:
    all_panels = panels(dashboard)
    titles = " | ".join(p["title"].lower() for p in all_panels)
    for needle in ("p50 / p95 / p99", "waterfall", "tier mix", "tokens per turn", "dlq", "lag"):
        assert needle in titles, needle
    heatmaps = [p for p in all_panels if p["type"] == "heatmap"]
    assert heatmaps
    assert all(p.get("repeat") == "agent" for p in heatmaps)
    per_agent = [p for p in all_panels if p.get("repeat") == "agent" and p["type"] == "timeseries"]
    (quantiles,) = per_agent
    assert [t["legendFormat"] for t in quantiles["targets"]] == ["p50", "p95", "p99"]


def test_grafana_structure(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"]
    assert len(dashboard["uid"]) <= 40
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            # No datasource uid baked in: the same JSON works in every Grafana.
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}"
