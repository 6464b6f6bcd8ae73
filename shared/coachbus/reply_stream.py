"""Streaming a reply to the user while an LLM writes it, checked before it is shown.

The router decides whether an LLM tier carries a reply and runs its bounded repair
loop; it asks its client for one whole answer per attempt. A service that streams
gives its router a :class:`StreamingLLM` instead of the plain client: each attempt
is streamed as text and its pieces go to a sink, which checks the text so far
before anything is shown and publishes the pieces as delta replies. Two sinks:

* :class:`DeltaPublisher` (the Coach's ``coach_delta``): batches of about 80 ms or
  a sentence end, never per token nor per sentence of a burst; a tail that could
  hold half of a blocked-step marker is held back.
* :class:`SentencePublisher` (Synth's ``final_delta``): whole sentences only, each
  checked with the text before it and within the reply's word budget (a burst's
  sentences, within ``SENTENCE_GAP_S`` of the last piece, as one piece); a sentence
  that fails ends the stream there. It may open with a sentence of the caller's,
  shown when the first attempt starts (before the model's first token) and
  continued by the model.

Rules that keep a half-shown reply safe, for both:

* nothing is shown before the language can be judged (``min_words``);
* the text is checked at every publishing point, before the piece goes out; a
  check failing mid-stream stops the attempt there (closing the stream stops the
  generation: no more tokens paid for);
* only the first attempt that gets anything shown streams: once pieces of one
  attempt were published, a repair attempt is not streamed, so two attempts'
  text never interleave. The whole reply follows in every case and is what the
  gateway keeps.

What happens when a check fails mid-stream is the caller's choice: without
``complete`` the attempt fails (the router repairs or falls back: the Coach's
whole reply replaces its pieces); with ``complete`` (Synth) an attempt that has
shown something is completed by ``complete(shown)`` instead, so the whole reply
starts with exactly what the user has already read.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel

from coachbus.contracts import Usage
from coachbus.llm import ChatRequest, ChatResult, LLMClient, LLMTier, OutputError, TokenCounter
from coachbus.llm.tokens import count_messages
from coachbus.replycheck import LANGUAGE_AFTER_WORDS, check_reply
from coachbus.text import Language, Register, word_count

log = logging.getLogger(__name__)

BATCH_S = 0.08
# A sentence end publishes before the batch is due, but not sooner than this after
# the last piece: a burst of sentences (a fast model, a stream that stalled and
# resumed) goes out as one piece, not one record per sentence. The first piece is
# never held back.
SENTENCE_GAP_S = 0.02
_SENTENCE_END = re.compile(r"[.!?…](?:\s|$)")
# Where a sentence ends for Synth's stream: its end mark (closing quotes or
# brackets included) followed by white space, or a line break. The white space
# must have arrived: "3." at the end of the text so far may still become "3.5".
_SENTENCE_BREAK = re.compile(r"[.!?…]+[\"'”’“»«)\]]*\s+|\n\s*")

Publish = Callable[[str, int], Awaitable[None]]
Check = Callable[[str], list[str]]


class DeltaPublisher:
    """Batches one turn's streamed text into checked delta pieces (the Coach's)."""

    def __init__(
        self,
        publish: Publish,
        check: Check,
        *,
        holdback: int = 0,
        min_words: int = 6,
        batch_s: float = BATCH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._publish = publish
        self._check = check
        self._holdback = holdback
        self._min_words = min_words
        self._batch_s = batch_s
        self._clock = clock
        self.seq = 0  # pieces published this turn
        self.text = ""  # the current attempt's text
        self._sent = 0  # characters of ``text`` already published
        self._live = True
        self._last = clock()

    def start_attempt(self) -> None:
        self.text, self._sent = "", 0
        # Once something was shown, later attempts are not streamed (no interleaving).
        self._live = self.seq == 0
        self._last = self._clock()

    @property
    def streamed(self) -> bool:
        return self.seq > 0

    async def feed(self, delta: str) -> list[str]:
        """Add a delta; returns the problems of the text so far (then stop streaming).

        The text is checked at each publishing point (a batch is due or a sentence
        ended), not on every token: every piece shown was checked first, a bad turn
        is still caught within one batch, and the check no longer runs once per
        token over the whole growing text.
        """
        self.text += delta
        elapsed = self._clock() - self._last
        if elapsed < self._batch_s and not (
            (self.seq == 0 or elapsed >= SENTENCE_GAP_S)
            and _SENTENCE_END.search(self.text, max(self._sent, len(self.text) - len(delta) - 1))
        ):
            return []
        errors = self._check(self.text)
        if errors:
            return errors
        if not self._live or len(self.text.split()) < self._min_words:
            self._last = self._clock()
            return []
        await self._send(len(self.text) - self._holdback)
        return []

    async def finish(self) -> None:
        """Publish what is left of an accepted attempt (the caller validated it whole)."""
        if self._live:
            await self._send(len(self.text))

    async def _send(self, upto: int) -> None:
        if upto < len(self.text):
            # Cut at a word boundary so a piece never ends inside a word.
            cut = self.text.rfind(" ", self._sent, max(upto, self._sent) + 1)
            upto = cut if cut > self._sent else self._sent
        piece = self.text[self._sent : upto]
        if self.seq == 0:
            piece = piece.lstrip()
        if not piece:
            return
        await self._publish(piece, self.seq)
        self.seq += 1
        self._sent = upto
        self._last = self._clock()


def partial_check(
    *,
    language: Language,
    register: Register,
    markers: Sequence[str] = (),
    never: Sequence[str] = (),
) -> Check:
    """The one reply checker (coachbus.replycheck) on a reply still being written:
    blocked steps in finished sentences (any wording), markers, merge artefacts,
    language (once it can be told) and du/Sie; length and help lines need the whole
    reply and are not judged here."""
    found, steps = list(markers), list(never)

    def check(text: str) -> list[str]:
        return check_reply(
            text, language=language, register=register, markers=found, never=steps, partial=True
        )

    return check


class SentencePublisher:
    """Publishes one turn's streamed text sentence by sentence, each checked first.

    A piece is one or more whole sentences, white space normalised as the final
    reply's text is (single spaces), with a leading space after the first piece:
    the pieces joined in ``seq`` order are exactly :attr:`shown`, a prefix of the
    final text. Each sentence is checked together with the text before it (a
    marker or a du/Sie slip across a sentence boundary is caught) and against the
    word budget: a sentence that would take the reply over ``max_words`` ends the
    stream, so the budget holds without waiting for the whole text.

    ``opening`` is trusted text (the caller checked it): it is shown as it is, and
    every attempt continues it, so its words count towards the budget and it is
    part of every sentence's check. An attempt whose first sentence repeats it
    (models like to restate what they were told was said) has that sentence left
    out rather than shown twice.
    """

    def __init__(
        self,
        publish: Publish,
        check: Check,
        *,
        max_words: int | None = None,
        min_words: int = LANGUAGE_AFTER_WORDS,
        json_field: str | None = None,
        opening: str = "",
        gap_s: float = SENTENCE_GAP_S,
        hold: bool = False,
    ) -> None:
        self._publish = publish
        # Held (the reply guard's model reads the reply whole first, on a turn that
        # blocked steps): the opening is shown, the model's sentences are checked as
        # they come but shown only in the whole reply, after the guard.
        self._hold = hold
        self._gap_s = gap_s
        self._published_at = -float("inf")
        self._check = check
        self._max_words = max_words
        self._min_words = min_words
        self._json_field = json_field
        self._opening = " ".join(opening.split())
        self.seq = 0  # pieces published this turn
        self.shown = ""  # what the user has been shown (all pieces, joined)
        self.text = ""  # the current attempt's raw text
        self._cut = 0  # characters of ``text`` already taken as sentences
        self._base = ""  # the opening, once shown: every attempt continues it
        self._accepted = ""  # the opening and the attempt's checked sentences
        self._live = True

    def start_attempt(self) -> None:
        self.text, self._cut, self._accepted = "", 0, self._base
        # Once an attempt's sentences were shown, later attempts are not streamed
        # (no interleaving); the opening alone is every attempt's beginning.
        self._live = self.shown == self._base

    async def open(self) -> None:
        """Show the opening, once (the first attempt calls this before its stream)."""
        if not self._opening or self._base or self.seq:
            return
        await self._publish(self._opening, self.seq)
        self._published_at = time.monotonic()
        self.seq += 1
        self.shown = self._base = self._accepted = self._opening

    @property
    def streamed(self) -> bool:
        """The user has been shown something (the opening counts)."""
        return self.seq > 0

    @property
    def streamed_model(self) -> bool:
        """The user has been shown sentences of an attempt, not only the opening."""
        return len(self.shown) > len(self._base)

    @property
    def showing(self) -> bool:
        """The current attempt is the one whose sentences the user is reading."""
        return self._live and self.streamed_model

    @property
    def opened(self) -> bool:
        """The opening has been shown: replies continue it."""
        return bool(self._base)

    @property
    def reply(self) -> str:
        """The opening and the current attempt's checked sentences: after ``end``
        without problems, the whole reply (white space normalised)."""
        return self._accepted

    async def feed(self, delta: str) -> list[str]:
        """Add a delta; every sentence it completes is checked, then shown.

        Returns the problems of the first sentence that fails (the stream ends
        there: later sentences are not judged, nothing after it is shown)."""
        self.text += delta
        if self._wrapped:
            return []
        # Only the delta's neighbourhood can hold a new break: search from just
        # before it (a break's white space may be all the delta brought).
        return await self._sentences(max(self._cut, len(self.text) - len(delta) - 8))

    @property
    def _wrapped(self) -> bool:
        # A model that answers with a JSON object although it was asked for plain
        # text (``json_field``): nothing of it is judged or shown until it is whole
        # and unwrapped in ``end``; it is then checked and shown like any other.
        return self._json_field is not None and self.text.lstrip().startswith("{")

    async def _sentences(self, start: int) -> list[str]:
        for m in _SENTENCE_BREAK.finditer(self.text, start):
            if m.end() <= self._cut:
                continue
            sentence, self._cut = self.text[self._cut : m.end()], m.end()
            errors = await self._take(sentence)
            if errors:
                return errors
        return []

    async def end(self) -> list[str]:
        """The stream ended: the last sentence (no white space after it) is judged
        and shown, and so is a reply too short to have reached ``min_words``."""
        if self._wrapped:
            try:
                value = json.loads(self.text).get(self._json_field)
            except (ValueError, AttributeError):
                value = None
            if not isinstance(value, str):
                return [f"not plain text, and not a JSON object with a {self._json_field!r}"]
            self.text, self._cut = value, 0
            errors = await self._sentences(0)
            if errors:
                return errors
        rest, self._cut = self.text[self._cut :], len(self.text)
        errors = await self._take(rest)
        if errors:
            return errors
        await self._flush()
        return []

    async def _take(self, sentence: str) -> list[str]:
        words = " ".join(sentence.split())
        if not words:
            return []
        if self._base and self._accepted == self._base and _restates(words, self._base):
            return []
        candidate = f"{self._accepted} {words}" if self._accepted else words
        if self._max_words is not None and word_count(candidate) > self._max_words:
            errors = [f"too long: the next sentence goes over {self._max_words} words"]
        else:
            errors = self._check(candidate)
        if errors:
            # The sentences before this one passed: what a burst held back goes out,
            # and the stream ends at the sentence that failed, as it would unheld.
            if word_count(self._accepted) >= self._min_words:
                await self._flush()
            return errors
        self._accepted = candidate
        if word_count(candidate) >= self._min_words:
            await self._flush(burst=True)
        return []

    async def _flush(self, *, burst: bool = False) -> None:
        """Show what was accepted and not yet shown. ``burst``: not within ``gap_s``
        of the last piece. A fast model's sentences (the instant one's arrive in one
        read) then go out as one record with the next sentence or the end, not one
        record each; a model writing at a human-readable pace is never held, since
        its sentences are further apart than the gap. What stays held when the
        attempt is cut off (a deadline) is in the final reply, as all of it is."""
        if self._hold or not self._live or len(self._accepted) <= len(self.shown):
            return
        if burst and time.monotonic() - self._published_at < self._gap_s:
            return
        piece = self._accepted[len(self.shown) :]
        await self._publish(piece, self.seq)
        self._published_at = time.monotonic()
        self.seq += 1
        self.shown = self._accepted


def _restates(sentence: str, opening: str) -> bool:
    """The sentence says the opening again: at least 80% of the words of the two
    (letters only, any case) are shared."""
    said = set(re.findall(r"\w+", sentence.casefold()))
    opened = set(re.findall(r"\w+", opening.casefold()))
    return bool(said and opened) and len(said & opened) / len(said | opened) >= 0.8


class Withheld:
    """A sink that shows nothing: each attempt's text is kept whole for a reader that
    must see all of it before the person does (the reply guard's model tier, on a
    turn that blocked steps). The model still writes plain text, as it does for the
    other sinks, and the text is still checked at each sentence end as it grows, so
    an attempt heading for a blocked step stops there (no tokens paid for the rest)."""

    def __init__(self, check: Check) -> None:
        self._check = check
        self.text = ""
        self.seq = 0  # nothing is ever published

    def start_attempt(self) -> None:
        self.text = ""

    async def feed(self, delta: str) -> list[str]:
        self.text += delta
        return self._check(self.text) if _SENTENCE_END.search(delta) else []


class StreamingLLM:
    """What a streaming service's router uses as its client: every answer is streamed.

    The router reads ``enabled``, ``has_tier``, ``counter`` and calls ``chat``; this
    class forwards the first three and turns ``chat`` into a text stream (thinking
    off: the user is waiting) whose finished text is wrapped in ``response_model``.

    ``complete`` (with a :class:`SentencePublisher`): when this attempt has shown
    sentences and then a sentence fails, or the whole text fails ``whole``, the
    attempt's text becomes ``complete(shown)`` instead of a failure, so the reply
    never contradicts what the user already read. With nothing shown, a failure is
    an ordinary failed attempt (the router repairs within its cap and budget).
    """

    def __init__(
        self,
        client: LLMClient,
        sink: DeltaPublisher | SentencePublisher | Withheld,
        wrap: Callable[[str], BaseModel],
        *,
        complete: Callable[[str], str] | None = None,
        whole: Check | None = None,
    ) -> None:
        self._client = client
        self._sink = sink
        self._wrap = wrap
        self._complete = complete
        self._whole = whole
        self.tier: LLMTier | None = None  # the tier of the attempt being streamed

    @property
    def enabled(self) -> bool:
        return self._client.enabled

    def has_tier(self, tier: str) -> bool:
        return self._client.has_tier(tier)

    @property
    def counter(self) -> TokenCounter:
        return self._client.counter

    async def chat(self, req: ChatRequest) -> ChatResult:
        plain = dataclasses.replace(req, response_model=None, thinking=False)
        sink = self._sink
        sink.start_attempt()
        if isinstance(sink, SentencePublisher):
            await sink.open()
        self.tier = req.tier
        started = time.perf_counter()
        errors: list[str] = []
        async with self._client.stream(plain) as stream:
            async for delta in stream:
                errors = await sink.feed(delta)
                if errors:
                    break  # closing the stream stops the generation: no tokens wasted
        sentences = sink if isinstance(sink, SentencePublisher) else None
        if errors:
            result = self._aborted(req, sink.text, started)
        else:
            done = stream.result
            assert done is not None  # set once the stream is exhausted
            result = done
            if not result.text.strip():
                raise OutputError("empty", ["the reply is empty"], result)
            if sentences is not None:
                errors = await sentences.end()
                # Unwrapped if the model sent JSON; after the opening, if there is one.
                result.text = sentences.reply if sentences.opened else sentences.text
                if not errors and self._whole is not None and sentences.showing:
                    errors = self._whole(sentences.shown)
        if errors and self._complete is not None and sentences is not None and sentences.showing:
            # The user has read part of this attempt: complete it, never retract it.
            log.info("%s: stream ended after %d pieces (%s)", req.agent, sink.seq, errors[0])
            result.text = self._complete(sentences.shown)
            result.parsed = self._wrap(result.text)
            return result
        if errors:
            raise OutputError("schema", errors, result)
        result.parsed = self._wrap(result.text.strip())
        return result

    def _aborted(self, req: ChatRequest, text: str, started: float) -> ChatResult:
        # The server sent no usage for an aborted stream: count what was spent.
        usage = Usage(
            prompt_tokens=count_messages(req.messages, self.counter),
            completion_tokens=self.counter.count(text),
            llm_calls=1,
        )
        return ChatResult(
            text=text,
            parsed=None,
            usage=usage,
            latency_s=time.perf_counter() - started,
            ttft_s=None,
            finish_reason="abort",
            model="",
            tier=req.tier,
            agent=req.agent,
            usage_estimated=True,
        )
