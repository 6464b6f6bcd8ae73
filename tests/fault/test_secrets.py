"""Secrets never reach a log or a repr; message text never reaches an INFO log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from coachbus.llm import LLMSettings, describe
from coachbus.settings import CoachbusSettings, KafkaSettings, faststream_security
from tests.fault.conftest import llm_sim, new_prefix, replies_for, running
from tests.integration.conftest import RunningStack

LLM_KEY = "sk-llm-Zq8TopSecretLlmKey4711"
API_KEY = "key-Zq8TopSecretApiKey0815"
SASL_PASSWORD = "Zq8TopSecretSaslPassword42"
WRONG_KEY = "key-Zq8WrongGuessedKey9999"
TEXT = "Flamingoquartz: I want to paint the garden fence on Saturday."
OPENAI_TEXT = "Lanternwhisker: remind me to water the tomatoes."
SECRETS = (LLM_KEY, API_KEY, SASL_PASSWORD, WRONG_KEY)


@pytest.mark.unit
def test_settings_reprs_hide_secrets() -> None:
    kafka = KafkaSettings(
        bootstrap_servers="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="coachbus",
        sasl_password=SASL_PASSWORD,  # type: ignore[arg-type]
    )
    settings = CoachbusSettings(
        api_keys=f"dana:{API_KEY}",  # type: ignore[arg-type]
    )
    llm = LLMSettings(base_url="http://127.0.0.1:1/v1", api_key=LLM_KEY)  # type: ignore[arg-type]
    shown = [
        repr(kafka),
        str(kafka),
        kafka.model_dump_json(),
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(settings.api_keys),
        repr(llm),
        llm.model_dump_json(),
        describe(llm),
        repr(faststream_security(kafka)),
    ]
    for text in shown:
        for secret in SECRETS:
            assert secret not in text, text
    # The secret is still there for the client that needs it.
    assert kafka.client_kwargs()["sasl_plain_password"] == SASL_PASSWORD


@pytest_asyncio.fixture(scope="module")
async def secret_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningStack, Path]]:
    logs = tmp_path_factory.mktemp("secret-logs")
    prefix = new_prefix("sec")
    env = {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": "2",
        "COACHBUS_API_KEYS": f"alice:{API_KEY}",
        "COACHBUS_LLM_API_KEY": LLM_KEY,
        # Set but unused (no SASL mechanism against the embedded broker): a secret in
        # the environment must stay out of the logs all the same.
        "KAFKA_SASL_PASSWORD": SASL_PASSWORD,
        "COACHBUS_LOG_LEVEL": "INFO",
        "COACHBUS_TURN_DEADLINE_MS": "15000",
    }
    # The simulator as its own process logging beside the services (its log is
    # checked too), instant: what is checked is what is logged, not how fast.
    with llm_sim(logs) as llm_url:
        env["COACHBUS_LLM_BASE_URL"] = llm_url
        async with running(kafka_bootstrap, logs, env) as rs:
            yield rs, logs


@pytest.mark.heavy
@pytest.mark.broker
@pytest.mark.slow
async def test_no_secret_and_no_message_text_in_any_log(
    secret_stack: tuple[RunningStack, Path],
) -> None:
    rs, logs = secret_stack
    auth = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(timeout=60) as client:
        accepted = await client.post(
            f"{rs.url}/v1/sessions/sec/messages", json={"text": TEXT}, headers=auth
        )
        assert accepted.status_code == 202
        turn = accepted.json()["turn_id"]
        refused = await client.post(
            f"{rs.url}/v1/sessions/sec/messages",
            json={"text": TEXT},
            headers={"Authorization": f"Bearer {WRONG_KEY}"},
        )
        assert refused.status_code == 401
        chat = await client.post(
            f"{rs.url}/v1/chat/completions",
            json={"model": "coachbus", "messages": [{"role": "user", "content": OPENAI_TEXT}]},
            headers=auth,
        )
        assert chat.status_code == 200, chat.text
    replies = await replies_for(rs, {turn}, timeout=60)
    assert not replies.missing({turn})
    # Give every service a moment to write what it would log about the turn.
    await asyncio.sleep(1)
    files = sorted(logs.glob("*.log"))
    assert {p.stem for p in files} >= {"gateway", "coach", "synth", "stability"}
    assert any(p.stem.startswith("llm-sim") for p in files)
    for path in files:
        text = path.read_text(errors="replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} in {path.name}"
        for line in text.splitlines():
            # The log level is INFO: no line at any level may carry the message text.
            assert "Flamingoquartz" not in line, f"message text in {path.name}: {line[:200]}"
            assert "Lanternwhisker" not in line, f"message text in {path.name}: {line[:200]}"
