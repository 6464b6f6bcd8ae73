"""The shared streaming machinery (coachbus.reply_stream): Synth's sentence publisher,
the per-sentence check, and StreamingLLM completing a stream that ended early."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from coachbus.contracts import Reply, Usage
from coachbus.llm import ChatRequest, ChatResult, EstimateCounter, OutputError
from coachbus.reply_stream import SentencePublisher, StreamingLLM, Withheld, partial_check

pytestmark = pytest.mark.unit

TEXT = (
    "Thanks for telling me how the thesis is going. It sounds like tidying feels safer "
    "than writing.  What if you wrote one rough paragraph tomorrow?\nWhich time suits you?"
)


def _tokens(text: str) -> list[str]:
    words = text.split(" ")
    return [words[0], *(" " + w for w in words[1:])]


class Shown:
    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, piece: str, seq: int) -> None:
        assert seq == len(self.pieces)
        self.pieces.append(piece)


async def _feed(sink: SentencePublisher, text: str) -> list[str]:
    sink.start_attempt()
    await sink.open()  # shows the opening, if the sink has one
    for token in _tokens(text):
        errors = await sink.feed(token)
        if errors:
            return errors
    return await sink.end()


async def test_sentences_go_out_whole_and_join_to_the_normalised_text() -> None:
    shown, checked = Shown(), []

    def check(text: str) -> list[str]:
        checked.append(text)
        return []

    # No burst gap: each sentence is a piece of its own, as at a model's reading pace.
    sink = SentencePublisher(shown, check, gap_s=0)
    assert await _feed(sink, TEXT) == []
    assert shown.pieces == [
        "Thanks for telling me how the thesis is going.",
        " It sounds like tidying feels safer than writing.",
        " What if you wrote one rough paragraph tomorrow?",
        " Which time suits you?",
    ]
    assert "".join(shown.pieces) == sink.shown == " ".join(TEXT.split())
    # Every piece was checked with all the text before it, before it went out.
    assert checked[-1] == sink.shown
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(checked))


async def test_nothing_is_shown_before_the_language_can_be_told() -> None:
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [], min_words=6)
    assert await _feed(sink, "Okay. I see. Let us look at this together now.") == []
    # The two short sentences wait for the third: one piece of ten words.
    assert shown.pieces == ["Okay. I see. Let us look at this together now."]
    # A reply that never reaches min_words still goes out when it ends.
    short = Shown()
    tiny = SentencePublisher(short, lambda _t: [])
    assert await _feed(tiny, "Well done.") == []
    assert short.pieces == ["Well done."]


async def test_a_failing_sentence_ends_the_stream_before_it_is_shown() -> None:
    shown = Shown()
    check = partial_check(language="en", register="informal", markers=["quit your job"])
    sink = SentencePublisher(shown, check)
    text = (
        "Thanks for telling me how the thesis is going. It sounds like a hard week. "
        "Maybe you should quit your job and write full time. Which day suits you?"
    )
    errors = await _feed(sink, text)
    assert errors and "blocked step" in errors[0]
    assert sink.shown == (
        "Thanks for telling me how the thesis is going. It sounds like a hard week."
    )
    # The second sentence came in the first one's burst and was held; it passed its
    # check, so the failing third releases it before the stream ends.
    assert shown.pieces == [
        "Thanks for telling me how the thesis is going.",
        " It sounds like a hard week.",
    ]
    assert "quit" not in "".join(shown.pieces)


async def test_a_marker_across_a_sentence_boundary_is_judged_with_what_came_before() -> None:
    seen: list[str] = []

    def check(text: str) -> list[str]:
        seen.append(text)
        return ["artefact"] if "notes. Shadow" in text else []

    sink = SentencePublisher(Shown(), check)
    errors = await _feed(sink, "You keep tidying your notes. Shadow says so, and more.")
    assert errors == ["artefact"]
    assert sink.shown == ""  # five words: still held back when the check failed


async def test_the_word_budget_ends_the_stream_at_the_sentence_that_would_break_it() -> None:
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [], max_words=17)
    errors = await _feed(sink, TEXT)
    assert errors and "too long" in errors[0]
    assert sink.shown == (
        "Thanks for telling me how the thesis is going. It sounds like tidying feels "
        "safer than writing."
    )


async def test_a_repair_attempt_after_pieces_were_shown_is_not_streamed() -> None:
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [])
    await _feed(sink, "Thanks for telling me how it is going. More follows here.")
    assert sink.showing
    before = list(shown.pieces)
    assert await _feed(sink, "A different second attempt with its own words. And more.") == []
    assert shown.pieces == before and not sink.showing


async def test_the_partial_check_judges_register_and_artefacts_not_length() -> None:
    check = partial_check(language="de", register="formal")
    assert check("Danke, dass Sie mir das erzählen.") == []
    assert any("register" in p for p in check("Danke, dass du mir das erzählst, wirklich gut."))
    assert any(
        "artefact" in p
        for p in partial_check(language="en", register="informal")(
            "The blackboard says you are doing well with this."
        )
    )


# --------------------------------------------------------------------------- StreamingLLM


class Draft(BaseModel):
    text: str


class FakeStream:
    def __init__(self, pieces: list[str], req: ChatRequest) -> None:
        self._pieces = pieces
        self._req = req
        self.result: ChatResult | None = None

    async def __aenter__(self) -> FakeStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[str]:
        for piece in self._pieces:
            yield piece
        self.result = ChatResult(
            text="".join(self._pieces),
            parsed=None,
            usage=Usage(prompt_tokens=10, completion_tokens=len(self._pieces), llm_calls=1),
            latency_s=0.1,
            ttft_s=0.01,
            finish_reason="stop",
            model="m",
            tier=self._req.tier,
            agent=self._req.agent,
        )


class FakeClient:
    enabled = True
    counter = EstimateCounter()

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[ChatRequest] = []

    def has_tier(self, tier: str) -> bool:
        return True

    def stream(self, req: ChatRequest) -> FakeStream:
        self.requests.append(req)
        return FakeStream(_tokens(self.text), req)


def _req() -> ChatRequest:
    return ChatRequest(
        agent="synth",
        tier="small",
        messages=[{"role": "user", "content": "hi"}],
        response_model=Draft,
        max_tokens=200,
    )


def _live(
    text: str, opening: str = "", gap_s: float = 0.02, **kwargs: Any
) -> tuple[StreamingLLM, SentencePublisher, Shown, FakeClient]:
    shown = Shown()
    check = partial_check(language="en", register="informal")
    sink = SentencePublisher(shown, check, opening=opening, gap_s=gap_s)
    client = FakeClient(text)
    live = StreamingLLM(client, sink, lambda t: Draft(text=t), **kwargs)  # type: ignore[arg-type]
    return live, sink, shown, client


async def test_a_stream_that_fails_after_showing_is_completed_not_retracted() -> None:
    text = (
        "Thanks for telling me how the thesis is going. It sounds like a hard week. "
        "Shadow noticed it. Which day suits you?"
    )
    live, sink, shown, client = _live(text, complete=lambda s: s + " Completed here.")
    result = await live.chat(_req())
    assert result.text == sink.shown + " Completed here."
    assert isinstance(result.parsed, Draft) and result.parsed.text == result.text
    assert "".join(shown.pieces) == sink.shown and "Shadow" not in sink.shown
    # The request streamed plain text: no JSON schema, no thinking.
    assert client.requests[0].response_model is None and client.requests[0].thinking is False
    assert live.tier == "small"


async def test_a_failure_with_nothing_shown_is_an_ordinary_failed_attempt() -> None:
    live, sink, shown, _client = _live(
        "Shadow says hello to you today and every day. More text follows.",
        complete=lambda s: s + " X.",
    )
    with pytest.raises(OutputError) as caught:
        await live.chat(_req())
    assert "agent name" in caught.value.errors[0]
    assert caught.value.result.finish_reason == "abort"
    assert shown.pieces == [] and not sink.streamed


async def test_a_whole_text_that_fails_after_showing_is_completed() -> None:
    text = "Thanks for telling me how the thesis is going. Good."
    live, sink, _shown, _client = _live(
        text, complete=lambda s: s + " And more words.", whole=lambda t: ["too short"]
    )
    result = await live.chat(_req())
    assert sink.shown == text and result.text == text + " And more words."


async def test_without_complete_a_failure_fails_the_attempt_as_for_the_coach() -> None:
    text = "Thanks for telling me how the thesis is going. Shadow noticed it."
    live, sink, _shown, _client = _live(text)
    with pytest.raises(OutputError):
        await live.chat(_req())
    assert sink.streamed


OPENING = "A goal for your studies, good: let's give it a shape you can start on this week."
CONTINUATION = "It sounds like tidying feels safer than writing. Which day suits you?"


async def test_the_opening_is_shown_before_the_first_token_and_the_model_continues_it() -> None:
    live, sink, shown, _client = _live(CONTINUATION, opening=OPENING)

    # The opening is published when the attempt starts, before the stream is read.
    class Watching(FakeClient):
        def stream(self, req: ChatRequest) -> FakeStream:
            assert shown.pieces == [OPENING], "the opening must be out before the first token"
            return super().stream(req)

    live._client = Watching(CONTINUATION)  # type: ignore[assignment]
    result = await live.chat(_req())
    assert shown.pieces[0] == OPENING
    assert "".join(shown.pieces) == sink.shown == f"{OPENING} {CONTINUATION}"
    assert result.text == sink.shown  # the reply is the opening and its continuation
    assert isinstance(result.parsed, Draft) and result.parsed.text == result.text
    assert sink.streamed_model and sink.opened


async def test_a_first_sentence_that_restates_the_opening_is_left_out() -> None:
    restated = "A goal for your studies: good, let's give it a shape you can start this week. "
    live, _sink, shown, _client = _live(restated + CONTINUATION, opening=OPENING)
    result = await live.chat(_req())
    assert result.text == f"{OPENING} {CONTINUATION}"
    assert "".join(shown.pieces) == result.text


async def test_the_opening_counts_towards_the_budget_and_every_check() -> None:
    shown = Shown()
    checked: list[str] = []

    def check(text: str) -> list[str]:
        checked.append(text)
        return []

    # 17 words of opening: an 18-word budget leaves room for no sentence of the model's.
    sink = SentencePublisher(shown, check, max_words=18, opening=OPENING)
    errors = await _feed(sink, CONTINUATION)
    assert errors and "too long" in errors[0]
    assert shown.pieces == [OPENING]
    sink2 = SentencePublisher(Shown(), check, opening=OPENING)
    assert await _feed(sink2, CONTINUATION) == []
    assert all(text.startswith(OPENING) for text in checked)


async def test_a_first_sentence_failing_after_the_opening_is_repaired_and_streamed() -> None:
    """Only the opening was shown: the failed attempt is an ordinary failure (the
    router repairs), and the repair attempt still streams, after the opening."""
    live, sink, shown, client = _live(
        "Shadow noticed a pattern here. " + CONTINUATION,
        opening=OPENING,
        gap_s=0,
        complete=lambda s: s,
    )
    with pytest.raises(OutputError):
        await live.chat(_req())
    assert shown.pieces == [OPENING] and sink.opened and not sink.streamed_model
    client.text = CONTINUATION
    result = await live.chat(_req())
    assert result.text == f"{OPENING} {CONTINUATION}"
    assert shown.pieces == [OPENING, f" {CONTINUATION.split('. ')[0]}.", " Which day suits you?"]
    assert "".join(shown.pieces) == result.text


async def test_the_opening_is_shown_once_whatever_the_attempts() -> None:
    live, _sink, shown, client = _live("Shadow says hi. More.", opening=OPENING)
    for _ in range(3):
        with pytest.raises(OutputError):
            await live.chat(_req())
    assert shown.pieces == [OPENING]
    assert client.requests and len(client.requests) == 3


def test_a_final_delta_is_a_v2_reply_with_a_seq() -> None:
    piece = Reply(turn_id="t", session_id="s", user_id="u", kind="final_delta", text="Hi.", seq=0)
    assert piece.schema_version == 2
    assert Reply.model_validate_json(piece.model_dump_json()) == piece
    final = Reply(turn_id="t", session_id="s", user_id="u", kind="final", text="Hi.")
    assert final.schema_version == 1
    with pytest.raises(ValueError, match="v2 reply with a seq"):
        Reply.model_validate({**piece.model_dump(mode="json"), "schema_version": 1})
    with pytest.raises(ValueError, match="v2 reply with a seq"):
        Reply(turn_id="t", session_id="s", user_id="u", kind="final_delta", text="Hi.")


async def test_a_json_wrapped_answer_is_unwrapped_then_checked_and_shown_whole() -> None:
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [], json_field="text")
    answer = '{"text": "Thanks for telling me how it is going. Which day suits you?"}'
    assert await _feed(sink, answer) == []
    assert sink.text == "Thanks for telling me how it is going. Which day suits you?"
    assert "".join(shown.pieces) == sink.text
    bad = SentencePublisher(Shown(), lambda _t: [], json_field="text")
    assert await _feed(bad, '{"answer": "no text field here"}')


async def test_a_burst_of_sentences_goes_out_as_one_piece_after_the_first() -> None:
    """The instant model's sentences arrive in one read: the first is shown at once,
    the rest as one piece at the end, not one record per sentence."""
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [])
    assert await _feed(sink, TEXT) == []
    assert shown.pieces == [
        "Thanks for telling me how the thesis is going.",
        " It sounds like tidying feels safer than writing. What if you wrote one rough "
        "paragraph tomorrow? Which time suits you?",
    ]
    assert "".join(shown.pieces) == " ".join(TEXT.split())


async def test_sentences_further_apart_than_the_gap_are_never_held() -> None:
    shown = Shown()
    sink = SentencePublisher(shown, lambda _t: [], gap_s=0.005)
    sink.start_attempt()
    for sentence in ("Thanks for telling me how it is going. ", "That sounds hard. ", "Well."):
        for token in _tokens(sentence):
            await sink.feed(token)
        await asyncio.sleep(0.01)  # a model at reading pace: longer than the gap
    # The first two went out as they were complete; the last (no white space after
    # it yet) waits for the end of the stream.
    assert shown.pieces == ["Thanks for telling me how it is going.", " That sounds hard."]
    assert await sink.end() == []
    assert shown.pieces[-1] == " Well."


async def test_a_held_sink_shows_the_opening_and_keeps_the_sentences_for_the_whole_reply() -> None:
    """On a turn the reply guard's model reads first: the opening goes out at once, the
    model's sentences are checked as they come and shown only with the whole reply."""
    shown, checked = Shown(), []

    def check(text: str) -> list[str]:
        checked.append(text)
        return []

    sink = SentencePublisher(shown, check, opening=OPENING, gap_s=0, hold=True)
    assert await _feed(sink, TEXT) == []
    assert shown.pieces == [OPENING]
    assert sink.streamed and not sink.streamed_model and not sink.showing
    assert sink.reply == f"{OPENING} {' '.join(TEXT.split())}"
    assert checked[-1] == sink.reply  # every sentence was still checked as it came


async def test_a_withheld_sink_shows_nothing_and_stops_at_a_failing_sentence() -> None:
    checked: list[str] = []

    def check(text: str) -> list[str]:
        checked.append(text)
        return ["blocked"] if "tomorrow" in text else []

    sink = Withheld(check)
    sink.start_attempt()
    errors: list[str] = []
    for token in _tokens(TEXT):
        errors = await sink.feed(token)
        if errors:
            break
    assert errors == ["blocked"]
    assert "Which time" not in sink.text  # nothing more was read after the failure
    assert sink.seq == 0 and checked
