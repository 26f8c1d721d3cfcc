"""The ranking chart as data (pure; shared by the report and the protocol dashboard): one row
per system, best first, its Bradley-Terry score as a dot and its interval as a whisker, as
:mod:`charts.shapes` for ``templates/charts/chart.svg.html`` (which escapes every name)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from charts.shapes import chart, circle, line, text

__all__ = ["ranking_chart", "score_ticks"]


def score_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round ticks covering ``[lo, hi]``: steps of 1, 2 or 5 times a power of ten; at least
    two (equal ends are widened by 1 each way)."""
    if hi - lo < 1e-6:
        lo, hi = lo - 1, hi + 1
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / most))
    for mult in (1, 2, 5, 10):
        if span / (step * mult) <= most:
            step *= mult
            break
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    return [first + i * step for i in range(round((last - first) / step) + 1)]


def _fmt(v: float, digits: int) -> str:
    return f"{v:.{digits}f}"


def ranking_chart(
    rows: Sequence[dict[str, Any]], label: str = "Bradley-Terry scores with intervals"
) -> dict[str, Any] | None:
    """``rows``: ``system``, ``score``, ``low``, ``high``, ``rank`` (and ``reason`` when the
    score is undefined), best first. ``None`` when there is no row."""
    if not rows:
        return None
    values = [
        v
        for r in rows
        for v in (r.get("score"), r.get("low"), r.get("high"))
        if v is not None and math.isfinite(v)
    ]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    ticks = score_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    digits = 0 if hi - lo >= 20 else 2
    lab_w, plot_w, num_w, row_h, top = 220, 360, 170, 24, 10
    width = lab_w + plot_w + num_w
    bottom = top + row_h * len(rows)
    height = bottom + 40
    x0 = lab_w

    def px(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    body = []
    for t in ticks:
        body.append(line(px(t), top, px(t), bottom, "#e3e5e8"))
        body.append(text(px(t), bottom + 14, f"{t:g}", "middle", "m"))
    for i, r in enumerate(rows):
        y = top + i * row_h + row_h / 2
        name = str(r["system"])
        head = f"{r['rank']}. {name}" if r.get("rank") is not None else name
        shown = head if len(head) <= 30 else head[:29] + "…"
        body.append(text(lab_w - 8, y + 4, shown, "end", tip=name))
        score = r.get("score")
        if score is None:
            why = "undefined: " + (r.get("reason") or "no score")
            body.append(text(x0 + 4, y + 4, why[:80], cls="u", tip=r.get("reason")))
            continue
        figure = _fmt(score, digits)
        if r.get("low") is not None and r.get("high") is not None:
            body.append(line(px(r["low"]), y, px(r["high"]), y, "#1d1d1f", 1.5))
            for v in (r["low"], r["high"]):
                body.append(line(px(v), y - 5, px(v), y + 5, "#1d1d1f", 1.5))
            figure += f" [{_fmt(r['low'], digits)}, {_fmt(r['high'], digits)}]"
        body.append(circle(px(score), y, 5, "#1a5fb4", f"{name}: {figure}"))
        body.append(text(x0 + plot_w + 10, y + 4, figure))
    caption = "dot: score; whisker: bootstrap interval over inputs; rank: 1 + systems above"
    # across the whole width: the caption is longer than the plot
    body.append(text(8, height - 6, caption, cls="m"))
    return chart(width, height, label, body)
