"""Who may read and write which topic: the one list every deployment's Kafka ACLs
and SCRAM users are generated from (``make acls`` runs ``python -m coachbus.acl
render``; docs/deploy.md).

Each service is its own Kafka principal (``coachbus-<service>``) and may write only
the topics its code writes: its agent topic, the state it alone owns, the DLQ and
human-review queue every consumer may fill. Only the gateway writes user-messages
(user messages, session ends and erase requests all travel there) and the erase
watermarks (``erasures``), so no other principal can forge a user's words or erase
someone else. ``replies`` is written by
Synth (finals) and the gateway (the review endpoint's ``human`` answers) only;
Coach's at-once ``coach``/``coach_delta`` pieces go to ``coach-replies``, and the
gateway shows from each topic only the kinds its writer may send, so a Coach
credential cannot forge a final or a human answer. ACLs cannot see a record's
kind, so what keeps the gateway to ``human`` replies is its code, not the broker.
Only the gateway writes ``review-actions`` and ``review-audit`` (reviewers act
through its API) and reads ``user-messages`` back (a reviewer sees the session).

``tests/shared/test_acl.py`` checks this table against the services' wiring (stores,
views, subscribers, publishers and every ``publish(Topic.X)``), so a service that
starts writing a new topic fails the suite until it is granted here.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from coachbus.roster import GATEWAY, SYNTH
from coachbus.topics import AGENT_TOPICS, Topic

# Every consumer may dead-letter (the runtime does it for records that do not parse)
# and escalate to a human (the LLM router does it).
_CONSUMER_WRITES = frozenset({Topic.DLQ, Topic.HUMAN_REVIEW})
# An owner of user state confirms each erase after its tombstones (bus.service_state).
_OWNER_WRITES = frozenset({Topic.ERASE_CONFIRMATIONS})
# Every process tails the erase watermarks (bus.erasure) to drop erased users' records.
_EVERYONE_READS = frozenset({Topic.ERASURES})


@dataclass(frozen=True, slots=True)
class ServiceAccess:
    service: str
    writes: frozenset[Topic]
    reads: frozenset[Topic]
    # Consumers in a group (range assignment, committed offsets); the gateway only
    # assigns partitions and commits nothing.
    consumer_group: bool = True

    @property
    def principal(self) -> str:
        return f"coachbus-{self.service}"


def _agent(name: str, *, owns: set[Topic], views: set[Topic]) -> ServiceAccess:
    output = AGENT_TOPICS[name]
    return ServiceAccess(
        service=name,
        writes=frozenset({output, *owns}) | _CONSUMER_WRITES | (_OWNER_WRITES if owns else set()),
        # Its own output: on assignment it re-reads the tail to skip turns it answered.
        reads=frozenset({Topic.USER_MESSAGES, output, *owns, *views}) | _EVERYONE_READS,
    )


ACCESS: dict[str, ServiceAccess] = {
    access.service: access
    for access in (
        ServiceAccess(
            service=GATEWAY,
            # user-messages carries erase requests too; erasures are the watermarks.
            # Reviewers' actions and their audit are the gateway's alone.
            writes=frozenset(
                {
                    Topic.USER_MESSAGES,
                    Topic.REPLIES,
                    Topic.ERASURES,
                    Topic.REVIEW_ACTIONS,
                    Topic.REVIEW_AUDIT,
                }
            ),
            reads=frozenset(
                {
                    # The person's own words, for the reviewer's view of the session.
                    Topic.USER_MESSAGES,
                    Topic.REVIEW_ACTIONS,
                    Topic.REPLIES,
                    Topic.COACH_REPLIES,
                    Topic.HUMAN_REVIEW,
                    Topic.ERASE_CONFIRMATIONS,
                    *AGENT_TOPICS.values(),
                }
            )
            | _EVERYONE_READS,
            consumer_group=False,
        ),
        _agent("shadow", owns={Topic.BLACKBOARD}, views={Topic.MEMORY}),
        _agent("persona", owns={Topic.PROFILES}, views={Topic.BLACKBOARD, Topic.MEMORY}),
        _agent("plasticity", owns=set(), views={Topic.PROFILES, Topic.BLACKBOARD}),
        _agent("stability", owns={Topic.SAFETY}, views={Topic.BLACKBOARD, Topic.MEMORY}),
        ServiceAccess(
            service="coach",
            writes=frozenset({Topic.COACH, Topic.COACH_REPLIES}) | _CONSUMER_WRITES,
            reads=frozenset(
                {Topic.USER_MESSAGES, Topic.COACH, Topic.BLACKBOARD, Topic.SAFETY, Topic.MEMORY}
            )
            | _EVERYONE_READS,
        ),
        ServiceAccess(
            service=SYNTH,
            writes=frozenset({Topic.REPLIES, Topic.MEMORY}) | _CONSUMER_WRITES | _OWNER_WRITES,
            # Replies: on assignment it re-reads the tail to recognise finals it sent.
            reads=frozenset(
                {Topic.USER_MESSAGES, Topic.REPLIES, Topic.MEMORY, *AGENT_TOPICS.values()}
            )
            | _EVERYONE_READS,
        ),
    )
}

# The principal of `coachbus topics create` (and KEDA's lag reader): creates topics
# and sets their configs, reads no record.
OPS_PRINCIPAL = "coachbus-ops"


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    principal: str
    resource: str  # topic, group or cluster
    name: str  # the prefix when pattern is "prefixed"
    operation: str
    pattern: str = "literal"


def writers(topic: Topic) -> set[str]:
    return {a.service for a in ACCESS.values() if topic in a.writes}


def acl_entries(prefix: str) -> list[Acl]:
    """The ACLs to grant (deny is Kafka's default once an authorizer is on)."""
    out: set[Acl] = set()
    for access in ACCESS.values():
        who = f"User:{access.principal}"
        for topic in access.writes:
            out.add(Acl(who, "topic", prefix + topic.value, "Write"))
        for topic in access.reads:
            out.add(Acl(who, "topic", prefix + topic.value, "Read"))
        # Every service checks at start that all topics exist with the same partition
        # count (bus.admin.ensure_topics): metadata only, no record content.
        out.add(Acl(who, "topic", prefix, "Describe", "prefixed"))
        if access.consumer_group:
            out.add(Acl(who, "group", prefix + access.service, "Read"))
    ops = f"User:{OPS_PRINCIPAL}"
    for operation in ("Create", "Describe", "DescribeConfigs", "AlterConfigs"):
        out.add(Acl(ops, "topic", prefix, operation, "prefixed"))
    out.add(Acl(ops, "group", prefix, "Describe", "prefixed"))  # KEDA's lag
    return sorted(out)


def principals() -> list[str]:
    return sorted([OPS_PRINCIPAL, *(a.principal for a in ACCESS.values())])


def password_variable(principal: str) -> str:
    """The env var carrying a principal's SCRAM password in deploy jobs."""
    return "KAFKA_PASSWORD_" + principal.removeprefix("coachbus-").upper()


_RESOURCE_FLAG = {"topic": "--topic", "group": "--group"}


def render_script(prefix_var: str = "TOPIC_PREFIX") -> str:
    """A POSIX shell script for the apache/kafka image: SCRAM users with
    kafka-configs.sh, then the ACLs with kafka-acls.sh. Idempotent (both tools
    add what is missing). The topic prefix stays a variable so one generated file
    serves every deployment."""
    lines = [
        "#!/bin/sh",
        "# GENERATED by `make acls` from shared/coachbus/acl.py: do not edit.",
        "# Needs: BOOTSTRAP (admin listener), COMMAND_CONFIG (admin client properties),",
        "# TOPIC_PREFIX, and KAFKA_PASSWORD_<SERVICE> for every principal below.",
        "set -eu",
        ': "${BOOTSTRAP?}" "${COMMAND_CONFIG?}"',
        f'{prefix_var}="${{{prefix_var}:-coachbus.}}"',
        'BIN="${KAFKA_BIN:-/opt/kafka/bin}"',
        "",
        "user() {",
        '  "$BIN/kafka-configs.sh" --bootstrap-server "$BOOTSTRAP" \\',
        '    --command-config "$COMMAND_CONFIG" --alter --entity-type users --entity-name "$1" \\',
        '    --add-config "SCRAM-SHA-512=[iterations=8192,password=$2]"',
        "}",
        "acl() {",
        '  "$BIN/kafka-acls.sh" --bootstrap-server "$BOOTSTRAP" \\',
        '    --command-config "$COMMAND_CONFIG" --add --force "$@"',
        "}",
        "",
    ]
    for principal in principals():
        var = password_variable(principal)
        lines.append(f'user {principal} "${{{var}:?{var} is not set}}"')
    lines.append("")
    # One kafka-acls.sh call (a JVM start) per principal, resource and operation, with
    # every name of that kind. Names are the prefix (a variable) and a topic or service
    # name, both limited to [A-Za-z0-9._-] (settings.topic_prefix's pattern): safe
    # inside double quotes.
    grouped: dict[tuple[str, str, str, str], list[str]] = {}
    for entry in acl_entries(""):
        key = (entry.principal, entry.resource, entry.pattern, entry.operation)
        grouped.setdefault(key, []).append(entry.name)
    for (principal, resource, pattern, operation), names in grouped.items():
        args = ["--allow-principal", principal, "--operation", operation]
        if pattern != "literal":
            args += ["--resource-pattern-type", pattern]
        for name in names:
            args += [_RESOURCE_FLAG[resource], f'"${{{prefix_var}}}{name}"']
        lines.append("acl " + " ".join(args))
    lines.append('echo "kafka users and ACLs in place"')
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coachbus acl", description=__doc__)
    parser.add_argument("action", choices=["render"], help="print the users/ACL shell script")
    parser.parse_args(argv)
    sys.stdout.write(render_script())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
