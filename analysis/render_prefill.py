"""The error-span section's ``prefill`` block (:mod:`analysis.prefill_report`: what the judge's
suggested spans did to the labels, and what skipping the items the judge found error-free
saved and missed) as plain text and as the data of ``analysis/_prefill.html`` (pure; the
template escapes, the text strips control characters)."""

from __future__ import annotations

from typing import Any

from analysis import tables
from analysis.formatting import num, pct, plain

__all__ = ["prefill_context", "prefill_text"]

TITLE = "Judge-prefilled spans"
SKIP_TITLE = "Items skipped as error-free by the judge"
RATE_HEADERS = ["suggestions", "count", "share", "interval"]
EFFECT_HEADERS = ["figure", "with suggestions", "without", "difference", "interval", "labels"]
_ACTIONS = [
    ("accepted", "accepted as they were"),
    ("edited", "edited"),
    ("resized", "edited: boundaries moved"),
    ("regraded", "edited: severity only"),
    ("deleted", "deleted"),
]
_FIGURES = {"n_spans": "error spans per label", "score": "score (0-100)"}


def _iv(lo: Any, hi: Any) -> str:
    return "undefined" if lo is None or hi is None else f"[{num(lo)}, {num(hi)}]"


def _lines(block: dict[str, Any]) -> list[str]:
    """The lead lines: label counts, human additions, judge-vs-final F1."""
    out = []
    labels = block.get("labels")
    if labels:
        out.append(
            f"{num(labels['shown'])} labels with suggestions, {num(labels['control'])} in the "
            f"control share (shown without), {num(labels['none'])} without a usable proposal"
        )
    rates = block.get("rates")
    if rates:
        out.append(
            f"{num(rates['n_suggestions'])} suggestions; "
            f"{num(rates['added_by_humans'])} span(s) added by the workers"
        )
    if labels:
        out.append(
            "Judge-vs-final span F1 (character level, labels with suggestions): "
            f"{num(block.get('judge_final_f1'))}"
        )
    return out


def _rate_rows(block: dict[str, Any]) -> list[list[str]]:
    rates = block.get("rates") or {}
    if not rates.get("n_suggestions"):
        return []
    return [
        [
            what,
            num(rates[key]["n"]),
            pct(rates[key]["value"]),
            _iv(rates[key]["low"], rates[key]["high"]),
        ]
        for key, what in _ACTIONS
        if key in rates  # labels from before boundary edits have no split
    ]


def _effect_rows(block: dict[str, Any]) -> list[list[str]]:
    return [
        [
            _FIGURES.get(r["figure"], r["figure"]),
            num(r["with"]),
            num(r["without"]),
            num(r["difference"]),
            _iv(r["low"], r["high"]) if not r.get("reason") else f"undefined: {r['reason']}",
            f"{num(r['n_with'])} / {num(r['n_without'])}",
        ]
        for r in block.get("effect") or []
    ]


def _skip_lines(skip: dict[str, Any] | None) -> list[str]:
    if not skip:
        return []
    c = skip["control_errors"]
    found = (
        f"humans found errors in {num(c['with_errors'])} of the {num(c['n_control'])} controls "
        f"they labelled: {pct(c['share'])}, interval {_iv(c['low'], c['high'])} (an estimate "
        "of the share of skipped items that had errors)"
        if c["n_control"]
        else f"errors found in controls: undefined ({c['reason']})"
    )
    return [
        f"{num(skip['skipped'])} items skipped: {num(skip['saved_annotations'])} of "
        f"{num(skip['planned_annotations'])} planned annotations saved "
        f"({pct(skip['budget_saved'])} of the budget)",
        f"{num(skip['controls'])} error-free items kept as controls (control share "
        f"{pct(skip['control_share'])}); {found}",
    ]


def _rate_table(block: dict[str, Any]) -> tables.Table:
    return tables.table("Suggestions: rates", RATE_HEADERS, _rate_rows(block))


def _effect_table(block: dict[str, Any]) -> tables.Table:
    title = "With vs without suggestions (the control share)"
    return tables.table(title, EFFECT_HEADERS, _effect_rows(block))


def prefill_text(section: dict[str, Any]) -> list[str]:
    """The block as text lines (none without one)."""
    from analysis.plaintext import table_text  # the report's table layout

    block = section.get("prefill")
    if not block:
        return []
    out = ["", TITLE, *(f"  {plain(line)}" for line in _lines(block))]
    if _rate_rows(block):
        out.extend(table_text(_rate_table(block)))
    if _effect_rows(block):
        out.extend(table_text(_effect_table(block)))
    if block.get("skip"):
        out += [SKIP_TITLE, *(f"  {plain(line)}" for line in _skip_lines(block["skip"]))]
    return out


def prefill_context(section: dict[str, Any]) -> dict[str, Any] | None:
    """What ``analysis/_prefill.html`` shows, or None without a prefill block."""
    block = section.get("prefill")
    if not block:
        return None
    out: dict[str, Any] = {"title": TITLE, "lines": _lines(block)}
    if _rate_rows(block):
        out["rates"] = _rate_table(block)
    if _effect_rows(block):
        out["effect"] = _effect_table(block)
    if block.get("skip"):
        out["skip"] = {"title": SKIP_TITLE, "lines": _skip_lines(block["skip"])}
    return out
