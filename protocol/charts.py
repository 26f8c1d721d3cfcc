"""The dashboard's charts as data (pure): the partial order and the budget over rounds, as
:mod:`charts.shapes` for ``templates/charts/chart.svg.html`` (which escapes every name)."""

from __future__ import annotations

from typing import Any

from charts.shapes import chart, group, line, poly, rect, text


def partial_order_chart(order: dict[str, Any], width: int = 640) -> dict | None:
    """Systems in layers (the longest chain of wins above each), arrows winner → loser."""
    systems = order["systems"]
    if not systems:
        return None
    layers: dict[int, list[str]] = {}
    for s in systems:
        layers.setdefault(s["layer"], []).append(s["name"])
    row_h, box_h = 70, 28
    height = row_h * len(layers) + 20
    pos = {}
    for layer, names in sorted(layers.items()):
        step = width / (len(names) + 1)
        for i, name in enumerate(names):
            pos[name] = (step * (i + 1), 20 + layer * row_h + box_h / 2)
    shapes = []
    for edge in order["edges"]:
        (x1, y1), (x2, y2) = pos[edge["winner"]], pos[edge["loser"]]
        tip = f"{edge['winner']} beats {edge['loser']}"
        if edge.get("implied"):
            tip += " (by implication)"
        shapes.append(line(x1, y1 + box_h / 2, x2, y2 - box_h / 2, tip=tip, arrow=True))
    for name, (x, y) in pos.items():
        w = max(60, 8 * len(name) + 16)
        box = rect(x - w / 2, y - box_h / 2, w, box_h, "#eef3fb", rx=6, stroke="#1a5fb4")
        shapes.append(group("", [box, text(x, y + 5, name, "middle", size=13)]))
    label = "Partial order of systems"
    return chart(width, height, label, shapes, cls="partial-order", sized=False, arrow=True)


def nice_ticks(top: float, most: int = 6) -> list[int]:
    """Round tick values from 0 to at least ``top``: steps of 1, 2 or 5 times a power of ten,
    at most ``most`` + 1 ticks."""
    top = max(top, 1)
    step = 1
    while True:
        for mult in (1, 2, 5):
            if top / (step * mult) <= most:
                step *= mult
                n = -(-int(top) // step)
                return [i * step for i in range(n + 1)]
        step *= 10


def budget_chart(rounds: list[dict[str, Any]], budget: int | None, width: int = 640) -> dict | None:
    """Annotations collected per round (bars) and in total (line), against the budget, with
    a y-axis in annotations and the round number under each bar."""
    if not rounds:
        return None
    height, left, right, top_pad, bottom = 220, 56, 16, 16, 40
    ticks = nice_ticks(max([budget or 0] + [r["spent_so_far"] for r in rounds]))
    top = ticks[-1]
    plot_w = width - left - right
    bar_w = plot_w / len(rounds)
    base = height - bottom

    def y(v: float) -> float:
        return base - (base - top_pad) * v / top

    shapes = [
        line(left, base, width - right, base, "#999"),
        line(left, top_pad, left, base, "#999"),
    ]
    for t in ticks:
        tick_line = line(left - 4, y(t), width - right, y(t), "#e3e5e8")
        shapes.append(group("y-tick", [tick_line, text(left - 6, y(t) + 4, t, "end", size=11)]))
    mid = (top_pad + base) / 2
    shapes.append(text(12, mid, "annotations", "middle", size=11, rotate=-90))
    shapes.append(text(left + plot_w / 2, height - 6, "round", "middle", size=11))
    if budget:
        shapes.append(line(left, y(budget), width - right, y(budget), "#c01c28", dash="4 3"))
        shapes.append(text(width - right, y(budget) - 4, f"budget {budget}", "end", size=11))
    points = []
    for i, r in enumerate(rounds):
        x = left + i * bar_w
        tip = f"round {r['number']}: {r['collected']} collected"
        bar_h = base - y(r["collected"])
        shapes.append(rect(x + 2, y(r["collected"]), bar_w - 4, bar_h, "#99c1f1", tip))
        shapes.append(text(x + bar_w / 2, base + 14, r["number"], "middle", size=11))
        points.append((x + bar_w / 2, y(r["spent_so_far"])))
    shapes.append(poly("polyline", points, stroke="#1a5fb4", tip="total collected"))
    label = "Annotations collected per round and in total, against the budget"
    return chart(width, height, label, shapes, cls="budget", sized=False)
