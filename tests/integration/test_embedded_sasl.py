"""What the embedded Tansu does with SASL, measured (see coachbus.embedded.broker).

With ``--authentication`` a client without SASL, or with a wrong password, is
refused. A right password cannot be shown: the broker's user store starts empty
(memory storage) and ``tansu user create`` is refused by an authenticating broker,
so no user can be created. The last test pins that: if a Tansu release lets a user
be created, it fails, and the positive path (produce and consume with the right
password) belongs here.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from coachbus.embedded.broker import EmbeddedBroker, free_port, tansu_binary

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def auth_broker() -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(port=free_port(), authentication=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def _produce(bootstrap: str, **security: object) -> None:
    """Connect and write one record (creating its topic first)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000, **security)
    try:
        await asyncio.wait_for(admin.start(), 15)
        await admin.create_topics([NewTopic("t", 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=3000, **security)
    try:
        await asyncio.wait_for(producer.start(), 15)
        await asyncio.wait_for(producer.send_and_wait("t", b"v", key=b"k"), 15)
    finally:
        await producer.stop()


async def test_client_without_sasl_is_refused(auth_broker: EmbeddedBroker) -> None:
    with pytest.raises(KafkaError):
        await _produce(auth_broker.bootstrap)


async def test_wrong_password_is_refused(auth_broker: EmbeddedBroker) -> None:
    # aiokafka reads Tansu's SCRAM failure ("e=..." instead of "v=...") as a KeyError.
    with pytest.raises((KafkaError, KeyError)):
        await _produce(
            auth_broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="coachbus-shadow",
            sasl_plain_password="not-the-password",
        )


def test_no_user_can_be_created_on_an_authenticating_broker(
    auth_broker: EmbeddedBroker,
) -> None:
    result = subprocess.run(
        [
            *(tansu_binary(), "user", "create", "--broker", f"tcp://{auth_broker.bootstrap}"),
            *("coachbus-shadow", "a-password-of-enough-length-0123456789"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0, "Tansu can create users now: add the positive SASL test"


async def test_without_authentication_sasl_is_not_offered() -> None:
    # The default (make run): anonymous clients only; a SASL client finds no mechanism.
    with EmbeddedBroker(port=free_port()) as broker:
        await _produce(broker.bootstrap)
        with pytest.raises(KafkaError):
            await _produce(
                broker.bootstrap,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="u",
                sasl_plain_password="p",
            )
