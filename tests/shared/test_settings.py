"""Settings from the environment."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from coachbus.settings import CoachbusSettings, KafkaSettings

pytestmark = pytest.mark.unit


def test_api_keys_parse_with_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COACHBUS_API_KEYS", "alice:k1, bob:k2:reviewer")
    settings = CoachbusSettings()
    assert [(k.user_id, k.reviewer) for k in settings.api_keys] == [
        ("alice", False),
        ("bob", True),
    ]
    assert settings.api_keys[0].key.get_secret_value() == "k1"
    assert "k1" not in repr(settings)  # secrets never show in a repr or a log line


@pytest.mark.parametrize("raw", ["alice", "alice:k:admin", ":k"])
def test_malformed_keys_are_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("COACHBUS_API_KEYS", raw)
    with pytest.raises(ValidationError):
        CoachbusSettings()


def test_placeholder_keys_refused_outside_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COACHBUS_API_KEYS", "alice:changeme")
    assert CoachbusSettings().environment == "local"
    monkeypatch.setenv("COACHBUS_ENVIRONMENT", "production")
    with pytest.raises(ValidationError, match="placeholder"):
        CoachbusSettings()


def test_topic_prefix_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COACHBUS_TOPIC_PREFIX", "acme.")
    settings = CoachbusSettings()
    assert settings.topic("user-messages") == "acme.user-messages"
    assert settings.gateway_port == 8000


def test_kafka_sasl_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9093")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "svc")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "s3cret")
    kafka = KafkaSettings()
    kwargs = kafka.client_kwargs()
    assert kafka.servers == "k1:9093"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_password"] == "s3cret"
    assert "s3cret" not in repr(kafka)


def test_unknown_required_agent_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COACHBUS_SYNTH_REQUIRED_AGENTS", "shadow,oracle")
    with pytest.raises(ValidationError, match="oracle"):
        CoachbusSettings()


def test_embedded_broker_gets_as_many_partitions_as_replicas_need() -> None:
    from coachbus.embedded.stack import embedded_partitions

    assert embedded_partitions({}) == 2
    assert embedded_partitions({"coach": 1, "synth": 2}) == 2
    assert embedded_partitions({"coach": 4}) == 4


def test_short_keys_refused_outside_local_naming_the_user_not_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COACHBUS_API_KEYS", f"alice:{'a' * 32},bob:tooshort-x")
    assert len(CoachbusSettings().api_keys) == 2  # local: any key will do
    for environment in ("staging", "production"):
        monkeypatch.setenv("COACHBUS_ENVIRONMENT", environment)
        with pytest.raises(ValidationError, match=r"'bob'.*fewer than 32") as raised:
            CoachbusSettings()
        assert "tooshort-x" not in str(raised.value)
    monkeypatch.setenv("COACHBUS_API_KEYS", f"alice:{'a' * 32},bob:{'b' * 32}:reviewer")
    assert [k.user_id for k in CoachbusSettings().api_keys] == ["alice", "bob"]


@pytest.mark.parametrize("environment", ["local", "production"])
def test_one_key_for_two_users_refused_everywhere(
    monkeypatch: pytest.MonkeyPatch, environment: str
) -> None:
    key = "k" * 40
    monkeypatch.setenv("COACHBUS_ENVIRONMENT", environment)
    monkeypatch.setenv("COACHBUS_API_KEYS", f"alice:{key},bob:{'b' * 40},mallory:{key}")
    with pytest.raises(ValidationError, match="'alice' and 'mallory' have the same API key") as e:
        CoachbusSettings()
    assert key not in str(e.value)
    # One user with two keys (a rotation) is fine.
    monkeypatch.setenv("COACHBUS_API_KEYS", f"alice:{key},alice:{'b' * 40}")
    assert len(CoachbusSettings().api_keys) == 2


def test_gateway_internal_port(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = CoachbusSettings()
    assert settings.gateway_internal_port == 9000
    assert settings.gateway_internal_port not in (settings.gateway_port, 9092)
    monkeypatch.setenv("COACHBUS_GATEWAY_INTERNAL_PORT", "0")  # pick a free one
    assert CoachbusSettings().gateway_internal_port == 0


def test_a_malformed_key_list_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COACHBUS_API_KEYS", "alice:sekrit-value-1234:admin")
    with pytest.raises(ValidationError) as raised:
        CoachbusSettings()
    assert "sekrit-value-1234" not in str(raised.value)


def test_the_gateway_port_has_one_name_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """COACHBUS_GATEWAY_PORT (the documented name) sets the gateway's port for
    ``faststream run`` without ``--port`` and for ``coachbus run`` (so ``make run``)."""
    import coachbus.embedded.stack as stack
    from coachbus.bus.app import DEFAULT_PORTS
    from coachbus.bus.service import AgentRuntime
    from coachbus.cli import main

    monkeypatch.setenv("COACHBUS_GATEWAY_PORT", "8123")
    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:1")  # never dialled
    gateway = AgentRuntime("gateway", settings=CoachbusSettings(), kafka=kafka).build_app()
    shadow = AgentRuntime("shadow", settings=CoachbusSettings(), kafka=kafka).build_app()
    assert gateway.default_port == 8123
    assert shadow.default_port == DEFAULT_PORTS["shadow"]

    class Started(Exception):
        pass

    ports: list[int] = []

    class Stack:
        def __init__(self, config: stack.StackConfig) -> None:
            ports.append(stack.StackPorts.resolve(config, dict(os.environ)).gateway)

        async def start(self) -> None:
            raise Started

    monkeypatch.setattr(stack, "Stack", Stack)
    for argv in (["run"], ["run", "--port", "8124"]):
        with pytest.raises(Started):
            main([*argv, "--no-snapshot"])
    assert ports == [8123, 8124]


def test_synth_waits_for_the_five_workers_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from coachbus.roster import SYNTH, WORKERS

    assert CoachbusSettings().synth_required_agents == list(WORKERS)
    # Synth does not wait for itself: only workers are known here.
    monkeypatch.setenv("COACHBUS_SYNTH_REQUIRED_AGENTS", f"shadow,{SYNTH}")
    with pytest.raises(ValidationError, match=SYNTH):
        CoachbusSettings()


def test_the_longest_user_message_fits_its_byte_limit() -> None:
    from coachbus.bus.codec import encode
    from coachbus.contracts import UserMessage

    settings = CoachbusSettings()
    # Every character 4 bytes in UTF-8 and every id at its longest: the worst case the
    # limit's formula is for (control characters are checked by the gateway instead).
    message = UserMessage.create(
        user_id="u" * 128,
        session_id="s" * 128,
        text="\U0001f600" * settings.max_message_chars,
        deadline_ms=settings.turn_deadline_ms,
        max_tokens=settings.turn_token_budget,
        wall_clock_ms=settings.turn_wall_clock_ms,
    )
    assert len(encode(message)) <= settings.max_message_bytes
    # An agent result may quote the message and add its own structure.
    assert settings.max_result_bytes > settings.max_message_bytes
    small = CoachbusSettings(max_message_chars=100)
    assert small.max_message_bytes < settings.max_message_bytes
    assert small.max_result_bytes < settings.max_result_bytes
