"""Decoding with a reason for every way a message can be wrong."""

from __future__ import annotations

import pytest

from coachbus.bus.codec import DecodeError, decode
from coachbus.contracts import UserInputAdapter, UserMessage

pytestmark = pytest.mark.unit


def _good() -> bytes:
    return (
        UserMessage.create(
            user_id="u", session_id="s", text="hello", deadline_ms=1, max_tokens=1, wall_clock_ms=1
        )
        .model_dump_json()
        .encode()
    )


@pytest.mark.parametrize(
    ("raw", "error_type"),
    [
        (None, "empty"),
        (b"", "empty"),
        (b"\xff\xfe", "bad_utf8"),
        (b"{oops", "not_json"),
        (b"[" * 100 + b"]" * 100, "too_deep"),
        (b'{"schema_version": 3, "kind": "message"}', "schema_version"),
        (b'{"kind": "message", "text": "no ids"}', "schema"),
        (b'{"kind": "launch-missiles"}', "schema"),
        (b"x" * 70_000, "too_large"),
    ],
)
def test_bad_input_has_a_reason(raw: bytes | None, error_type: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(raw, UserInputAdapter, max_bytes=65_536)
    assert info.value.error_type == error_type
    assert info.value.reason


def test_good_input_decodes() -> None:
    message = decode(_good(), UserInputAdapter, max_bytes=65_536)
    assert isinstance(message, UserMessage)
    assert message.text == "hello"


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    message = UserMessage.create(
        user_id="u",
        session_id="s",
        text="[[[[" * 40,
        deadline_ms=1,
        max_tokens=1,
        wall_clock_ms=1,
    )
    decoded = decode(message.model_dump_json().encode(), UserInputAdapter, max_bytes=65_536)
    assert decoded.text == message.text  # type: ignore[union-attr]


def test_depth_is_measured_only_past_the_cheap_bound() -> None:
    from coachbus.bus.codec import MAX_DEPTH, _too_deep

    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert not _too_deep(at_limit)
    assert _too_deep(b"[" + at_limit + b"]")
    # Many brackets side by side (or inside strings) are wide, not deep.
    wide = b"[" + b",".join(b"[1]" for _ in range(3 * MAX_DEPTH)) + b"]"
    assert not _too_deep(wide)
    assert not _too_deep(b'{"a": "' + b"[{" * MAX_DEPTH + b'"}')
