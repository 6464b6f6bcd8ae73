"""The printed table and the plots, from the results of one run (nothing else)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

# Targets of issue #8; the measured values are compared against these.
OVERHEAD_P50_MS = 15.0
OVERHEAD_P99_MS = 50.0
EFFICIENCY_MAX = 1.05
COACH_BEYOND_TTFT_MS = 20.0
THROUGHPUT_FRACTION_AT_MAX = 0.9
PREFIX_RATIO_MIN = 0.8
# Flat prompts: the same bound the memory unit test holds turn 1000 to.
PROMPT_FLAT_FACTOR = 1.15
STACK_RSS_MAX_MIB = 1536.0
# Flat memory: RSS after all turns within 5 % of RSS after half of them.
RSS_FLAT_FACTOR = 1.05


def _get(data: Any, *path: str) -> Any:
    """``data[k1][k2]...``, or None where a level is missing (a phase that failed)."""
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not math.isnan(float(value)):
        return float(value)
    return None


def _fmt(value: Any, unit: str = "", digits: int = 1) -> str:
    v = _num(value)
    return "n/a" if v is None else f"{v:.{digits}f}{unit}"


def _verdict(value: Any, limit: float, *, at_most: bool) -> str:
    v = _num(value)
    if v is None:
        return "n/a"
    return "ok" if (v <= limit if at_most else v >= limit) else "MISS"


def rows(r: dict[str, Any]) -> list[dict[str, str]]:
    from bench import latency

    if r.get("only") == "latency":
        return latency.rows(r)
    out: list[dict[str, str]] = []

    def add(measure: str, value: str, target: str, baseline: str, verdict: str) -> None:
        out.append(
            {
                "measure": measure,
                "value": value,
                "target": target,
                "baseline": baseline,
                "verdict": verdict,
            }
        )

    ov = r.get("overhead") or {}
    for q, limit in (("p50", OVERHEAD_P50_MS), ("p99", OVERHEAD_P99_MS)):
        value = _get(ov, "overhead_ms", q)
        add(
            f"1 orchestration overhead {q} (instant LLM)",
            _fmt(value, " ms"),
            f"<= {limit:.0f} ms",
            f"turn {_fmt(_get(ov, 'turn_ms', q), ' ms')}, critical path "
            f"{_fmt(_get(ov, 'critical_path_ms', q), ' ms')}",
            _verdict(value, limit, at_most=True),
        )
    cp = r.get("critical_path") or {}
    eff = _get(cp, "efficiency", "p50")
    add(
        f"2 critical-path efficiency p50 ({_fmt(_get(cp, 'llm', 'ttft_ms'), ' ms', 0)}/LLM call)",
        _fmt(eff, "x", 2),
        f"<= {EFFICIENCY_MAX:.2f}x",
        f"sequential {_fmt(_get(cp, 'sequential_ratio', 'p50'), 'x', 2)} "
        f"({_fmt(_get(cp, 'sequential_ms', 'p50'), ' ms', 0)} vs turn "
        f"{_fmt(_get(cp, 'turn_ms', 'p50'), ' ms', 0)}, ideal "
        f"{_fmt(_get(cp, 'critical_path_ms', 'p50'), ' ms', 0)})",
        _verdict(eff, EFFICIENCY_MAX, at_most=True),
    )
    co = r.get("coach") or {}
    beyond = _get(co, "beyond_ttft_ms", "p50")
    llm_turns = _get(co, "turns_coach_called_llm") or 0
    add(
        "3 Coach first reply minus TTFT p50",
        _fmt(beyond, " ms"),
        f"<= {COACH_BEYOND_TTFT_MS:.0f} ms",
        f"p99 {_fmt(_get(co, 'beyond_ttft_ms', 'p99'), ' ms')}; LLM in "
        f"{llm_turns}/{llm_turns + (_get(co, 'turns_coach_deterministic') or 0)}"
        f" turns; det. first reply {_fmt(_get(co, 'deterministic_first_reply_ms', 'p50'), ' ms')}",
        _verdict(beyond, COACH_BEYOND_TTFT_MS, at_most=True),
    )
    tp = r.get("throughput") or {}
    for replicas in ("1", "2"):
        data = tp.get(replicas) or {}
        levels = data.get("levels") or []
        top = max((lv["users"] for lv in levels), default=None)
        for lv in levels:
            fraction = lv.get("fraction_of_ideal")
            is_top = lv["users"] == top
            add(
                f"4 throughput x{replicas} replicas, {lv['users']} users "
                f"({_fmt(_get(data, 'llm', 'ttft_ms'), ' ms', 0)}/LLM call)",
                _fmt(fraction, " of ideal", 2),
                f">= {THROUGHPUT_FRACTION_AT_MAX}" if is_top else "-",
                f"{_fmt(lv.get('throughput_per_s'), '/s', 2)} vs ideal "
                f"{_fmt(lv.get('ideal_per_s'), '/s', 2)} (ideal turn "
                f"{_fmt(data.get('ideal_turn_ms'), ' ms', 0)}); p50 turn "
                f"{_fmt(_get(lv, 'turn_ms', 'p50'), ' ms', 0)}; "
                f"ok {lv.get('ok')}/{lv.get('turns')}",
                _verdict(fraction, THROUGHPUT_FRACTION_AT_MAX, at_most=False) if is_top else "-",
            )
        burst = data.get("burst")
        if burst:
            add(
                f"4 throughput x{replicas} replicas, {burst['users']} users all at once",
                _fmt(burst.get("fraction_of_ideal"), " of ideal", 2),
                "-",
                f"{_fmt(burst.get('throughput_per_s'), '/s', 2)}; every turn until the last "
                f"is done; p50 turn {_fmt(_get(burst, 'turn_ms', 'p50'), ' ms', 0)}; "
                f"ok {burst.get('ok')}/{burst.get('turns')}",
                "-",
            )
    pr = r.get("prompts") or {}
    points = pr.get("checkpoints") or []
    if points:
        last = points[-1]
        ratio = last.get("shared_prefix_ratio_min")
        add(
            f"5 shared-prefix ratio, min pair (turn {last['turn']}, {len(pr.get('prompts', []))} "
            "prompts)",
            _fmt(ratio, "", 2),
            f">= {PREFIX_RATIO_MIN}",
            f"mean {_fmt(last.get('shared_prefix_ratio_mean'), '', 2)}; by turn "
            + " / ".join(_fmt(p.get("shared_prefix_ratio_min"), "", 2) for p in points),
            _verdict(ratio, PREFIX_RATIO_MIN, at_most=False),
        )
        tokens = {p["turn"]: p["coach_prompt_tokens"] for p in points}
        turns = sorted(tokens)
        growth = tokens[turns[-1]] / tokens[turns[-2]] if len(turns) > 1 else None
        add(
            "5 Coach prompt tokens at turn " + "/".join(str(t) for t in turns),
            " / ".join(str(tokens[t]) for t in turns),
            f"last <= {PROMPT_FLAT_FACTOR}x previous",
            f"last/previous {_fmt(growth, 'x', 2)}",
            _verdict(growth, PROMPT_FLAT_FACTOR, at_most=True),
        )
    cpu = r.get("cpu") or {}
    for name, ms in sorted((cpu.get("ms_per_turn") or {}).items(), key=lambda kv: -kv[1]):
        add(
            f"6 CPU per turn: {name}",
            _fmt(ms, " ms"),
            "-",
            f"idle {_fmt(_get(cpu, 'idle_percent_of_a_core', name), '% of a core')}",
            "-",
        )
    prof = r.get("profile") or {}
    if prof:
        add(
            "6 profile: serialization share of handler CPU",
            _fmt((prof.get("serialization_share") or 0) * 100, " %"),
            "-",
            f"in-process handlers {_fmt(prof.get('profiled_self_ms_per_turn'), ' ms')}/turn "
            f"over {prof.get('turns')} turns",
            "-",
        )
    mem = r.get("memory") or {}
    totals = mem.get("stack_total_mib") or {}
    end = totals.get("end")
    add(
        f"7 stack RSS after {mem.get('turns_at_end')} turns",
        _fmt(end, " MiB", 0),
        f"<= {STACK_RSS_MAX_MIB:.0f} MiB",
        f"idle {_fmt(totals.get('idle'), ' MiB', 0)}",
        _verdict(end, STACK_RSS_MAX_MIB, at_most=True),
    )
    half = _num(totals.get("half"))
    end_mib = _num(end)
    growth_rss = end_mib / half if half and end_mib is not None else None
    add(
        f"7 RSS growth {mem.get('turns_at_half')} -> {mem.get('turns_at_end')} turns",
        _fmt(growth_rss, "x", 3),
        f"<= {RSS_FLAT_FACTOR}x",
        f"after {mem.get('turns_at_half')}: {_fmt(half, ' MiB', 0)}",
        _verdict(growth_rss, RSS_FLAT_FACTOR, at_most=True),
    )
    # Apart: the broker's share is its in-memory log (the embedded broker keeps every
    # record it was sent), the services' share is ours.
    rss = mem.get("rss_mib") or {}
    parts = []
    for name in ("broker", "gateway"):
        half_mib = _num((rss.get("half") or {}).get(name))
        end_of = _num((rss.get("end") or {}).get(name))
        if half_mib is not None and end_of is not None:
            parts.append(f"{name} {half_mib:.0f} -> {end_of:.0f} MiB")
    services = {
        k: _num(v)
        for k, v in (rss.get("end") or {}).items()
        if k not in ("broker", "llm-sim") and _num(v) is not None
    }
    services_half = {k: _num(v) for k, v in (rss.get("half") or {}).items() if k in services}
    if services and all(v is not None for v in services_half.values()):
        total_end = sum(v for v in services.values() if v is not None)
        total_half = sum(v for v in services_half.values() if v is not None)
        add(
            "7 RSS growth, services without the broker",
            _fmt(total_end / total_half if total_half else None, "x", 3),
            "-",
            "; ".join(parts),
            "-",
        )
    out += latency.rows(r)
    return out


def table(r: dict[str, Any]) -> str:
    m = r.get("machine") or {}
    lines = [
        f"machine: {m.get('cores')} cores ({m.get('physical_cores')} physical), "
        f"{m.get('cpu_model')}, {m.get('memory_gib')} GiB, Python {m.get('python')}, "
        f"{m.get('os')}; load avg at start {m.get('load_avg_at_start')}, at end "
        f"{m.get('load_avg_at_end')}; a fixed loop took {m.get('cpu_loop_s_at_start')} s "
        f"per core at start, {m.get('cpu_loop_s_at_end')} s at end; "
        f"run took {_fmt(r.get('elapsed_s'), ' s', 0)}"
        + (" [QUICK: smoke-test sizes, figures not meaningful]" if r.get("quick") else ""),
        "",
    ]
    body = r.get("table") or rows(r)
    widths = [max(len(row[k]) for row in body) for k in ("measure", "value", "target")]
    header = ("measure", "value", "target")
    lines.append(
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + "  ok?   baseline"
    )
    lines.append("-" * (sum(widths) + 40))
    for row in body:
        cells = [row[k].ljust(w) for k, w in zip(header, widths, strict=True)]
        lines.append("  ".join(cells) + f"  {row['verdict']:<5} {row['baseline']}")
    lines += ["", _notes(r)]
    return "\n".join(lines)


def _notes(r: dict[str, Any]) -> str:
    out = [
        "overhead = (final.created_at - message.created_at) - (slowest parallel agent's "
        "latency_ms + Synth's own work); Synth's own work = its deterministic synthesis "
        "timed in-process on the turn's results + its LLM calls x one measured LLM call.",
        "efficiency = turn latency / that ideal; sequential = sum of the agents' latency_ms "
        "+ Synth's, over the same ideal. Throughput ideal = users / ideal turn at 1 user.",
    ]
    use = _get(r, "critical_path", "llm_use") or _get(r, "overhead", "llm_use") or {}
    called = [
        f"{name} ({info['llm_calls_per_turn']:.1f}/turn)"
        for name, info in use.items()
        if info.get("turns_with_llm_calls")
    ]
    silent = [name for name, info in use.items() if not info.get("turns_with_llm_calls")]
    out.append(
        "LLM calls (result usage/tier fields): "
        + (", ".join(called) if called else "none")
        + (f"; deterministic only: {', '.join(silent)}" if silent else "")
    )
    sim = _get(r, "critical_path", "sim_stats") or {}
    if sim:
        out.append(f"simulator requests by model (fixed-latency phase): {sim.get('by_model')}")
    prof = r.get("profile") or {}
    if prof.get("top_self"):
        out.append("hot path, top self time per turn (in-process handlers, cProfile):")
        for row in prof["top_self"][:8]:
            out.append(
                f"  {row['self_ms_per_turn']:7.2f} ms  {row['calls']:>6} calls  {row['function']}"
            )
        out.append("serialization, top cumulative per turn:")
        for row in (prof.get("serialization_top") or [])[:5]:
            out.append(f"  {row['cumulative_ms_per_turn']:7.2f} ms  {row['function']}")
    mem = _get(r, "memory", "rss_mib") or {}
    if mem.get("end"):
        out.append(
            "RSS MiB idle/half/end: "
            + ", ".join(
                f"{k} {_fmt(mem['idle'].get(k), '', 0)}/{_fmt(mem['half'].get(k), '', 0)}/"
                f"{_fmt(v, '', 0)}"
                for k, v in mem["end"].items()
            )
        )
    from bench import latency

    out += latency.notes(r)
    for err in r.get("errors") or []:
        out.append(f"PHASE FAILED: {err['phase']}: {err['error']}")
    return "\n".join(out)


def plots(r: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    wf = r.get("waterfall_turn")
    if wf:
        bars = wf["bars"]
        for i, bar in enumerate(bars):
            start = bar["end_ms"] - bar["own_ms"]
            ax.barh(i, start, color="#dddddd", edgecolor="none")
            ax.barh(
                i,
                bar["own_ms"],
                left=start,
                color="#4c72b0" if bar["tier"] != "deterministic" else "#55a868",
            )
            ax.text(bar["end_ms"], i, f" {bar['end_ms']:.0f} ms ({bar['tier']})", va="center")
        if wf.get("coach_first_ms") is not None:
            ax.axvline(wf["coach_first_ms"], color="#c44e52", ls="--", lw=1)
            ax.text(wf["coach_first_ms"], len(bars) - 0.4, " coach first text", color="#c44e52")
        ax.set_yticks(range(len(bars)), [b["name"] for b in bars])
        ax.invert_yaxis()
        ax.set_xlabel(
            "ms since the message was created (grey: waiting/transport, colour: own work)"
        )
        per_call = _fmt(_get(r, "critical_path", "llm", "ttft_ms"), " ms", 0)
        ax.set_title(f"a typical turn ({per_call} per LLM call)")
    else:
        ax.text(0.5, 0.5, "no turn measured", ha="center")
    fig.tight_layout()
    fig.savefig(out / "waterfall.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    colours = {"1": "#4c72b0", "2": "#dd8452"}
    for replicas, data in sorted((r.get("throughput") or {}).items()):
        levels = data.get("levels") or []
        xs = [lv["users"] for lv in levels]
        c = colours.get(replicas, "k")
        ax.plot(
            xs, [lv["ideal_per_s"] for lv in levels], ls="--", color=c, label=f"ideal x{replicas}"
        )
        ax.plot(
            xs,
            [lv["throughput_per_s"] for lv in levels],
            marker="o",
            color=c,
            label=f"measured x{replicas}",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent users (closed loop)")
    ax.set_ylabel("turns per second")
    ax.set_title("throughput vs concurrency")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
