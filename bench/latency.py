"""What a user waits for on the seed's hardware: our design against the seed's.

For each hardware profile of the LLM simulator (``coachbus llm-sim --profile``) the
stack runs with every decision sent to the model (bench/policy.toml), first one
user turn after turn, then 16 users at once (closed loop, first messages spread
over one turn). Per turn: the Coach's first text, the first synthesis text (the
first ``final_delta``, else the ``final``) and the full synthesis, all from the
message's ``created_at``. Beside them the seed's sequential-after-Shadow design on
the same profile, computed on the profile's virtual clock (bench/virtual_clock.py:
nothing sleeps), for the same number of users; and, from the simulator's timeline,
where our calls spent their time (queue, prefill, decode) and the share of prompt
tokens served from the prefix cache.

A profile's clock may run scaled (``time_scale`` < 1 makes the simulated model
faster). The figures are then reported unscaled: the orchestration overhead
measured with the instant model (phase A) is taken out before dividing by the
scale and put back after, so the pipeline's own time is never scaled up.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from bench.harness import (
    PARALLEL_AGENTS,
    POLICY_FILE,
    BenchStack,
    SimProcess,
    Turn,
    Users,
    closed_loop,
    running,
    ts,
)
from bench.virtual_clock import (
    SeedCall,
    SeedTurn,
    load_seed_design,
    seed_stages,
    simulate_seed,
    simulate_stages,
)
from coachbus.llm.sim import count_pieces
from coachbus.llm.simprofile import load

# Every call is let finish, however long the model takes: a call cut short by a
# timeout falls back to the deterministic tier and would make a turn faster by
# doing less than the seed does.
PATIENT_ENV = {
    "COACHBUS_LLM_DEFAULT_TIMEOUT_S": "900",
    "COACHBUS_LLM_TIMEOUTS_S": '{"coach": 900, "synth": 900}',
}
DEADLINE_MS = 900_000
# Goals of issue #19 (items 1 and 3).
FULL_VS_SEED_MAX = 0.5
FIRST_TEXT_BEYOND_SYNTH_TTFT_MS = 50.0


def _policy_max_tokens() -> dict[str, int]:
    policy = tomllib.loads(POLICY_FILE.read_text(encoding="utf-8"))
    default = int(policy["defaults"]["max_tokens"])
    return {
        kind: int(spec.get("max_tokens", default))
        for kind, spec in (policy.get("decision") or {}).items()
    }


def _policy_priorities() -> dict[str, int]:
    policy = tomllib.loads(POLICY_FILE.read_text(encoding="utf-8"))
    default = int(policy["defaults"]["priority"])
    return {
        kind: int(spec.get("priority", default))
        for kind, spec in (policy.get("decision") or {}).items()
    }


def call_kind(record: dict[str, Any]) -> str:
    """The decision kind of a simulator request, from its max_tokens and priority
    (distinct per decision in bench/policy.toml, except the agents' structured ones,
    which share the defaults and are reported together)."""
    sizes, priorities = _policy_max_tokens(), _policy_priorities()
    matches = [
        kind
        for kind in sizes
        if sizes[kind] == record.get("max_tokens") and priorities[kind] == record.get("priority")
    ]
    return matches[0] if len(matches) == 1 else "ocean_update|pattern_classification"


def pct(values: list[float], q: int) -> float:
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def dist(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p95": pct(values, 95), "n": len(values)}


@dataclass(frozen=True)
class Scaling:
    """Wall milliseconds of a scaled run back to unscaled ones."""

    time_scale: float
    overhead_ms: float

    def unscale(self, wall_ms: float) -> float:
        if self.time_scale == 1.0:
            return wall_ms
        model = max(wall_ms - self.overhead_ms, 0.0)
        return model / self.time_scale + min(wall_ms, self.overhead_ms)


# ---------------------------------------------------------------------- our turns


def synth_call(turn: Turn, timeline: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Synth's (first) model call of this turn in the simulator's timeline."""
    size = _policy_max_tokens()["synthesis_prose"]
    calls = [
        r
        for r in timeline
        if r.get("max_tokens") == size and any(turn.tag in t for t in r.get("user_tails", []))
    ]
    return min(calls, key=lambda r: r["arrived"]) if calls else None


def turn_figures(turn: Turn, timeline: list[dict[str, Any]], sc: Scaling) -> dict[str, Any]:
    assert turn.message_at is not None and turn.final_at is not None
    out: dict[str, Any] = {
        "coach_first_ms": sc.unscale(turn.since_message_ms(turn.first_coach_at) or math.nan),
        "first_synthesis_ms": sc.unscale(turn.since_message_ms(turn.first_final_at) or math.nan),
        "full_ms": sc.unscale(turn.turn_ms),
        "streamed": turn.final_deltas > 0,
        "last_agent_ms": math.nan,
    }
    agent_ends = [turn.since_message_ms(ts(a["created_at"])) for a in turn.agents.values()]
    if agent_ends:
        out["last_agent_ms"] = sc.unscale(max(e for e in agent_ends if e is not None))
    call = synth_call(turn, timeline)
    if call is not None and "first_token" in call:
        scale = sc.time_scale
        out["synth_ttft_ms"] = (call["first_token"] - call["arrived"]) * 1000 / scale
        out["synth_queue_ms"] = (call["admitted"] - call["arrived"]) * 1000 / scale
        out["synth_decode_ms"] = (call["done"] - call["first_token"]) * 1000 / scale
        # From Synth's first token to the user's first synthesis text: the pipeline's
        # own time when Synth streams; with the final only, Synth's whole decode too.
        assert turn.first_final_at is not None
        if out["streamed"]:
            # Negative when Synth opened with the rendering's sentence: shown when the
            # model was asked, before its first token.
            out["first_text_beyond_synth_ttft_ms"] = (
                turn.first_final_at - call["first_token"]
            ) * 1000
            out["opened"] = turn.opened
            # The model's first sentence waits for its own decode. Its share of the
            # gap, at this call's mean time per token; the rest is the pipeline's
            # (Synth's checks, the broker, the gateway).
            produced = int(call.get("completion_tokens") or 0)
            if produced > 1 and turn.first_model_final_at is not None:
                per_token_ms = out["synth_decode_ms"] / (produced - 1)
                sentence = count_pieces(turn.first_model_final_text)
                out["model_text_beyond_synth_ttft_ms"] = (
                    turn.first_model_final_at - call["first_token"]
                ) * 1000
                out["first_sentence_tokens"] = float(sentence)
                out["first_sentence_decode_ms"] = max(sentence - 1, 0) * per_token_ms
                out["first_text_pipeline_ms"] = (
                    out["model_text_beyond_synth_ttft_ms"] - out["first_sentence_decode_ms"]
                )
        else:
            out["first_text_beyond_synth_ttft_ms"] = (
                out["synth_decode_ms"] + (turn.first_final_at - call["done"]) * 1000
            )
    return out


def calls_breakdown(timeline: list[dict[str, Any]], scale: float) -> dict[str, Any]:
    """Where the model calls spent their time, per decision kind (unscaled ms)."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in timeline:
        if "first_token" in r:
            by_kind[call_kind(r)].append(r)
    out: dict[str, Any] = {}
    for kind, records in sorted(by_kind.items()):
        out[kind] = {
            "calls": len(records),
            "queued_share": sum(1 for r in records if r["queued"]) / len(records),
            "queue_ms": dist([(r["admitted"] - r["arrived"]) * 1000 / scale for r in records]),
            "ttft_ms": dist([(r["first_token"] - r["arrived"]) * 1000 / scale for r in records]),
            "decode_ms": dist([(r["done"] - r["first_token"]) * 1000 / scale for r in records]),
            "prompt_tokens": dist([float(r["prompt_tokens"]) for r in records]),
            "cached_tokens": dist([float(r.get("cached_tokens", 0)) for r in records]),
            "completion_tokens": dist([float(r.get("completion_tokens", 0)) for r in records]),
        }
    return out


def summarise(
    turns: list[Turn], stats: dict[str, Any], sc: Scaling, elapsed_s: float
) -> dict[str, Any]:
    good = [t for t in turns if t.ok]
    timeline = stats.get("timeline") or []
    figures = [turn_figures(t, timeline, sc) for t in good]

    def col(key: str) -> list[float]:
        return [f[key] for f in figures if key in f and not math.isnan(f[key])]

    prompt = stats.get("prompt_tokens_cached", 0) + stats.get("prompt_tokens_computed", 0)
    tiers: dict[str, dict[str, int]] = defaultdict(dict)
    for t in good:
        for agent in (*PARALLEL_AGENTS, "synth"):
            tier = t.tier(agent)
            tiers[agent][tier] = tiers[agent].get(tier, 0) + 1
    return {
        "turns": len(turns),
        "ok": len(good),
        "errors": [f"{t.user}: {t.error}" for t in turns if not t.ok][:5],
        "elapsed_wall_s": elapsed_s,
        "streamed_turns": sum(1 for f in figures if f["streamed"]),
        "opened_turns": sum(1 for f in figures if f.get("opened")),
        "degraded_turns": sum(1 for t in good if (t.final or {}).get("degraded")),
        "coach_first_ms": dist(col("coach_first_ms")),
        "first_synthesis_ms": dist(col("first_synthesis_ms")),
        "full_ms": dist(col("full_ms")),
        "last_agent_ms": dist(col("last_agent_ms")),
        "synth_ttft_ms": dist(col("synth_ttft_ms")),
        "synth_queue_ms": dist(col("synth_queue_ms")),
        "synth_decode_ms": dist(col("synth_decode_ms")),
        "first_text_beyond_synth_ttft_ms": dist(col("first_text_beyond_synth_ttft_ms")),
        "model_text_beyond_synth_ttft_ms": dist(col("model_text_beyond_synth_ttft_ms")),
        "first_sentence_tokens": dist(col("first_sentence_tokens")),
        "first_sentence_decode_ms": dist(col("first_sentence_decode_ms")),
        "first_text_pipeline_ms": dist(col("first_text_pipeline_ms")),
        "prefix_cache_share": stats.get("prompt_tokens_cached", 0) / prompt if prompt else None,
        "prompt_tokens": prompt,
        "sim": {
            k: stats.get(k)
            for k in ("requests", "max_active", "queued", "max_kv_used", "completion_tokens")
        },
        "calls": calls_breakdown(timeline, sc.time_scale),
        # Which tier answered each agent's result: "small" = the model carried it.
        "tiers": dict(tiers),
    }


# ---------------------------------------------------------------------- the seed


def seed_summary(turns: list[SeedTurn]) -> dict[str, Any]:
    return {
        "full_ms": dist([t.full_s * 1000 for t in turns]),
        "first_synthesis_ms": dist([t.first_text_s * 1000 for t in turns]),
        "turns": len(turns),
    }


def seed_for(profile: str, users: int, rounds: int, stagger_s: float) -> dict[str, Any]:
    """The seed's design on ``profile``: a model computation on the virtual clock."""
    p = load(profile)
    design = load_seed_design()
    out = seed_summary(simulate_seed(p, design, users=users, turns=rounds, stagger_s=stagger_s))
    out["headline_s"] = p.seed.full_synthesis_s if p.seed else None
    out["design"] = design.model_dump()
    return out


def _call(calls: dict[str, Any], kind: str) -> SeedCall | None:
    c = calls.get(kind)
    if not c:
        return None
    prompt, cached = c["prompt_tokens"]["p50"], c["cached_tokens"]["p50"]
    return SeedCall(
        shared_prefix_tokens=int(cached),
        own_prompt_tokens=max(int(prompt - cached), 0),
        output_tokens=max(int(c["completion_tokens"]["p50"]), 1),
    )


def what_if(
    profile: str, calls: dict[str, Any], users: int, rounds: int, stagger_s: float
) -> dict[str, Any]:
    """Model computations on the profile's virtual clock that split our gain over
    the seed into its causes: our structure with our measured calls (beside the
    measurement: the difference is the pipeline's own time), the seed's sequential
    structure with our calls, and our structure with the seed's calls."""
    p = load(profile)
    design = load_seed_design()
    agent = _call(calls, "ocean_update|pattern_classification")
    risk, steps = _call(calls, "risk_screen"), _call(calls, "blocked_steps")
    coach, synth = _call(calls, "coach_reply"), _call(calls, "synthesis_prose")
    if None in (agent, risk, steps, coach, synth):
        return {}
    assert agent and risk and steps and coach and synth
    # Shadow and Persona ask the agents' structured decisions; Stability asks the
    # risk screen, then the blocked steps; Plasticity asks none.
    ours = [[[agent], [agent], [risk, steps], [coach]], [[synth]]]
    seed_structure = [[[agent]], [[agent], [risk, steps], [coach]], [[synth]]]
    seed = seed_stages(design)
    our_structure_seed_calls = [[[design.shadow], *([w] for w in design.workers)], seed[-1]]
    out: dict[str, Any] = {}
    for name, stages in (
        ("ours_modelled", ours),
        ("seed_structure_our_calls", seed_structure),
        ("our_structure_seed_calls", our_structure_seed_calls),
    ):
        out[name] = {
            "1": seed_summary(simulate_stages(p, stages)),
            str(users): seed_summary(
                simulate_stages(p, stages, users=users, turns=rounds, stagger_s=stagger_s)
            ),
        }
    return out


# ---------------------------------------------------------------------- the phase


async def measure_profile(
    name: str,
    *,
    users: Users,
    sim: SimProcess,
    n_users: int,
    turns_one: int,
    rounds: int,
    time_scale: float,
    overhead_ms: float,
    turn_timeout: float,
) -> dict[str, Any]:
    sc = Scaling(time_scale, overhead_ms)
    await sim.start(profile=name, time_scale=time_scale)
    # The agents' clients reconnect to the new process; the turn also warms the
    # prefix cache with the user's first prompts, as any earlier turn would.
    await users.turn(users.user(0), turn_timeout)
    await sim.stats(reset=True)
    one, elapsed1 = await closed_loop(
        users, 1, max_turns=turns_one, duration_s=math.inf, turn_timeout=turn_timeout
    )
    single = summarise(one, await sim.stats(), sc, elapsed1)
    # Many users: first messages spread over one of our turns, then closed loop.
    turn_s = (single["full_ms"]["p50"] / 1000) if single["ok"] else 1.0
    stagger_s = turn_s / n_users
    await sim.stats(reset=True)
    many, elapsed_n = await closed_loop(
        users,
        n_users,
        max_turns=n_users * rounds,
        duration_s=math.inf,
        turn_timeout=turn_timeout,
        stagger_s=stagger_s * time_scale,
    )
    concurrent = summarise(many, await sim.stats(), sc, elapsed_n)
    profile = load(name)
    return {
        "profile": name,
        "description": profile.description,
        "hardware": profile.hardware.model_dump() if profile.hardware else None,
        "time_scale": time_scale,
        "overhead_ms_used_for_unscaling": overhead_ms,
        "users": {"1": single, str(n_users): concurrent},
        "seed": {
            "1": seed_for(name, 1, 1, 0.0),
            str(n_users): seed_for(name, n_users, rounds, stagger_s),
        },
        "what_if": what_if(name, single["calls"], n_users, rounds, stagger_s),
    }


async def phase_latency(
    *,
    profiles: tuple[str, ...],
    sim: SimProcess,
    stack: BenchStack,
    n_users: int,
    turns_one: int,
    rounds: int,
    time_scale: float,
    overhead_ms: float,
    turn_timeout: float = 600.0,
) -> dict[str, Any]:
    out: dict[str, Any] = {"users": n_users, "time_scale": time_scale, "profiles": {}}
    async with running(stack) as (users, _tap):
        out["stack_start_s"] = stack.started_s
        for name in profiles:
            out["profiles"][name] = await measure_profile(
                name,
                users=users,
                sim=sim,
                n_users=n_users,
                turns_one=turns_one,
                rounds=rounds,
                time_scale=time_scale,
                overhead_ms=overhead_ms,
                turn_timeout=turn_timeout,
            )
    return out


# ---------------------------------------------------------------------- report


def _ms(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(float(value)):
        return "n/a"
    return f"{value / 1000:.1f} s" if abs(value) >= 1000 else f"{value:.0f} ms"


def rows(r: dict[str, Any]) -> list[dict[str, str]]:
    """One row per profile, user count and figure; ok/MISS on the two goals."""
    out: list[dict[str, str]] = []
    lat = r.get("latency") or {}
    for name, data in (lat.get("profiles") or {}).items():
        for users, ours in (data.get("users") or {}).items():
            seed = (data.get("seed") or {}).get(users) or {}
            label = f"8 {name}, {users} user{'s' if users != '1' else ''}"
            full, seed_full = ours["full_ms"], seed.get("full_ms") or {}
            ratio = (
                full["p50"] / seed_full["p50"]
                if seed_full.get("p50") and not math.isnan(full["p50"])
                else math.nan
            )
            cache = ours.get("prefix_cache_share")
            out.append(
                {
                    "measure": f"{label}: full synthesis p50 / p95",
                    "value": f"{_ms(full['p50'])} / {_ms(full['p95'])}",
                    "target": f"<= {FULL_VS_SEED_MAX} x seed",
                    "baseline": f"seed design {_ms(seed_full.get('p50'))} / "
                    f"{_ms(seed_full.get('p95'))} (x{ratio:.2f}); "
                    f"ok {ours['ok']}/{ours['turns']}",
                    "verdict": "n/a"
                    if math.isnan(ratio)
                    else ("ok" if ratio <= FULL_VS_SEED_MAX else "MISS"),
                }
            )
            first = ours["first_synthesis_ms"]
            beyond = ours["first_text_beyond_synth_ttft_ms"]["p50"]
            out.append(
                {
                    "measure": f"{label}: first synthesis text p50 / p95",
                    "value": f"{_ms(first['p50'])} / {_ms(first['p95'])}",
                    "target": f"<= Synth TTFT + {FIRST_TEXT_BEYOND_SYNTH_TTFT_MS:.0f} ms",
                    "baseline": f"{_ms(beyond)} after Synth's first token "
                    f"(opened with the rendering's sentence {ours.get('opened_turns', 0)}"
                    f"/{ours['streamed_turns']}; the model's first sentence "
                    f"{_ms(_p50(ours, 'model_text_beyond_synth_ttft_ms'))} after it = decode "
                    f"{_ms(_p50(ours, 'first_sentence_decode_ms'))}"
                    f" + pipeline {_ms(_p50(ours, 'first_text_pipeline_ms'))}; "
                    f"Synth TTFT {_ms(ours['synth_ttft_ms']['p50'])}); "
                    f"streamed {ours['streamed_turns']}/{ours['ok']}; seed "
                    f"{_ms((seed.get('first_synthesis_ms') or {}).get('p50'))}",
                    "verdict": "n/a"
                    if not isinstance(beyond, int | float) or math.isnan(beyond)
                    else ("ok" if beyond <= FIRST_TEXT_BEYOND_SYNTH_TTFT_MS else "MISS"),
                }
            )
            model = {k: (v.get(users) or {}) for k, v in (data.get("what_if") or {}).items()}
            if model:

                def full_p50(key: str, m: dict[str, Any] = model) -> Any:
                    return ((m.get(key) or {}).get("full_ms") or {}).get("p50")

                out.append(
                    {
                        "measure": f"{label}: modelled full synthesis p50 (why)",
                        "value": _ms(full_p50("ours_modelled")),
                        "target": "-",
                        "baseline": "our calls in the seed's sequential structure "
                        f"{_ms(full_p50('seed_structure_our_calls'))}; the seed's calls in "
                        f"our parallel structure {_ms(full_p50('our_structure_seed_calls'))}",
                        "verdict": "-",
                    }
                )
            coach = ours["coach_first_ms"]
            out.append(
                {
                    "measure": f"{label}: Coach first text p50 / p95",
                    "value": f"{_ms(coach['p50'])} / {_ms(coach['p95'])}",
                    "target": "-",
                    "baseline": "prefix cache served "
                    + ("n/a" if cache is None else f"{cache * 100:.0f} %")
                    + f" of {ours['prompt_tokens']} prompt tokens; last agent p50 "
                    f"{_ms(ours['last_agent_ms']['p50'])}",
                    "verdict": "-",
                }
            )
    return out


def _p50(data: dict[str, Any], key: str) -> Any:
    return (data.get(key) or {}).get("p50")


def notes(r: dict[str, Any]) -> list[str]:
    lat = r.get("latency") or {}
    if not lat:
        return []
    scale = lat.get("time_scale", 1.0)
    lines = [
        "8 = hardware profiles (coachbus llm-sim --profile, bench/profiles.md): every "
        "decision to the model; seed = its sequential-after-Shadow design computed on the "
        "same profile's virtual clock (Shadow, then 4 workers, then Synth; token counts "
        "in bench/seed_design.toml).",
    ]
    if scale != 1.0:
        lines.append(
            f"8: the simulated clock ran x{scale} (faster); figures are unscaled: "
            "(wall - overhead) / scale + overhead, overhead = phase A's p50."
        )
    for name, data in (lat.get("profiles") or {}).items():
        for users, ours in (data.get("users") or {}).items():
            parts = []
            for kind, c in (ours.get("calls") or {}).items():
                parts.append(
                    f"{kind} x{c['calls']}: queue {_ms(c['queue_ms']['p50'])}, TTFT "
                    f"{_ms(c['ttft_ms']['p50'])}, decode {_ms(c['decode_ms']['p50'])} "
                    f"({c['completion_tokens']['p50']:.0f} tok), cached "
                    f"{c['cached_tokens']['p50']:.0f}/{c['prompt_tokens']['p50']:.0f}"
                )
            lines.append(f"8 {name}, {users} users, calls p50: " + "; ".join(parts))
    return lines
