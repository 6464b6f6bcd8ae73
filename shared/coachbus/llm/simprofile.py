"""Hardware profiles of the LLM simulator and the serving model behind them.

A profile (``coachbus/llm/profiles/<name>.toml``) describes one model on one set of
GPUs the way a caller feels it: prefill speed for uncached prompt tokens (cached
prefix tokens nearly free), decode speed per sequence as a function of how many
sequences decode together, a KV-cache capacity beyond which requests wait (FIFO, or
by priority when the server schedules by priority), and a prefix cache in the style
of vLLM's automatic prefix caching (block-granular, LRU).

Everything here is pure and clock-free: :class:`PrefixCache`, :class:`KVGate` and
:class:`Profile`'s rate functions are used by the live simulator (``coachbus
llm-sim --profile``) and by the same scheduling on a virtual clock, which computes
what a workload costs on a profile without sleeping (bench/virtual_clock.py).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
import tomllib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PROFILES_DIR = Path(__file__).with_name("profiles")


class ProfileError(ValueError):
    """A profile file that cannot be used, with the file and the reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hardware(_Strict):
    """What the figures describe; informational, shown in reports."""

    model: str
    gpus: str
    quantization: str = ""
    tensor_parallel: int = Field(default=1, ge=1)


class Prefill(_Strict):
    # 0 = instant.
    tokens_per_s: float = Field(ge=0)
    # Cached prefix tokens still pass through the scheduler but skip the compute.
    cached_tokens_per_s: float = Field(default=0.0, ge=0)
    # Fixed cost of a request before its first token (scheduling, the first
    # forward step at a tiny prompt).
    overhead_ms: float = Field(default=0.0, ge=0)


class Decode(_Strict):
    # One sequence decoding alone; 0 = instant.
    tokens_per_s: float = Field(ge=0)
    # Per-sequence speed relative to one sequence alone, at these batch sizes;
    # interpolated in log2(batch). Past the last point the aggregate stays flat.
    batch: list[int] = Field(default_factory=lambda: [1])
    relative: list[float] = Field(default_factory=lambda: [1.0])

    @model_validator(mode="after")
    def _curve(self) -> Decode:
        if len(self.batch) != len(self.relative) or not self.batch:
            raise ValueError("decode.batch and decode.relative must have the same length (>= 1)")
        if self.batch[0] != 1 or abs(self.relative[0] - 1.0) > 1e-9:
            raise ValueError("the decode curve must start at batch 1 with relative 1.0")
        if any(b2 <= b1 for b1, b2 in itertools.pairwise(self.batch)):
            raise ValueError("decode.batch must be strictly increasing")
        if any(r <= 0 or r > 1 for r in self.relative):
            raise ValueError("decode.relative values must be in (0, 1]")
        if any(r2 > r1 for r1, r2 in itertools.pairwise(self.relative)):
            raise ValueError("decode.relative must not rise with the batch")
        aggregate = [b * r for b, r in zip(self.batch, self.relative, strict=True)]
        if any(a2 < a1 for a1, a2 in itertools.pairwise(aggregate)):
            raise ValueError("aggregate decode speed (batch x relative) must not fall")
        return self


class KVCache(_Strict):
    # 0 = unlimited.
    capacity_tokens: int = Field(default=0, ge=0)
    block_tokens: int = Field(default=16, ge=1)
    # The prefix cache lives in the KV blocks no request holds; by default it may
    # keep as many tokens as the whole cache (vLLM evicts cached blocks LRU when a
    # running request needs them). 0 = no prefix caching.
    prefix_cache_tokens: int | None = Field(default=None, ge=0)


class Scheduler(_Strict):
    # 0 = unlimited.
    max_num_seqs: int = Field(default=0, ge=0)
    # vLLM's --scheduling-policy: fcfs ignores a request's priority.
    policy: Literal["fcfs", "priority"] = "fcfs"


class Output(_Strict):
    """How long unconstrained answers are, so a request costs what a real one does."""

    # Prose (no response_format) takes this share of its max_tokens.
    prose_share_of_max_tokens: tuple[float, float] | None = None
    # Reasoning tokens of a request with thinking on.
    reasoning_tokens: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _ranges(self) -> Output:
        share = self.prose_share_of_max_tokens
        if share is not None and not 0 < share[0] <= share[1] <= 1:
            raise ValueError("output.prose_share_of_max_tokens must be 0 < low <= high <= 1")
        reasoning = self.reasoning_tokens
        if reasoning is not None and not 0 <= reasoning[0] <= reasoning[1]:
            raise ValueError("output.reasoning_tokens must be 0 <= low <= high")
        return self


class SeedHeadline(_Strict):
    """The seed's measured full-synthesis time on this hardware (one user)."""

    full_synthesis_s: float = Field(gt=0)
    source: str


class Profile(_Strict):
    name: str
    description: str = ""
    hardware: Hardware | None = None
    prefill: Prefill
    decode: Decode
    kv_cache: KVCache = KVCache()
    scheduler: Scheduler = Scheduler()
    output: Output = Output()
    seed: SeedHeadline | None = None

    # -------------------------------------------------------------- rates

    def prefill_s(self, uncached: int, cached: int = 0) -> float:
        """Seconds from admission to the first token for this prompt, alone."""
        p = self.prefill
        seconds = p.overhead_ms / 1000
        if p.tokens_per_s > 0:
            seconds += uncached / p.tokens_per_s
        if p.cached_tokens_per_s > 0:
            seconds += cached / p.cached_tokens_per_s
        return seconds

    def decode_tps(self, batch: int) -> float:
        """Tokens per second of each of ``batch`` sequences decoding together
        (``inf`` for an instant profile)."""
        d = self.decode
        if d.tokens_per_s <= 0:
            return math.inf
        return d.tokens_per_s * relative_speed(tuple(d.batch), tuple(d.relative), max(batch, 1))

    @property
    def kv_capacity(self) -> int:
        return self.kv_cache.capacity_tokens

    @property
    def prefix_blocks(self) -> int | None:
        """The prefix cache's size in blocks: None = unlimited (the KV cache is),
        0 = no prefix caching."""
        kv = self.kv_cache
        if kv.prefix_cache_tokens is not None:
            return self.blocks(kv.prefix_cache_tokens)
        return self.blocks(kv.capacity_tokens) if kv.capacity_tokens else None

    def blocks(self, tokens: int) -> int:
        return -(-tokens // self.kv_cache.block_tokens)


@cache
def relative_speed(batch: tuple[int, ...], relative: tuple[float, ...], n: int) -> float:
    if n <= batch[0]:
        return relative[0]
    if n >= batch[-1]:
        # Past the measured points the GPU is saturated: the aggregate stays flat.
        return relative[-1] * batch[-1] / n
    x = math.log2(n)
    for (b1, r1), (b2, r2) in itertools.pairwise(zip(batch, relative, strict=True)):
        if b1 <= n <= b2:
            t = (x - math.log2(b1)) / (math.log2(b2) - math.log2(b1))
            return r1 + t * (r2 - r1)
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------- loading


def available() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def load_file(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not TOML: {exc}") from exc
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(file)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ProfileError(f"{path}: invalid profile: {problems}") from exc


def load(name_or_path: str) -> Profile:
    """A profile by name (a file of ``coachbus/llm/profiles``) or by path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return load_file(candidate)
    path = PROFILES_DIR / f"{name_or_path}.toml"
    if not path.exists():
        raise ProfileError(
            f"unknown profile {name_or_path!r}; known: {', '.join(available())} "
            "(or give a path to a .toml file)"
        )
    return load_file(path)


# ---------------------------------------------------------------------- prefix cache


def block_hashes(tokens: Sequence[str], block_tokens: int) -> list[bytes]:
    """One hash per full block, each chained to the one before (as vLLM's are), so
    a block only matches behind the same whole prefix."""
    out: list[bytes] = []
    parent = b""
    for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
        h = hashlib.blake2b(parent, digest_size=16)
        h.update("\x1f".join(tokens[start : start + block_tokens]).encode())
        parent = h.digest()
        out.append(parent)
    return out


class PrefixCache:
    """vLLM-style automatic prefix caching: full blocks keyed by their chained hash,
    least recently used evicted first, ``capacity_blocks`` at most (0 = off,
    None = unlimited)."""

    def __init__(self, capacity_blocks: int | None) -> None:
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, hashes: Sequence[bytes]) -> int:
        """How many leading blocks are cached (touching them)."""
        hit = 0
        for h in hashes:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            hit += 1
        return hit

    def insert(self, hashes: Iterable[bytes]) -> None:
        if self.capacity_blocks == 0:
            return
        for h in hashes:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while self.capacity_blocks is not None and len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def serve(self, hashes: Sequence[bytes], prompt_tokens: int, block_tokens: int) -> int:
        """Prompt tokens served from the cache for this prompt; its blocks are cached
        afterwards. The last prompt token is always computed (its logits start the
        answer), so a prompt never hits completely."""
        hit = self.lookup(hashes)
        self.insert(hashes)
        return min(hit * block_tokens, max(prompt_tokens - 1, 0))


# ---------------------------------------------------------------------- admission


@dataclass
class Waiting:
    key: tuple[int, int]
    need: int  # KV tokens the request holds while it runs
    ticket: object


class KVGate:
    """Admission by KV-cache capacity and sequence count. A request holds ``need``
    tokens from admission to completion; waiting requests are admitted strictly in
    order (FIFO, or by priority then arrival), so a large request at the head is not
    overtaken by smaller ones (no starvation). Clock-free: callers admit and release."""

    def __init__(self, capacity_tokens: int, max_num_seqs: int, by_priority: bool) -> None:
        self.capacity = capacity_tokens
        self.max_num_seqs = max_num_seqs
        self.by_priority = by_priority
        self.used = 0
        self.running = 0
        self._heap: list[tuple[tuple[int, int], int, Waiting]] = []
        self._seq = itertools.count()

    def fits(self, need: int) -> bool:
        room = self.capacity <= 0 or self.used + need <= self.capacity or self.running == 0
        seqs = self.max_num_seqs <= 0 or self.running < self.max_num_seqs
        return room and seqs

    @property
    def waiting(self) -> int:
        return len(self._heap)

    def offer(self, need: int, priority: int, ticket: object) -> bool:
        """True if admitted at once; otherwise queued (``ticket`` comes back from
        :meth:`release` when its turn comes)."""
        if not self._heap and self.fits(need):
            self._take(need)
            return True
        seq = next(self._seq)
        key = (priority if self.by_priority else 0, seq)
        heapq.heappush(self._heap, (key, seq, Waiting(key, need, ticket)))
        return False

    def withdraw(self, ticket: object) -> bool:
        """Drop a waiting request (its caller gave up); True if it was waiting."""
        for i, (_, _, w) in enumerate(self._heap):
            if w.ticket is ticket:
                self._heap.pop(i)
                heapq.heapify(self._heap)
                return True
        return False

    def _take(self, need: int) -> None:
        self.used += need
        self.running += 1

    def release(self, need: int) -> list[object]:
        """Give back a finished request's tokens; the tickets admitted now, in order."""
        self.used -= need
        self.running -= 1
        admitted: list[object] = []
        while self._heap and self.fits(self._heap[0][2].need):
            _, _, w = heapq.heappop(self._heap)
            self._take(w.need)
            admitted.append(w.ticket)
        return admitted
