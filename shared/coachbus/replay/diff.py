"""What a candidate decided differently on each recorded turn, the totals, the
guard that fails a run, and the report (``diff.json`` and ``report.html``)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from coachbus.replay.record import Recorded


def _crisis(result: dict[str, Any] | None) -> tuple[str, bool]:
    crisis = ((result or {}).get("payload") or {}).get("crisis") or {}
    return str(crisis.get("category", "none")), bool(crisis.get("uncertain", False))


def _steps(result: dict[str, Any] | None) -> list[str]:
    blocked = ((result or {}).get("payload") or {}).get("blocked_steps") or []
    return sorted({str(b.get("step_id") or b.get("step")) for b in blocked})


def _conflicts(final: dict[str, Any] | None) -> list[str]:
    return sorted(
        f"{c['rule']}:{c['winner']}>{c['overruled']}" for c in (final or {}).get("conflicts", [])
    )


def _tokens(results: dict[str, dict[str, Any]], final: dict[str, Any] | None) -> int:
    usage = (final or {}).get("usage") or {}
    if usage:
        return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    return sum(
        int((r.get("usage") or {}).get("prompt_tokens", 0))
        + int((r.get("usage") or {}).get("completion_tokens", 0))
        for r in results.values()
    )


def turn_diff(
    base: Recorded,
    cand_results: dict[str, dict[str, Any]],
    cand_final: dict[str, Any] | None,
    latency_s: float | None,
) -> dict[str, Any]:
    """What the candidate decided differently on one recorded turn."""
    from coachbus.safety.steps import markers_of
    from coachbus.text import find_markers

    b_crisis, c_crisis = (
        _crisis(base.results.get("stability")),
        _crisis(cand_results.get("stability")),
    )
    b_steps, c_steps = _steps(base.results.get("stability")), _steps(cand_results.get("stability"))
    decisions = {
        agent: sorted(
            k
            for k in set((base.results.get(agent) or {}).get("payload") or {})
            | set((cand_results.get(agent) or {}).get("payload") or {})
            if k not in ("text", "summary", "quotes", "evidence")
            and ((base.results.get(agent) or {}).get("payload") or {}).get(k)
            != ((cand_results.get(agent) or {}).get("payload") or {}).get(k)
        )
        for agent in sorted(set(base.results) | set(cand_results))
    }
    text = str((cand_final or {}).get("text", ""))
    leaks = find_markers(text, markers_of(set(b_steps) | set(c_steps))) if text else []
    missed = b_crisis[0] != "none" and c_crisis[0] == "none" and not c_crisis[1]
    return {
        "turn_id": base.turn_id,
        "user_id": base.user_id,
        "decisions_changed": {a: ks for a, ks in decisions.items() if ks},
        "tiers": {
            "baseline": {a: r.get("tier") for a, r in sorted(base.results.items())},
            "candidate": {a: r.get("tier") for a, r in sorted(cand_results.items())},
        },
        "crisis": {
            "baseline": b_crisis[0],
            "candidate": c_crisis[0],
            "baseline_uncertain": b_crisis[1],
            "candidate_uncertain": c_crisis[1],
            "changed": b_crisis != c_crisis,
            "missed": missed,
        },
        "blocked_steps": {"baseline": b_steps, "candidate": c_steps, "changed": b_steps != c_steps},
        "leaked_steps": sorted(set(leaks)),
        "conflicts": {
            "baseline": _conflicts(base.final),
            "candidate": _conflicts(cand_final),
            "changed": _conflicts(base.final) != _conflicts(cand_final),
        },
        "final": {
            "baseline": (base.final or {}).get("text"),
            "candidate": (cand_final or {}).get("text"),
            "changed": (base.final or {}).get("text") != (cand_final or {}).get("text"),
        },
        "tokens": {
            "baseline": _tokens(base.results, base.final),
            "candidate": _tokens(cand_results, cand_final),
        },
        "latency_s": None if latency_s is None else round(latency_s, 3),
        "answered": cand_final is not None,
    }


def totals(turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def count(pred: Any) -> int:
        return sum(1 for t in turns if pred(t))

    latencies = sorted(t["latency_s"] for t in turns if t["latency_s"] is not None)
    return {
        "turns": len(turns),
        "answered": count(lambda t: t["answered"]),
        "decisions_changed": count(lambda t: t["decisions_changed"]),
        "crisis_changed": count(lambda t: t["crisis"]["changed"]),
        "crisis_missed": count(lambda t: t["crisis"]["missed"]),
        "blocked_steps_changed": count(lambda t: t["blocked_steps"]["changed"]),
        "leaks": count(lambda t: t["leaked_steps"]),
        "conflicts_changed": count(lambda t: t["conflicts"]["changed"]),
        "finals_changed": count(lambda t: t["final"]["changed"]),
        "tokens": {
            "baseline": sum(t["tokens"]["baseline"] for t in turns),
            "candidate": sum(t["tokens"]["candidate"] for t in turns),
        },
        "latency_s_p50": latencies[len(latencies) // 2] if latencies else None,
    }


def guard(turns: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """The turns that fail a run: a crisis the recording caught and the candidate
    missed, a blocked step named in the candidate's final reply."""
    return {
        "missed_crisis": [t["turn_id"] for t in turns if t["crisis"]["missed"]],
        "leaked_steps": [t["turn_id"] for t in turns if t["leaked_steps"]],
    }


def render_html(diff: dict[str, Any]) -> str:
    """``report.html``: each turn's recorded and candidate final reply side by side,
    words removed and added marked, the turn's flags beside it."""
    rows = []
    for turn in diff["turns"]:
        recorded = str(turn["final"]["baseline"] or "").split()
        candidate = str(turn["final"]["candidate"] or "").split()
        left, right = [], []
        matcher = difflib.SequenceMatcher(a=recorded, b=candidate)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                left.append(escape(" ".join(recorded[i1:i2])))
                right.append(escape(" ".join(candidate[j1:j2])))
            else:
                if i2 > i1:
                    left.append(f"<del>{escape(' '.join(recorded[i1:i2]))}</del>")
                if j2 > j1:
                    right.append(f"<ins>{escape(' '.join(candidate[j1:j2]))}</ins>")
        flags = []
        if turn["crisis"]["missed"]:
            flags.append("MISSED CRISIS")
        if turn["leaked_steps"]:
            flags.append("LEAK: " + ", ".join(turn["leaked_steps"]))
        if turn["crisis"]["changed"]:
            flags.append(f"crisis {turn['crisis']['baseline']} → {turn['crisis']['candidate']}")
        if turn["blocked_steps"]["changed"]:
            flags.append("blocked steps changed")
        if turn["conflicts"]["changed"]:
            flags.append("conflicts changed")
        rows.append(
            f"<tr><td><code>{escape(turn['turn_id'])}</code><br>{escape('; '.join(flags))}</td>"
            f"<td>{' '.join(left)}</td><td>{' '.join(right)}</td></tr>"
        )
    figures = diff["totals"]
    summary = ", ".join(f"{k} {v}" for k, v in figures.items() if not isinstance(v, dict))
    return (
        "<!doctype html><html lang=en><meta charset=utf-8><title>coachbus replay</title>"
        "<style>body{font:14px/1.45 system-ui,sans-serif;margin:2rem}table{border-collapse:"
        "collapse}td,th{border:1px solid #ccd;padding:.4rem;vertical-align:top;max-width:40rem}"
        "del{background:#fdd}ins{background:#dfd;text-decoration:none}</style>"
        f"<h1>coachbus replay</h1><p>{escape(summary)}</p>"
        "<table><tr><th>turn</th><th>recorded final reply</th><th>candidate</th></tr>"
        + "".join(rows)
        + "</table></html>"
    )


def write_outputs(out: Path, diff: dict[str, Any]) -> None:
    """``diff.json`` (schema: docs/replay.schema.json) and ``report.html`` in ``out``."""
    (out / "diff.json").write_text(json.dumps(diff, indent=2, ensure_ascii=False), "utf-8")
    (out / "report.html").write_text(render_html(diff), encoding="utf-8")
