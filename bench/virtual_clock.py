"""The LLM simulator's serving model on a virtual clock, and the seed design it
checks the hardware profiles with.

:class:`VirtualEngine` runs the scheduling of ``coachbus llm-sim --profile``
(:mod:`coachbus.llm.simprofile`: KV admission, prefix cache, prefill and batched
decode at the profile's speeds) on a clock that jumps from event to event: what a
workload costs on a profile, computed without sleeping. The seed design
(``bench/seed_design.toml``) is the seed's sequential-after-Shadow turn as such a
workload; bench/latency.py sets it beside our measured turns, and
tests/bench/test_virtual_clock.py checks that each profile lands near the time the
seed measured on that hardware.
"""

from __future__ import annotations

import heapq
import itertools
import math
import tomllib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coachbus.llm.simprofile import KVGate, PrefixCache, Profile, ProfileError, block_hashes

SEED_DESIGN_FILE = Path(__file__).with_name("seed_design.toml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class VRequest:
    """One request to :class:`VirtualEngine`. ``tokens`` identify the prompt (for
    the prefix cache); ``prompt_tokens`` defaults to their number."""

    name: str
    tokens: Sequence[str]
    output_tokens: int
    priority: int = 0
    prompt_tokens: int = 0
    on_done: Callable[[VRequest, float], None] | None = None
    # Filled in by the engine.
    arrived: float = math.nan
    admitted: float = math.nan
    first_token: float = math.nan
    done: float = math.nan
    cached_tokens: int = 0
    queued: bool = False
    _left: float = 0.0

    def __post_init__(self) -> None:
        if not self.prompt_tokens:
            self.prompt_tokens = len(self.tokens)


@dataclass
class VirtualEngine:
    """The profile's serving model on a virtual clock: KV admission, one prefill
    lane (prefills run one after another, each at the profile's prefill speed),
    decode in a batch whose per-sequence speed follows the profile's curve.
    Deterministic; nothing sleeps."""

    profile: Profile
    now: float = 0.0
    cache: PrefixCache = field(init=False)
    gate: KVGate = field(init=False)
    done: list[VRequest] = field(default_factory=list)
    _prefill: deque[VRequest] = field(default_factory=deque)
    _prefill_end: float = math.inf
    _decoding: list[VRequest] = field(default_factory=list)
    _arrivals: list[tuple[float, int, VRequest]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        p = self.profile
        self.cache = PrefixCache(p.prefix_blocks)
        self.gate = KVGate(
            p.kv_capacity, p.scheduler.max_num_seqs, p.scheduler.policy == "priority"
        )

    def need(self, req: VRequest) -> int:
        return self.profile.blocks(req.prompt_tokens + req.output_tokens) * (
            self.profile.kv_cache.block_tokens
        )

    def submit(self, req: VRequest, at: float | None = None) -> None:
        when = self.now if at is None else at
        heapq.heappush(self._arrivals, (when, next(self._seq), req))

    def _arrive(self, req: VRequest) -> None:
        req.arrived = self.now
        if self.gate.offer(self.need(req), req.priority, req):
            self._admit(req)
        else:
            req.queued = True

    def _admit(self, req: VRequest) -> None:
        req.admitted = self.now
        self._prefill.append(req)
        if len(self._prefill) == 1:
            self._start_prefill()

    def _start_prefill(self) -> None:
        head = self._prefill[0]
        p = self.profile
        hashes = block_hashes(head.tokens, p.kv_cache.block_tokens)
        head.cached_tokens = self.cache.serve(hashes, head.prompt_tokens, p.kv_cache.block_tokens)
        self._prefill_end = self.now + p.prefill_s(
            head.prompt_tokens - head.cached_tokens, head.cached_tokens
        )

    def _rate(self) -> float:
        return self.profile.decode_tps(len(self._decoding))

    def run(self, until: float = math.inf) -> None:
        """Advance until nothing is left to do (or ``until``)."""
        while True:
            rate = self._rate()
            decode_end = math.inf
            if self._decoding:
                least = min(r._left for r in self._decoding)
                decode_end = self.now + (0.0 if math.isinf(rate) else least / rate)
            arrival = self._arrivals[0][0] if self._arrivals else math.inf
            prefill_end = self._prefill_end if self._prefill else math.inf
            nxt = min(arrival, prefill_end, decode_end)
            if math.isinf(nxt) or nxt > until:
                return
            if self._decoding and not math.isinf(rate):
                step = (nxt - self.now) * rate
                for r in self._decoding:
                    r._left -= step
            self.now = nxt
            if nxt == decode_end:
                self._finish_decodes()
            elif nxt == prefill_end:
                self._finish_prefill()
            else:
                _, _, req = heapq.heappop(self._arrivals)
                self._arrive(req)

    def _finish_prefill(self) -> None:
        req = self._prefill.popleft()
        req.first_token = self.now
        # The first token comes out of the prefill step; the rest are decoded.
        req._left = max(req.output_tokens - 1, 0)
        self._decoding.append(req)
        if self._prefill:
            self._start_prefill()

    def _finish_decodes(self) -> None:
        if math.isinf(self._rate()):
            for r in self._decoding:
                r._left = 0.0
        finished = [r for r in self._decoding if r._left <= 1e-9]
        self._decoding = [r for r in self._decoding if r._left > 1e-9]
        for req in finished:
            req.done = self.now
            self.done.append(req)
            for ticket in self.gate.release(self.need(req)):
                assert isinstance(ticket, VRequest)
                self._admit(ticket)
            if req.on_done is not None:
                req.on_done(req, self.now)


# ---------------------------------------------------------------------- seed design


class SeedCall(_Strict):
    """One model call of the seed design: its prompt (a prefix shared with the
    turn's other calls plus its own part) and its output."""

    shared_prefix_tokens: int = Field(ge=0)
    own_prompt_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=1)


class SeedDesign(_Strict):
    """The seed's sequential-after-Shadow turn: Shadow, then the workers at once,
    then Synth (see ``bench/seed_design.toml``)."""

    shadow: SeedCall
    workers: list[SeedCall]
    synth: SeedCall


def load_seed_design(path: Path = SEED_DESIGN_FILE) -> SeedDesign:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return SeedDesign.model_validate(data["design"])
    except (OSError, tomllib.TOMLDecodeError, KeyError, ValidationError) as exc:
        raise ProfileError(f"{path}: invalid seed design: {exc}") from exc


def _prompt(call: SeedCall, user: int, turn: int, role: str) -> list[str]:
    # Tokens that identify the prompt for the prefix cache: the shared part is the
    # same for every call of one user's turn, the own part differs per call.
    shared = [f"u{user}t{turn}s{i}" for i in range(call.shared_prefix_tokens)]
    own = [f"u{user}t{turn}{role}{i}" for i in range(call.own_prompt_tokens)]
    return shared + own


# A turn as stages run one after another; a stage is chains run at once; a chain is
# calls run one after another. The seed: [[shadow]], [[w1], [w2], [w3], [w4]], [[synth]].
Stages = Sequence[Sequence[Sequence[SeedCall]]]


def seed_stages(design: SeedDesign) -> list[list[list[SeedCall]]]:
    return [[[design.shadow]], [[w] for w in design.workers], [[design.synth]]]


@dataclass
class SeedTurn:
    user: int
    started: float
    calls: list[VRequest] = field(default_factory=list)

    @property
    def last(self) -> VRequest:
        return self.calls[-1]

    @property
    def full_s(self) -> float:
        return self.last.done - self.started

    @property
    def first_text_s(self) -> float:
        """When the final call's text begins (the seed streams Synth's answer)."""
        return self.last.first_token - self.started


def simulate_stages(
    profile: Profile,
    stages: Stages,
    *,
    users: int = 1,
    turns: int = 1,
    stagger_s: float = 0.0,
) -> list[SeedTurn]:
    """Turns of ``stages`` on ``profile`` (closed loop: each user starts its next turn
    when the last stage is done; user ``i`` starts at ``i * stagger_s``). The last
    stage must be a single call (the synthesis)."""
    if len(stages[-1]) != 1 or len(stages[-1][0]) != 1:
        raise ValueError("the last stage must be one call")
    engine = VirtualEngine(profile)
    out: list[SeedTurn] = []

    def start(user: int, turn: int, at: float) -> None:
        st = SeedTurn(user=user, started=at)
        out.append(st)
        run_stage(st, user, turn, 0, at)

    def run_stage(st: SeedTurn, user: int, turn: int, index: int, at: float) -> None:
        if index == len(stages):
            if turn + 1 < turns:
                start(user, turn + 1, at)
            return
        chains = stages[index]
        left = [len(chains)]

        def run_call(chain: int, step: int, now: float) -> None:
            calls = chains[chain]
            if step == len(calls):
                left[0] -= 1
                if left[0] == 0:
                    run_stage(st, user, turn, index + 1, now)
                return
            call = calls[step]
            req = VRequest(
                f"s{index}c{chain}.{step}",
                _prompt(call, user, turn, f"s{index}c{chain}.{step}_"),
                call.output_tokens,
                on_done=lambda _req, t: run_call(chain, step + 1, t),
            )
            st.calls.append(req)
            engine.submit(req, now)

        for chain in range(len(chains)):
            run_call(chain, 0, at)

    for user in range(users):
        start(user, 0, user * stagger_s)
    engine.run()
    return out


def simulate_seed(
    profile: Profile,
    design: SeedDesign,
    *,
    users: int = 1,
    turns: int = 1,
    stagger_s: float = 0.0,
) -> list[SeedTurn]:
    """The seed's turns on ``profile`` (see :func:`simulate_stages`)."""
    return simulate_stages(
        profile, seed_stages(design), users=users, turns=turns, stagger_s=stagger_s
    )
