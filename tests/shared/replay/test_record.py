"""Reading a recording (coachbus.replay.record): turns assembled oldest first, filtered
by user, time and count, erased users left out; a saved file reads back the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from coachbus.replay.record import assemble, load_file, save
from tests.fixtures.recording import recording

pytestmark = pytest.mark.unit


def test_assemble_filters_users_time_limit_and_erased() -> None:
    lines = recording("ann")
    turns = assemble(lines)
    assert [t.turn_id for t in turns] == ["rec-ann-0", "rec-ann-1", "rec-ann-2"]
    assert "gone" not in {t.user_id for t in turns}
    assert [t.turn_id for t in assemble(lines, limit=1)] == ["rec-ann-0"]
    assert assemble(lines, users=["nobody"]) == []
    assert assemble(lines, since=turns[1].created_at)[0].turn_id == "rec-ann-1"
    assert turns[2].results["stability"]["payload"]["crisis"]["category"] == "suicidal_ideation"


def test_a_saved_recording_reads_back_the_same(tmp_path: Path) -> None:
    lines = recording("ann")
    path = tmp_path / "recording.jsonl"
    save(lines, path)
    assert load_file(path) == lines


def test_a_line_that_is_not_a_recording_names_its_place(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"topic": "replies", "value": {}}\n{"value": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl:2"):
        load_file(path)
