"""SVG chart shapes as data (pure; shared by the report's and the dashboard's charts).

A chart is ``{"width", "height", "label", "shapes", ...}``; a shape is a dict with a ``shape``
(``rect``, ``line``, ``text``, ``circle``, ``path`` (a diamond marker), ``polyline``,
``polygon``, or ``g`` holding ``children``), its coordinates, colours and an optional ``tip``.
The markup is written, with every text escaped, by the template
``templates/charts/chart.svg.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: A chart or one of its shapes (keys as the module docstring says).
Shape = dict[str, Any]

__all__ = ["chart", "circle", "group", "line", "path", "poly", "rect", "text"]

# --- -----------------------------------------------------------------------------------


def chart(width: float, height: float, label: str, shapes: list[Shape], **extra: Any) -> Shape:
    """A chart for ``charts/chart.svg.html``; ``extra``: ``cls``, ``sized`` (width/height
    attributes, default True), ``arrow`` (define the arrow-head marker)."""
    return {
        "width": width,
        "height": height,
        "label": label,
        "shapes": shapes,
        "sized": True,
    } | extra


def text(
    x: float,
    y: float,
    value: Any,
    anchor: str = "start",
    cls: str = "",
    tip: Any = None,
    **extra: Any,
) -> Shape:
    """A text; ``extra``: ``size`` (font size), ``rotate`` (degrees about its point)."""
    return (
        {"shape": "text", "x": x, "y": y, "text": str(value), "anchor": anchor, "cls": cls}
        | {"tip": None if tip is None else str(tip)}
        | extra
    )


def rect(x: float, y: float, w: float, h: float, fill: str, tip: Any = None, **extra: Any) -> Shape:
    """A rectangle; ``extra``: ``rx``, ``stroke``."""
    return (
        {"shape": "rect", "x": x, "y": y, "w": max(w, 0), "h": h, "fill": fill}
        | {"tip": None if tip is None else str(tip)}
        | extra
    )


def line(
    x1: float,
    y1: float,
    x2: float,
    y2: float,
    stroke: str = "#5f6368",
    w: float = 1,
    dash: str = "",
    tip: Any = None,
    **extra: Any,
) -> Shape:
    """A line; ``extra``: ``arrow`` (an arrow head at its end)."""
    return (
        {"shape": "line", "x1": x1, "y1": y1, "x2": x2, "y2": y2, "stroke": stroke, "w": w}
        | {"dash": dash, "tip": None if tip is None else str(tip)}
        | extra
    )


def circle(cx: float, cy: float, r: float, fill: str, tip: Any = None) -> Shape:
    return {"shape": "circle", "cx": cx, "cy": cy, "r": r, "fill": fill, "tip": tip}


def path(x: float, y: float, fill: str, tip: Any = None) -> Shape:
    """A diamond marker whose top is at (x, y)."""
    return {"shape": "path", "x": x, "y": y, "fill": fill, "tip": tip}


def poly(
    shape: str,
    points: Sequence[tuple[float, float]],
    fill: str = "none",
    stroke: str = "",
    w: float = 1,
    dash: str = "",
    tip: Any = None,
) -> Shape:
    """A ``polyline`` or ``polygon`` through ``points``."""
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return {"shape": shape, "points": pts, "fill": fill, "stroke": stroke, "w": w, "dash": dash} | {
        "tip": tip
    }


def group(cls: str, children: list[Shape]) -> Shape:
    return {"shape": "g", "cls": cls, "children": children}
