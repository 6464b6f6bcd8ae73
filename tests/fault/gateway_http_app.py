"""The gateway's HTTP app without a bus, for tests that run it under a real uvicorn.

``uvicorn tests.fault.gateway_http_app:create --factory``: the same ``create_api``
the gateway serves (its middleware included); published messages are kept in a list
instead of going to the broker. Keys come from ``COACHBUS_API_KEYS`` as usual.
"""

from __future__ import annotations

from fastapi import FastAPI

from coachbus.contracts import EraseRequest, Reply, UserMessage
from coachbus.settings import CoachbusSettings
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore

PUBLISHED: list[UserMessage | EraseRequest | Reply] = []


async def _publish(message: UserMessage | EraseRequest | Reply) -> None:
    PUBLISHED.append(message)


def create() -> FastAPI:
    settings = CoachbusSettings()
    return create_api(
        settings, KeyRing(settings.api_keys), TurnStore(), _publish, ReviewQueue(), _publish
    )
