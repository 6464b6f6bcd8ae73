"""``coachbus llm-sim``: an OpenAI-compatible LLM server without a GPU.

It honours ``response_format`` (json_schema, and llama.cpp's json_object+schema)
with schema-valid JSON, streams server-sent events, and models what matters to
a caller: time to first token, tokens per second, a batching server's slowdown
with concurrent requests, priority admission, and faults (HTTP errors, hangs,
invalid or truncated JSON, endless whitespace). All behaviour comes from flags
and is deterministic for a given ``--seed`` and request order.

``--profile NAME`` replaces the flat latency flags with a hardware profile
(``coachbus/llm/profiles/NAME.toml``, see :mod:`coachbus.llm.simprofile`): prefill
speed for uncached prompt tokens with a block-granular LRU prefix cache, decode
speed per sequence falling with the number of sequences decoding, and a KV-cache
capacity beyond which requests wait. ``--time-scale`` runs the modelled clock
faster (0.25 = four times faster) for short benchmarks; the stats say so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import heapq
import itertools
import json
import random
import re
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from coachbus.llm.schema import InstanceGenerator
from coachbus.llm.simprofile import KVGate, PrefixCache, Profile, ProfileError, block_hashes
from coachbus.llm.simprofile import load as load_profile

DEFAULT_MODELS = ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B")
Fault = Literal["error", "timeout", "invalid_json", "truncate", "whitespace"]
_encode = msgspec.json.Encoder().encode
_PIECES = re.compile(r"\s?\w+|\s?[^\w\s]+|\s+")


@dataclass(slots=True)
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 8089
    models: tuple[str, ...] = DEFAULT_MODELS
    ttft_ms: float = 120.0
    tokens_per_s: float = 80.0  # 0 = infinitely fast
    # Each additional running request slows every running one by this fraction.
    batch_slowdown: float = 0.05
    # 0 = unlimited; otherwise requests beyond it wait, lowest ``priority`` first.
    max_num_seqs: int = 0
    error_rate: float = 0.0
    timeout_rate: float = 0.0
    invalid_json_rate: float = 0.0
    truncate_rate: float = 0.0
    whitespace_rate: float = 0.0
    error_statuses: tuple[int, ...] = (500, 503, 429)
    # How long a "timeout" fault stalls before giving up on its own.
    hang_s: float = 300.0
    seed: int = 0
    # Emulate llama.cpp's server: HTTP 500 on {"type": "json_schema"}.
    llamacpp_quirks: bool = False
    text_tokens: tuple[int, int] = (24, 90)
    # A hardware profile replaces ttft_ms, tokens_per_s, batch_slowdown and
    # max_num_seqs with its own model of the server (coachbus.llm.simprofile).
    profile: Profile | None = None
    # Every modelled duration is multiplied by this (profile or flat latency alike).
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        rates = (
            self.error_rate,
            self.timeout_rate,
            self.invalid_json_rate,
            self.truncate_rate,
            self.whitespace_rate,
        )
        if any(r < 0 for r in rates) or sum(rates) > 1:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")


@dataclass(slots=True)
class SimStats:
    requests: int = 0
    by_model: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    active: int = 0
    max_active: int = 0
    waiting: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=200))
    admitted_order: deque[int | None] = field(default_factory=lambda: deque(maxlen=200))
    # Prompt tokens served from the prefix cache vs computed (profile mode only).
    prompt_tokens_cached: int = 0
    prompt_tokens_computed: int = 0
    # Requests that waited for KV-cache room or a sequence slot (profile mode).
    queued: int = 0
    kv_used: int = 0
    max_kv_used: int = 0
    # One record per finished request (profile mode): wall-clock epoch seconds of
    # arrival, admission, first token and end, and its token counts.
    timeline: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=4000))

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_model": dict(self.by_model),
            "by_status": {str(k): v for k, v in self.by_status.items()},
            "faults": dict(self.faults),
            "active": self.active,
            "max_active": self.max_active,
            "waiting": self.waiting,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "recent": list(self.recent),
            "admitted_priorities": list(self.admitted_order),
            "prompt_tokens_cached": self.prompt_tokens_cached,
            "prompt_tokens_computed": self.prompt_tokens_computed,
            "queued": self.queued,
            "kv_used": self.kv_used,
            "max_kv_used": self.max_kv_used,
            "timeline": list(self.timeline),
        }


_SUBJECTS = [
    "You",
    "This week",
    "A small step",
    "Your plan",
    "The morning walk",
    "Writing it down",
    "That goal",
]
_VERBS = [
    "could start with",
    "seems to rest on",
    "might grow from",
    "deserves",
    "can lean on",
    "points towards",
]
_OBJECTS = [
    "one concrete action today",
    "a ten-minute slot after breakfast",
    "what already worked last week",
    "a kinder way to talk to yourself",
    "a clear reason that matters to you",
    "an honest look at the obstacles",
    "a routine you can keep on a bad day",
]


def sample_text(rng: random.Random, n_tokens: int) -> str:
    """Varied, deterministic coaching-like prose of about ``n_tokens`` pieces."""
    sentences: list[str] = []
    while sum(len(_PIECES.findall(s)) for s in sentences) < n_tokens:
        sentences.append(
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
            + rng.choice([".", ".", "!", "?"])
        )
    return " ".join(sentences)


def count_pieces(text: str) -> int:
    return len(_PIECES.findall(text))


@lru_cache(maxsize=1024)
def _content_pieces(content: str) -> tuple[str, ...]:
    # The briefing, the instructions and a turn's shared context recur across the
    # agents' calls: split each once (the split was a tenth of the simulator's CPU).
    return tuple(_PIECES.findall(content))


def prompt_tokens_of(messages: Sequence[dict[str, Any]], salt: Any = None) -> list[str]:
    """The prompt as the simulator's tokens, in ChatML framing (4 per message, 3 to
    open the reply): what the prefix cache keys on. A ``cache_salt`` comes first, so
    differently salted prompts never share blocks (as in vLLM)."""
    tokens: list[str] = [f"<salt:{salt}>"] if salt else []
    for m in messages:
        tokens += ["<|im_start|>", str(m.get("role", "")), "\n"]
        tokens += _content_pieces(str(m.get("content", "")))
        tokens.append("<|im_end|>")
    tokens += ["<|im_start|>", "assistant", "\n"]
    return tokens


class _Admission:
    """vLLM-like admission: at most ``limit`` running, waiting ones by priority."""

    def __init__(self, limit: int, stats: SimStats) -> None:
        self.limit = limit
        self.stats = stats
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    async def acquire(self, priority: int) -> bool:
        """Take a slot; True if the request had to queue for it."""
        if self.limit <= 0 or (self.stats.active < self.limit and not self._heap):
            self._admit()
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (priority, next(self._seq), fut))
        self.stats.waiting += 1
        try:
            await fut
        except asyncio.CancelledError:
            if not fut.done() or fut.cancelled():
                self._heap = [e for e in self._heap if e[2] is not fut]
                heapq.heapify(self._heap)
                self.stats.waiting -= 1
                raise
            self.release()  # admitted and cancelled at once: give the slot back
            raise
        return True

    def _admit(self) -> None:
        self.stats.active += 1
        self.stats.max_active = max(self.stats.max_active, self.stats.active)

    def release(self) -> None:
        self.stats.active -= 1
        while self._heap and (self.limit <= 0 or self.stats.active < self.limit):
            _, _, fut = heapq.heappop(self._heap)
            self.stats.waiting -= 1
            if not fut.done():
                self._admit()
                fut.set_result(None)


@dataclass(slots=True)
class _Plan:
    model: str
    stream: bool
    include_usage: bool
    reasoning: list[str]
    pieces: list[str]
    finish_reason: str
    prompt_tokens: int
    # Block hashes of the prompt (profile mode: the prefix cache's keys).
    hashes: list[bytes]
    max_tokens: int
    # The tail of every user message: lets a reader of the timeline tell requests
    # apart without the simulator knowing what they are.
    user_tails: list[str]
    response_format: str | None
    fault: Fault | None
    # When the request arrived (perf_counter): the time to first token counts from
    # here, as a server's does, so the simulator's own parsing and planning are
    # inside it instead of added to it.
    arrived: float


class Simulator:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.stats = SimStats()
        self._fault_rng = random.Random(config.seed)
        self._admission = _Admission(config.max_num_seqs, self.stats)
        self._stop = asyncio.Event()
        profile = config.profile
        # Server state of the profile's model: it survives a stats reset, as a real
        # server's caches do.
        self._gate = KVGate(
            profile.kv_capacity if profile else 0,
            profile.scheduler.max_num_seqs if profile else 0,
            bool(profile and profile.scheduler.policy == "priority"),
        )
        self._gate_waiters: dict[object, asyncio.Future[None]] = {}
        self._cache = PrefixCache(profile.prefix_blocks if profile else 0)
        self._prefill_free_at = 0.0
        self._decoding = 0
        # perf_counter -> wall clock, for the timeline.
        self._epoch = time.time() - time.perf_counter()

    def reset(self) -> None:
        self.stats = SimStats()
        self._admission.stats = self.stats
        self._fault_rng = random.Random(self.config.seed)

    def _draw_fault(self) -> Fault | None:
        c = self.config
        r = self._fault_rng.random()
        for fault, rate in (
            ("error", c.error_rate),
            ("timeout", c.timeout_rate),
            ("invalid_json", c.invalid_json_rate),
            ("truncate", c.truncate_rate),
            ("whitespace", c.whitespace_rate),
        ):
            if r < rate:
                return fault  # type: ignore[return-value]
            r -= rate
        return None

    def _slowdown(self) -> float:
        return 1.0 + self.config.batch_slowdown * max(self.stats.active - 1, 0)

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), seconds)

    # ------------------------------------------------------------------ handlers

    async def models(self, request: Request) -> Response:
        data = [
            {"id": m, "object": "model", "owned_by": "coachbus-sim"} for m in self.config.models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def stats_endpoint(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.reset()
        return JSONResponse(self.stats.as_json())

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        self.stats.by_status[status] += 1
        body = {"error": {"message": message, "type": "sim_error", "code": status}}
        return JSONResponse(body, status_code=status, headers=headers)

    async def chat(self, request: Request) -> Response:
        arrived = time.perf_counter()
        self.stats.requests += 1
        try:
            # msgspec: the standard library's decoder was a twentieth of the
            # simulator's CPU (every request carries its prompt and schema).
            body = msgspec.json.decode(await request.body())
        except msgspec.DecodeError:
            return self._error(400, "body is not JSON")
        if not isinstance(body, dict):
            return self._error(400, "body is not a JSON object")
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error(400, "messages must be a non-empty list")
        if model not in self.config.models:
            return self._error(404, f"The model `{model}` does not exist.")
        self.stats.by_model[model] += 1
        fmt = body.get("response_format") or {}
        kwargs = body.get("chat_template_kwargs") or {}
        self.stats.recent.append(
            {
                "model": model,
                "stream": bool(body.get("stream")),
                "priority": body.get("priority"),
                "enable_thinking": kwargs.get("enable_thinking"),
                "response_format": fmt.get("type"),
                "max_tokens": body.get("max_tokens"),
                "include_usage": (body.get("stream_options") or {}).get("include_usage"),
            }
        )
        if self.config.llamacpp_quirks and fmt.get("type") == "json_schema":
            # What llama.cpp's server does with the OpenAI shape.
            return self._error(500, "Unsupported response_format type: json_schema")
        fault = self._draw_fault()
        if fault:
            self.stats.faults[fault] += 1
        if fault == "error":
            status = self._fault_rng.choice(self.config.error_statuses)
            headers = {"retry-after": "0"} if status == 429 else None
            return self._error(status, "simulated failure", headers)
        try:
            plan = self._plan(body, model, fmt, fault, arrived)
        except ValueError as exc:
            return self._error(400, f"cannot honour response_format: {exc}")
        self.stats.by_status[200] += 1
        if plan.stream:
            return StreamingResponse(self._stream(plan, body), media_type="text/event-stream")
        return StreamingResponse(self._whole(plan), media_type="application/json")

    def _plan(
        self,
        body: dict[str, Any],
        model: str,
        fmt: dict[str, Any],
        fault: Fault | None,
        arrived: float,
    ) -> _Plan:
        messages = body["messages"]
        digest = hashlib.sha256(
            (str(self.config.seed) + json.dumps(messages, sort_keys=True)).encode()
        ).digest()
        rng = random.Random(digest)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 1024)
        schema: dict[str, Any] | None = None
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or {}
        elif fmt.get("type") == "json_object":
            schema = fmt.get("schema") or {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
            }
        output = self.config.profile.output if self.config.profile else None
        if schema is not None:
            text = json.dumps(InstanceGenerator(schema, rng).generate(), ensure_ascii=False)
            if fault == "invalid_json":
                text = text[:-1] + ", }" if text.endswith("}") else text + "}"
        elif output is not None and output.prose_share_of_max_tokens is not None:
            low, high = output.prose_share_of_max_tokens
            text = sample_text(rng, rng.randint(int(low * max_tokens), int(high * max_tokens)))
        else:
            text = sample_text(rng, rng.randint(*self.config.text_tokens))
        pieces = _PIECES.findall(text)
        finish = "stop"
        if fault == "truncate":
            pieces = pieces[: max(len(pieces) // 2, 1)]
            finish = "length"
        if fault == "whitespace":
            pieces = pieces[:2] + ["\n", "  "] * max_tokens
        if len(pieces) > max_tokens:
            pieces, finish = pieces[:max_tokens], "length"
        thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking") is True
        reasoning_tokens = 12
        if output is not None and output.reasoning_tokens is not None:
            reasoning_tokens = rng.randint(*output.reasoning_tokens)
        reasoning = _PIECES.findall(sample_text(rng, reasoning_tokens)) if thinking else []
        tokens = prompt_tokens_of(messages, body.get("cache_salt"))
        profile = self.config.profile
        block = profile.kv_cache.block_tokens if profile else 16
        user_texts = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
        return _Plan(
            model=model,
            stream=bool(body.get("stream")),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
            reasoning=reasoning,
            pieces=pieces,
            finish_reason=finish,
            # The salt is not a prompt token; it only keys the cache.
            prompt_tokens=len(tokens) - (1 if body.get("cache_salt") else 0),
            hashes=block_hashes(tokens, block) if profile else [],
            max_tokens=max_tokens,
            user_tails=[t[-160:] for t in user_texts],
            response_format=fmt.get("type"),
            fault=fault,
            arrived=arrived,
        )

    async def _produce(self, plan: _Plan, priority: int) -> AsyncIterator[tuple[str, str]]:
        """("reasoning"|"content", piece) at the modelled pace, under admission."""
        if self.config.profile is not None:
            async for item in self._produce_profiled(plan, priority, self.config.profile):
                yield item
            return
        scale = self.config.time_scale
        queued = await self._admission.acquire(priority)
        # Prefill starts on admission; a request admitted at once started on arrival.
        # The simulated latency is then the configured one: with several requests
        # arriving together (a turn's agents), the simulator's own CPU time per
        # request no longer delays the later ones beyond it.
        started = time.perf_counter() if queued else plan.arrived
        self.stats.admitted_order.append(priority)
        try:
            if plan.fault == "timeout":
                await self._sleep(self.config.hang_s)
                return
            ttft_s = self.config.ttft_ms / 1000 * self._slowdown() * scale
            await self._sleep(started + ttft_s - time.perf_counter())
            tps = self.config.tokens_per_s
            due = time.perf_counter()
            produced = 0
            for kind, items in (("reasoning", plan.reasoning), ("content", plan.pieces)):
                for piece in items:
                    if tps > 0 and produced:
                        due += self._slowdown() / tps * scale
                        await self._sleep(due - time.perf_counter())
                    produced += 1
                    yield kind, piece
        finally:
            self.stats.completion_tokens += len(plan.reasoning) + len(plan.pieces)
            self.stats.prompt_tokens += plan.prompt_tokens
            self._admission.release()

    async def _admit_profiled(self, need: int, priority: int) -> bool:
        """Wait for KV-cache room and a sequence slot; True if the request queued."""
        ticket = object()
        if self._gate.offer(need, priority, ticket):
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._gate_waiters[ticket] = fut
        self.stats.waiting += 1
        self.stats.queued += 1
        try:
            await fut
        except asyncio.CancelledError:
            if self._gate.withdraw(ticket):
                self.stats.waiting -= 1
            else:  # admitted and cancelled at once: give the room back
                self._release_profiled(need)
            raise
        finally:
            self._gate_waiters.pop(ticket, None)
        return True

    def _release_profiled(self, need: int) -> None:
        self.stats.kv_used = max(self.stats.kv_used - need, 0)
        for ticket in self._gate.release(need):
            fut = self._gate_waiters.get(ticket)
            self.stats.waiting -= 1
            if fut is not None and not fut.done():
                fut.set_result(None)

    async def _produce_profiled(
        self, plan: _Plan, priority: int, profile: Profile
    ) -> AsyncIterator[tuple[str, str]]:
        """The profile's server: KV admission, one prefill lane with the prefix
        cache, decode at the speed of the current batch (coachbus.llm.simprofile;
        bench/virtual_clock.py is the same model on a virtual clock)."""
        scale = self.config.time_scale
        block = profile.kv_cache.block_tokens
        completion = len(plan.reasoning) + len(plan.pieces)
        need = profile.blocks(plan.prompt_tokens + completion) * block
        queued = await self._admit_profiled(need, priority)
        admitted = time.perf_counter() if queued else plan.arrived
        self.stats.admitted_order.append(priority)
        self.stats.active += 1
        self.stats.max_active = max(self.stats.max_active, self.stats.active)
        self.stats.kv_used += need
        self.stats.max_kv_used = max(self.stats.max_kv_used, self.stats.kv_used)
        record: dict[str, Any] = {
            "arrived": plan.arrived + self._epoch,
            "admitted": admitted + self._epoch,
            "queued": queued,
            "priority": priority,
            "max_tokens": plan.max_tokens,
            "prompt_tokens": plan.prompt_tokens,
            "user_tails": plan.user_tails,
            "response_format": plan.response_format,
        }
        decoding = False
        produced = 0
        try:
            if plan.fault == "timeout":
                await self._sleep(self.config.hang_s)
                return
            # Prefills run one after another (one lane), each served from the
            # prefix cache as far as its leading blocks were computed before.
            cached = self._cache.serve(plan.hashes, plan.prompt_tokens, block)
            record["cached_tokens"] = cached
            self.stats.prompt_tokens_cached += cached
            self.stats.prompt_tokens_computed += plan.prompt_tokens - cached
            start = max(admitted, self._prefill_free_at)
            end = start + profile.prefill_s(plan.prompt_tokens - cached, cached) * scale
            self._prefill_free_at = end
            await self._sleep(end - time.perf_counter())
            record["first_token"] = time.perf_counter() + self._epoch
            self._decoding += 1
            decoding = True
            due = time.perf_counter()
            for kind, items in (("reasoning", plan.reasoning), ("content", plan.pieces)):
                for piece in items:
                    if produced:
                        # The speed of every token is that of the batch decoding now.
                        due += scale / profile.decode_tps(self._decoding)
                        await self._sleep(due - time.perf_counter())
                    produced += 1
                    yield kind, piece
        finally:
            if decoding:
                self._decoding -= 1
            self.stats.active -= 1
            self.stats.completion_tokens += completion
            self.stats.prompt_tokens += plan.prompt_tokens
            record["done"] = time.perf_counter() + self._epoch
            record["completion_tokens"] = produced
            self.stats.timeline.append(record)
            self._release_profiled(need)

    def _usage(self, plan: _Plan) -> dict[str, int]:
        completion = len(plan.reasoning) + len(plan.pieces)
        return {
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": plan.prompt_tokens + completion,
        }

    async def _stream(self, plan: _Plan, body: dict[str, Any]) -> AsyncIterator[bytes]:
        cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": plan.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            # One event per token: msgspec, as the stdlib encoder was a sixth of the
            # simulator's CPU. UTF-8 as vLLM sends it (no \u escapes).
            return b"data: " + _encode(data) + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        priority = int(body.get("priority") or 0)
        # An instant model has every token at once: one write carries them all (still
        # one event per token), as a server does when tokens outpace the socket. A
        # write per token made the simulator a large user of the CPU it shares with
        # the stack under test.
        profile = self.config.profile
        instant = (profile.decode.tokens_per_s if profile else self.config.tokens_per_s) <= 0
        held: list[bytes] = []
        async for kind, piece in self._produce(plan, priority):
            key = "reasoning_content" if kind == "reasoning" else "content"
            if instant:
                held.append(chunk({key: piece}))
            else:
                yield chunk({key: piece})
        if plan.fault == "timeout":
            return  # a hung model produced nothing, so nothing is held
        held.append(chunk({}, plan.finish_reason))
        if plan.include_usage:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": plan.model,
                "choices": [],
                "usage": self._usage(plan),
            }
            held.append(f"data: {json.dumps(data)}\n\n".encode())
        held.append(b"data: [DONE]\n\n")
        if instant:
            yield b"".join(held)
        else:
            for event in held:
                yield event

    async def _whole(self, plan: _Plan) -> AsyncIterator[bytes]:
        reasoning: list[str] = []
        content: list[str] = []
        async for kind, piece in self._produce(plan, 0):
            (reasoning if kind == "reasoning" else content).append(piece)
        if plan.fault == "timeout":
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
        if reasoning:
            message["reasoning_content"] = "".join(reasoning)
        data = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": plan.model,
            "choices": [{"index": 0, "message": message, "finish_reason": plan.finish_reason}],
            "usage": self._usage(plan),
        }
        yield json.dumps(data, ensure_ascii=False).encode()

    def shutdown(self) -> None:
        """Wake every stalled or pacing response so the server can stop promptly."""
        self._stop.set()


def create_app(config: SimConfig | None = None) -> Starlette:
    """The simulator as an ASGI app; ``app.state.sim`` is the :class:`Simulator`."""
    sim = Simulator(config or SimConfig())
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", sim.chat, methods=["POST"]),
            Route("/v1/models", sim.models, methods=["GET"]),
            Route("/v1/stats", sim.stats_endpoint, methods=["GET", "DELETE"]),
            Route("/stats", sim.stats_endpoint, methods=["GET", "DELETE"]),
            Route("/health", sim.health, methods=["GET"]),
        ]
    )
    app.state.sim = sim
    return app


def _parser() -> argparse.ArgumentParser:
    d = SimConfig()
    p = argparse.ArgumentParser(
        prog="coachbus llm-sim",
        description="OpenAI-compatible LLM simulator: structured output, streaming, "
        "latency, faults.",
    )
    p.add_argument("--host", default=d.host)
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--model", dest="models", action="append", help="served model name (repeatable)")
    p.add_argument("--ttft-ms", type=float, default=d.ttft_ms, help="time to first token")
    p.add_argument(
        "--tokens-per-s", type=float, default=d.tokens_per_s, help="decode speed; 0 = instant"
    )
    p.add_argument(
        "--batch-slowdown",
        type=float,
        default=d.batch_slowdown,
        help="fraction by which each additional running request slows all running ones",
    )
    p.add_argument(
        "--max-num-seqs", type=int, default=d.max_num_seqs, help="running limit; 0 = none"
    )
    for name in ("error", "timeout", "invalid-json", "truncate", "whitespace"):
        p.add_argument(
            f"--{name}-rate", type=float, default=0.0, help=f"share of requests with {name} fault"
        )
    p.add_argument("--hang-s", type=float, default=d.hang_s, help="how long a timeout fault stalls")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--llamacpp-quirks", action="store_true", help="answer json_schema with HTTP 500"
    )
    p.add_argument(
        "--profile",
        default=None,
        help="hardware profile (a name of coachbus/llm/profiles or a .toml path); replaces "
        "--ttft-ms, --tokens-per-s, --batch-slowdown and --max-num-seqs",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=d.time_scale,
        help="multiply every modelled duration (0.25 = a clock four times faster)",
    )
    return p


def config_from_args(argv: Sequence[str] | None = None) -> SimConfig:
    a = _parser().parse_args(argv)
    return SimConfig(
        host=a.host,
        port=a.port,
        models=tuple(a.models) if a.models else DEFAULT_MODELS,
        ttft_ms=a.ttft_ms,
        tokens_per_s=a.tokens_per_s,
        batch_slowdown=a.batch_slowdown,
        max_num_seqs=a.max_num_seqs,
        error_rate=a.error_rate,
        timeout_rate=a.timeout_rate,
        invalid_json_rate=a.invalid_json_rate,
        truncate_rate=a.truncate_rate,
        whitespace_rate=a.whitespace_rate,
        hang_s=a.hang_s,
        seed=a.seed,
        llamacpp_quirks=a.llamacpp_quirks,
        profile=load_profile(a.profile) if a.profile else None,
        time_scale=a.time_scale,
    )


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    try:
        config = config_from_args(argv)
    except (ValueError, ProfileError) as exc:
        print(f"llm-sim: {exc}")
        return 2
    summary = {
        k: getattr(config, k)
        for k in SimConfig.__dataclass_fields__
        if k not in {"host", "port", "profile"}
    }
    if config.profile is not None:
        summary["profile"] = config.profile.name
        for k in ("ttft_ms", "tokens_per_s", "batch_slowdown", "max_num_seqs"):
            summary.pop(k)
    print(f"llm-sim on http://{config.host}:{config.port}/v1 {json.dumps(summary)}", flush=True)
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
