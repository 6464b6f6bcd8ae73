"""One self-contained HTML page for an eval report: tables and inline-SVG reliability
charts, no script, no external asset, no plotting dependency."""

from __future__ import annotations

from html import escape
from typing import Any

from evaluation.metrics import fmt

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#1d2430}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ccd}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.4rem 0 1rem}td,th{padding:.2rem .6rem;text-align:right}
th{background:#eef1f6}td:first-child,th:first-child{text-align:left}
tr:nth-child(even) td{background:#f7f8fb}.bad{color:#a3221b;font-weight:600}
.note{color:#555}svg{background:#fff;border:1px solid #ccd}
"""


def _fmt(v: Any) -> str:
    return escape(fmt(v, missing="–"))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def reliability_svg(rel: dict[str, Any] | None, size: int = 220) -> str:
    """Reported confidence (x) against observed accuracy (y) per bin: a perfectly
    calibrated tier lies on the diagonal; a dot's area grows with its bin's size."""
    if not rel or not rel.get("bins"):
        return '<p class="note">no confidences reported</p>'
    pad = 28
    span = size - 2 * pad
    total = sum(b["n"] for b in rel["bins"]) or 1
    parts = [
        f'<svg width="{size}" height="{size}" viewBox="0 0 {size} {size}" role="img" '
        f'aria-label="reliability: confidence against accuracy">',
        f'<line x1="{pad}" y1="{size - pad}" x2="{size - pad}" y2="{pad}" '
        'stroke="#99a" stroke-dasharray="4 3"/>',
        f'<rect x="{pad}" y="{pad}" width="{span}" height="{span}" fill="none" stroke="#ccd"/>',
        f'<text x="{size / 2}" y="{size - 6}" text-anchor="middle" font-size="10">'
        "confidence</text>",
        f'<text x="10" y="{size / 2}" font-size="10" transform="rotate(-90 10 {size / 2})" '
        'text-anchor="middle">accuracy</text>',
    ]
    for b in rel["bins"]:
        x = pad + b["confidence"] * span
        y = size - pad - b["accuracy"] * span
        r = 3 + 9 * (b["n"] / total) ** 0.5
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="#3a6ea5" fill-opacity=".75">'
            f"<title>n={b['n']} confidence {b['confidence']:.3f} accuracy "
            f"{b['accuracy']:.3f}</title></circle>"
        )
    parts.append("</svg>")
    ece = rel.get("ece")
    return "".join(parts) + f'<p class="note">expected calibration error {_fmt(ece)}</p>'


def _crisis(rep: dict[str, Any]) -> str:
    names = list(rep["tiers"])
    out = ["<h3>Help offered (flagged)</h3>"]
    out.append(
        _table(
            ["", *names],
            [
                [k, *(rep["tiers"][n]["flagged"][k] for n in names)]
                for k in ("precision", "recall", "f1", "tp", "fp", "fn", "tn")
            ],
        )
    )
    first = rep["tiers"][names[0]]
    out.append("<h3>By language</h3>")
    out.append(
        _table(
            ["language", *(f"{n} {m}" for n in names for m in ("P", "R"))],
            [
                [
                    lang,
                    *(
                        rep["tiers"][n]["by_language"][lang][m]
                        for n in names
                        for m in ("precision", "recall")
                    ),
                ]
                for lang in first["by_language"]
            ],
        )
    )
    out.append("<h3>By category (recall, or false-alarm rate for kinds labelled none)</h3>")
    rows = []
    for cat, row in first["by_category"].items():
        cells: list[Any] = [cat, row["n"]]
        for n in names:
            r = rep["tiers"][n]["by_category"][cat]
            cells.append(r.get("recall", r.get("false_alarm_rate")))
        rows.append(cells)
    out.append(_table(["category", "n", *names], rows))
    for n in names:
        tier = rep["tiers"][n]
        out.append(f"<h3>{escape(n)}: confusion (rows: label, columns: answer)</h3>")
        cols = tier["confusion"]["predicted"]
        out.append(
            _table(
                ["label", *cols],
                [[g, *(row[c] for c in cols)] for g, row in tier["confusion"]["rows"].items()],
            )
        )
        out.append(f"<h3>{escape(n)}: reliability</h3>{reliability_svg(tier['reliability'])}")
    return "".join(out)


def _decision(rep: dict[str, Any]) -> str:
    tier = rep["tiers"]["deterministic"]
    out = [
        f"<p>{tier['items']} items; exact match {_fmt(tier['exact_match'])}; micro precision "
        f"{_fmt(tier['micro']['precision'])}, recall {_fmt(tier['micro']['recall'])}, "
        f"F1 {_fmt(tier['micro']['f1'])}</p>",
        _table(
            ["label", "precision", "recall", "F1", "tp", "fp", "fn"],
            [
                [lab, r["precision"], r["recall"], r["f1"], r["tp"], r["fp"], r["fn"]]
                for lab, r in tier["by_label"].items()
            ],
        ),
        reliability_svg(tier.get("reliability")),
    ]
    return "".join(out)


def render_html(report: dict[str, Any]) -> str:
    sections = []
    for name, rep in report["corpora"].items():
        body = _crisis(rep) if name == "crisis" else _decision(rep)
        sections.append(f"<h2>{escape(name)}</h2>{body}")
    return (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        f"<title>coachbus eval — {escape(report['split'])}</title><style>{_STYLE}</style>"
        f"<h1>coachbus eval — split {escape(report['split'])}</h1>"
        '<p class="note">Deterministic tier on labelled data written for coachbus; '
        "heldout reports list no items.</p>" + "".join(sections) + "</html>"
    )
