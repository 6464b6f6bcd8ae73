"""The web router without a browser or a broker: files, headers, the beliefs view."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from coachbus.contracts import PersonaResult, ShadowResult, StabilityResult
from coachbus.contracts.payloads import (
    CrisisCategory,
    CrisisScreen,
    PatternClass,
    PatternEvidence,
    PersonaPayload,
    ShadowPayload,
    StabilityPayload,
    StatedGoal,
    Trait,
    TraitEstimate,
)
from coachbus.settings import ApiKey
from services.gateway.auth import KeyRing
from services.gateway.turns import TurnStore
from services.gateway.web import STATIC_DIR, create_web_router

pytestmark = pytest.mark.unit

ALICE = {"Authorization": "Bearer key-alice"}
BOB = {"Authorization": "Bearer key-bob"}


@pytest.fixture
def store() -> TurnStore:
    return TurnStore()


@pytest.fixture
def client(store: TurnStore) -> TestClient:
    keys = KeyRing(
        [
            ApiKey(user_id="alice", key=SecretStr("key-alice")),
            ApiKey(user_id="bob", key=SecretStr("key-bob")),
        ]
    )
    app = FastAPI()
    app.include_router(create_web_router(store, keys))
    return TestClient(app)


def shadow(turn: str, user: str, goal: str, quote: str) -> ShadowResult:
    payload = ShadowPayload(
        stated_goals=[
            StatedGoal(
                goal_id=f"goal:{goal}",
                text=goal,
                quote=quote,
                sessions_mentioned=1,
                first_seen_session="s1",
            )
        ],
        actual_priorities=[],
        avoided_goals=[],
        follow_through=[],
        patterns=[
            PatternEvidence(
                pattern=PatternClass.PROCRASTINATION,
                confidence=0.6,
                occurrences=1,
                evidence=[quote],
            )
        ],
        primary_pattern=PatternClass.PROCRASTINATION,
        blackboard_version=1,
    )
    return ShadowResult(
        turn_id=turn, session_id="s1", user_id=user, tier="deterministic", latency_ms=3.0,
        payload=payload,
    )  # fmt: skip


def persona(turn: str, user: str, openness: float) -> PersonaResult:
    payload = PersonaPayload(
        ocean={t: TraitEstimate(value=0.5, confidence=0.2, evidence_count=1) for t in Trait}
        | {Trait.OPENNESS: TraitEstimate(value=openness, confidence=0.4, evidence_count=2)},
        items=[],
        recurring_goals=[],
        growth_opportunities=["Try one small step a day."],
        sessions_seen=1,
    )
    return PersonaResult(
        turn_id=turn, session_id="s1", user_id=user, tier="small", latency_ms=5.0, payload=payload
    )


def stability(turn: str, user: str) -> StabilityResult:
    screen = CrisisScreen(category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False)
    payload = StabilityPayload(risks=[], blocked_steps=[], crisis=screen, overall="low")
    return StabilityResult(
        turn_id=turn, session_id="s1", user_id=user, tier="deterministic", latency_ms=1.0,
        payload=payload,
    )  # fmt: skip


# ------------------------------------------------------------------ files and headers


def test_index_is_served_with_a_strict_policy(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/static/app.js">' in response.text


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("sse.js", "text/javascript; charset=utf-8"),
        ("app.css", "text/css; charset=utf-8"),
        ("index.html", "text/html; charset=utf-8"),
    ],
)
def test_static_files_have_their_content_type(
    client: TestClient, name: str, content_type: str
) -> None:
    response = client.get(f"/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert response.content == (STATIC_DIR / name).read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "/static/web.py",  # exists one folder up: never reachable
        "/static/..%2Fweb.py",
        "/static/%2E%2E%2Fweb.py",
        "/static/.hidden.js",
        "/static/missing.js",
        "/static/app.js.bak",
    ],
)
def test_nothing_else_is_served(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    # Nothing of the file leaks (an encoded slash never even reaches the handler).
    assert b"import" not in response.content


class _Refs(HTMLParser):
    """Collects what index.html loads and anything the CSP would block."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "href"):
            value = found.get(name)
            if value and not value.startswith("#"):
                self.refs.append(value)
        if tag == "script" and "src" not in found:
            self._in_script = True
        for name in found:
            if name == "style" or name.startswith("on"):
                self.inline.append(f"<{tag} {name}>")
        if tag == "style":
            self.inline.append("<style>")

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append("<script> without src")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False


def test_page_loads_only_its_own_files_and_nothing_inline(client: TestClient) -> None:
    parser = _Refs()
    parser.feed((STATIC_DIR / "index.html").read_text())
    assert parser.refs, "the parser found nothing: the check below would pass vacuously"
    for ref in parser.refs:
        assert ref.startswith("/"), f"{ref} is not served by the gateway"
        assert not ref.startswith("//"), f"{ref} is another host"
        assert client.get(ref).status_code == 200, ref
    # Inline script, style attributes and on* handlers are blocked by the CSP.
    assert parser.inline == []


def test_the_icon_is_an_svg(client: TestClient) -> None:
    response = client.get("/favicon.svg")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.text.startswith("<svg ")


def test_modules_import_only_local_files() -> None:
    for path in STATIC_DIR.glob("*.js"):
        for target in re.findall(r"""^import .*? from ["']([^"']+)["'];""", path.read_text(), re.M):
            assert target.startswith("./"), f"{path.name} imports {target}"
            assert (STATIC_DIR / target[2:]).is_file(), f"{path.name} imports missing {target}"
    assert "./sse.js" in (STATIC_DIR / "app.js").read_text()


def test_scripts_never_parse_text_as_html() -> None:
    # User and agent text reach the page through textContent only; any of these
    # would let a message containing markup run as code.
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
    )
    for path in STATIC_DIR.glob("*.js"):
        hits = [m.group(0) for m in sinks.finditer(path.read_text())]
        assert hits == [], f"{path.name} uses {hits}"


def test_styles_load_nothing_from_elsewhere() -> None:
    css = (STATIC_DIR / "app.css").read_text()
    assert "@import" not in css
    assert re.search(r"url\(\s*['\"]?(https?:)?//", css) is None


# ------------------------------------------------------------------ beliefs


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "x"}])
def test_beliefs_need_a_key(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get("/v1/me/beliefs", headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["title"] == "Unauthorized"


def test_beliefs_are_null_before_any_turn(client: TestClient) -> None:
    response = client.get("/v1/me/beliefs", headers=ALICE)
    assert response.status_code == 200
    assert response.json() == {"user_id": "alice", "shadow": None, "persona": None}


async def test_beliefs_come_from_the_latest_turn_of_the_caller_only(
    client: TestClient, store: TurnStore
) -> None:
    store.open("t1", "alice", "s1")
    await store.add_result(shadow("t1", "alice", "run a marathon", "I want to run a marathon"))
    await store.add_result(persona("t1", "alice", openness=0.3))
    store.open("t2", "bob", "s1")
    await store.add_result(shadow("t2", "bob", "learn piano", "I'd love to learn piano"))
    store.open("t3", "alice", "s1")
    await store.add_result(shadow("t3", "alice", "write a novel", "I keep saying I'll write"))
    await store.add_result(stability("t3", "alice"))
    # t3 has no Persona result (it ran late): the profile from t1 still stands.

    body = client.get("/v1/me/beliefs", headers=ALICE).json()
    assert body["user_id"] == "alice"
    assert body["shadow"]["turn_id"] == "t3"
    goals = body["shadow"]["payload"]["stated_goals"]
    assert [g["text"] for g in goals] == ["write a novel"]
    assert goals[0]["quote"] == "I keep saying I'll write"
    assert body["shadow"]["payload"]["patterns"][0]["evidence"] == ["I keep saying I'll write"]
    assert body["persona"]["turn_id"] == "t1"
    assert body["persona"]["tier"] == "small"
    assert body["persona"]["payload"]["ocean"]["openness"] == {
        "value": 0.3,
        "confidence": 0.4,
        "evidence_count": 2,
    }

    bob = client.get("/v1/me/beliefs", headers=BOB).json()
    assert [g["text"] for g in bob["shadow"]["payload"]["stated_goals"]] == ["learn piano"]
    assert bob["persona"] is None


async def test_beliefs_are_gone_after_erasure(client: TestClient, store: TurnStore) -> None:
    store.open("t1", "alice", "s1")
    await store.add_result(shadow("t1", "alice", "run a marathon", "I want to run"))
    assert client.get("/v1/me/beliefs", headers=ALICE).json()["shadow"] is not None
    store.drop_user("alice")
    assert client.get("/v1/me/beliefs", headers=ALICE).json()["shadow"] is None


# ------------------------------------------------------------------ help lines


def test_the_page_always_offers_help_even_before_any_script_runs() -> None:
    page = (STATIC_DIR / "index.html").read_text()
    help_panel = page[page.index('<details id="help"') : page.index("</details>")]
    assert "Need help now?" in help_panel
    # The fallback line, for when the help lines cannot be fetched.
    assert "112" in help_panel and "911" in help_panel


def test_the_page_asks_for_help_lines_without_the_key() -> None:
    script = (STATIC_DIR / "app.js").read_text()
    # A plain fetch, not api(): that one sends the key and signs out on a 401.
    assert "fetch(`/v1/help-lines?language=${lang}`)" in script
    assert 'api("/v1/help-lines' not in script and "api(`/v1/help-lines" not in script


def test_help_lines_are_served_without_a_key(client: TestClient) -> None:
    body = client.get("/v1/help-lines", params={"language": "de"}).json()
    assert body["language"] == "de"
    assert [g["kind"] for g in body["groups"]] == ["emergency", "lifeline", "abuse", "medical"]
