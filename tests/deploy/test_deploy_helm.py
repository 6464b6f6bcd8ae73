"""The Helm chart, rendered and linted with Helm's own engine (helm-python-sdk).

No cluster is involved: `Chart.render` is `helm template`, `lint` is `helm lint`,
both from Helm's Go SDK in a shared library. Assertions are on the parsed
manifests for the main value combinations.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.deploy.deploy_support import AGENTS, ALERTS, CHART, DASHBOARD, SERVICES, missing_tool

pytestmark = pytest.mark.unit

try:
    import helm_python as helm
except ImportError:  # pragma: no cover - depends on the environment
    helm = None

RELEASE = "coachbus"
CONSUMERS = (*AGENTS, "synth")
# libyaml when present: the rendered manifests are long and the pure-Python parser slow.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    if helm is None:
        missing_tool("helm-python-sdk is not installed (Helm's engine for rendering and lint)")
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any] | None = None, release: str = RELEASE) -> list[dict]:
    manifests = chart.render(values or {}, name=release, namespace="coaching")
    docs: list[dict] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(doc for doc in yaml.load_all(text, Loader=_LOADER) if doc)
    return docs


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def container(deployment: dict) -> dict:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


# --- defaults -------------------------------------------------------------------


def test_defaults_one_deployment_per_service(chart: Any) -> None:
    docs = render(chart)
    deployments = of_kind(docs, "Deployment")
    assert set(deployments) == {f"coachbus-{name}" for name in SERVICES}
    for name in SERVICES:
        dep = deployments[f"coachbus-{name}"]
        assert dep["spec"]["replicas"] == 2
        c = container(dep)
        assert c["command"] == [
            "faststream", "run", f"services.{name}.main:app", "--host", "0.0.0.0", "--port", "8080",
        ]  # fmt: skip
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["resources"]["requests"]
        assert c["resources"]["limits"]
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        assert c["envFrom"] == [
            {"configMapRef": {"name": "coachbus"}},
            {"secretRef": {"name": "coachbus"}},
        ]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == name
        assert labels["app.kubernetes.io/instance"] == RELEASE
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        # The gateway's /metrics is on its internal port; its 8080 answers 404 there.
        metrics_port = "9000" if name == "gateway" else "8080"
        assert annotations["prometheus.io/port"] == metrics_port
    assert set(of_kind(docs, "Service")) == set(deployments) | {"coachbus-gateway-internal"}
    assert set(of_kind(docs, "PodDisruptionBudget")) == set(deployments)
    # On by default: the security model, not an opt-in.
    assert set(of_kind(docs, "NetworkPolicy")) == set(deployments)
    for kind in ("HorizontalPodAutoscaler", "ScaledObject", "ServiceMonitor"):
        assert not of_kind(docs, kind), kind


def test_gateway_internal_port(chart: Any) -> None:
    from coachbus.settings import CoachbusSettings

    default = CoachbusSettings.model_fields["gateway_internal_port"].default
    docs = render(
        chart, {"services": {"gateway": {"enabled": True, "serviceType": "LoadBalancer"}}}
    )
    deployments = of_kind(docs, "Deployment")
    gateway = container(deployments["coachbus-gateway"])
    ports = {p["name"]: p["containerPort"] for p in gateway["ports"]}
    assert ports == {"http": 8080, "internal": default}
    # Pinned in env (which wins over the ConfigMap): pod, Service and policy agree.
    assert _env(gateway)["COACHBUS_GATEWAY_INTERNAL_PORT"] == str(default)
    for name in CONSUMERS:
        c = container(deployments[f"coachbus-{name}"])
        assert [p["containerPort"] for p in c["ports"]] == [8080], name
        assert "COACHBUS_GATEWAY_INTERNAL_PORT" not in _env(c)
    services = of_kind(docs, "Service")
    # The public Service, possibly a LoadBalancer, never carries the internal port.
    public = services["coachbus-gateway"]["spec"]
    assert public["type"] == "LoadBalancer"
    assert [(p["port"], p["targetPort"]) for p in public["ports"]] == [(8080, "http")]
    internal = services["coachbus-gateway-internal"]["spec"]
    assert internal["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["targetPort"]) for p in internal["ports"]] == [
        ("internal", default, "internal")
    ]
    assert internal["selector"] == public["selector"]


def test_defaults_settings_configmap(chart: Any) -> None:
    data = of_kind(render(chart), "ConfigMap")["coachbus"]["data"]
    assert data["COACHBUS_PARTITIONS"] == "6"
    assert data["COACHBUS_TOPIC_PREFIX"] == "coachbus."
    assert data["KAFKA_SECURITY_PROTOCOL"] == "PLAINTEXT"
    # Kafka wakes a waiting fetch: the long wait, not the embedded broker's 5 ms.
    assert data["KAFKA_FETCH_MAX_WAIT_MS"] == "500"
    assert all(isinstance(v, str) for v in data.values())
    # Secrets never go in the ConfigMap.
    assert not {"COACHBUS_API_KEYS", "COACHBUS_LLM_API_KEY", "KAFKA_SASL_PASSWORD"} & set(data)


def test_chart_secret_only_without_existing_secret(chart: Any) -> None:
    secret = of_kind(render(chart, {"secret": {"values": {"COACHBUS_API_KEYS": "u:k"}}}), "Secret")
    assert secret["coachbus"]["stringData"] == {"COACHBUS_API_KEYS": "u:k"}

    docs = render(chart, {"secret": {"existingSecret": "coachbus-prod"}})
    assert not of_kind(docs, "Secret")
    for dep in of_kind(docs, "Deployment").values():
        assert {"secretRef": {"name": "coachbus-prod"}} in container(dep)["envFrom"]
        assert "checksum/secret" not in dep["spec"]["template"]["metadata"]["annotations"]
    job = of_kind(docs, "Job")["coachbus-topics"]
    (job_container,) = job["spec"]["template"]["spec"]["containers"]
    assert {"secretRef": {"name": "coachbus-prod"}} in job_container["envFrom"]


def test_topic_job_is_a_post_install_hook(chart: Any) -> None:
    job = of_kind(render(chart), "Job")["coachbus-topics"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["coachbus", "topics", "create", "--fix-configs"]
    assert not of_kind(render(chart, {"topics": {"create": False}}), "Job")


def test_dashboard_configmap_is_the_dashboard_file(chart: Any) -> None:
    maps = of_kind(render(chart), "ConfigMap")
    dash = maps["coachbus-dashboard-coachbus"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["coachbus.json"]) == json.loads(DASHBOARD.read_text())
    assert "coachbus-dashboard-coachbus" not in of_kind(
        render(chart, {"dashboards": {"enabled": False}}), "ConfigMap"
    )


def test_names_stay_within_63_characters(chart: Any) -> None:
    docs = render(chart, {"vllm": {"enabled": True}}, release="r" * 53)
    for doc in docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]


# --- autoscaling ------------------------------------------------------------------


def test_keda_scales_each_consumer_on_its_lag(chart: Any) -> None:
    docs = render(chart, {"autoscaling": {"enabled": True, "type": "keda"}})
    for dep in of_kind(docs, "Deployment").values():
        assert "replicas" not in dep["spec"], "the autoscaler owns the replica count"
    scaled = of_kind(docs, "ScaledObject")
    assert set(scaled) == {f"coachbus-{name}" for name in CONSUMERS}
    for name in AGENTS:
        spec = scaled[f"coachbus-{name}"]["spec"]
        assert spec["scaleTargetRef"]["name"] == f"coachbus-{name}"
        assert spec["maxReplicaCount"] <= 6
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "kafka"
        assert trigger["metadata"]["consumerGroup"] == f"coachbus.{name}"
        assert trigger["metadata"]["topic"] == "coachbus.user-messages"
        assert all(isinstance(v, str) for v in trigger["metadata"].values())
    synth = scaled["coachbus-synth"]["spec"]["triggers"]
    assert {t["metadata"]["consumerGroup"] for t in synth} == {"coachbus.synth"}
    assert {t["metadata"]["topic"] for t in synth} == {f"coachbus.agent.{a}" for a in AGENTS}
    # The gateway consumes no input topic: it scales on CPU.
    assert set(of_kind(docs, "HorizontalPodAutoscaler")) == {"coachbus-gateway"}
    assert not of_kind(docs, "TriggerAuthentication")


def test_hpa_everywhere(chart: Any) -> None:
    docs = render(chart, {"autoscaling": {"enabled": True, "type": "hpa", "maxReplicas": 4}})
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    assert set(hpas) == {f"coachbus-{name}" for name in SERVICES}
    assert {h["spec"]["maxReplicas"] for h in hpas.values()} == {4}
    assert not of_kind(docs, "ScaledObject")
    for dep in of_kind(docs, "Deployment").values():
        assert "replicas" not in dep["spec"]


def test_a_service_can_opt_out_of_global_autoscaling(chart: Any) -> None:
    # Guards against sprig's mergeOverwrite, which would ignore `enabled: false`.
    values = {
        "autoscaling": {"enabled": True},
        "services": {"shadow": {"enabled": True, "autoscaling": {"enabled": False}}},
    }
    docs = render(chart, values)
    assert of_kind(docs, "Deployment")["coachbus-shadow"]["spec"]["replicas"] == 2
    assert "coachbus-shadow" not in of_kind(docs, "ScaledObject")
    assert "coachbus-persona" in of_kind(docs, "ScaledObject")


def test_keda_uses_the_services_secret_for_sasl_and_tls(chart: Any) -> None:
    values = {
        "autoscaling": {"enabled": True},
        "kafka": {
            "securityProtocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-512",
            "tls": {"secretName": "kafka-ca"},
        },
        "secret": {"existingSecret": "coachbus-prod"},
    }
    docs = render(chart, values)
    auth = of_kind(docs, "TriggerAuthentication")["coachbus-kafka"]
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    assert refs == {
        "username": ("coachbus-prod", "KAFKA_SASL_USERNAME"),
        "password": ("coachbus-prod", "KAFKA_SASL_PASSWORD"),
        "ca": ("kafka-ca", "ca.crt"),
    }
    for so in of_kind(docs, "ScaledObject").values():
        for trigger in so["spec"]["triggers"]:
            assert trigger["metadata"]["sasl"] == "scram_sha512"
            assert trigger["metadata"]["tls"] == "enable"
            assert trigger["authenticationRef"] == {"name": "coachbus-kafka"}
    data = of_kind(docs, "ConfigMap")["coachbus"]["data"]
    assert data["KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert data["KAFKA_SSL_CAFILE"] == "/etc/coachbus/kafka-tls/ca.crt"
    pod = of_kind(docs, "Deployment")["coachbus-shadow"]["spec"]["template"]["spec"]
    assert {"name": "kafka-tls", "secret": {"secretName": "kafka-ca", "defaultMode": 0o440}} in pod[
        "volumes"
    ]


# --- partitions >= replicas ------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"services": {"shadow": {"enabled": True, "replicas": 7}}}, id="replicas"),
        pytest.param({"autoscaling": {"enabled": True, "maxReplicas": 12}}, id="keda-max"),
        pytest.param(
            {"autoscaling": {"enabled": True, "type": "hpa"}, "config": {"partitions": 3}},
            id="hpa-max-above-fewer-partitions",
        ),
        pytest.param(
            {
                "services": {
                    "synth": {"enabled": True, "autoscaling": {"enabled": True, "maxReplicas": 9}}
                }
            },
            id="per-service-max",
        ),
    ],
)
def test_rendering_fails_when_replicas_could_exceed_partitions(chart: Any, values: dict) -> None:
    with pytest.raises(helm.HelmRenderError, match=r"only \d+ partitions"):
        render(chart, values)


def test_more_partitions_allow_more_replicas(chart: Any) -> None:
    docs = render(
        chart, {"autoscaling": {"enabled": True, "maxReplicas": 12}, "config": {"partitions": 12}}
    )
    assert {s["spec"]["maxReplicaCount"] for s in of_kind(docs, "ScaledObject").values()} == {12}
    # The gateway is no consumer: its replicas are not bound by partitions.
    render(chart, {"services": {"gateway": {"enabled": True, "replicas": 10}}})


# --- vLLM ----------------------------------------------------------------------------------


def test_vllm_deployments_and_service_urls(chart: Any) -> None:
    docs = render(chart, {"vllm": {"enabled": True}})
    deployments = of_kind(docs, "Deployment")
    expected = {"small": ("Qwen/Qwen3-30B-A3B", 1), "strong": ("Qwen/Qwen3-235B-A22B", 4)}
    for tier, (served, gpus) in expected.items():
        dep = deployments[f"coachbus-vllm-{tier}"]
        c = container(dep)
        assert f"--served-model-name={served}" in c["args"]
        assert f"--tensor-parallel-size={gpus}" in c["args"]
        assert "--enable-prefix-caching" in c["args"]
        assert "--reasoning-parser=qwen3" in c["args"]
        assert any(a.startswith("--guided-decoding-backend=") for a in c["args"])
        assert c["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert c["startupProbe"]["httpGet"]["path"] == "/health"
        assert f"coachbus-vllm-{tier}" in of_kind(docs, "Service")
    data = of_kind(docs, "ConfigMap")["coachbus"]["data"]
    assert data["COACHBUS_LLM_SMALL_BASE_URL"] == "http://coachbus-vllm-small:8000/v1"
    assert data["COACHBUS_LLM_STRONG_BASE_URL"] == "http://coachbus-vllm-strong:8000/v1"
    # Off by default: no GPU workloads unless asked for.
    assert not any("vllm" in name for name in of_kind(render(chart), "Deployment"))


def test_explicit_llm_url_wins_over_chart_vllm(chart: Any) -> None:
    values = {
        "vllm": {
            "enabled": True,
            "models": {"strong": {"enabled": False, "checkpoint": "x", "gpus": 1}},
        },
        "config": {"llm": {"strongBaseUrl": "http://big-llm.example:8000/v1"}},
    }
    docs = render(chart, values)
    data = of_kind(docs, "ConfigMap")["coachbus"]["data"]
    assert data["COACHBUS_LLM_STRONG_BASE_URL"] == "http://big-llm.example:8000/v1"
    assert "coachbus-vllm-strong" not in of_kind(docs, "Deployment")


# --- network policy and monitoring ---------------------------------------------------------


def _policies(docs: list[dict]) -> dict[str, dict]:
    return {name: p["spec"] for name, p in of_kind(docs, "NetworkPolicy").items()}


def _ports(rule: dict) -> set[tuple[int | str, str]]:
    return {(p["port"], p.get("protocol", "TCP")) for p in rule.get("ports", [])}


MONITORING = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
KUBE_DNS = [
    {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
]
DNS_PORTS = {(53, "UDP"), (53, "TCP")}
LLM_CALLERS = ("shadow", "persona", "stability", "coach", "synth")


def test_network_policies_default_deny_both_ways(chart: Any) -> None:
    policies = _policies(render(chart))
    assert set(policies) == {f"coachbus-{n}" for n in SERVICES}
    for name in SERVICES:
        spec = policies[f"coachbus-{name}"]
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == name
        # Both types listed: whatever no rule allows is denied, in and out.
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        for rule in spec["ingress"] + spec["egress"]:
            assert rule["ports"], f"{name}: a rule without ports opens every port"


def test_network_policy_ingress_gateway_public_port_and_metrics_from_monitoring(
    chart: Any,
) -> None:
    policies = _policies(render(chart))
    open_rule, metrics_rule = policies["coachbus-gateway"]["ingress"]
    # The public API is open to everyone by default (no `from`), on 8080 only.
    assert "from" not in open_rule
    assert _ports(open_rule) == {(8080, "TCP")}
    # /metrics and the API docs: the internal port, from the monitoring namespace only.
    assert metrics_rule["from"] == MONITORING
    assert _ports(metrics_rule) == {(9000, "TCP")}
    for name in CONSUMERS:
        (rule,) = policies[f"coachbus-{name}"]["ingress"]
        assert rule["from"] == MONITORING, name
        assert _ports(rule) == {(8080, "TCP")}, name

    prometheus = [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]
    ingress = [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}]
    values = {"networkPolicy": {"gatewayFrom": ingress, "metricsFrom": prometheus}}
    restricted = _policies(render(chart, values))
    open_rule, metrics_rule = restricted["coachbus-gateway"]["ingress"]
    assert open_rule["from"] == ingress
    assert metrics_rule["from"] == prometheus
    # Nobody to scrape: no rule at all, never a `from`-less one that lets everyone in.
    silent = _policies(render(chart, {"networkPolicy": {"metricsFrom": []}}))
    assert silent["coachbus-shadow"]["ingress"] == []
    assert [r.get("from") for r in silent["coachbus-gateway"]["ingress"]] == [None]


def test_network_policy_egress_only_to_dns_kafka_and_the_llm(chart: Any) -> None:
    values = {
        "kafka": {"bootstrapServers": "kafka-0.kafka:9093,kafka-1.kafka:9093"},
        "config": {"llm": {"baseUrl": "https://llm.example/v1"}},
    }
    policies = _policies(render(chart, values))
    for name in SERVICES:
        egress = policies[f"coachbus-{name}"]["egress"]
        dns, kafka, *rest = egress
        assert dns == {
            "to": KUBE_DNS,
            "ports": [{"port": 53, "protocol": p} for p in ("UDP", "TCP")],
        }
        assert _ports(kafka) == {(9093, "TCP")}
        # A policy cannot name a host: without peers in values, the port is the limit.
        assert "to" not in kafka
        if name in LLM_CALLERS:
            (llm,) = rest
            assert _ports(llm) == {(443, "TCP")}, name
        else:
            # The gateway and plasticity never call the LLM.
            assert rest == [], name
        allowed = {port for rule in egress for port in _ports(rule)}
        assert allowed <= DNS_PORTS | {(9093, "TCP"), (443, "TCP")}


def test_network_policy_egress_peers_from_values(chart: Any) -> None:
    strimzi = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kafka"}},
            "podSelector": {"matchLabels": {"strimzi.io/cluster": "main"}},
        }
    ]
    values = {
        "kafka": {"bootstrapServers": "main-kafka-bootstrap.kafka:9092"},
        "config": {
            "llm": {"smallBaseUrl": "http://10.0.0.7:8000/v1"},
            "otlpEndpoint": "http://otel-collector.observability:4318",
        },
        "vllm": {"enabled": True, "models": {"small": {"enabled": False, "checkpoint": "x"}}},
        "networkPolicy": {
            "egress": {
                "kafka": {"to": strimzi, "ports": [9092, 9093]},
                "otlp": {"to": MONITORING},
                "to": [{"ports": [{"port": 5432}]}],
            }
        },
    }
    policies = _policies(render(chart, values))
    shadow = policies["coachbus-shadow"]["egress"]
    kafka = shadow[1]
    assert kafka["to"] == strimzi
    assert _ports(kafka) == {(9092, "TCP"), (9093, "TCP")}
    vllm = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "coachbus",
                "app.kubernetes.io/instance": RELEASE,
                "coachbus.io/role": "llm",
            }
        }
    }
    # The strong tier on the chart's vLLM pods, the small one at an address of its own.
    assert {"to": [vllm], "ports": [{"port": 8000, "protocol": "TCP"}]} in shadow
    assert {
        "to": [{"ipBlock": {"cidr": "10.0.0.7/32"}}],
        "ports": [{"port": 8000, "protocol": "TCP"}],
    } in shadow
    otlp = {"to": MONITORING, "ports": [{"port": 4318, "protocol": "TCP"}]}
    gateway = policies["coachbus-gateway"]["egress"]
    # Tracing is on: every service, the gateway too, reaches the collector.
    assert otlp in shadow
    assert otlp in gateway
    assert shadow[-1] == gateway[-1] == {"ports": [{"port": 5432}]}
    # No LLM for the gateway: neither the chart's vLLM nor the small tier's address.
    gateway_peers = [peer for rule in gateway for peer in rule.get("to", [])]
    assert vllm not in gateway_peers
    assert {"ipBlock": {"cidr": "10.0.0.7/32"}} not in gateway_peers
    assert not any((8000, "TCP") in _ports(rule) for rule in gateway)
    # vLLM answers the LLM callers only (and Prometheus).
    vllm_policy = policies["coachbus-vllm"]["ingress"]
    (rule,) = vllm_policy
    callers = rule["from"][0]["podSelector"]["matchExpressions"][0]
    assert callers["operator"] == "In"
    assert sorted(callers["values"]) == sorted(LLM_CALLERS)
    assert rule["from"][1:] == MONITORING

    # Kafka given by IP addresses: an ipBlock per broker without any peers in values.
    by_ip = _policies(render(chart, {"kafka": {"bootstrapServers": "10.1.0.1:9092,10.1.0.2:9092"}}))
    assert by_ip["coachbus-synth"]["egress"][1]["to"] == [
        {"ipBlock": {"cidr": "10.1.0.1/32"}},
        {"ipBlock": {"cidr": "10.1.0.2/32"}},
    ]


def test_network_policy_egress_can_stay_open_and_policies_can_be_off(chart: Any) -> None:
    open_egress = _policies(render(chart, {"networkPolicy": {"egress": {"enabled": False}}}))
    for spec in open_egress.values():
        assert spec["policyTypes"] == ["Ingress"]
        assert "egress" not in spec
    off = render(chart, {"networkPolicy": {"enabled": False}, "vllm": {"enabled": True}})
    assert not of_kind(off, "NetworkPolicy")


def test_service_monitor_replaces_annotations(chart: Any) -> None:
    docs = render(
        chart,
        {
            "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
            "vllm": {"enabled": True},
        },
    )
    monitor = of_kind(docs, "ServiceMonitor")["coachbus"]
    assert monitor["metadata"]["labels"]["release"] == "kps"
    endpoints = {e["port"]: e for e in monitor["spec"]["endpoints"]}
    # http: the agents, Synth and vLLM; internal: the gateway's /metrics.
    assert set(endpoints) == {"http", "internal"}
    for endpoint in endpoints.values():
        assert endpoint["path"] == "/metrics"
        assert endpoint["honorLabels"] is True
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = {
        name: {p["name"] for p in svc["spec"]["ports"]}
        for name, svc in of_kind(docs, "Service").items()
        if selector.items() <= svc["metadata"]["labels"].items()
    }
    # Not the gateway's public Service: its 8080 answers 404 for /metrics.
    assert scraped == {
        **{f"coachbus-{name}": {"http"} for name in CONSUMERS},
        "coachbus-gateway-internal": {"internal"},
        "coachbus-vllm-small": {"http"},
        "coachbus-vllm-strong": {"http"},
    }
    for dep in of_kind(docs, "Deployment").values():
        assert "prometheus.io/scrape" not in dep["spec"]["template"]["metadata"].get(
            "annotations", {}
        )


def test_prometheus_rule_ships_the_alerts(chart: Any) -> None:
    docs = render(chart, {"prometheusRule": {"enabled": True}})
    rule = of_kind(docs, "PrometheusRule")["coachbus"]
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())


def test_chart_alerts_are_a_copy_of_deploy_alerts() -> None:
    # Helm reads files inside the chart only; this keeps the copy from drifting.
    copy = (CHART / "files" / "alerts.yml").read_text()
    assert copy == ALERTS.read_text(), "cp deploy/prometheus/alerts.yml charts/coachbus/files/"


# --- the human tier: review console, alert limit, webhook -------------------------------

WEBHOOK_SECRET = "coachbus-review-webhook"
WEBHOOK = {"url": "https://hooks.example/coachbus", "existingSecret": WEBHOOK_SECRET}
# Values key -> ReviewSettings field (services/gateway/review_settings.py).
REVIEW_FIELDS = {
    ("console",): "console",
    ("claimTtlSeconds",): "claim_ttl_s",
    ("alertAfterSeconds",): "alert_after_s",
    ("streamHoldSeconds",): "stream_hold_s",
    ("webhook", "attempts"): "webhook_attempts",
    ("webhook", "timeoutSeconds"): "webhook_timeout_s",
    ("webhook", "backoffSeconds"): "webhook_backoff_s",
}


def _review_env(c: dict) -> dict[str, Any]:
    return {k: v for k, v in _env(c).items() if k.startswith("COACHBUS_REVIEW_")}


def _gateway_review_env(docs: list[dict]) -> dict[str, Any]:
    return _review_env(container(of_kind(docs, "Deployment")["coachbus-gateway"]))


def _bounds(field: Any) -> dict[str, float]:
    names = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum"}
    return {
        names[attr]: getattr(m, attr)
        for m in field.metadata
        for attr in names
        if getattr(m, attr, None) is not None
    }


def test_review_values_mirror_the_gateways_settings() -> None:
    """Defaults and bounds of `review` are the code's: the chart neither changes a
    default behind the operator's back nor accepts what the gateway refuses."""
    from coachbus.settings import CoachbusSettings
    from services.gateway.review_settings import ReviewSettings

    values = yaml.safe_load((CHART / "values.yaml").read_text())["review"]
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["review"]
    for path, name in REVIEW_FIELDS.items():
        field = ReviewSettings.model_fields[name]
        value, prop = values, schema
        for key in path:
            value, prop = value[key], prop["properties"][key]
        assert value == field.default, path
        if name == "console":
            assert prop["enum"] == ["public", "internal", "off"]
            continue
        assert {k: v for k, v in prop.items() if k != "type"} == _bounds(field), path
    audit = CoachbusSettings.model_fields["review_audit_retention_ms"]
    assert values["auditRetentionMs"] == audit.default
    assert schema["properties"]["auditRetentionMs"]["minimum"] == _bounds(audit)["minimum"]
    assert values["webhook"]["url"] == ""


def test_review_defaults_render_no_webhook(chart: Any) -> None:
    from coachbus.settings import CoachbusSettings

    docs = render(chart)
    assert _gateway_review_env(docs) == {
        "COACHBUS_REVIEW_CONSOLE": "public",
        "COACHBUS_REVIEW_CLAIM_TTL_S": "600",
        "COACHBUS_REVIEW_ALERT_AFTER_S": "300",
        "COACHBUS_REVIEW_STREAM_HOLD_S": "900",
    }
    # The gateway's settings stay out of the other services' env.
    for name in CONSUMERS:
        assert not _review_env(container(of_kind(docs, "Deployment")[f"coachbus-{name}"])), name
    # The audit's retention is a topic setting: the ConfigMap, which the topic job reads.
    data = of_kind(docs, "ConfigMap")["coachbus"]["data"]
    default = CoachbusSettings.model_fields["review_audit_retention_ms"].default
    assert data["COACHBUS_REVIEW_AUDIT_RETENTION_MS"] == str(default)
    assert [k for k in data if k.startswith("COACHBUS_REVIEW_")] == [
        "COACHBUS_REVIEW_AUDIT_RETENTION_MS"
    ]
    gateway = _policies(docs)["coachbus-gateway"]["egress"]
    assert {port for rule in gateway for port in _ports(rule)} == DNS_PORTS | {(9092, "TCP")}


@pytest.mark.parametrize("console", ["public", "internal", "off"])
def test_review_settings_reach_the_gateway(
    chart: Any, console: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coachbus.settings import CoachbusSettings
    from services.gateway.review_settings import ReviewSettings

    # A million seconds: Helm prints such a float as 1e+06 unless the chart says otherwise.
    values = {
        "review": {
            "console": console,
            "claimTtlSeconds": 1200,
            "alertAfterSeconds": 1_000_000,
            "auditRetentionMs": 400 * 86_400_000,
        }
    }
    docs = render(chart, values)
    env = _gateway_review_env(docs)
    assert env["COACHBUS_REVIEW_CONSOLE"] == console
    # CoachbusReviewWaiting compares with the limit the gateway exports from this.
    assert env["COACHBUS_REVIEW_ALERT_AFTER_S"] == "1000000"
    assert env["COACHBUS_REVIEW_CLAIM_TTL_S"] == "1200"
    retention = of_kind(docs, "ConfigMap")["coachbus"]["data"]["COACHBUS_REVIEW_AUDIT_RETENTION_MS"]
    assert retention == str(400 * 86_400_000)
    # And the gateway reads them as meant.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COACHBUS_REVIEW_AUDIT_RETENTION_MS", retention)
    settings = ReviewSettings()
    assert (settings.console, settings.claim_ttl_s, settings.alert_after_s) == (
        console,
        1200.0,
        1_000_000.0,
    )
    assert CoachbusSettings().review_audit_retention_ms == 400 * 86_400_000


def test_review_webhook_renders_its_env_with_the_secret_by_reference(chart: Any) -> None:
    values = {"review": {"webhook": {**WEBHOOK, "attempts": 8, "timeoutSeconds": 2.5}}}
    docs = render(chart, values)
    assert _gateway_review_env(docs) == {
        "COACHBUS_REVIEW_CONSOLE": "public",
        "COACHBUS_REVIEW_CLAIM_TTL_S": "600",
        "COACHBUS_REVIEW_ALERT_AFTER_S": "300",
        "COACHBUS_REVIEW_STREAM_HOLD_S": "900",
        "COACHBUS_REVIEW_WEBHOOK_URL": "https://hooks.example/coachbus",
        "COACHBUS_REVIEW_WEBHOOK_SECRET": {
            "secretKeyRef": {"name": WEBHOOK_SECRET, "key": "COACHBUS_REVIEW_WEBHOOK_SECRET"}
        },
        "COACHBUS_REVIEW_WEBHOOK_ATTEMPTS": "8",
        "COACHBUS_REVIEW_WEBHOOK_TIMEOUT_S": "2.5",
        "COACHBUS_REVIEW_WEBHOOK_BACKOFF_S": "1",
    }
    for name in CONSUMERS:
        assert not _review_env(container(of_kind(docs, "Deployment")[f"coachbus-{name}"])), name
    data = of_kind(docs, "ConfigMap")["coachbus"]["data"]
    assert not any(k.startswith("COACHBUS_REVIEW_WEBHOOK") for k in data)
    assert WEBHOOK_SECRET not in of_kind(docs, "Secret")  # brought by the operator

    # Or a key of the services' Secret: the chart's own, or an existing one.
    own = render(
        chart,
        {
            "review": {"webhook": {"url": WEBHOOK["url"]}},
            "secret": {"values": {"COACHBUS_REVIEW_WEBHOOK_SECRET": "s" * 32}},
        },
    )
    assert _gateway_review_env(own)["COACHBUS_REVIEW_WEBHOOK_SECRET"] == {
        "secretKeyRef": {"name": "coachbus", "key": "COACHBUS_REVIEW_WEBHOOK_SECRET"}
    }
    existing = render(
        chart,
        {
            "review": {"webhook": {"url": WEBHOOK["url"], "secretKey": "review-hmac"}},
            "secret": {"existingSecret": "coachbus-prod"},
        },
    )
    assert _gateway_review_env(existing)["COACHBUS_REVIEW_WEBHOOK_SECRET"] == {
        "secretKeyRef": {"name": "coachbus-prod", "key": "review-hmac"}
    }


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="no-secret"),
        pytest.param({"secret": {"values": {"COACHBUS_API_KEYS": "u:k"}}}, id="key-not-in-values"),
        pytest.param(
            {"secret": {"values": {"COACHBUS_REVIEW_WEBHOOK_SECRET": ""}}}, id="empty-secret"
        ),
    ],
)
def test_review_webhook_without_a_secret_fails(chart: Any, values: dict) -> None:
    # The gateway would refuse to start (outside local): the install fails first.
    values = {**values, "review": {"webhook": {"url": WEBHOOK["url"]}}}
    with pytest.raises(helm.HelmRenderError, match=r"review\.webhook\.url needs a signing secret"):
        render(chart, values)


@pytest.mark.parametrize(
    ("webhook", "policy", "rule"),
    [
        pytest.param(
            WEBHOOK, {}, {"ports": [{"port": 443, "protocol": "TCP"}]}, id="https-any-address"
        ),
        pytest.param(
            {**WEBHOOK, "url": "http://hooks.example/coachbus"},
            {},
            {"ports": [{"port": 80, "protocol": "TCP"}]},
            id="http",
        ),
        pytest.param(
            {**WEBHOOK, "url": "http://10.2.0.5:8443/hooks/coachbus"},
            {},
            {
                "to": [{"ipBlock": {"cidr": "10.2.0.5/32"}}],
                "ports": [{"port": 8443, "protocol": "TCP"}],
            },
            id="ipv4-explicit-port",
        ),
        pytest.param(
            WEBHOOK,
            {"to": MONITORING, "ports": [8443, 9443]},
            {
                "to": MONITORING,
                "ports": [{"port": p, "protocol": "TCP"} for p in (8443, 9443)],
            },
            id="peers-and-ports-from-values",
        ),
    ],
)
def test_network_policy_egress_to_the_review_webhook(
    chart: Any, webhook: dict, policy: dict, rule: dict
) -> None:
    values = {
        "review": {"webhook": webhook},
        "networkPolicy": {"egress": {"webhook": policy, "to": [{"ports": [{"port": 5432}]}]}},
    }
    policies = _policies(render(chart, values))
    gateway = policies["coachbus-gateway"]["egress"]
    # The gateway's one more rule, before the extra rules of egress.to.
    assert gateway[-2:] == [rule, {"ports": [{"port": 5432}]}]
    for name in CONSUMERS:
        assert rule not in policies[f"coachbus-{name}"]["egress"], name
    # Egress left open: nothing to add.
    values["networkPolicy"]["egress"]["enabled"] = False
    assert "egress" not in _policies(render(chart, values))["coachbus-gateway"]


def test_review_console_internal_port_for_reviewers(chart: Any) -> None:
    vpn = [{"ipBlock": {"cidr": "10.50.0.0/16"}}]
    values = {"review": {"console": "internal"}, "networkPolicy": {"reviewFrom": vpn}}
    docs = render(chart, values)
    open_rule, metrics_rule, review_rule = _policies(docs)["coachbus-gateway"]["ingress"]
    assert _ports(open_rule) == {(8080, "TCP")}
    assert metrics_rule["from"] == MONITORING
    # The console lives on the internal port then; 8080 answers 404 for it.
    assert review_rule == {"ports": [{"port": 9000, "protocol": "TCP"}], "from": vpn}
    services = of_kind(docs, "Service")
    assert [p["port"] for p in services["coachbus-gateway"]["spec"]["ports"]] == [8080]
    assert [p["port"] for p in services["coachbus-gateway-internal"]["spec"]["ports"]] == [9000]
    # Without reviewFrom: metricsFrom and port-forward only, no open rule.
    closed = _policies(render(chart, {"review": {"console": "internal"}}))
    assert len(closed["coachbus-gateway"]["ingress"]) == 2
    # reviewFrom with the console elsewhere would open the metrics port for nothing.
    with pytest.raises(helm.HelmRenderError, match=r"networkPolicy\.reviewFrom"):
        render(chart, {"networkPolicy": {"reviewFrom": vpn}})


# --- schema and lint ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"config": {"partitions": 0}}, "/config/partitions"),
        ({"kafka": {"securityProtocol": "TLS"}}, "/kafka/securityProtocol"),
        ({"kafka": {"saslMechanism": "GSSAPI"}}, "/kafka/saslMechanism"),
        ({"services": {"shadow": {"enabled": True, "replicas": -1}}}, "/services/shadow/replicas"),
        ({"services": {"shadow": {"enabled": True, "replica": 3}}}, "/services/shadow"),
        ({"services": {"Bad_Name": {"enabled": True}}}, "Bad_Name"),
        ({"autoscaling": {"type": "vpa"}}, "/autoscaling/type"),
        ({"config": {"environment": "prod"}}, "/config/environment"),
        ({"secret": {"values": {"COACHBUS_API_KEYS": 42}}}, "/secret/values"),
        ({"replicaCount": 3}, "replicaCount"),
        ({"networkPolicy": {"egress": {"kafka": {"ports": [0]}}}}, "/networkPolicy/egress/kafka"),
        ({"networkPolicy": {"egress": {"llm": {"to": {}}}}}, "/networkPolicy/egress/llm/to"),
        ({"networkPolicy": {"ingressFrom": []}}, "ingressFrom"),
        ({"review": {"console": "private"}}, "/review/console"),
        ({"review": {"consoleMode": "public"}}, "consoleMode"),
        ({"review": {"claimTtlSeconds": 5}}, "/review/claimTtlSeconds"),
        ({"review": {"alertAfterSeconds": "5m"}}, "/review/alertAfterSeconds"),
        ({"review": {"auditRetentionMs": 60000}}, "/review/auditRetentionMs"),
        ({"review": {"webhook": {"url": "ftp://hooks.example/x"}}}, "/review/webhook/url"),
        ({"review": {"webhook": {"url": "hooks.example/x"}}}, "/review/webhook/url"),
        ({"review": {"webhook": {"attempts": 0}}}, "/review/webhook/attempts"),
        ({"review": {"webhook": {"timeoutSeconds": 0}}}, "/review/webhook/timeoutSeconds"),
        ({"review": {"webhook": {"secret": "s3cr3t"}}}, "/review/webhook"),
        (
            {"networkPolicy": {"egress": {"webhook": {"ports": [0]}}}},
            "/networkPolicy/egress/webhook",
        ),
        ({"networkPolicy": {"reviewFrom": {}}}, "/networkPolicy/reviewFrom"),
    ],
)
def test_schema_rejects_bad_values(chart: Any, values: dict, path: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=path):
        chart.validate_schema(values)
    # And an install would refuse them too, not just the explicit check.
    with pytest.raises(helm.HelmValuesError):
        render(chart, values)


def test_defaults_pass_the_schema(chart: Any) -> None:
    chart.validate_schema({})
    chart.validate_schema(yaml.safe_load((CHART / "values.yaml").read_text()))


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"autoscaling": {"enabled": True}}, id="keda"),
        pytest.param({"autoscaling": {"enabled": True, "type": "hpa"}}, id="hpa"),
        pytest.param({"vllm": {"enabled": True}}, id="vllm"),
        pytest.param({"secret": {"existingSecret": "coachbus-prod"}}, id="existing-secret"),
        pytest.param(
            {"vllm": {"enabled": True}, "serviceMonitor": {"enabled": True}},
            id="networkpolicy-servicemonitor",
        ),
        pytest.param(
            {
                "config": {
                    "llm": {"baseUrl": "http://10.0.0.7:8000/v1"},
                    "otlpEndpoint": "http://otel:4318",
                },
                "networkPolicy": {
                    "gatewayFrom": [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}],
                    "egress": {"kafka": {"to": [{"ipBlock": {"cidr": "10.1.0.0/24"}}]}},
                },
            },
            id="networkpolicy-peers",
        ),
        pytest.param({"networkPolicy": {"enabled": False}}, id="networkpolicy-off"),
        pytest.param(
            {
                "review": {
                    "console": "internal",
                    "webhook": {"url": "https://10.2.0.5:8443/hook", "existingSecret": "wh"},
                },
                "networkPolicy": {"reviewFrom": [{"ipBlock": {"cidr": "10.50.0.0/16"}}]},
            },
            id="review-internal-webhook",
        ),
    ],
)
def test_helm_lint_strict(values: dict) -> None:
    if helm is None:
        missing_tool("helm-python-sdk is not installed (Helm's engine for rendering and lint)")
    report = helm.lint(CHART, values, strict=True, kube_version="v1.30.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["total_charts_linted"] == 1
    assert not problems, problems
    assert not report["errors"], report["errors"]


def test_lint_reports_a_broken_chart(tmp_path: Any) -> None:
    # helm lint must be able to fail here, or a green lint test means nothing.
    if helm is None:
        missing_tool("helm-python-sdk is not installed (Helm's engine for rendering and lint)")
    broken = tmp_path / "coachbus"
    with helm.Chart.load(CHART) as loaded:
        loaded.save_dir(tmp_path)
    (broken / "templates" / "broken.yaml").write_text("{{ .Values.nope.deeper }}\n")
    report = helm.lint(broken)
    assert any(m["severity"] == 3 for m in report["messages"]) or report["errors"]


def test_values_are_documented() -> None:
    """Each value in values.yaml carries a `# --` description (helm-docs style):
    every scalar or empty-collection leaf has one in the comment block above it or
    above one of its parent keys."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    documented_at: dict[int, bool] = {}  # indent -> documented at this level
    undocumented = []
    pending = False
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(stripped)
        if stripped.startswith("# --"):
            pending = True
            continue
        if stripped.startswith(("#", "-")):
            continue
        key, _, rest = stripped.partition(":")
        for level in [lvl for lvl in documented_at if lvl >= indent]:
            del documented_at[level]
        inherited = any(documented_at.values())
        documented_at[indent] = pending
        if rest.strip() and not (pending or inherited):
            undocumented.append(key)
        pending = False
    assert not undocumented, undocumented


# --- Kafka users and ACLs ---------------------------------------------------------------

SASL = {
    "kafka": {
        "securityProtocol": "SASL_SSL",
        "saslMechanism": "SCRAM-SHA-512",
        "acls": {"create": True, "adminSecret": "kafka-admin"},
    },
    "secret": {"existingSecret": "coachbus-prod"},
}


def _env(c: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def test_every_service_logs_in_as_its_own_kafka_user(chart: Any) -> None:
    from coachbus.acl import ACCESS, password_variable

    docs = render(chart, SASL)
    for name in SERVICES:
        env = _env(container(of_kind(docs, "Deployment")[f"coachbus-{name}"]))
        assert env["KAFKA_SASL_USERNAME"] == ACCESS[name].principal
        assert env["KAFKA_SASL_PASSWORD"] == {
            "secretKeyRef": {
                "name": "coachbus-prod",
                "key": password_variable(ACCESS[name].principal),
            }
        }
    (topics,) = of_kind(docs, "Job")["coachbus-topics"]["spec"]["template"]["spec"]["containers"]
    assert _env(topics)["KAFKA_SASL_USERNAME"] == "coachbus-ops"
    # Without SASL nothing is added (no password to read).
    plain = render(chart)
    assert "env" not in container(of_kind(plain, "Deployment")["coachbus-shadow"]) or (
        "KAFKA_SASL_USERNAME"
        not in _env(container(of_kind(plain, "Deployment")["coachbus-shadow"]))
    )


def test_acl_job_ships_the_generated_script(chart: Any) -> None:
    from coachbus.acl import password_variable, principals, render_script
    from tests.shared.test_acl import parse_script

    docs = render(chart, SASL)
    script = of_kind(docs, "ConfigMap")["coachbus-kafka-acls"]["data"]["acls.sh"]
    assert script == render_script()
    assert parse_script(script)  # grants parse; their content: tests/shared/test_acl.py
    job = of_kind(docs, "Job")["coachbus-kafka-acls"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    (c,) = job["spec"]["template"]["spec"]["containers"]
    env = _env(c)
    for principal in principals():
        var = password_variable(principal)
        assert env[var] == {"secretKeyRef": {"name": "coachbus-prod", "key": var}}
    assert not {"coachbus-kafka-acls"} & set(of_kind(render(chart), "Job"))
