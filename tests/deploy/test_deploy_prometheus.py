"""Alert rules and metrics, checked with Prometheus' own promtool."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import Counter, Gauge, Histogram, Summary, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from coachbus import metrics
from tests.deploy.deploy_support import ALERTS, ALERTS_TEST, PROMETHEUS_CONFIG, REPO
from tests.deploy.promql_names import known_metric_names, metric_names_in

pytestmark = pytest.mark.unit


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=stdin, capture_output=True, timeout=60, check=False)


def output(result: subprocess.CompletedProcess[bytes]) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")


def test_alert_rules_pass_promtool_check(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(ALERTS))
    assert result.returncode == 0, output(result)


def test_alert_rules_pass_their_unit_tests(promtool: str) -> None:
    # alerts_test.yml names alerts.yml relative to itself.
    result = run(promtool, "test", "rules", str(ALERTS_TEST))
    assert result.returncode == 0, output(result)


def test_promtool_unit_tests_can_fail(promtool: str, tmp_path: Path) -> None:
    # The same tests against a rule file with a loosened SLO must fail: proof that
    # they pin the thresholds rather than merely parse.
    loosened = ALERTS.read_text().replace("p95_5m > 10\n", "p95_5m > 30\n")
    assert loosened != ALERTS.read_text()
    (tmp_path / "alerts.yml").write_text(loosened)
    (tmp_path / "alerts_test.yml").write_text(ALERTS_TEST.read_text())
    result = run(promtool, "test", "rules", str(tmp_path / "alerts_test.yml"))
    assert result.returncode != 0
    assert "CoachbusTurnLatencyP95High" in output(result)


def test_every_alert_has_a_unit_test() -> None:
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(ALERTS.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    tested = {
        case["alertname"]
        for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == tested, f"alerts without a firing test: {sorted(alerts - tested)}"


def test_alert_rules_use_only_existing_metrics() -> None:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    recorded = {rule["record"] for g in groups for rule in g["rules"] if "record" in rule}
    known = known_metric_names() | recorded
    for group in groups:
        for rule in group["rules"]:
            unknown = metric_names_in(rule["expr"]) - known
            assert not unknown, f"{rule.get('alert') or rule.get('record')}: {unknown}"


def test_compose_prometheus_config_is_valid(promtool: str) -> None:
    # --syntax-only: the rule file path in it is the container's, not the repo's.
    result = run(promtool, "check", "config", "--syntax-only", str(PROMETHEUS_CONFIG))
    assert result.returncode == 0, output(result)
    assert "alerts.yml" in PROMETHEUS_CONFIG.read_text()
    assert (REPO / "deploy/prometheus/alerts.yml").exists()


def test_compose_prometheus_scrapes_the_gateways_internal_port() -> None:
    from coachbus.settings import CoachbusSettings

    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "coachbus"]
    targets = [t for static in job["static_configs"] for t in static["targets"]]
    ports = dict(target.split(":") for target in targets)
    default = CoachbusSettings.model_fields["gateway_internal_port"].default
    # /metrics answers 404 on the gateway's public 8080: scraping it there finds nothing.
    assert ports["gateway"] == str(default) == "9000"
    assert {port for name, port in ports.items() if name != "gateway"} == {"8080"}
    assert job["metrics_path"] == "/metrics"


def _coachbus_metrics() -> list[MetricWrapperBase]:
    found = [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]
    assert len(found) >= 14
    return found


@pytest.fixture
def one_sample_each() -> Iterator[None]:
    """One sample in every coachbus metric, removed again afterwards so that no other
    test sees these label values in the process-wide registry."""
    touched: list[tuple[MetricWrapperBase, tuple[str, ...]]] = []
    try:
        for metric in _coachbus_metrics():
            labels = tuple("promtool-check" for _ in metric._labelnames)
            child = metric.labels(*labels) if labels else metric
            if isinstance(metric, Histogram | Summary):
                child.observe(1.5)
            elif isinstance(metric, Counter):
                child.inc()
            elif isinstance(metric, Gauge):
                child.set(3)
            if labels:
                touched.append((metric, labels))
        yield
    finally:
        for metric, labels in touched:
            metric.remove(*labels)


@pytest.mark.usefixtures("one_sample_each")
def test_exposed_metrics_pass_promtool_check_metrics(promtool: str) -> None:
    exposition = generate_latest(metrics.REGISTRY)
    for metric in _coachbus_metrics():
        assert metric._name.encode() in exposition
    result = run(promtool, "check", "metrics", stdin=exposition)
    assert result.returncode == 0, output(result)
    assert not output(result).strip(), output(result)
