"""The Coach's delta publisher: batched pieces, each checked before it is shown."""

from __future__ import annotations

import pytest

from services.coach.stream import DeltaPublisher

pytestmark = pytest.mark.unit

TEXT = (
    "That sounds like a real plan. Start with two short runs this week and keep them easy. "
    "Pick the days now, so the decision is already made when the day comes. "
    "Which two days fit your week best?"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tokens(text: str) -> list[str]:
    words = text.split(" ")
    return [words[0], *(" " + w for w in words[1:])]


async def _stream(
    text: str, check_for: str | None = None
) -> tuple[DeltaPublisher, dict[str, object]]:
    clock = Clock()
    shown: list[str] = []
    checked: list[str] = []

    async def publish(piece: str, seq: int) -> None:
        assert seq == len(shown)
        shown.append(piece)

    def check(so_far: str) -> list[str]:
        checked.append(so_far)
        return ["blocked step"] if check_for and check_for in so_far else []

    sink = DeltaPublisher(publish, check, holdback=4, min_words=6, batch_s=0.08, clock=clock)
    sink.start_attempt()
    errors: list[str] = []
    for token in _tokens(text):
        clock.now += 0.01  # 100 tokens a second
        errors = await sink.feed(token)
        if errors:
            break
    if not errors:
        await sink.finish()
    return sink, {"shown": shown, "checked": checked, "errors": errors}


async def test_pieces_are_batched_and_every_shown_prefix_was_checked_first() -> None:
    _sink, out = await _stream(TEXT)
    shown, checked = out["shown"], out["checked"]
    assert isinstance(shown, list) and isinstance(checked, list)
    assert "".join(shown) == TEXT
    tokens = len(_tokens(TEXT))
    assert 2 <= len(shown) < tokens // 3
    # Checked at publishing points only, not once per token over the whole text.
    assert len(checked) < tokens // 2
    prefix = ""
    for piece in shown[:-1]:  # the last piece is the accepted whole (finish)
        prefix += piece
        assert any(c.startswith(prefix) for c in checked), prefix


async def test_a_bad_sentence_aborts_before_it_is_shown() -> None:
    bad = "That sounds good. Run every day no matter the pain. Then rest."
    _sink, out = await _stream(bad, check_for="every day")
    assert out["errors"] == ["blocked step"]
    shown = out["shown"]
    assert isinstance(shown, list)
    assert "every" not in "".join(shown)


async def test_nothing_is_shown_before_enough_words_to_judge_the_language() -> None:
    _sink, out = await _stream("Yes. Go. Now. Good.")
    shown = out["shown"]
    assert isinstance(shown, list)
    assert shown == ["Yes. Go. Now. Good."]  # only the accepted whole, at finish


async def _pieces(token_gap_s: float) -> list[str]:
    clock = Clock()
    shown: list[str] = []

    async def publish(piece: str, seq: int) -> None:
        shown.append(piece)

    sink = DeltaPublisher(publish, lambda _t: [], min_words=3, batch_s=0.08, clock=clock)
    sink.start_attempt()
    clock.now = 0.3  # the first token comes after the time to first token
    for token in _tokens(TEXT):
        clock.now += token_gap_s
        await sink.feed(token)
    await sink.finish()
    assert "".join(shown) == TEXT
    return shown


async def test_a_burst_of_sentences_is_one_piece_after_the_first() -> None:
    """A fast model (or a stream that resumes after a stall) delivers several
    sentences at once: the first sentence goes out at once, the rest of the burst
    as one piece, not one record per sentence."""
    burst = await _pieces(0.0)
    assert burst == [TEXT[: TEXT.index(". ") + 1], TEXT[TEXT.index(". ") + 1 :]]
    # Tokens spread out: every sentence end publishes once the gap has passed.
    spread = await _pieces(0.03)
    assert len(spread) > 2
