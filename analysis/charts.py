"""The report's charts as data (pure: report figures in, numbers and strings out).

Each function returns a chart of :mod:`charts.shapes` (coordinates, colours, texts); the SVG
markup is written by ``templates/charts/chart.svg.html``, which escapes every text.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from analysis.formatting import interval, num, pct, short
from charts.shapes import chart, circle, line, path, poly, rect, text

__all__ = [
    "bias_chart",
    "colors",
    "forest_chart",
    "prioritisation_chart",
    "stacked_chart",
    "win_chart",
]

# --- colours ----------------------------------------------------------------------------------

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


def colors(scale: str, labels: Sequence[Any]) -> list[str]:
    """One fill colour per label: fixed for pairwise outcomes, diverging for ordinal scales."""
    if scale == "pairwise":
        return [_PAIR_COLORS.get(str(x), "#5e5c64") for x in labels]
    if scale == "ordinal":
        return _ordinal_colors(len(labels))
    return [_QUALITATIVE[i % len(_QUALITATIVE)] for i in range(len(labels))]


def _text_class(fill: str) -> str:
    """Text class on a bar of this colour: dark grey on light fills, white on dark ones."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "m" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "w"


# --- pieces -----------------------------------------------------------------------------------


def _legend(x: float, y: float, entries: Sequence[tuple[str, str]]) -> list[dict]:
    out, cx = [], x
    for name, color in entries:
        out.append(rect(cx, y - 9, 10, 10, color))
        label = short(name, 32)
        out.append(text(cx + 14, y, label))
        cx += 24 + 7 * len(label)
    return out


def _axis(
    x0: float, x1: float, y_top: float, y_bot: float, lo: float, hi: float, ticks: Sequence[float]
) -> list[dict]:
    out = []
    for v in ticks:
        x = x0 + (v - lo) / (hi - lo) * (x1 - x0)
        out.append(line(x, y_top, x, y_bot, "#e3e5e8"))
        out.append(text(x, y_bot + 14, f"{v:g}", "middle", "m"))
    return out


# --- charts -----------------------------------------------------------------------------------


def forest_chart(
    rows: Sequence[tuple[str, dict[str, Any]]], label: str, lo: float | None = None, hi: float = 1.0
) -> dict:
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
    body = _axis(x0, x1, top, bottom, lo, hi, ticks)
    if lo < 0 < hi:
        body.append(line(px(0), top, px(0), bottom, "#5f6368"))
    for (name, est), reason, y_top in zip(rows, reasons, tops, strict=True):
        y = y_top + row_h / 2
        body.append(text(lab_w - 8, y + 4, short(name, 38), "end", tip=name))
        if reason is not None:
            tip = est.get("reason") or "undefined"
            for k, part in enumerate(reason):
                body.append(text(x0 + 4, y + 4 + k * line_h, part, cls="u", tip=tip))
            continue
        if est.get("low") is not None and est.get("high") is not None:
            body.append(line(px(est["low"]), y, px(est["high"]), y, "#1d1d1f", 1.5))
            for v in (est["low"], est["high"]):
                body.append(line(px(v), y - 5, px(v), y + 5, "#1d1d1f", 1.5))
        figure = f"{num(est['value'])} {interval(est)}"
        body.append(circle(px(est["value"]), y, 5, "#1a5fb4", f"{name}: {figure}"))
        body.append(text(x1 + 10, y + 4, figure))
    return chart(width, height, label, body)


def win_chart(pairs: Sequence[dict[str, Any]], conf: float) -> dict:
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
        body.append(text(lab_w, y + 17, short(r["system_1"], 24), "end", tip=r["system_1"]))
        body.append(text(x0 + bar_w + 10, y + 17, short(r["system_2"], 24), tip=r["system_2"]))
        x = x0
        for count, color, what in (
            (r["wins_1"], "#1a5fb4", f"{r['system_1']} wins"),
            (r["ties"], "#9a9996", "ties"),
            (r["wins_2"], "#e66100", f"{r['system_2']} wins"),
        ):
            w = bar_w * count / n
            body.append(rect(x, y + 4, w, 18, color, f"{what}: {count} of {r['n_items']} items"))
            if w > 34:
                share = f"{100 * count / n:.0f}%"
                body.append(text(x + w / 2, y + 17, share, "middle", _text_class(color)))
            x += w
        ewr = r.get("expected_win_rate")
        if ewr is not None:
            if r.get("expected_win_rate_low") is not None:
                lo = x0 + bar_w * r["expected_win_rate_low"]
                hi = x0 + bar_w * r["expected_win_rate_high"]
                body.append(line(lo, y + 2, hi, y + 2, "#1d1d1f", 1.5))
            span = {"low": r.get("expected_win_rate_low"), "high": r.get("expected_win_rate_high")}
            tip = f"expected win rate of {r['system_1']}: {num(ewr)} {interval(span)}"
            body.append(path(x0 + bar_w * ewr, y - 2, "#1d1d1f", tip))
    mid = x0 + bar_w / 2
    body.append(line(mid, top - 4, mid, top + row_h * len(pairs), "#5f6368", 1, "3 3"))
    body.append(
        text(
            x0,
            height - 8,
            f"◆ expected win rate of system 1 = (wins + ½ ties) / items; "
            f"bar: {round(100 * conf)}% interval",
            cls="m",
        )
    )
    return chart(width, height, "Win and tie rates per system pair", body)


def stacked_chart(
    groups: Sequence[tuple[str | None, Sequence[tuple[str, Sequence[float], str]]]],
    labels: Sequence[Any],
    fills: Sequence[str],
    label: str,
    legend_title: str = "",
) -> dict:
    """Groups of 100% stacked bars: (group heading, [(row name, proportions, note)])."""
    lab_w, bar_w, row_h, head_h = 190, 420, 22, 20
    legend_w = sum(24 + 7 * len(short(str(lb), 32)) for lb in labels)
    width = max(lab_w + bar_w + 150, lab_w + legend_w)  # every legend entry shown
    n_rows = sum(len(rows) for _, rows in groups)
    n_heads = sum(1 for head, _ in groups if head)
    height = 30 + n_rows * row_h + n_heads * head_h + 10
    body = _legend(lab_w, 14, [(str(lb), c) for lb, c in zip(labels, fills, strict=True)])
    if legend_title:
        body.insert(0, text(lab_w - 8, 14, legend_title, "end", "m"))
    y = 26
    for head, rows in groups:
        if head:
            body.append(text(8, y + 14, short(head, 90), cls="m", tip=head))
            y += head_h
        for name, props, note in rows:
            body.append(text(lab_w - 8, y + 15, short(name, 26), "end", tip=name))
            total = sum(props)
            if total <= 0:
                why = "undefined: " + short(note or "no labels", 70)
                body.append(text(lab_w + 4, y + 15, why, cls="u", tip=note))
                y += row_h
                continue
            x = lab_w
            for lab, p, color in zip(labels, props, fills, strict=True):
                w = bar_w * p / total
                body.append(rect(x, y + 3, w, 16, color, f"{name}: {lab} {100 * p / total:.1f}%"))
                if w > 30:
                    share = f"{100 * p / total:.0f}%"
                    body.append(text(x + w / 2, y + 15, share, "middle", _text_class(color)))
                x += w
            if note:
                body.append(text(lab_w + bar_w + 8, y + 15, short(note, 22), cls="m", tip=note))
            y += row_h
    return chart(width, height, label, body)


def prioritisation_chart(rows: Sequence[dict[str, Any]]) -> dict:
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
        body.append(line(left, py(v), left + plot_w, py(v), "#e3e5e8"))
        body.append(text(left - 6, py(v) + 4, f"{v:.2f}", "end", "m"))
    for r in rows:
        body.append(
            text(px(r["k_percent"]), top + plot_h + 16, f"{r['k_percent']:g}%", "middle", "m")
        )
    band = [r for r in rows if r["random_mean"] is not None]
    if band:
        upper = [(px(r["k_percent"]), py(r["random_mean"] + (r["random_std"] or 0))) for r in band]
        lower = [
            (px(r["k_percent"]), py(max(0.0, r["random_mean"] - (r["random_std"] or 0))))
            for r in band
        ]
        body.append(poly("polygon", upper + lower[::-1], fill="#deddda"))
        mean = [(px(r["k_percent"]), py(r["random_mean"])) for r in band]
        body.append(poly("polyline", mean, stroke="#77767b", w=1.5, dash="4 3"))
    obs = [(px(r["k_percent"]), py(r["tie_rate"])) for r in rows]
    body.append(poly("polyline", obs, stroke="#1a5fb4", w=2))
    for r in rows:
        tip = f"top {r['k_percent']:g}%: tie rate {num(r['tie_rate'])}"
        body.append(circle(px(r["k_percent"]), py(r["tie_rate"]), 3, "#1a5fb4", tip))
    caption = "top k% of items by priority; y: share of ties"
    body.append(text(left + plot_w / 2, height - 4, caption, "middle", "m"))
    return chart(width, height, "Prioritisation check: tie rate by priority", body)


def bias_chart(pb: dict[str, Any], limit: int = 30) -> dict:
    """Share of left-hand choices overall and for the ``limit`` busiest annotators."""
    rows = [("all annotators", pb["overall"])]
    raters = sorted(pb["annotators"], key=lambda r: (-(r["n"] or 0), str(r["rater"])))
    rows += [(str(r["rater"]), r) for r in raters[:limit]]
    lab_w, plot_w, row_h, top = 160, 380, 20, 10
    width, height = lab_w + plot_w + 170, top + row_h * len(rows) + 30
    x0 = lab_w
    bottom = top + row_h * len(rows)

    def px(v: float) -> float:
        return x0 + v * plot_w

    body = _axis(x0, x0 + plot_w, top, bottom, 0, 1, [0, 0.25, 0.5, 0.75, 1])
    body.append(line(px(0.5), top, px(0.5), bottom, "#5f6368", 1, "3 3"))
    for i, (name, r) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        body.append(text(lab_w - 8, y + 4, short(name, 22), "end", tip=name))
        if r.get("share_left") is None:
            why = "undefined: " + short(r.get("reason", ""), 60)
            body.append(text(x0 + 4, y + 4, why, cls="u", tip=r.get("reason")))
            continue
        p = r.get("p_holm") if i else r.get("p_value")
        color = "#a51d2d" if p is not None and p < 0.05 else "#1a5fb4"
        tip = (
            f"{name}: left {r['n_left']} of {r['n']} ({pct(r['share_left'])}), "
            f"p = {num(r['p_value'])}"
        )
        body.append(circle(px(r["share_left"]), y, 5 if i == 0 else 4, color, tip))
        body.append(text(x0 + plot_w + 10, y + 4, f"{pct(r['share_left'])} of {r['n']}", cls="m"))
    caption = "share of left-hand choices; red: p < 0.05 (annotators: Holm-adjusted)"
    body.append(text(x0, height - 4, caption, cls="m"))
    return chart(width, height, "Position bias: share of left-hand choices", body)
