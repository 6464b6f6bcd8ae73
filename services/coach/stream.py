"""Streaming the Coach's LLM reply to the user while it is written.

The router decides whether an LLM tier carries the reply and runs its bounded
repair loop; it asks its client for one whole answer per attempt. The Coach gives
its router a :class:`StreamingLLM` instead of the plain client: each attempt is
streamed as text and its pieces go to a :class:`DeltaPublisher`, which batches
them (about every 80 ms or at a sentence end, never per token nor per sentence of
a burst), checks the text so far before anything is shown, and publishes
``coach_delta`` replies.

Rules that keep a half-shown reply safe:

* nothing is shown before the language can be judged, and the last
  ``holdback`` characters stay unpublished until more text follows, so a
  blocked-step marker split across two deltas is caught before its first half
  is shown;
* the text is checked at every publishing point, before the piece goes out; a
  check failing mid-stream aborts the attempt there (no more tokens paid for)
  and the router repairs or falls back;
* only the first attempt that gets anything shown streams: once pieces of one
  attempt were published, a repair attempt is not streamed, so two attempts'
  text never interleave. The whole ``coach`` reply follows in every case and is
  what the gateway keeps.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from coachbus.contracts import Usage
from coachbus.llm import ChatRequest, ChatResult, LLMClient, OutputError, TokenCounter
from coachbus.llm.tokens import count_messages

BATCH_S = 0.08
# A sentence end publishes before the batch is due, but not sooner than this after
# the last piece: a burst of sentences (a fast model, a stream that stalled and
# resumed) goes out as one piece, not one record per sentence. The first piece is
# never held back.
SENTENCE_GAP_S = 0.02
_SENTENCE_END = re.compile(r"[.!?…](?:\s|$)")

Publish = Callable[[str, int], Awaitable[None]]
Check = Callable[[str], list[str]]


class DeltaPublisher:
    """Batches one turn's streamed text into checked ``coach_delta`` pieces."""

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


class StreamingLLM:
    """What the Coach's router uses as its client: every answer is streamed.

    The router reads ``enabled``, ``has_tier``, ``counter`` and calls ``chat``; this
    class forwards the first three and turns ``chat`` into a text stream (thinking
    off: the user is waiting) whose finished text is wrapped in ``response_model``.
    """

    def __init__(
        self,
        client: LLMClient,
        sink: DeltaPublisher,
        wrap: Callable[[str], BaseModel],
    ) -> None:
        self._client = client
        self._sink = sink
        self._wrap = wrap

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
        started = time.perf_counter()
        errors: list[str] = []
        async with self._client.stream(plain) as stream:
            async for delta in stream:
                errors = await sink.feed(delta)
                if errors:
                    break  # closing the stream stops the generation: no tokens wasted
        if errors:
            # The server sent no usage for an aborted stream: count what was spent.
            usage = Usage(
                prompt_tokens=count_messages(req.messages, self.counter),
                completion_tokens=self.counter.count(sink.text),
                llm_calls=1,
            )
            raise OutputError(
                "schema",
                errors,
                ChatResult(
                    text=sink.text,
                    parsed=None,
                    usage=usage,
                    latency_s=time.perf_counter() - started,
                    ttft_s=None,
                    finish_reason="abort",
                    model="",
                    tier=req.tier,
                    agent=req.agent,
                    usage_estimated=True,
                ),
            )
        result = stream.result
        assert result is not None  # set once the stream is exhausted
        text = result.text.strip()
        if not text:
            raise OutputError("empty", ["the reply is empty"], result)
        result.parsed = self._wrap(text)
        return result
