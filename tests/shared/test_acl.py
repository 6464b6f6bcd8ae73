"""The ACL table (coachbus.acl) against the services' own topic wiring, and the
generated users/ACL script against the table.

No broker here runs Kafka's authorizer (the embedded Tansu has none), so what the
ACLs allow is checked on the generated artefacts: the script compose and the Helm
chart both run is parsed back and its grants compared with the code.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from coachbus.acl import ACCESS, OPS_PRINCIPAL, principals, render_script, writers
from coachbus.roster import SERVICES, WORKERS
from coachbus.topics import AGENT_TOPICS, COMPACTED, Topic

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GENERATED = (
    REPO / "deploy" / "kafka" / "acls.sh",
    REPO / "charts" / "coachbus" / "files" / "kafka-acls.sh",
)
PREFIX = "coachbus."
_BY_NAME = {PREFIX + t.value: t for t in Topic}


def _topic(name: str) -> Topic:
    return _BY_NAME[name]


def _wiring(service: str) -> tuple[set[Topic], set[Topic], bool]:
    """(writes, reads, has a consumer group) as the service's code declares them."""
    handlers: Any = importlib.import_module(f"services.{service}.handlers")
    runtime, router = handlers.runtime, handlers.router
    writes = {_topic(s.topic) for s in runtime.state.stores}
    reads = {_topic(s.topic) for s in runtime.state.stores} | {
        _topic(v.topic) for v in runtime.state.views
    }
    for pub in router.publishers:
        writes.add(_topic(pub.topic))
    for sub in router.subscribers:
        reads |= {_topic(getattr(t, "name", t)) for t in sub.topics}
    source = "\n".join(p.read_text() for p in (REPO / "services" / service).glob("*.py"))
    # Every direct publish, e.g. Coach's at-once reply: `publish(Topic.COACH_REPLIES, ...)`.
    writes |= {Topic[m] for m in re.findall(r"(?:publish|tombstone)\(\s*Topic\.(\w+)", source)}
    # Topics read by name (tails, feeds): every other topic the code names.
    mentioned = {Topic[m] for m in re.findall(r"\bTopic\.(\w+)", source)}
    if "AGENT_TOPICS" in source:
        mentioned |= set(AGENT_TOPICS.values())
    reads |= mentioned - writes
    if service in AGENT_TOPICS:  # the agent's own output tail (runtime.agent)
        reads.add(AGENT_TOPICS[service])
    grouped = bool(runtime.dispatchers)
    if grouped:  # the runtime dead-letters and escalates for every consumer
        writes |= {Topic.DLQ, Topic.HUMAN_REVIEW}
    if runtime.state.stores:  # and an owner of state confirms erasures (bus.service_state)
        writes.add(Topic.ERASE_CONFIRMATIONS)
    return writes, reads, grouped


def test_every_service_has_its_principal() -> None:
    assert sorted(ACCESS) == sorted(SERVICES)


def test_readers_of_shadows_board() -> None:
    # Shadow owns the primary pattern; every agent that uses it reads the board itself
    # (Plasticity included: Persona's copy of it lags a turn or two).
    readers = {s for s, a in ACCESS.items() if Topic.BLACKBOARD in a.reads}
    assert readers == set(WORKERS)
    assert writers(Topic.BLACKBOARD) == {"shadow"}


@pytest.mark.parametrize("service", sorted(ACCESS))
def test_table_matches_the_services_wiring(service: str) -> None:
    writes, reads, grouped = _wiring(service)
    access = ACCESS[service]
    assert set(access.writes) == writes, "grant exactly what the code writes"
    assert reads <= set(access.reads), "every topic the code reads is granted"
    # No read grant beyond what the code names (own writes aside: stores reload).
    assert set(access.reads) - reads <= writes
    assert access.consumer_group == grouped


def test_the_issue_rules() -> None:
    assert writers(Topic.USER_MESSAGES) == {"gateway"}  # messages and erase requests
    assert writers(Topic.ERASURES) == {"gateway"}
    # Only Synth (finals) and the review endpoint write replies; Coach's at-once
    # pieces have a topic of their own (see acl.py).
    assert writers(Topic.REPLIES) == {"synth", "gateway"}
    assert writers(Topic.COACH_REPLIES) == {"coach"}
    for topic in COMPACTED:
        assert len(writers(topic)) == 1, f"one writer per state topic: {topic}"
    for name, topic in AGENT_TOPICS.items():
        assert writers(topic) == {name}
    assert writers(Topic.HUMAN_REVIEW) == set(AGENT_TOPICS) | {"synth"}


# --- the generated script ---------------------------------------------------------

_ACL = re.compile(r"^acl (.*)$", re.MULTILINE)


def parse_script(text: str) -> set[tuple[str, str, str, str, str]]:
    """(principal, resource, name, operation, pattern) for every grant the script makes."""
    grants = set()
    for match in _ACL.finditer(text):
        args = re.findall(r'"[^"]*"|\S+', match.group(1))
        it = iter(args)
        principal = operation = ""
        pattern = "literal"
        names: list[tuple[str, str]] = []
        for flag in it:
            value = next(it).strip('"').replace("${TOPIC_PREFIX}", PREFIX)
            if flag == "--allow-principal":
                principal = value
            elif flag == "--operation":
                operation = value
            elif flag == "--resource-pattern-type":
                pattern = value
            elif flag in ("--topic", "--group"):
                names.append((flag[2:], value))
            else:
                raise AssertionError(f"unexpected flag {flag}")
        grants |= {(principal, res, name, operation, pattern) for res, name in names}
    return grants


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.parent.name)
def test_generated_scripts_are_current(path: Path) -> None:
    assert path.read_text() == render_script(), "run `make acls` after changing coachbus.acl"


def test_script_grants_each_service_only_its_own_topics() -> None:
    grants = parse_script(render_script())
    write = {(p, n) for p, r, n, op, pat in grants if op == "Write"}
    for access in ACCESS.values():
        mine = {n for p, n in write if p == f"User:{access.principal}"}
        assert mine == {PREFIX + t.value for t in access.writes}, access.service
    # No wildcard or prefixed write, read or group grant anywhere.
    for p, _r, n, op, pat in grants:
        if pat == "prefixed":
            assert op in {"Describe", "Create", "DescribeConfigs", "AlterConfigs"}, (p, op)
            if op != "Describe":
                assert p == f"User:{OPS_PRINCIPAL}"
        assert "*" not in n and "*" not in p

    def writers_of(topic: Topic) -> set[str]:
        return {p for p, n in write if n == PREFIX + topic.value}

    assert writers_of(Topic.USER_MESSAGES) == {"User:coachbus-gateway"}
    assert writers_of(Topic.REPLIES) == {
        "User:coachbus-gateway",
        "User:coachbus-synth",
    }
    assert writers_of(Topic.COACH_REPLIES) == {"User:coachbus-coach"}
    groups = {(p, n) for p, r, n, op, pat in grants if r == "group" and op == "Read"}
    assert groups == {
        (f"User:coachbus-{s}", PREFIX + s) for s, a in ACCESS.items() if a.consumer_group
    }
    assert not any(
        p == f"User:{OPS_PRINCIPAL}" and op in {"Read", "Write"} for p, _r, _n, op, _pat in grants
    )


def test_script_creates_a_scram_user_per_principal() -> None:
    text = render_script()
    users = re.findall(r"^user (\S+) ", text, re.MULTILINE)
    assert users == principals()
    assert set(users) == {f"coachbus-{s}" for s in ACCESS} | {OPS_PRINCIPAL}
