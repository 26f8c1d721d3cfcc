"""SVG drawings of the protocol's state (pure; every text escaped: names are untrusted)."""

from __future__ import annotations

from html import escape
from typing import Any


def partial_order_svg(order: dict[str, Any], width: int = 640) -> str:
    """Systems in layers (the longest chain of wins above each), arrows winner → loser."""
    systems = order["systems"]
    if not systems:
        return ""
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
    parts = [
        f'<svg class="partial-order" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Partial order of systems" xmlns="http://www.w3.org/2000/svg">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#5f6368"/></marker></defs>',
    ]
    for edge in order["edges"]:
        (x1, y1), (x2, y2) = pos[edge["winner"]], pos[edge["loser"]]
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1 + box_h / 2:.1f}" x2="{x2:.1f}" '
            f'y2="{y2 - box_h / 2:.1f}" stroke="#5f6368" marker-end="url(#arrow)">'
            f"<title>{escape(edge['winner'])} beats {escape(edge['loser'])}</title></line>"
        )
    for name, (x, y) in pos.items():
        w = max(60, 8 * len(name) + 16)
        parts.append(
            f'<g><rect x="{x - w / 2:.1f}" y="{y - box_h / 2:.1f}" width="{w}" height="{box_h}" '
            f'rx="6" fill="#eef3fb" stroke="#1a5fb4"/><text x="{x:.1f}" y="{y + 5:.1f}" '
            f'text-anchor="middle" font-size="13">{escape(name)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


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


def budget_svg(rounds: list[dict[str, Any]], budget: int | None, width: int = 640) -> str:
    """Annotations collected per round (bars) and in total (line), against the budget, with
    a y-axis in annotations and the round number under each bar."""
    if not rounds:
        return ""
    height, left, right, top_pad, bottom = 220, 56, 16, 16, 40
    ticks = nice_ticks(max([budget or 0] + [r["spent_so_far"] for r in rounds]))
    top = ticks[-1]
    plot_w = width - left - right
    bar_w = plot_w / len(rounds)
    base = height - bottom

    def y(v: float) -> float:
        return base - (base - top_pad) * v / top

    parts = [
        f'<svg class="budget" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Annotations collected per round and in total, against the budget" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{base}" stroke="#999"/>',
    ]
    for t in ticks:
        parts.append(
            f'<g class="y-tick"><line x1="{left - 4}" y1="{y(t):.1f}" x2="{width - right}" '
            f'y2="{y(t):.1f}" stroke="#e3e5e8"/><text x="{left - 6}" y="{y(t) + 4:.1f}" '
            f'text-anchor="end" font-size="11">{t}</text></g>'
        )
    parts.append(
        f'<text x="12" y="{(top_pad + base) / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top_pad + base) / 2:.1f})">annotations</text>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" font-size="11" '
        f'text-anchor="middle">round</text>'
    )
    if budget:
        parts.append(
            f'<line x1="{left}" y1="{y(budget):.1f}" x2="{width - right}" y2="{y(budget):.1f}" '
            f'stroke="#c01c28" stroke-dasharray="4 3"/><text x="{width - right}" '
            f'y="{y(budget) - 4:.1f}" text-anchor="end" font-size="11">budget {budget}</text>'
        )
    points = []
    for i, r in enumerate(rounds):
        x = left + i * bar_w
        parts.append(
            f'<rect x="{x + 2:.1f}" y="{y(r["collected"]):.1f}" width="{bar_w - 4:.1f}" '
            f'height="{base - y(r["collected"]):.1f}" fill="#99c1f1">'
            f"<title>round {r['number']}: {r['collected']} collected</title></rect>"
            f'<text x="{x + bar_w / 2:.1f}" y="{base + 14}" text-anchor="middle" '
            f'font-size="11">{r["number"]}</text>'
        )
        points.append(f"{x + bar_w / 2:.1f},{y(r['spent_so_far']):.1f}")
    parts.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="#1a5fb4">')
    parts.append("<title>total collected</title></polyline>")
    parts.append("</svg>")
    return "".join(parts)
