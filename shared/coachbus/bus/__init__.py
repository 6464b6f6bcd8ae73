"""The bus runtime every service runs on: key-ordered dispatch, dead-lettering,
compacted-topic state, topic administration and the service app factory."""

from __future__ import annotations

from typing import Any


def _never_auto_create_topics() -> None:
    """Make every aiokafka client in the process ask for metadata without creating
    topics. aiokafka offers no setting for it (its metadata requests always allow
    auto-creation), and a topic that a reconnecting client recreates gets the
    broker's default partition count instead of ours, which breaks co-partitioning.
    Topics are created by ``coachbus.bus.admin.ensure_topics`` only."""
    from aiokafka.protocol import metadata

    original = metadata.MetadataRequest.__init__
    if getattr(original, "_coachbus", False):
        return

    def init(
        self: Any, topics: list[str] | None = None, allow_auto_topic_creation: bool | None = False
    ) -> None:
        original(self, topics, allow_auto_topic_creation)

    init._coachbus = True  # type: ignore[attr-defined]
    metadata.MetadataRequest.__init__ = init


_never_auto_create_topics()
