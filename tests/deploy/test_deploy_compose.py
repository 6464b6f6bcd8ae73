"""docker-compose.yml, Dockerfile and .dockerignore, checked without a Docker engine.

The compose file is interpolated the way Compose does it and then validated against
the Compose Specification's JSON schema (vendored, see data/README.md), followed by
the structural facts the issue asks for.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.deploy_support import COMPOSE, PROMETHEUS_CONFIG, REPO, SERVICES

pytestmark = pytest.mark.unit

SCHEMA_PATH = Path(__file__).parent / "data" / "compose-spec.json"
# The copy must stay the file docker-compose 1.29.2 ships; edits to "make it pass"
# would defeat the test.
COMPOSE_SCHEMA_SHA256 = "0dc04bd346dcfee1b1419628fff79937bbf076925f298f272a2b490e2b112bac"

# The secrets compose must refuse to start without (`${VAR?...}`), never defaulted.
KAFKA_USERS = ("OPS", "GATEWAY", "SHADOW", "PERSONA", "PLASTICITY", "STABILITY", "COACH", "SYNTH")
REQUIRED_SECRETS = {
    "COACHBUS_API_KEYS",
    "COACHBUS_LLM_API_KEY",
    "GRAFANA_ADMIN_PASSWORD",
    "KAFKA_ADMIN_PASSWORD",
    *(f"KAFKA_PASSWORD_{user}" for user in KAFKA_USERS),
}
SECRET_NAME = re.compile(r"(PASSWORD|SECRET|API_KEY|TOKEN)", re.IGNORECASE)

_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's variable interpolation: ${VAR}, ${VAR:-default}, ${VAR-default},
    ${VAR:?err}, ${VAR?err}, ${VAR:+alt}, $VAR and $$ (a literal $)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["name"] or match["bare"]
        op, arg = match["op"], match["arg"] or ""
        is_set = name in env
        is_non_empty = bool(env.get(name))
        present = is_non_empty if op and op.startswith(":") else is_set
        if op in (":-", "-"):
            return env[name] if present else arg
        if op in (":?", "?"):
            if not present:
                raise MissingVariable(f"{name}: {arg}")
            return env[name]
        if op in (":+", "+"):
            return arg if present else ""
        return env.get(name, "")

    return _VAR.sub(replace, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    # safe_load resolves the `<<: *anchor` merge keys like Compose does.
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    env = {name: "test-value" for name in REQUIRED_SECRETS}
    result = interpolate(raw, env)
    assert isinstance(result, dict)
    return result


def _schema() -> dict[str, Any]:
    # Its $schema says draft 2019-09 (as an http URL with "#" that jsonschema does not
    # map by itself), so the validator class is named explicitly.
    schema = json.loads(SCHEMA_PATH.read_text())
    assert "2019-09" in schema["$schema"]
    assert isinstance(schema, dict)
    return schema


def test_vendored_schema_is_unmodified() -> None:
    assert hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest() == COMPOSE_SCHEMA_SHA256


def test_validates_against_compose_spec_schema(compose: dict[str, Any]) -> None:
    schema = _schema()
    jsonschema.Draft201909Validator.check_schema(schema)
    errors = sorted(
        jsonschema.Draft201909Validator(schema).iter_errors(compose),
        key=lambda e: list(e.absolute_path),
    )
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
    )


def test_schema_check_catches_a_broken_file(compose: dict[str, Any]) -> None:
    # Proof that the validation above has teeth: a typo'd key must be rejected.
    broken = json.loads(json.dumps(compose))
    broken["services"]["shadow"]["helthcheck"] = broken["services"]["shadow"].pop("healthcheck")
    assert not jsonschema.Draft201909Validator(_schema()).is_valid(broken)


def test_required_secrets_have_no_default(raw: dict[str, Any]) -> None:
    for name in REQUIRED_SECRETS:
        others = {n: "x" for n in REQUIRED_SECRETS - {name}}
        with pytest.raises(MissingVariable, match=name):
            interpolate(raw, others)


def test_no_hard_coded_secrets(raw: dict[str, Any]) -> None:
    """Every secret-looking variable comes from the environment, never from the file."""
    reference = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(\?[^}]*|:-|:\?[^}]*)?\}$")
    checked = 0
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                checked += 1
                assert isinstance(value, str), f"{name}.{key}"
                assert reference.match(value), (
                    f"{name}.{key} must be ${{VAR?...}} or an empty default, not {value!r}"
                )
    assert checked >= 5  # the pattern does find the secrets it is meant to check


def test_the_seven_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in SERVICES:
        svc = services[name]
        assert svc["command"] == [
            "faststream", "run", f"services.{name}.main:app", "--host", "0.0.0.0", "--port", "8080",
        ]  # fmt: skip
        assert "profiles" not in svc, "the pipeline itself runs in every profile"
        assert svc["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")
        assert "/healthz" in " ".join(svc["healthcheck"]["test"])
        assert svc["depends_on"] == {
            "kafka": {"condition": "service_healthy"},
            "topics-init": {"condition": "service_completed_successfully"},
        }
        assert svc["read_only"] is True
        assert svc["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:19092"


def test_every_long_running_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        if name == "topics-init":
            assert svc["restart"] == "no"
            assert svc["command"] == ["coachbus", "topics", "create", "--fix-configs"]
            continue
        if name == "kafka-acls":
            assert svc["restart"] == "no"
            continue
        assert "healthcheck" in svc, name


def test_kafka_is_kraft_with_two_listeners(compose: dict[str, Any]) -> None:
    images = {name: svc.get("image", "") for name, svc in compose["services"].items()}
    assert not any("bitnami" in image for image in images.values())
    kafka = compose["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["CLUSTER_ID"]
    advertised = env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert {a.split("://")[0] for a in advertised} == {"INTERNAL", "HOST"}
    assert "INTERNAL://kafka:19092" in advertised
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_llm_profiles(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["llm-sim"]["profiles"] == ["sim"]
    assert services["llm-sim"]["command"][:2] == ["coachbus", "llm-sim"]
    for name, model in (("vllm-small", "Qwen3-30B-A3B"), ("vllm-strong", "Qwen3-235B-A22B")):
        svc = services[name]
        assert svc["profiles"] == ["gpu"]
        args = svc["command"]
        assert f"--served-model-name=Qwen/{model}" in args
        assert "--enable-prefix-caching" in args
        assert "--reasoning-parser=qwen3" in args
        assert any(a.startswith("--guided-decoding-backend=") for a in args)
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"]
    profiled = {n for n, s in services.items() if s.get("profiles")}
    assert profiled == {"llm-sim", "vllm-small", "vllm-strong"}


def test_prometheus_scrapes_every_service_and_vllm(compose: dict[str, Any]) -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    targets = {
        target
        for job in config["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    }
    # The gateway's /metrics is on its internal port; 8080 is its public API.
    assert "gateway:8080" not in targets
    assert "gateway:9000" in targets
    assert {f"{name}:8080" for name in SERVICES if name != "gateway"} <= targets
    assert {"vllm-small:8000", "vllm-strong:8000"} <= targets
    for target in targets - {"localhost:9090"}:
        assert target.split(":")[0] in compose["services"], target


def test_bind_mounts_exist_in_the_repo(compose: dict[str, Any]) -> None:
    mounts = [
        volume.split(":")[0]
        for svc in compose["services"].values()
        for volume in svc.get("volumes", [])
        if volume.startswith("./")
    ]
    assert "./charts/coachbus/dashboards" in mounts  # one dashboard file for compose and Helm
    for source in mounts:
        assert (REPO / source).exists(), source


def test_grafana_provisions_the_chart_dashboard() -> None:
    provider = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/dashboards/coachbus.yml").read_text()
    )
    compose_mount = "./charts/coachbus/dashboards:/var/lib/grafana/dashboards/coachbus:ro"
    assert compose_mount in COMPOSE.read_text()
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/coachbus"


def test_dockerfile_runs_as_non_root_with_the_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users
    assert users[-1].split(":")[0] not in {"0", "root"}
    assert "/healthz" in text
    assert "EXPOSE 8080" in text


def test_dockerignore_keeps_secrets_and_venv_out() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert lines.count("*") == 1, "allow-list: exclude everything, then re-include"
    assert "**/.env" in lines
    included = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert included == {"pyproject.toml", "README.md", "shared", "services", "evaluation"}


# --- closed by default -----------------------------------------------------------------

PUBLIC = REPO / "docker-compose.public.yml"


def _published(svc: dict[str, Any]) -> list[str]:
    return [str(p) for p in svc.get("ports", [])]


def test_every_published_port_is_bound_to_localhost(compose: dict[str, Any]) -> None:
    published = 0
    for name, svc in compose["services"].items():
        for port in _published(svc):
            published += 1
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} on all interfaces"
    assert published >= 4  # kafka, gateway, prometheus, grafana


def test_public_override_publishes_the_gateway_only() -> None:
    override = interpolate(yaml.safe_load(PUBLIC.read_text()), {})
    assert set(override["services"]) == {"gateway"}
    assert set(override["services"]["gateway"]) == {"ports"}
    # Its public port only, never the internal one with /metrics and the API docs.
    assert [p.rsplit(":", 1)[-1] for p in _published(override["services"]["gateway"])] == ["8080"]


def test_gateway_internal_port_stays_on_the_compose_network(compose: dict[str, Any]) -> None:
    gateway = compose["services"]["gateway"]
    internal = gateway["environment"]["COACHBUS_GATEWAY_INTERNAL_PORT"]
    assert internal == "9000"
    assert [p.rsplit(":", 1)[-1] for p in _published(gateway)] == ["8080"]
    assert "expose" not in gateway
    for name, svc in compose["services"].items():
        for port in _published(svc):
            assert not port.endswith(f":{internal}"), f"{name} publishes {port}"


def test_kafka_has_no_plaintext_listener_and_an_authorizer(compose: dict[str, Any]) -> None:
    env = compose["services"]["kafka"]["environment"]
    protocols = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    listeners = {entry.split("://")[0] for entry in env["KAFKA_LISTENERS"].split(",")}
    assert listeners <= set(protocols)
    assert all(protocols[name] in {"SASL_PLAINTEXT", "SASL_SSL"} for name in listeners), protocols
    assert "CONTROLLER://localhost:" in env["KAFKA_LISTENERS"]
    assert env["KAFKA_AUTHORIZER_CLASS_NAME"].endswith("StandardAuthorizer")
    assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    assert env["KAFKA_SUPER_USERS"] == "User:admin"
    assert "SCRAM-SHA-512" in env["KAFKA_SASL_ENABLED_MECHANISMS"]


def test_every_service_has_its_own_scram_user(compose: dict[str, Any]) -> None:
    from coachbus.acl import ACCESS, OPS_PRINCIPAL, password_variable

    users = {}
    for name in SERVICES:
        env = compose["services"][name]["environment"]
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert env["KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
        users[name] = env["KAFKA_SASL_USERNAME"]
        assert users[name] == ACCESS[name].principal
    assert len(set(users.values())) == len(SERVICES)
    topics = compose["services"]["topics-init"]["environment"]
    assert topics["KAFKA_SASL_USERNAME"] == OPS_PRINCIPAL
    # The users/ACL job gets every principal's password, from the same variables.
    raw = yaml.safe_load(COMPOSE.read_text())
    acl_env = raw["services"]["kafka-acls"]["environment"]
    for principal in [OPS_PRINCIPAL, *(a.principal for a in ACCESS.values())]:
        var = password_variable(principal)
        assert acl_env[var] == f"${{{var}?Variable not set}}"
    for name in SERVICES:
        var = password_variable(ACCESS[name].principal)
        assert raw["services"][name]["environment"]["KAFKA_SASL_PASSWORD"] == (
            f"${{{var}?Variable not set}}"
        )


def test_the_acl_job_runs_the_generated_script(compose: dict[str, Any]) -> None:
    from coachbus.acl import render_script

    job = compose["services"]["kafka-acls"]
    assert job["image"] == compose["services"]["kafka"]["image"]  # same kafka-acls.sh
    assert "./deploy/kafka:/coachbus:ro" in job["volumes"]
    assert (REPO / "deploy/kafka/acls.sh").read_text() == render_script()
    assert "/coachbus/acls.sh" in (REPO / "deploy/kafka/init.sh").read_text()
    assert compose["services"]["topics-init"]["depends_on"]["kafka-acls"] == {
        "condition": "service_completed_successfully"
    }


def test_production_settings_and_no_prometheus_lifecycle(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        env = compose["services"][name]["environment"]
        assert env["COACHBUS_ENVIRONMENT"] == "production"
        assert int(env["COACHBUS_RETENTION_MS"]) == 7 * 86_400_000
        assert int(env["COACHBUS_DLQ_RETENTION_MS"]) == 3 * 86_400_000
    assert not any("enable-lifecycle" in a for a in compose["services"]["prometheus"]["command"])


def test_env_example_names_every_required_variable() -> None:
    example = dict(
        line.split("=", 1)
        for line in (REPO / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert set(example) == REQUIRED_SECRETS
    assert all("REPLACE-ME" in value for value in example.values()), "obvious placeholders"
    assert ".env" in (REPO / ".gitignore").read_text().splitlines()


# --- the human tier --------------------------------------------------------------------

REVIEW_KNOBS = {
    "COACHBUS_REVIEW_CONSOLE",
    "COACHBUS_REVIEW_CLAIM_TTL_S",
    "COACHBUS_REVIEW_ALERT_AFTER_S",
    "COACHBUS_REVIEW_STREAM_HOLD_S",
    "COACHBUS_REVIEW_WEBHOOK_URL",
    "COACHBUS_REVIEW_WEBHOOK_SECRET",
    "COACHBUS_REVIEW_WEBHOOK_ATTEMPTS",
    "COACHBUS_REVIEW_WEBHOOK_TIMEOUT_S",
    "COACHBUS_REVIEW_WEBHOOK_BACKOFF_S",
}


def test_review_knobs_on_the_gateway_empty_by_default(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from coachbus.settings import CoachbusSettings
    from services.gateway.review_settings import ReviewSettings

    gateway = compose["services"]["gateway"]["environment"]
    assert not REVIEW_KNOBS - set(gateway), "every knob of the gateway's human tier"
    # Empty is unset for the settings: the gateway's own defaults, no webhook.
    assert all(gateway[name] == "" for name in REVIEW_KNOBS)
    for name in REVIEW_KNOBS:
        monkeypatch.setenv(name, gateway[name])
    assert ReviewSettings() == ReviewSettings.model_construct()
    for name in SERVICES:
        if name != "gateway":
            assert not REVIEW_KNOBS & set(compose["services"][name]["environment"]), name
    # A topic setting: topics-init applies it.
    topics = compose["services"]["topics-init"]["environment"]
    monkeypatch.setenv(
        "COACHBUS_REVIEW_AUDIT_RETENTION_MS", topics["COACHBUS_REVIEW_AUDIT_RETENTION_MS"]
    )
    default = CoachbusSettings.model_fields["review_audit_retention_ms"].default
    assert CoachbusSettings().review_audit_retention_ms == default


def test_review_knobs_come_from_the_environment(raw: dict[str, Any]) -> None:
    env = {name: "test-value" for name in REQUIRED_SECRETS}
    env |= {"COACHBUS_REVIEW_CONSOLE": "internal", "COACHBUS_REVIEW_ALERT_AFTER_S": "900"}
    gateway = interpolate(raw, env)["services"]["gateway"]["environment"]
    assert gateway["COACHBUS_REVIEW_CONSOLE"] == "internal"
    assert gateway["COACHBUS_REVIEW_ALERT_AFTER_S"] == "900"
