"""The async client through which every agent talks to an OpenAI-compatible server.

Every call streams, even :meth:`LLMClient.chat`: that measures time to first
token, and lets the client abort a degenerate generation (Qwen3's endless
whitespace, vllm#17393) as soon as it starts instead of paying for max_tokens.
A server that ignores ``stream`` and answers with one JSON body is understood too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self

import httpx
import msgspec
import stamina

from coachbus.contracts import Usage
from coachbus.llm.api import (
    ChatRequest,
    ChatResult,
    CircuitOpenError,
    LLMConnectionError,
    LLMDisabledError,
    LLMError,
    LLMHTTPError,
    LLMTimeoutError,
    OutputError,
)
from coachbus.llm.breaker import CircuitBreaker
from coachbus.llm.schema import ParseFailure, parse_structured, response_format
from coachbus.llm.settings import LLMSettings, LLMTier, StructuredMode
from coachbus.llm.sse import Chunk, chunks
from coachbus.llm.tokens import TokenCounter, count_messages, default_counter
from coachbus.metrics import LLM_LATENCY, LLM_TOKENS, LLM_TTFT

log = logging.getLogger(__name__)

# Request bodies by msgspec: httpx's ``json=`` runs the standard library's encoder,
# a twentieth of an agent's CPU when its answer's JSON schema is large (Shadow's).
_encode_json = msgspec.json.Encoder().encode
_JSON = {"Content-Type": "application/json"}

# Status codes with which llama.cpp-style servers refuse {"type": "json_schema"}.
_SCHEMA_REFUSALS = frozenset({400, 422, 500})


def describe(settings: LLMSettings) -> str:
    """One line for the start-up log: which tiers think with which model where."""
    if not settings.enabled:
        return (
            "LLM disabled (no COACHBUS_LLM_BASE_URL): every decision runs on the "
            "deterministic tier (tier=deterministic)"
        )
    parts = []
    tiers: tuple[LLMTier, ...] = ("small", "strong")
    for tier in tiers:
        url = settings.url_for(tier)
        if url:
            parts.append(f"{tier}={settings.model_for(tier)}@{url}")
    return "LLM enabled: " + ", ".join(parts)


class _Endpoint:
    """One server: its HTTP pool, concurrency limit, breaker and negotiated mode."""

    def __init__(
        self,
        url: str,
        settings: LLMSettings,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self.url = url
        headers = {}
        key = settings.api_key.get_secret_value()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.http = httpx.AsyncClient(
            base_url=url,
            headers=headers,
            transport=transport,
            # The call's wall clock is enforced around the request (asyncio.timeout);
            # these only bound a single socket operation.
            timeout=httpx.Timeout(settings.default_timeout_s, connect=settings.connect_timeout_s),
            limits=httpx.Limits(max_connections=settings.max_concurrency + 4),
        )
        self.semaphore = asyncio.Semaphore(settings.max_concurrency)
        self.breaker = CircuitBreaker(
            url, threshold=settings.breaker_failure_threshold, reset_s=settings.breaker_reset_s
        )
        self.mode: StructuredMode = settings.structured_output


class _Accumulator:
    """Collects one completion from stream events (or a single JSON body)."""

    def __init__(self, started: float, whitespace_limit: int) -> None:
        self.started = started
        self.whitespace_limit = whitespace_limit
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.ttft_s: float | None = None
        self._ws_run = 0
        self.degenerate = False

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def feed(self, event: Chunk) -> str:
        """Take one chunk; return the content delta it carried ("" if none)."""
        if event.error is not None and not event.choices:
            err = event.error
            msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            code = err.get("code") if isinstance(err, dict) else None
            raise LLMHTTPError(code if isinstance(code, int) and code >= 400 else 500, msg)
        if event.usage:
            self.usage = event.usage
        self.model = event.model or self.model
        delta_text = ""
        for choice in event.choices or ():
            if choice.index != 0:
                continue
            part = choice.delta or choice.message
            if part is None:
                if choice.finish_reason:
                    self.finish_reason = choice.finish_reason
                continue
            # vLLM's reasoning parsers put thinking here; it is never parsed.
            reasoning = part.reasoning_content or part.reasoning or ""
            content = part.content or ""
            if reasoning:
                self.reasoning_parts.append(reasoning)
            if content:
                self.text_parts.append(content)
                delta_text = content
                self._track_whitespace(content)
            if (content or reasoning) and self.ttft_s is None:
                self.ttft_s = time.perf_counter() - self.started
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return delta_text

    def _track_whitespace(self, content: str) -> None:
        stripped = content.rstrip()
        if not stripped:
            self._ws_run += len(content)
        else:
            self._ws_run = len(content) - len(stripped)
        if self._ws_run >= self.whitespace_limit:
            self.degenerate = True


def _retry_hook(settings: LLMSettings) -> Any:
    def hook(exc: Exception) -> bool | float:
        if isinstance(exc, LLMHTTPError) and exc.retryable:
            if exc.retry_after is not None:
                return min(exc.retry_after, settings.retry_wait_max_s)
            return True
        return isinstance(exc, LLMConnectionError)

    return hook


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        return None


Outcome = Literal["ok", "invalid", "timeout", "error", "circuit_open", "http_error"]


class LLMClient:
    """Async client for OpenAI-compatible chat completions (vLLM, SGLang, llama.cpp).

    Use as ``async with LLMClient(settings) as client`` or call :meth:`aclose`.
    """

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.settings = settings or LLMSettings()
        self._counter = counter
        self._endpoints: dict[str, _Endpoint] = {}
        self._tiers: dict[LLMTier, tuple[_Endpoint, str]] = {}
        tiers: tuple[LLMTier, ...] = ("small", "strong")
        for tier in tiers:
            url = self.settings.url_for(tier)
            if not url:
                continue
            # Tiers on the same server share its pool, limit and breaker.
            endpoint = self._endpoints.get(url) or _Endpoint(url, self.settings, transport)
            self._endpoints[url] = endpoint
            self._tiers[tier] = (endpoint, self.settings.model_for(tier))
        log.info(describe(self.settings))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.http.aclose()

    @property
    def enabled(self) -> bool:
        return bool(self._tiers)

    def has_tier(self, tier: str) -> bool:
        return tier in self._tiers

    def breaker(self, tier: LLMTier) -> CircuitBreaker:
        return self._route(tier)[0].breaker

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    # ------------------------------------------------------------------ requests

    def _route(self, tier: LLMTier) -> tuple[_Endpoint, str]:
        try:
            return self._tiers[tier]
        except KeyError:
            raise LLMDisabledError(f"no endpoint configured for tier {tier!r}") from None

    def _timeout(self, req: ChatRequest) -> float:
        timeout = (
            req.timeout_s if req.timeout_s is not None else self.settings.timeout_for(req.agent)
        )
        if req.deadline_at is not None:
            timeout = min(timeout, (req.deadline_at - datetime.now(UTC)).total_seconds())
        return timeout

    def _body(self, req: ChatRequest, model: str, mode: StructuredMode) -> dict[str, Any]:
        s = self.settings
        thinking = req.thinking if req.thinking is not None else s.thinking_for(req.agent)
        body: dict[str, Any] = {
            "model": model,
            "messages": req.messages,
            "max_tokens": max(1, min(req.max_tokens, s.max_tokens_cap)),
            "temperature": req.temperature if req.temperature is not None else s.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": thinking},
        }
        if req.response_model is not None:
            body["response_format"] = response_format(
                req.response_model, "json_object" if mode == "json_object" else "json_schema"
            )
        if req.priority is not None and s.send_priority:
            body["priority"] = req.priority
        if s.cache_salt:
            body["cache_salt"] = s.cache_salt
        if req.stop:
            body["stop"] = req.stop
        body.update(req.extra_body)
        return body

    async def _send(self, endpoint: _Endpoint, body: dict[str, Any]) -> httpx.Response:
        """One HTTP attempt up to the response headers; raises on an error status."""
        endpoint.breaker.before_call()
        try:
            resp = await endpoint.http.send(
                endpoint.http.build_request(
                    "POST", "chat/completions", content=_encode_json(body), headers=_JSON
                ),
                stream=True,
            )
        except httpx.TransportError as exc:
            endpoint.breaker.record_failure()
            raise LLMConnectionError(f"{endpoint.url}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            endpoint.breaker.release_probe()
            raise
        if resp.status_code < 400:
            return resp
        text = (await resp.aread()).decode("utf-8", errors="replace")
        await resp.aclose()
        error = LLMHTTPError(resp.status_code, text, _retry_after(resp))
        if error.retryable:
            endpoint.breaker.record_failure()
        else:
            # A 4xx proves the server is up; the fault is in our request.
            endpoint.breaker.record_success()
        raise error

    async def _open(self, endpoint: _Endpoint, body: dict[str, Any]) -> httpx.Response:
        """Send, negotiating the structured-output shape on an ``auto`` endpoint."""
        fmt = body.get("response_format") or {}
        try:
            resp = await self._send(endpoint, body)
        except LLMHTTPError as exc:
            if not (
                endpoint.mode == "auto"
                and fmt.get("type") == "json_schema"
                and exc.status in _SCHEMA_REFUSALS
            ):
                raise
            # llama.cpp's server: HTTP 500 for json_schema, wants json_object+schema.
            fallback = {"type": "json_object", "schema": fmt["json_schema"]["schema"]}
            try:
                resp = await self._send(endpoint, {**body, "response_format": fallback})
            except LLMError:
                raise exc from None
            log.warning(
                "%s refused json_schema (HTTP %s); using json_object", endpoint.url, exc.status
            )
            endpoint.mode = "json_object"
            return resp
        if endpoint.mode == "auto" and fmt.get("type") == "json_schema":
            endpoint.mode = "json_schema"
        return resp

    def _retrying(self, timeout: float) -> Any:
        s = self.settings
        return stamina.retry_context(
            on=_retry_hook(s),
            attempts=s.retry_attempts,
            timeout=max(timeout, 0.001),
            wait_initial=s.retry_wait_initial_s,
            wait_max=s.retry_wait_max_s,
            wait_jitter=s.retry_wait_jitter_s,
        )

    def _result(
        self, req: ChatRequest, model: str, acc: _Accumulator, started: float, attempts: int
    ) -> ChatResult:
        estimated = acc.usage is None
        if acc.usage is not None:
            usage = Usage(
                prompt_tokens=int(acc.usage.get("prompt_tokens") or 0),
                completion_tokens=int(acc.usage.get("completion_tokens") or 0),
                llm_calls=1,
            )
        else:
            usage = Usage(
                prompt_tokens=count_messages(req.messages, self.counter),
                completion_tokens=self.counter.count(acc.text + "".join(acc.reasoning_parts)),
                llm_calls=1,
            )
        return ChatResult(
            text=acc.text,
            parsed=None,
            usage=usage,
            latency_s=time.perf_counter() - started,
            ttft_s=acc.ttft_s,
            finish_reason="length" if acc.degenerate else acc.finish_reason,
            model=acc.model or model,
            tier=req.tier,
            agent=req.agent,
            reasoning="".join(acc.reasoning_parts),
            usage_estimated=estimated,
            attempts=attempts,
        )

    def _finish(self, req: ChatRequest, result: ChatResult, degenerate: bool) -> ChatResult:
        """Validate the answer: degenerate output, then the response model."""
        if degenerate:
            raise OutputError(
                "whitespace",
                [
                    f"generation aborted: {self.settings.whitespace_run_limit}+ whitespace "
                    "characters in a row"
                ],
                result,
            )
        if req.response_model is not None:
            try:
                result.parsed = parse_structured(
                    result.text, req.response_model, result.finish_reason
                )
            except ParseFailure as exc:
                raise OutputError(exc.kind, exc.errors, result) from exc
        elif result.finish_reason == "length" and not result.text.strip():
            raise OutputError("truncated", ["no content before the token limit"], result)
        return result

    def _record(
        self,
        req: ChatRequest,
        model: str,
        outcome: Outcome,
        started: float,
        result: ChatResult | None,
    ) -> None:
        LLM_LATENCY.labels(req.agent, model, req.tier, outcome).observe(
            time.perf_counter() - started
        )
        if result is None:
            return
        if result.ttft_s is not None:
            LLM_TTFT.labels(req.agent, model).observe(result.ttft_s)
        LLM_TOKENS.labels(req.agent, model, "prompt").inc(result.usage.prompt_tokens)
        LLM_TOKENS.labels(req.agent, model, "completion").inc(result.usage.completion_tokens)

    async def chat(self, req: ChatRequest) -> ChatResult:
        """One completion, validated against ``req.response_model`` if given.

        The stream gathered: one path for both (see :meth:`_call`). Raises
        :class:`OutputError` (with the spent usage) for unusable answers,
        :class:`LLMTimeoutError`, :class:`CircuitOpenError`, :class:`LLMHTTPError`,
        :class:`LLMConnectionError` or :class:`LLMDisabledError`.
        """
        stream = ChatStream(self, req, live=False)
        async with stream:
            async for _ in stream:
                pass
        assert stream.result is not None  # set whenever the call ends without error
        return stream.result

    def stream(self, req: ChatRequest) -> ChatStream:
        """Text deltas as the server produces them; ``.result`` once exhausted."""
        return ChatStream(self, req)

    async def _call(
        self, req: ChatRequest, live: bool, out: ChatStream
    ) -> AsyncGenerator[str, None]:
        """Every call, ``chat`` and ``stream`` alike: the one state machine.

        An attempt may be retried until it hands text to its caller. A live stream
        hands out each delta as it arrives, so it is retried only before its first
        delta; ``chat`` hands out nothing before the end, so a whole answer is
        retried (an error event halfway through included). The result (or the
        unusable one, with its usage) lands in ``out.result``.
        """
        endpoint, model = self._route(req.tier)
        timeout = self._timeout(req)
        started = time.perf_counter()
        deadline = asyncio.get_running_loop().time() + timeout
        outcome: Outcome = "error"
        result: ChatResult | None = None
        try:
            if timeout <= 0:
                raise LLMTimeoutError(f"{req.agent}: no time left before the call")
            answer, delta, attempts = await self._start(
                endpoint, model, req, started, deadline, live
            )
            try:
                # From here on nothing is retried: the text is the caller's.
                while delta is not None:
                    yield delta
                    delta = await answer.read(deadline, live)
                answer.succeeded()
            finally:
                await answer.close()
            result = self._result(req, model, answer.acc, started, attempts)
            out.result = self._finish(req, result, answer.acc.degenerate)
            outcome = "ok"
        except OutputError as exc:
            outcome, result = "invalid", exc.result
            out.result = exc.result
            raise
        except TimeoutError as exc:
            outcome = "timeout"
            if isinstance(exc, LLMTimeoutError):
                raise
            raise LLMTimeoutError(f"{req.agent}: no answer within {timeout:.2f}s") from exc
        except CircuitOpenError:
            outcome = "circuit_open"
            raise
        except LLMHTTPError:
            outcome = "http_error"
            raise
        finally:
            self._record(req, model, outcome, started, result)

    async def _start(
        self,
        endpoint: _Endpoint,
        model: str,
        req: ChatRequest,
        started: float,
        deadline: float,
        live: bool,
    ) -> tuple[_Answer, str | None, int]:
        """Attempts until one answer is under way: its first delta read (``live``),
        or all of it. Returns the open answer, that delta and the attempts made."""
        retrying = aiter(self._retrying(deadline - asyncio.get_running_loop().time()))
        attempts = 0
        while True:
            # The back-off sleeps here: bounded by the call's deadline like the rest.
            async with asyncio.timeout_at(deadline):
                attempt = await anext(retrying)  # re-raises the last error when done
            with attempt:
                attempts += 1
                async with asyncio.timeout_at(deadline):
                    await endpoint.semaphore.acquire()
                    try:
                        resp = await self._open(endpoint, self._body(req, model, endpoint.mode))
                    except BaseException:
                        endpoint.semaphore.release()
                        raise
                acc = _Accumulator(started, self.settings.whitespace_run_limit)
                answer = _Answer(endpoint, resp, acc)
                try:
                    delta = await answer.read(deadline, live)
                except BaseException:
                    await answer.close()
                    raise
                return answer, delta, attempts


class _Answer:
    """One attempt's response being read. It holds its endpoint's concurrency slot
    until closed, and gives the breaker its verdict: a failure when the answer
    breaks (an error event, a dropped connection; also after tokens reached the
    caller, which is how the Coach's live path fails), a success when it ends, and
    neither when the caller leaves early or the deadline cuts it.
    """

    def __init__(self, endpoint: _Endpoint, resp: httpx.Response, acc: _Accumulator) -> None:
        self.endpoint = endpoint
        self.resp = resp
        self.acc = acc
        self.events = chunks(resp)
        self._judged = False

    async def read(self, deadline: float, live: bool) -> str | None:
        """The next content delta (``live``), or None once the answer has ended
        (read to its end otherwise). A degenerate whitespace run ends it early."""
        acc = self.acc
        try:
            # A timeout scope per read, not wait_for: that would start a task per event.
            async with asyncio.timeout_at(deadline):
                async for event in self.events:
                    delta = acc.feed(event)
                    if acc.degenerate:
                        return None
                    if delta and live:
                        return delta
        except httpx.TransportError as exc:
            self._judge(failed=True)
            raise LLMConnectionError(f"stream broke: {exc}") from exc
        except LLMHTTPError:
            self._judge(failed=True)
            raise
        return None

    def succeeded(self) -> None:
        self._judge(failed=False)

    def _judge(self, *, failed: bool) -> None:
        if failed:
            self.endpoint.breaker.record_failure()
        else:
            self.endpoint.breaker.record_success()
        self._judged = True

    async def close(self) -> None:
        if not self._judged:
            self.endpoint.breaker.release_probe()
        try:
            with contextlib.suppress(Exception):
                await self.events.aclose()
            await self.resp.aclose()
        finally:
            self.endpoint.semaphore.release()


class ChatStream:
    """``async for delta in client.stream(req)`` yields content deltas (reasoning is
    skipped). After the loop, :attr:`result` holds the full :class:`ChatResult`
    with usage. Nothing is retried once a delta has reached the caller. Use
    ``async with`` to release the connection at once when breaking out early.
    ``chat`` is this stream gathered (``live=False``: nothing is handed out before
    the end).
    """

    def __init__(self, client: LLMClient, req: ChatRequest, *, live: bool = True) -> None:
        self._client = client
        self._req = req
        self._live = live
        self.result: ChatResult | None = None
        self._gen: AsyncGenerator[str, None] | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        if self._gen is None:
            self._gen = self._client._call(self._req, self._live, self)
        return self._gen

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._gen is not None:
            await self._gen.aclose()
