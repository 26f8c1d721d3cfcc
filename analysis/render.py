"""Render a report dict (:func:`analysis.report.build_report`) as plain text or as HTML with
inline SVG charts (pure: no Django, no plotting library).

Every piece of text that comes from the data -- system and judge names, labels, property
names, reasons -- is passed through :func:`html.escape` in HTML, and stripped of control
characters in plain text, since model names and labels are untrusted. An undefined figure is
written ``undefined`` followed by its reason, never as a bare NaN.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["REPORT_CSS", "render_html", "render_text"]


# --------------------------------------------------------------------------------------------
# Shared formatting
# --------------------------------------------------------------------------------------------

_CONTROL = dict.fromkeys([*range(0, 32), *range(127, 160)], "?")


def _plain(value: Any) -> str:
    """Text safe for a terminal: control characters (escape sequences) become '?'."""
    return str(value).translate(_CONTROL)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "undefined"
        if value.is_integer() and abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "undefined" if value is None else f"{100 * value:.1f}%"


def _interval(est: dict[str, Any]) -> str:
    if est.get("low") is None or est.get("high") is None:
        return ""
    return f"[{_num(est['low'])}, {_num(est['high'])}]"


def _win_rate_cells(r: dict) -> list[str]:
    """The cells of one system pair's win-rate row, shared by the text and HTML tables."""
    return [
        r["system_1"], r["system_2"], _num(r["n_items"]), _num(r["wins_1"]), _num(r["ties"]),
        _num(r["wins_2"]), _pct(r["win_rate"]), _pct(r["tie_rate"]),
        _num(r["expected_win_rate"]),
    ]  # fmt: skip


def _expected_interval(r: dict) -> dict:
    return {"low": r["expected_win_rate_low"], "high": r["expected_win_rate_high"]}


def _metric_name(row: dict[str, Any]) -> str:
    name = row.get("title") or row.get("metric", "")
    if row.get("metric") == "krippendorff_alpha":
        name = f"{name} ({row.get('level')})"
    if row.get("metric") == "percentage_agreement" and row.get("reference"):
        name = f"{name} ({row['reference']})"
    return name


_KIND_TITLES = {
    "pairwise": "pairwise preference",
    "ordinal": "ordinal scale",
    "categorical": "categorical labels",
}


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------


def _est_text(est: dict[str, Any]) -> str:
    if est.get("value") is None:
        return f"undefined -- {est.get('reason') or 'no reason given'}"
    text = f"{_num(est['value'])} {_interval(est)}".rstrip()
    if est.get("reason"):
        text += f" ({est['reason']})"
    return text


def _text_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "  ") -> str:
    cells = [[_plain(h) for h in headers]] + [[_plain(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for j, row in enumerate(cells):
        parts = [
            c.ljust(w) if i == 0 or not _looks_numeric(c) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(indent + "  ".join(parts).rstrip())
        if j == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _looks_numeric(text: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d,.]+%?", text))


def render_text(report: dict[str, Any]) -> str:
    """The report as plain text for a terminal."""
    out: list[str] = []
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    out.append(f"Study report: {_plain(report.get('title') or '(untitled)')}")
    if report.get("source"):
        out.append(f"Source: {_plain(report['source'])}")
    out.append(
        f"Annotations used: {_num(counts.get('annotations', 0))} "
        f"({_num(counts.get('labels', 0))} labels) on {_num(counts.get('items', 0))} items "
        f"from {_num(counts.get('annotators', 0))} annotators; judges: "
        f"{', '.join(_plain(j) for j in counts.get('judges', [])) or 'none'}"
    )
    conf = settings.get("confidence", 0.95)
    out.append(
        f"Settings: tie threshold {settings.get('threshold')}, {settings.get('n_boot')} bootstrap "
        f"resamples over items, {round(100 * conf)}% percentile intervals, seed "
        f"{settings.get('seed')}"
    )
    for note in report.get("notes", []):
        out.append(f"Note: {_plain(note)}")
    for prop in report.get("properties", []):
        out.append("")
        out.extend(_text_property(prop))
    return "\n".join(out) + "\n"


def _text_property(prop: dict[str, Any]) -> list[str]:
    out = []
    head = (
        f"== {prop['name']} ({_KIND_TITLES.get(prop['kind'], prop['kind'])}; "
        f"Krippendorff's alpha at the {prop['level']} level) =="
    )
    out.append(_plain(head))
    if prop.get("title") and prop["title"] != prop["name"]:
        out.append(_plain(prop["title"]))
    out.append(f"Labels: {', '.join(_plain(x) for x in prop.get('labels', []))}")
    for note in prop.get("notes", []):
        out.append(f"Note: {_plain(note)}")
    exc = prop.get("excluded", {})
    if exc.get("flagged") or exc.get("gold"):
        out.append(
            f"Flagged labels: {exc.get('flagged', 0)}; gold labels excluded: {exc.get('gold', 0)}"
        )
    if prop.get("empty"):
        out.append(f"No figures: {_plain(prop['empty'])}")
        return out
    c = prop["counts"]
    per = c["labels_per_item"]
    out.append(
        f"{_num(c['labels'])} labels on {_num(c['items'])} items by {_num(c['annotators'])} "
        f"annotators; labels per item {per['min']}-{per['max']} (median {_num(per['median'], 1)}); "
        f"{_num(c['items_with_two_or_more'])} items with two or more labels"
    )
    out.append("")
    out.append("Inter-rater reliability (bootstrap interval over items)")
    out.append(
        _text_table(
            ["statistic", "value", "interval", "items", "note"],
            [
                [
                    _metric_name(r),
                    _num(r["value"]),
                    _interval(r),
                    _num(r["n"]),
                    r.get("reason", ""),
                ]
                for r in prop["reliability"]
            ],
        )
    )
    if "pairwise" in prop:
        pw = prop["pairwise"]
        o = pw["outcomes"]
        out.append("")
        out.append(
            f"Soft-voted outcomes (tie when |p_A - p_B| <= {pw['threshold']}): "
            f"A {o['A']}, B {o['B']}, tie {o['tie']}"
        )
        if pw["pairs"]:
            out.append(
                _text_table(
                    ["system 1", "system 2", "items", "wins 1", "ties", "wins 2", "win rate 1"]
                    + ["tie rate", "expected win rate 1", "interval", "note"],
                    [
                        [*_win_rate_cells(r), _interval(_expected_interval(r)), r.get("reason", "")]
                        for r in pw["pairs"]
                    ],
                )
            )
        else:
            out.append(f"  Win rates: undefined -- {pw.get('pairs_reason', '')}")
    if "likert" in prop:
        lk = prop["likert"]
        out.append("")
        out.append("Ratings per system (item median: median of the item's ratings)")
        out.append(
            _text_table(
                ["system", "items", "ratings", "mean rating", "mean of item means"]
                + ["median of item medians", "distribution " + "/".join(map(str, lk["labels"]))],
                [
                    [
                        r["system"],
                        _num(r["n_items"]),
                        _num(r["n_ratings"]),
                        _num(r["mean_rating"]),
                        _num(r["mean_of_item_means"]),
                        _num(r["median_of_item_medians"], 1),
                        "/".join(str(x) for x in r["distribution"]),
                    ]
                    for r in lk["systems"]
                ],
            )
        )
    out.extend(_text_judges(prop))
    out.extend(_text_perception(prop))
    if "position_bias" in prop:
        pb = prop["position_bias"]
        out.append("")
        if pb.get("reason"):
            out.append(f"Position bias: undefined -- {_plain(pb['reason'])}")
        else:
            ov = pb["overall"]
            flagged = [r for r in pb["annotators"] if (r.get("p_holm") or 1) < 0.05]
            out.append(
                f"Position bias: left chosen in {_pct(ov['share_left'])} of {_num(ov['n'])} "
                f"sided choices (binomial p = {_num(ov['p_value'])}; {_num(ov['n_excluded'])} "
                f"without a side); {len(flagged)} of {len(pb['annotators'])} annotators "
                "differ from 1/2 at Holm-adjusted p < 0.05"
            )
            out.append(
                _text_table(
                    ["annotator", "sided", "left", "share left", "p", "p (Holm)", "note"],
                    [
                        [
                            r["rater"],
                            _num(r["n"]),
                            _num(r["n_left"]),
                            _pct(r["share_left"]),
                            _num(r["p_value"]),
                            _num(r.get("p_holm")),
                            r.get("reason", ""),
                        ]
                        for r in sorted(pb["annotators"], key=_p_key)[:20]
                    ],
                )
            )
            if len(pb["annotators"]) > 20:
                out.append(f"  ... {len(pb['annotators']) - 20} more annotators (see --json)")
    if "prioritisation" in prop:
        pr = prop["prioritisation"]
        out.append("")
        if pr.get("reason"):
            out.append(f"Prioritisation check: undefined -- {_plain(pr['reason'])}")
        else:
            out.append(
                f"Prioritisation check (tie rate among the top k% by priority vs random orders; "
                f"{pr['n_ties']} ties in {pr['n_items']} items)"
            )
            out.append(
                _text_table(
                    ["top k%", "items", "tie rate", "random mean", "random sd", "note"],
                    [
                        [
                            f"{r['k_percent']:g}",
                            _num(r["n_top"]),
                            _num(r["tie_rate"]),
                            _num(r["random_mean"]),
                            _num(r["random_std"]),
                            r.get("reason", ""),
                        ]
                        for r in pr["rows"]
                    ],
                )
            )
    return out


def _p_key(row: dict[str, Any]) -> tuple:
    p = row.get("p_value")
    return (p is None, p if p is not None else 1.0, str(row.get("rater")))


def _text_judges(prop: dict[str, Any]) -> list[str]:
    out: list[str] = []
    judges = prop.get("judges", [])
    if not judges:
        return ["", "Human vs judge: no judge labels"]
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    for j in judges:
        out.append("")
        out.append(
            f"Judge {_plain(j['judge'])}: {_num(j['n_items'])} items with human and judge labels"
        )
        rows = [["leave-one-out agreement (outer)", _est_text(j["loo_outer"])]]
        if inner is not None:
            rows.append(["  humans among themselves (inner)", _est_text(inner)])
        for r in j.get("vs_majority", []):
            name = "agreement with human majority" if r["metric"] == "accuracy" else "Cohen's kappa"
            rows.append([name, _est_text(r)])
        for r in j.get("correlations", []):
            rows.append([f"{r['metric']} (human {r['aggregate']})", _est_text(r)])
        jsd = j["binned_jsd"]
        rows.append([f"binned JSD ({jsd['binning']} bins; lower is closer)", _est_text(jsd)])
        out.append(_text_table(["statistic", "value [interval]"], rows))
        strat = j["stratified"]
        out.append(
            f"  Stratified by human percentage agreement ({strat['level']}): "
            "HH = among humans, HM = human vs judge majority, delta = HH - HM"
        )
        out.append(
            _text_table(
                [
                    "stratum",
                    "items",
                    "metric",
                    "HH",
                    "HM",
                    "H'M",
                    "delta",
                    "delta interval",
                    "note",
                ],
                [
                    [
                        r["stratum"],
                        _num(r["n_items"]),
                        r["metric"],
                        _num(r["hh"]),
                        _num(r["hm"]),
                        _num(r["h1m"]),
                        _num(r["delta"]),
                        _interval({"low": r["delta_low"], "high": r["delta_high"]}),
                        r.get("reason", ""),
                    ]
                    for r in strat["rows"]
                    if r["metric"] in ("alpha", "percentage_agreement", "jsd_b")
                ],
                indent="    ",
            )
        )
    return out


def _text_perception(prop: dict[str, Any]) -> list[str]:
    per = prop.get("perception", {})
    if per.get("reason"):
        return ["", f"Perception chart: undefined -- {_plain(per['reason'])}"]
    labels = [str(x) for x in per["labels"]]
    out = ["", f"Perception chart ({per['binning']}): label shares per bin"]
    rows = []
    for b in per["bins"]:
        for s in b["sources"]:
            shares = " ".join(
                f"{lab}:{_pct(p)}" for lab, p in zip(labels, s["proportions"], strict=True)
            )
            rows.append(
                [
                    str(b["bin"]),
                    _pct(b["share"]),
                    s["source"],
                    shares if b["items"] > 0 else f"undefined -- {b['reason']}",
                ]
            )
    out.append(_text_table(["bin", "items", "source", "label shares"], rows))
    return out


# --------------------------------------------------------------------------------------------
# HTML and SVG
# --------------------------------------------------------------------------------------------


class _Safe(str):
    """Text that is already HTML (built here from escaped parts)."""


def _h(value: Any) -> _Safe:
    """Escape data for HTML text or attribute values (idempotent for :class:`_Safe`)."""
    if isinstance(value, _Safe):
        return value
    return _Safe(html.escape(str(value), quote=True))


def _short(text: Any, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


REPORT_CSS = """
.hv-report { font-size: 15px; }
.hv-report h2 { text-transform: none; letter-spacing: 0; color: inherit; font-size: 1.25rem; }
.hv-report h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
.hv-report .meta, .hv-report .why, .hv-report .ci, .hv-report .src { color: #5f6368; }
.hv-report .why, .hv-report .src { font-size: .85em; }
.hv-report .notes { padding-left: 1.2rem; color: #5f6368; }
.hv-report .cards { display: flex; flex-wrap: wrap; gap: .75rem; margin: .5rem 0 1rem; }
.hv-report .card { border: 1px solid #d0d4d9; border-radius: 8px; padding: .5rem .75rem;
  min-width: 12rem; max-width: 24rem; }
.hv-report .card .name { font-size: .85em; color: #5f6368; }
.hv-report .card .fig { font-size: 1.35rem; font-weight: 600; }
.hv-report .undefined { color: #a51d2d; font-style: italic; }
.hv-report table { border-collapse: collapse; font-size: .88em; margin: .5rem 0; }
.hv-report th, .hv-report td { border-bottom: 1px solid #e3e5e8; padding: .2rem .5rem;
  text-align: right; vertical-align: top; }
.hv-report th { background: #f6f8fa; }
.hv-report td.t, .hv-report th.t { text-align: left; max-width: 28rem; overflow-wrap: anywhere; }
.hv-report details { margin: .25rem 0 .75rem; }
.hv-report summary { cursor: pointer; color: #1a5fb4; }
.hv-report section.property { border-top: 2px solid #d0d4d9; margin-top: 1.5rem; }
.hv-report svg { display: block; max-width: 100%; height: auto; margin: .25rem 0; }
.hv-report svg text { font: 12px system-ui, -apple-system, "Segoe UI", sans-serif;
  fill: #1d1d1f; }
.hv-report svg text.m { fill: #5f6368; }
.hv-report svg text.u { fill: #a51d2d; font-style: italic; }
.hv-report svg text.w { fill: #fff; }
"""

_PAIR_COLORS = {
    "A": "#1a5fb4",
    "B": "#e66100",
    "tie": "#9a9996",
    "both_good": "#26a269",
    "both_bad": "#a51d2d",
}
_QUALITATIVE = [
    "#1a5fb4",
    "#e66100",
    "#26a269",
    "#a51d2d",
    "#613583",
    "#986a44",
    "#c061cb",
    "#5e5c64",
    "#b5835a",
    "#2ec27e",
]


def _ordinal_colors(k: int) -> list[str]:
    """Diverging red -> light -> blue for k ordered labels (low to high)."""
    lo, mid, hi = (192, 28, 40), (238, 236, 230), (26, 95, 180)
    out = []
    for i in range(k):
        t = i / (k - 1) if k > 1 else 0.5
        a, b, u = (lo, mid, t * 2) if t <= 0.5 else (mid, hi, (t - 0.5) * 2)
        rgb = [round(x + (y - x) * u) for x, y in zip(a, b, strict=True)]
        out.append("#{:02x}{:02x}{:02x}".format(*rgb))
    return out


def _colors(kind: str, labels: Sequence[Any]) -> list[str]:
    if kind == "pairwise":
        return [_PAIR_COLORS.get(str(x), "#5e5c64") for x in labels]
    if kind == "ordinal":
        return _ordinal_colors(len(labels))
    return [_QUALITATIVE[i % len(_QUALITATIVE)] for i in range(len(labels))]


def _text_color(fill: str) -> str:
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "m" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "w"


def _svg(width: int, height: int, label: str, body: Iterable[str]) -> _Safe:
    return _Safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{_h(label)}">'
        f"<title>{_h(label)}</title>" + "".join(body) + "</svg>"
    )


def _t(x: float, y: float, text: Any, anchor: str = "start", cls: str = "", tip: Any = None) -> str:
    c = f' class="{cls}"' if cls else ""
    inner = _h(text)
    if tip is not None:
        inner = _Safe(f"<title>{_h(tip)}</title>{inner}")
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{inner}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: Any = None) -> str:
    tip_el = f"<title>{_h(tip)}</title>" if tip is not None else ""
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" '
        f'fill="{fill}">{tip_el}</rect>'
    )


def _line(
    x1: float,
    y1: float,
    x2: float,
    y2: float,
    stroke: str = "#5f6368",
    w: float = 1,
    dash: str = "",
) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke="{stroke}" stroke-width="{w}"{d}/>'
    )


def _legend(x: float, y: float, entries: Sequence[tuple[str, str]]) -> list[str]:
    out, cx = [], x
    for name, color in entries:
        out.append(_rect(cx, y - 9, 10, 10, color))
        label = _short(name, 32)
        out.append(_t(cx + 14, y, label))
        cx += 24 + 7 * len(label)
    return out


def _axis(
    x0: float,
    x1: float,
    y_top: float,
    y_bot: float,
    lo: float,
    hi: float,
    ticks: Sequence[float],
    fmt,
) -> list[str]:
    out = []
    for v in ticks:
        x = x0 + (v - lo) / (hi - lo) * (x1 - x0)
        out.append(_line(x, y_top, x, y_bot, "#e3e5e8"))
        out.append(_t(x, y_bot + 14, fmt(v), "middle", "m"))
    return out


def _forest(
    rows: Sequence[tuple[str, dict[str, Any]]], label: str, lo: float | None = None, hi: float = 1.0
) -> _Safe:
    """Point estimates with interval whiskers; an undefined row shows its reason instead."""
    values = [
        v
        for _, est in rows
        for v in (est.get("value"), est.get("low"))
        if v is not None and math.isfinite(v)
    ]
    if lo is None:
        lo = min([0.0, *values])
        lo = max(-1.0, math.floor(lo * 4) / 4)
    hi = max(hi, *values) if values else hi
    hi = math.ceil(hi * 4) / 4
    lab_w, plot_w, num_w, row_h, line_h, top = 250, 330, 150, 24, 16, 10
    width = lab_w + plot_w + num_w
    # an undefined row shows its whole reason, wrapped over as many lines as it needs
    wrap = (plot_w + num_w - 8) // 7
    reasons = [
        None
        if est.get("value") is not None
        else textwrap.wrap("undefined: " + (est.get("reason") or "undefined"), wrap)
        for _, est in rows
    ]
    heights = [row_h if r is None else max(row_h, line_h * len(r) + 8) for r in reasons]
    tops = [top + sum(heights[:i]) for i in range(len(rows))]
    bottom = top + sum(heights)
    height = bottom + 26
    x0, x1 = lab_w, lab_w + plot_w

    def px(v: float) -> float:
        return x0 + (min(max(v, lo), hi) - lo) / (hi - lo) * plot_w

    step = 0.25 if hi - lo <= 1.0 else 0.5
    first = math.ceil(lo / step - 1e-9) * step
    ticks = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
    body = _axis(x0, x1, top, bottom, lo, hi, ticks, lambda v: f"{v:g}")
    if lo < 0 < hi:
        body.append(_line(px(0), top, px(0), bottom, "#5f6368"))
    for (name, est), reason, y_top in zip(rows, reasons, tops, strict=True):
        y = y_top + row_h / 2
        body.append(_t(lab_w - 8, y + 4, _short(name, 38), "end", tip=name))
        if reason is not None:
            tip = est.get("reason") or "undefined"
            for k, line in enumerate(reason):
                body.append(_t(x0 + 4, y + 4 + k * line_h, line, cls="u", tip=tip))
            continue
        if est.get("low") is not None and est.get("high") is not None:
            body.append(_line(px(est["low"]), y, px(est["high"]), y, "#1d1d1f", 1.5))
            for v in (est["low"], est["high"]):
                body.append(_line(px(v), y - 5, px(v), y + 5, "#1d1d1f", 1.5))
        tip = f"{name}: {_num(est['value'])} {_interval(est)}"
        body.append(
            f'<circle cx="{px(est["value"]):.1f}" cy="{y:.1f}" r="5" fill="#1a5fb4">'
            f"<title>{_h(tip)}</title></circle>"
        )
        body.append(_t(x1 + 10, y + 4, f"{_num(est['value'])} {_interval(est)}"))
    return _svg(width, height, label, body)


def _win_chart(pairs: Sequence[dict[str, Any]], conf: float) -> _Safe:
    """Per system pair: share of wins of system 1, ties and wins of system 2 (stacked), with
    the expected win rate of system 1 and its interval as a black marker."""
    lab_w, bar_w, row_h, top = 170, 380, 30, 26
    width = lab_w * 2 + bar_w + 20
    height = top + row_h * len(pairs) + 30
    x0 = lab_w + 10
    body = _legend(
        x0, 14, [("system 1 wins", "#1a5fb4"), ("tie", "#9a9996"), ("system 2 wins", "#e66100")]
    )
    for i, r in enumerate(pairs):
        y = top + i * row_h
        n = r["n_items"] or 1
        body.append(_t(lab_w, y + 17, _short(r["system_1"], 24), "end", tip=r["system_1"]))
        body.append(_t(x0 + bar_w + 10, y + 17, _short(r["system_2"], 24), tip=r["system_2"]))
        x = x0
        for count, color, what in (
            (r["wins_1"], "#1a5fb4", f"{r['system_1']} wins"),
            (r["ties"], "#9a9996", "ties"),
            (r["wins_2"], "#e66100", f"{r['system_2']} wins"),
        ):
            w = bar_w * count / n
            body.append(_rect(x, y + 4, w, 18, color, f"{what}: {count} of {r['n_items']} items"))
            if w > 34:
                body.append(
                    _t(x + w / 2, y + 17, f"{100 * count / n:.0f}%", "middle", _text_color(color))
                )
            x += w
        ewr = r.get("expected_win_rate")
        if ewr is not None:
            ex = x0 + bar_w * ewr
            if r.get("expected_win_rate_low") is not None:
                lo = x0 + bar_w * r["expected_win_rate_low"]
                hi = x0 + bar_w * r["expected_win_rate_high"]
                body.append(_line(lo, y + 2, hi, y + 2, "#1d1d1f", 1.5))
            span = {"low": r.get("expected_win_rate_low"), "high": r.get("expected_win_rate_high")}
            tip = f"expected win rate of {r['system_1']}: {_num(ewr)} {_interval(span)}"
            body.append(
                f'<path d="M{ex:.1f} {y - 2:.1f} l4 4 l-4 4 l-4 -4 z" fill="#1d1d1f">'
                f"<title>{_h(tip)}</title></path>"
            )
    body.append(
        _line(
            x0 + bar_w / 2, top - 4, x0 + bar_w / 2, top + row_h * len(pairs), "#5f6368", 1, "3 3"
        )
    )
    body.append(
        _t(
            x0,
            height - 8,
            f"◆ expected win rate of system 1 = (wins + ½ ties) / items; "
            f"bar: {round(100 * conf)}% interval",
            cls="m",
        )
    )
    return _svg(width, height, "Win and tie rates per system pair", body)


def _stacked(
    groups: Sequence[tuple[str | None, Sequence[tuple[str, Sequence[float], str]]]],
    labels: Sequence[Any],
    colors: Sequence[str],
    label: str,
    legend_title: str = "",
) -> _Safe:
    """Groups of 100% stacked bars: (group heading, [(row name, proportions, note)])."""
    lab_w, bar_w, row_h, head_h = 190, 420, 22, 20
    width = lab_w + bar_w + 150
    n_rows = sum(len(rows) for _, rows in groups)
    n_heads = sum(1 for head, _ in groups if head)
    height = 30 + n_rows * row_h + n_heads * head_h + 10
    body = _legend(lab_w, 14, [(str(lb), c) for lb, c in zip(labels, colors, strict=True)])
    if legend_title:
        body.insert(0, _t(lab_w - 8, 14, legend_title, "end", "m"))
    y = 26
    for head, rows in groups:
        if head:
            body.append(_t(8, y + 14, _short(head, 90), cls="m", tip=head))
            y += head_h
        for name, props, note in rows:
            body.append(_t(lab_w - 8, y + 15, _short(name, 26), "end", tip=name))
            total = sum(props)
            if total <= 0:
                body.append(
                    _t(
                        lab_w + 4,
                        y + 15,
                        "undefined: " + _short(note or "no labels", 70),
                        cls="u",
                        tip=note,
                    )
                )
                y += row_h
                continue
            x = lab_w
            for lab, p, color in zip(labels, props, colors, strict=True):
                w = bar_w * p / total
                body.append(_rect(x, y + 3, w, 16, color, f"{name}: {lab} {100 * p / total:.1f}%"))
                if w > 30:
                    body.append(
                        _t(
                            x + w / 2,
                            y + 15,
                            f"{100 * p / total:.0f}%",
                            "middle",
                            _text_color(color),
                        )
                    )
                x += w
            if note:
                body.append(_t(lab_w + bar_w + 8, y + 15, _short(note, 22), cls="m", tip=note))
            y += row_h
    return _svg(width, height, label, body)


def _lines_chart(rows: Sequence[dict[str, Any]]) -> _Safe:
    """Tie rate among the top k% by priority (line) vs random orders (dashed, ±1 sd band)."""
    left, plot_w, plot_h, top = 50, 480, 180, 26
    width, height = left + plot_w + 30, top + plot_h + 40
    ys = [r["tie_rate"] for r in rows] + [
        (r["random_mean"] or 0) + (r["random_std"] or 0) for r in rows
    ]
    y_hi = max(0.05, max(ys)) * 1.1
    y_hi = math.ceil(y_hi * 10) / 10

    def px(k: float) -> float:
        return left + (k / 100) * plot_w

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    body = _legend(
        left, 14, [("top k% by priority", "#1a5fb4"), ("random orders (mean ± sd)", "#c0bfbc")]
    )
    for i in range(6):
        v = y_hi * i / 5
        body.append(_line(left, py(v), left + plot_w, py(v), "#e3e5e8"))
        body.append(_t(left - 6, py(v) + 4, f"{v:.2f}", "end", "m"))
    for r in rows:
        body.append(
            _t(px(r["k_percent"]), top + plot_h + 16, f"{r['k_percent']:g}%", "middle", "m")
        )
    band = [r for r in rows if r["random_mean"] is not None]
    if band:
        upper = [(px(r["k_percent"]), py(r["random_mean"] + (r["random_std"] or 0))) for r in band]
        lower = [
            (px(r["k_percent"]), py(max(0.0, r["random_mean"] - (r["random_std"] or 0))))
            for r in band
        ]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in upper + lower[::-1])
        body.append(f'<polygon points="{pts}" fill="#deddda"/>')
        mean = " ".join(f"{px(r['k_percent']):.1f},{py(r['random_mean']):.1f}" for r in band)
        body.append(
            f'<polyline points="{mean}" fill="none" stroke="#77767b" stroke-width="1.5" '
            'stroke-dasharray="4 3"/>'
        )
    obs = " ".join(f"{px(r['k_percent']):.1f},{py(r['tie_rate']):.1f}" for r in rows)
    body.append(f'<polyline points="{obs}" fill="none" stroke="#1a5fb4" stroke-width="2"/>')
    for r in rows:
        tip = f"top {r['k_percent']:g}%: tie rate {_num(r['tie_rate'])}"
        body.append(
            f'<circle cx="{px(r["k_percent"]):.1f}" cy="{py(r["tie_rate"]):.1f}" r="3" '
            f'fill="#1a5fb4"><title>{_h(tip)}</title></circle>'
        )
    body.append(
        _t(
            left + plot_w / 2,
            height - 4,
            "top k% of items by priority; y: share of ties",
            "middle",
            "m",
        )
    )
    return _svg(width, height, "Prioritisation check: tie rate by priority", body)


def _bias_chart(pb: dict[str, Any], limit: int = 30) -> _Safe:
    rows = [("all annotators", pb["overall"])]
    raters = sorted(pb["annotators"], key=lambda r: (-(r["n"] or 0), str(r["rater"])))
    rows += [(str(r["rater"]), r) for r in raters[:limit]]
    lab_w, plot_w, row_h, top = 160, 380, 20, 10
    width, height = lab_w + plot_w + 170, top + row_h * len(rows) + 30
    x0 = lab_w

    def px(v: float) -> float:
        return x0 + v * plot_w

    body = _axis(
        x0,
        x0 + plot_w,
        top,
        top + row_h * len(rows),
        0,
        1,
        [0, 0.25, 0.5, 0.75, 1],
        lambda v: f"{v:g}",
    )
    body.append(_line(px(0.5), top, px(0.5), top + row_h * len(rows), "#5f6368", 1, "3 3"))
    for i, (name, r) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        body.append(_t(lab_w - 8, y + 4, _short(name, 22), "end", tip=name))
        if r.get("share_left") is None:
            body.append(
                _t(
                    x0 + 4,
                    y + 4,
                    "undefined: " + _short(r.get("reason", ""), 60),
                    cls="u",
                    tip=r.get("reason"),
                )
            )
            continue
        p = r.get("p_holm") if i else r.get("p_value")
        color = "#a51d2d" if p is not None and p < 0.05 else "#1a5fb4"
        tip = (
            f"{name}: left {r['n_left']} of {r['n']} ({_pct(r['share_left'])}), "
            f"p = {_num(r['p_value'])}"
        )
        body.append(
            f'<circle cx="{px(r["share_left"]):.1f}" cy="{y:.1f}" r="{5 if i == 0 else 4}" '
            f'fill="{color}"><title>{_h(tip)}</title></circle>'
        )
        body.append(_t(x0 + plot_w + 10, y + 4, f"{_pct(r['share_left'])} of {r['n']}", cls="m"))
    body.append(
        _t(
            x0,
            height - 4,
            "share of left-hand choices; red: p < 0.05 (annotators: Holm-adjusted)",
            cls="m",
        )
    )
    return _svg(width, height, "Position bias: share of left-hand choices", body)


# --- HTML pieces ------------------------------------------------------------------------------


def _value_html(value: Any, reason: str = "", digits: int = 3, pct: bool = False) -> _Safe:
    if value is None:
        return _Safe(
            f'<span class="undefined">undefined</span> <span class="why">{_h(reason or "")}</span>'
        )
    return _h(_pct(value) if pct else _num(value, digits))


def _undefined_p(reason: str) -> _Safe:
    return _Safe(f"<p>{_value_html(None, reason)}</p>")


def _est_html(est: dict[str, Any]) -> _Safe:
    if est.get("value") is None:
        return _value_html(None, est.get("reason", ""))
    text = f"{_h(_num(est['value']))} <span class='ci'>{_h(_interval(est))}</span>"
    if est.get("reason"):
        text += f" <span class='why'>{_h(est['reason'])}</span>"
    return _Safe(text)


def _table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], text_cols: Sequence[int] = (0,)
) -> _Safe:
    head = "".join(
        f"<th{' class=t' if i in text_cols else ''}>{_h(h)}</th>" for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = "".join(
            f"<td{' class=t' if i in text_cols else ''}>{_h(c)}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return _Safe(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def _details(summary: str, content: str) -> _Safe:
    return _Safe(f"<details><summary>{_h(summary)}</summary>{_h(content)}</details>")


def _card(name: str, body: str, note: str = "") -> _Safe:
    n = f'<div class="why">{_h(note)}</div>' if note else ""
    return _Safe(
        f'<div class="card"><div class="name">{_h(name)}</div>'
        f'<div class="fig">{_h(body)}</div>{n}</div>'
    )


def _card_est(name: str, est: dict[str, Any]) -> _Safe:
    if est.get("value") is None:
        return _card(name, _Safe('<span class="undefined">undefined</span>'), est.get("reason", ""))
    return _card(
        name,
        _Safe(f"{_h(_num(est['value']))} <span class='ci'>{_h(_interval(est))}</span>"),
        est.get("reason", ""),
    )


def render_html(report: dict[str, Any], *, standalone: bool = False) -> str:
    """The report as an HTML fragment (``<div class="hv-report">`` with its own ``<style>``)
    with inline SVG charts; ``standalone=True`` wraps it in a complete document."""
    parts: list[str] = [f"<style>{REPORT_CSS}</style>", '<div class="hv-report">']
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    conf = settings.get("confidence", 0.95)
    title = report.get("title") or "(untitled)"
    parts.append(f"<h1>Study report: {_h(title)}</h1>")
    judges = counts.get("judges", [])
    parts.append(
        f'<p class="meta">{_h(_num(counts.get("annotations", 0)))} annotations '
        f"({_h(_num(counts.get('labels', 0)))} labels) on "
        f"{_h(_num(counts.get('items', 0)))} items from {_h(_num(counts.get('annotators', 0)))} "
        f"annotators · judges: {_h(', '.join(judges) or 'none')} · tie threshold "
        f"{_h(settings.get('threshold'))} · {_h(settings.get('n_boot'))} bootstrap resamples over "
        f"items, {round(100 * conf)}% percentile intervals</p>"
    )
    if report.get("source"):
        parts.append(f'<p class="meta">Source: {_h(report["source"])}</p>')
    if report.get("notes"):
        parts.append(
            '<ul class="notes">' + "".join(f"<li>{_h(n)}</li>" for n in report["notes"]) + "</ul>"
        )
    props = report.get("properties", [])
    if len(props) > 1:
        links = " · ".join(f'<a href="#hv-p{i}">{_h(p["name"])}</a>' for i, p in enumerate(props))
        parts.append(f"<p>Properties: {links}</p>")
    for i, prop in enumerate(props):
        parts.append(_html_property(prop, f"hv-p{i}", conf))
    parts.append("</div>")
    fragment = "".join(parts)
    if not standalone:
        return fragment
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Study report: {_h(title)}</title>"
        "<style>body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1d1d1f}"
        ".page{max-width:1200px;margin:0 auto;padding:1rem}</style></head>"
        f'<body><main class="page">{fragment}</main></body></html>\n'
    )


def _html_property(prop: dict[str, Any], anchor: str, conf: float) -> str:
    out = [f'<section class="property" id="{anchor}">']
    kind = _KIND_TITLES.get(prop["kind"], prop["kind"])
    out.append(f"<h2>{_h(prop['name'])} <span class='meta'>· {_h(kind)}</span></h2>")
    if prop.get("title") and prop["title"] != prop["name"]:
        out.append(f"<p>{_h(prop['title'])}</p>")
    notes = list(prop.get("notes", []))
    exc = prop.get("excluded", {})
    if exc.get("flagged") or exc.get("gold"):
        notes.append(
            f"flagged labels: {exc.get('flagged', 0)}; gold labels excluded: {exc.get('gold', 0)}"
        )
    if notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_h(n)}</li>" for n in notes) + "</ul>")
    if prop.get("empty"):
        out.append(
            f'<p><span class="undefined">No figures:</span> {_h(prop["empty"])}</p></section>'
        )
        return "".join(out)
    c = prop["counts"]
    per = c["labels_per_item"]
    out.append(
        f'<p class="meta">{_h(_num(c["labels"]))} labels on {_h(_num(c["items"]))} items by '
        f"{_h(_num(c['annotators']))} annotators; {per['min']}–{per['max']} labels per item; "
        f"labels: {_h(', '.join(str(x) for x in prop['labels']))}</p>"
    )
    out.append(_key_figures(prop))
    # reliability
    out.append("<h3>Inter-rater reliability</h3>")
    rel = prop["reliability"]
    out.append(
        _forest(
            [(_metric_name(r), r) for r in rel], "Inter-rater reliability with intervals", lo=None
        )
    )
    out.append(
        _details(
            "Numbers and sources",
            _table(
                ["statistic", "value", f"{round(100 * conf)}% interval", "items", "source"],
                [
                    [
                        _metric_name(r),
                        _value_html(r["value"], r["reason"]),
                        _interval(r),
                        _num(r["n"]),
                        r.get("source", ""),
                    ]
                    for r in rel
                ],
                text_cols=(0, 4),
            ),
        )
    )
    if "pairwise" in prop:
        out.append(_html_pairwise(prop, conf))
    if "likert" in prop:
        out.append(_html_likert(prop))
    out.append(_html_judges(prop, conf))
    out.append(_html_perception(prop))
    if "position_bias" in prop:
        out.append(_html_position_bias(prop["position_bias"]))
    if "prioritisation" in prop:
        out.append(_html_prioritisation(prop["prioritisation"]))
    out.append("</section>")
    return "".join(out)


def _key_figures(prop: dict[str, Any]) -> _Safe:
    cards = []
    alpha = next(r for r in prop["reliability"] if r["metric"] == "krippendorff_alpha")
    cards.append(_card_est(f"Krippendorff's α ({alpha['level']})", alpha))
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    if inner:
        cards.append(_card_est("Leave-one-out agreement (humans)", inner))
    if "pairwise" in prop:
        o = prop["pairwise"]["outcomes"]
        total = sum(o.values()) or 1
        cards.append(
            _card("Soft-voted ties", _h(_pct(o["tie"] / total)), f"{o['tie']} of {total} items")
        )
        pairs = prop["pairwise"]["pairs"]
        if pairs:
            best = max(pairs, key=lambda r: abs((r["expected_win_rate"] or 0.5) - 0.5))
            est = {
                "value": best["expected_win_rate"],
                "low": best["expected_win_rate_low"],
                "high": best["expected_win_rate_high"],
                "reason": best.get("reason", ""),
            }
            cards.append(
                _card_est(
                    f"Expected win rate {_short(best['system_1'], 20)} "
                    f"vs {_short(best['system_2'], 20)}",
                    est,
                )
            )
    if "likert" in prop:
        rows = [r for r in prop["likert"]["systems"] if r["system"] != "all"]
        top = max(rows, key=lambda r: r["mean_rating"])
        cards.append(
            _card(
                f"Highest mean rating: {_short(top['system'], 30)}",
                _h(_num(top["mean_rating"], 2)),
                f"median of item medians {_num(top['median_of_item_medians'], 1)}",
            )
        )
    for j in prop.get("judges", [])[:4]:
        cards.append(
            _card_est(f"Judge {_short(j['judge'], 30)}: leave-one-out (outer)", j["loo_outer"])
        )
    return _Safe('<div class="cards">' + "".join(cards) + "</div>")


def _html_pairwise(prop: dict[str, Any], conf: float) -> str:
    pw = prop["pairwise"]
    out = [
        "<h3>Win rates per system pair (soft vote, tie when "
        f"|p<sub>A</sub> − p<sub>B</sub>| ≤ {_h(pw['threshold'])})</h3>"
    ]
    if not pw["pairs"]:
        out.append(_undefined_p(pw.get("pairs_reason", "")))
        return "".join(out)
    out.append(_win_chart(pw["pairs"], conf))
    if pw.get("pairs_note"):
        out.append(f'<p class="why">{_h(pw["pairs_note"])}</p>')
    out.append(
        _details(
            "Numbers",
            _table(
                [
                    "system 1",
                    "system 2",
                    "items",
                    "wins 1",
                    "ties",
                    "wins 2",
                    "win rate 1",
                    "tie rate",
                    "expected win rate 1",
                    f"{round(100 * conf)}% interval",
                    "note",
                ],
                [
                    [
                        *_win_rate_cells(r),
                        _interval(_expected_interval(r)) or _value_html(None, r.get("reason", "")),
                        r.get("reason", ""),
                    ]
                    for r in pw["pairs"]
                ],
                text_cols=(0, 1, 10),
            ),
        )
    )
    out.append(f'<p class="src">{_h(pw["source"])}</p>')
    return "".join(out)


def _html_likert(prop: dict[str, Any]) -> str:
    lk = prop["likert"]
    labels = lk["labels"]
    colors = _colors("ordinal", labels)
    rows = [
        (r["system"], r["distribution"], f"mean {_num(r['mean_rating'], 2)}") for r in lk["systems"]
    ]
    out = ["<h3>Ratings per system</h3>"]
    out.append(
        _stacked([(None, rows)], labels, colors, "Distribution of ratings per system", "rating")
    )
    out.append(
        _details(
            "Numbers",
            _table(
                [
                    "system",
                    "items",
                    "ratings",
                    "mean rating",
                    "mean of item means",
                    "median of item medians",
                    "distribution " + " / ".join(map(str, labels)),
                ],
                [
                    [
                        r["system"],
                        _num(r["n_items"]),
                        _num(r["n_ratings"]),
                        _num(r["mean_rating"]),
                        _num(r["mean_of_item_means"]),
                        _num(r["median_of_item_medians"], 1),
                        " / ".join(map(str, r["distribution"])),
                    ]
                    for r in lk["systems"]
                ],
            ),
        )
    )
    return "".join(out)


def _html_judges(prop: dict[str, Any], conf: float) -> str:
    judges = prop.get("judges", [])
    out = ["<h3>Human vs judge</h3>"]
    if not judges:
        out.append(_undefined_p("no judge labels for this property"))
        return "".join(out)
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    rows = []
    if inner:
        rows.append(("humans (inner)", inner))
    rows += [(f"{j['judge']} (outer)", j["loo_outer"]) for j in judges]
    out.append(
        _forest(rows, "Leave-one-out agreement: humans among themselves and each judge", lo=0.0)
    )
    table_rows = []
    for j in judges:
        stats = [("leave-one-out agreement (outer)", j["loo_outer"])]
        stats += [
            (
                "agreement with human majority"
                if r["metric"] == "accuracy"
                else "Cohen's kappa vs human majority",
                r,
            )
            for r in j.get("vs_majority", [])
        ]
        stats += [
            (f"{r['metric']} with human {r['aggregate']}", r) for r in j.get("correlations", [])
        ]
        stats.append(
            (f"binned JSD ({j['binned_jsd']['binning']} bins, lower is closer)", j["binned_jsd"])
        )
        for name, est in stats:
            table_rows.append([j["judge"], name, _est_html(est), _num(est.get("n"))])
    out.append(
        _table(
            ["judge", "statistic", f"value [{round(100 * conf)}% interval]", "items"],
            table_rows,
            text_cols=(0, 1, 2),
        )
    )
    srcs = {j.get("vs_majority_source") or j.get("correlations_source") for j in judges}
    srcs |= {judges[0]["binned_jsd"]["source"], judges[0]["loo_outer"].get("source", "")}
    out.append(f'<p class="src">{_h("; ".join(sorted(s for s in srcs if s)))}</p>')
    for j in judges:
        strat = j["stratified"]
        table = _table(
            [
                "stratum",
                "items",
                "share",
                "metric",
                "HH",
                "HM",
                "H′M",
                "Δ = HH − HM",
                f"Δ {round(100 * conf)}% interval",
                "note",
            ],
            [
                [
                    r["stratum"],
                    _num(r["n_items"]),
                    _pct(r["share"]),
                    r["metric"],
                    _value_html(r["hh"]),
                    _value_html(r["hm"]),
                    _value_html(r["h1m"]),
                    _value_html(r["delta"]),
                    _interval({"low": r["delta_low"], "high": r["delta_high"]}),
                    r.get("reason", ""),
                ]
                for r in strat["rows"]
            ],
            text_cols=(0, 3, 9),
        )
        out.append(
            _details(
                f"Stratified agreement for {j['judge']} (by human percentage agreement; "
                "HH humans, HM human vs judge majority)",
                _Safe(table + f'<p class="src">{_h(strat["source"])}</p>'),
            )
        )
    return "".join(out)


def _html_perception(prop: dict[str, Any]) -> str:
    per = prop.get("perception", {})
    out = ["<h3>Perception chart</h3>"]
    if per.get("reason"):
        out.append(_undefined_p(per["reason"]))
        return "".join(out)
    labels = per["labels"]
    colors = _colors(prop["kind"] if prop["kind"] != "pairwise" else "pairwise", labels)
    what = "human median" if prop["kind"] == "ordinal" else "human majority"
    groups = []
    for b in per["bins"]:
        head = f"{what} = {b['bin']} · {_pct(b['share'])} of items ({_num(b['items'], 1)})"
        rows = [
            (
                s["source"],
                s["proportions"] if b["items"] > 0 else [0.0] * len(labels),
                "" if b["items"] > 0 else b["reason"],
            )
            for s in b["sources"]
        ]
        groups.append((head, rows))
    out.append(
        _stacked(groups, labels, colors, f"Perception chart: label shares per {what} bin", "label")
    )
    out.append(
        f'<p class="src">Bins: {_h(per["binning"])}. {_h(per.get("note", ""))} '
        f"{_h(per['source'])}</p>"
    )
    return "".join(out)


def _html_position_bias(pb: dict[str, Any]) -> str:
    out = ["<h3>Position bias</h3>"]
    if pb.get("reason"):
        out.append(_undefined_p(pb["reason"]))
        return "".join(out)
    out.append(_bias_chart(pb))
    n_more = max(0, len(pb["annotators"]) - 30)
    if n_more:
        out.append(f'<p class="why">{n_more} more annotators in the table.</p>')
    out.append(
        _details(
            "Numbers per annotator",
            _table(
                [
                    "annotator",
                    "sided choices",
                    "left",
                    "share left",
                    "p",
                    "p (Holm)",
                    "without a side",
                    "note",
                ],
                [
                    [
                        r["rater"] if r["rater"] is not None else "all annotators",
                        _num(r["n"]),
                        _num(r["n_left"]),
                        _value_html(r["share_left"], r.get("reason", ""), pct=True),
                        _value_html(r["p_value"], r.get("reason", "")),
                        _num(r.get("p_holm")) if r.get("p_holm") is not None else "",
                        _num(r["n_excluded"]),
                        r.get("reason", ""),
                    ]
                    for r in [pb["overall"], *sorted(pb["annotators"], key=_p_key)]
                ],
                text_cols=(0, 7),
            ),
        )
    )
    out.append(f'<p class="src">{_h(pb["source"])}; {_h(pb.get("holm", ""))}</p>')
    return "".join(out)


def _html_prioritisation(pr: dict[str, Any]) -> str:
    out = ["<h3>Prioritisation check</h3>"]
    if pr.get("reason"):
        out.append(_undefined_p(pr["reason"]))
        return "".join(out)
    out.append(_lines_chart(pr["rows"]))
    if pr.get("note"):
        out.append(f'<p class="why">{_h(pr["note"])}</p>')
    out.append(
        _details(
            "Numbers",
            _table(
                ["top k%", "items", "tie rate", "random mean", "random sd", "expected", "note"],
                [
                    [
                        f"{r['k_percent']:g}",
                        _num(r["n_top"]),
                        _num(r["tie_rate"]),
                        _value_html(r["random_mean"], r.get("reason", "")),
                        _value_html(r["random_std"], r.get("reason", "")),
                        _num(r["random_expected"]),
                        r.get("reason", ""),
                    ]
                    for r in pr["rows"]
                ],
                text_cols=(6,),
            ),
        )
    )
    out.append(
        f'<p class="src">{_h(pr["source"])}: {pr["n_ties"]} ties among {pr["n_items"]} items; '
        "a useful priority puts fewer ties at the top than random orders.</p>"
    )
    return "".join(out)
