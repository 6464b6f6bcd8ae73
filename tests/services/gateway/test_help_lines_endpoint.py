"""GET /v1/help-lines: public, in the chat's language, the lines crisis replies carry."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from coachbus.contracts.payloads import CrisisCategory
from coachbus.safety.helplines import Helplines
from coachbus.safety.replies import crisis_reply
from coachbus.settings import ApiKey, CoachbusSettings
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit


def _client(settings: CoachbusSettings) -> TestClient:
    async def publish(_message: object) -> None:
        return None

    # The whole app, front door included: the key check must let this one path through.
    ring = KeyRing([ApiKey(user_id="a", key=SecretStr("k" * 40))])
    api = create_api(settings, ring, TurnStore(), publish, ReviewQueue(), publish)
    return TestClient(api)


@pytest.fixture
def client() -> TestClient:
    return _client(CoachbusSettings())


def numbers(body: dict[str, object]) -> set[str]:
    groups = body["groups"]
    assert isinstance(groups, list)
    return {n for g in groups for line in g["lines"] for n in line["numbers"]}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_help_lines_need_no_key(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get("/v1/help-lines", headers=headers)
    assert response.status_code == 200
    body = response.json()
    assert body["language"] == "en" and body["locale"] == "en"
    assert body["title"] == "Need help now?"
    assert {"112", "911", "988", "116 123"} <= numbers(body)
    assert response.headers["cache-control"] == "no-cache"


def test_only_that_path_is_public(client: TestClient) -> None:
    assert client.get("/v1/help-lines/more").status_code == 401
    assert client.get("/v1/me/beliefs").status_code == 401


def test_german_lines_in_german(client: TestClient) -> None:
    body = client.get("/v1/help-lines", params={"language": "de"}).json()
    assert body["locale"] == "de-DE" and body["title"] == "Jetzt Hilfe nötig?"
    lifeline = next(g for g in body["groups"] if g["kind"] == "lifeline")
    assert lifeline["lines"][0]["numbers"] == ["0800 111 0 111", "0800 111 0 222"]
    assert "rund um die Uhr" in lifeline["lines"][0]["details"]


def test_an_unknown_language_is_refused(client: TestClient) -> None:
    response = client.get("/v1/help-lines", params={"language": "fr"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"


def test_the_configured_locale_is_what_the_page_and_the_replies_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COACHBUS_LOCALE", "de-AT")
    settings = CoachbusSettings()
    body = _client(settings).get("/v1/help-lines", params={"language": "en"}).json()
    assert body["locale"] == "de-AT" and body["region"] == "Austria"
    assert numbers(body) == {"112", "144", "142", "0800 222 555"}
    # What Coach and Synth configure from the same settings as they start.
    lines = Helplines.configured(settings.helplines_file, settings.locale)
    replies = " ".join(
        crisis_reply(c, "en", "informal", lines) for c in CrisisCategory if c.value != "none"
    )
    assert all(n in replies for n in numbers(body))
