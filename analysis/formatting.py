"""How the report writes numbers and names as text (pure; shared by the text report, the HTML
report's context and the charts). An undefined figure is written ``undefined``, never NaN."""

from __future__ import annotations

import math
from typing import Any

_CONTROL = dict.fromkeys([*range(0, 32), *range(127, 160)], "?")


def plain(value: Any) -> str:
    """Text safe for a terminal: control characters (escape sequences) become '?'."""
    return str(value).translate(_CONTROL)


def num(value: Any, digits: int = 3) -> str:
    """A figure: thousands separated, floats to ``digits`` places, ``undefined`` for None/NaN."""
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


def pct(value: Any) -> str:
    """A share as a percentage with one decimal."""
    return "undefined" if value is None else f"{100 * value:.1f}%"


def interval(est: dict[str, Any]) -> str:
    """``[low, high]`` of an estimate, or empty when it has none."""
    if est.get("low") is None or est.get("high") is None:
        return ""
    return f"[{num(est['low'])}, {num(est['high'])}]"


def short(text: Any, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
