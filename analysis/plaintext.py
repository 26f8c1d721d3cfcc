"""A report dict (:func:`analysis.report.build_report`) as plain text for a terminal.

Every table is a :class:`analysis.tables.Table`, the same the HTML report shows (same
title, columns and rows). Untrusted text (system, judge and label names, reasons) is
stripped of control characters. An undefined figure is written ``undefined`` followed by its
reason, never as a bare NaN.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from analysis import tables
from analysis.formatting import num, pct, plain
from analysis.render_assisted import assisted_text, style_text
from analysis.render_prefill import prefill_text
from analysis.tables import Table

__all__ = ["SINGLE_LABEL", "render_text", "table_text", "text_table"]

#: Said once, instead of a wall of undefined agreement figures, when no item has two labels.
SINGLE_LABEL = (
    "Every item has one label, so agreement between annotators (Krippendorff's alpha, the "
    "kappas, percentage and leave-one-out agreement, worker reliability) cannot be measured. "
    "It needs items labelled by two or more workers: raise the study's redundancy (labels per "
    "item) to 2 or more, at least on a share of the items. An adaptive study collects one "
    "label per item by design."
)

SCALE_TITLES = {
    "pairwise": "pairwise preference",
    "ordinal": "ordinal scale",
    "categorical": "categorical labels",
}


def labels_text(prop: dict[str, Any]) -> str:
    """The label set in words: a fine score as its range and bins, not 101 numbers."""
    labels = prop.get("labels", [])
    if prop.get("bins") and labels:
        bins = prop["bins"]
        return (
            f"scores {labels[0]}–{labels[-1]}, shown in {len(bins)} bins: "
            f"{', '.join(bins[:2])}, …, {bins[-1]}"
        )
    return "labels: " + ", ".join(str(x) for x in labels)


def judges_text(counts: dict[str, Any]) -> str:
    """The judges compared with humans; judges whose ratings have no human labels to be
    compared with yet are named as such, never as "none"."""
    compared = list(counts.get("judges", []))
    waiting = [j for j in counts.get("judges_rated", []) if j not in compared]
    parts = [", ".join(compared)] if compared else []
    if waiting:
        parts.append(
            f"{', '.join(waiting)} (ratings stored; compared once humans have labelled the "
            "same items)"
        )
    return "; ".join(parts) or "none"


def ranking_heading(method: dict[str, Any]) -> str:
    return (
        f"Ranking: Bradley-Terry scores ({method['scale']}; {method['ties']}); "
        f"{method['interval']}, {method.get('n_boot', 0)} resamples; rank = {method['rank']}"
    )


def text_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "  ") -> str:
    cells = [[plain(h) for h in headers]] + [[plain(c) for c in row] for row in rows]
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


def table_text(table: Table | None) -> list[str]:
    """A table of the report: its title, notes, every row, and its source."""
    if table is None:
        return []
    out = [f"{plain(table.title)}:"]
    out += [f"  Note: {plain(n)}" for n in table.notes]
    out.append(text_table(table.columns, [[c.plain() for c in row] for row in table.rows]))
    if table.source:
        out.append(f"  Source: {plain(table.source)}")
    return out


def _est_text(est: dict[str, Any]) -> str:
    return tables.est(est).plain()


def render_text(report: dict[str, Any]) -> str:
    """The report as plain text for a terminal."""
    out: list[str] = []
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    conf = settings.get("confidence", 0.95)
    out.append(f"Study report: {plain(report.get('title') or '(untitled)')}")
    if report.get("source"):
        out.append(f"Source: {plain(report['source'])}")
    out.append(
        f"Annotations used: {num(counts.get('annotations', 0))} "
        f"({num(counts.get('labels', 0))} labels) on {num(counts.get('items', 0))} items "
        f"from {num(counts.get('annotators', 0))} annotators; judges: "
        f"{plain(judges_text(counts))}"
    )
    out.append(
        f"Settings: tie threshold {settings.get('threshold')}, {settings.get('n_boot')} bootstrap "
        f"resamples over items, {round(100 * conf)}% percentile intervals, seed "
        f"{settings.get('seed')}"
    )
    for note in report.get("notes", []):
        out.append(f"Note: {plain(note)}")
    for section in report.get("sections", []):  # the kind's own sections first
        out.append("")
        out.extend(_text_section(section))
    for prop in report.get("properties", []):
        out.append("")
        out.extend(_text_property(prop, conf))
    return "\n".join(out) + "\n"


def _text_section(section: dict[str, Any]) -> list[str]:
    """A kind's own section (:mod:`analysis.sections`): figures, tables, notes."""
    out = [f"== {plain(section.get('title') or section.get('name', ''))} =="]
    for note in section.get("notes", []):
        out.append(f"Note: {plain(note)}")
    for fig in section.get("figures", []):
        out.append(f"{plain(fig.get('name', ''))}: {_est_text(fig)}")
    for table in tables.section_tables(section):
        out.extend(table_text(table))
    return out + prefill_text(section)


def _text_property(prop: dict[str, Any], conf: float) -> list[str]:
    out = []
    head = (
        f"== {prop['name']} ({SCALE_TITLES.get(prop['scale'], prop['scale'])}; "
        f"Krippendorff's alpha at the {prop['level']} level) =="
    )
    out.append(plain(head))
    if prop.get("title") and prop["title"] != prop["name"]:
        out.append(plain(prop["title"]))
    labels = labels_text(prop)
    out.append(plain(labels[:1].upper() + labels[1:]))
    for note in prop.get("notes", []):
        out.append(f"Note: {plain(note)}")
    exc = prop.get("excluded", {})
    if exc.get("flagged") or exc.get("gold"):
        out.append(
            f"Flagged labels: {exc.get('flagged', 0)}; gold labels excluded: {exc.get('gold', 0)}"
        )
    if prop.get("empty"):
        out.append(f"No figures: {plain(prop['empty'])}")
        return out
    tabs = tables.property_tables(prop, conf)
    c = prop["counts"]
    per = c["labels_per_item"]
    out.append(
        f"{num(c['labels'])} labels on {num(c['items'])} items by {num(c['annotators'])} "
        f"annotators; labels per item {per['min']}-{per['max']} (median {num(per['median'], 1)}); "
        f"{num(c['items_with_two_or_more'])} items with two or more labels"
    )
    if not c.get("items_with_two_or_more", 1):
        out.append(f"Note: {SINGLE_LABEL}")
    out.append("")
    out.extend(table_text(tabs.reliability))
    if "pairwise" in prop:
        pw = prop["pairwise"]
        o = pw["outcomes"]
        out.append("")
        out.append(
            f"Soft-voted outcomes (tie when |p_A - p_B| <= {pw['threshold']}): "
            f"A {o['A']}, B {o['B']}, tie {o['tie']}"
        )
        if pw["pairs"]:
            out.extend(table_text(tabs.pairwise))
        else:
            out.append(f"  Win rates: undefined -- {plain(pw.get('pairs_reason', ''))}")
    if "ranking" in prop:
        method = prop.get("ranking_method", {})
        out += ["", plain(ranking_heading(method))]
        if not prop["ranking"]:
            out.append(f"  undefined -- {plain(method.get('reason', ''))}")
        else:
            if method.get("reason"):
                out.append(f"  Note: {plain(method['reason'])}")
            out.extend(table_text(tabs.ranking))
    out.extend(assisted_text(prop) + style_text(prop))
    if tabs.likert is not None:
        out.append("")
        out.extend(table_text(tabs.likert))
    out.extend(_text_judges(prop, tabs))
    out.extend(_text_workers(prop, tabs))
    out.extend(_text_perception(prop, tabs))
    out.extend(_text_position_bias(prop, tabs))
    if "prioritisation" in prop:
        pr = prop["prioritisation"]
        out.append("")
        if pr.get("reason"):
            out.append(f"Prioritisation check: undefined -- {plain(pr['reason'])}")
        else:
            out.extend(table_text(tabs.prioritisation))
    return out


def _text_judges(prop: dict[str, Any], tabs: tables.PropertyTables) -> list[str]:
    out = [""]
    if tabs.judges is None:
        out.append("Human vs judge: no judge labels")
    else:
        for j in prop["judges"]:
            out.append(
                f"Judge {plain(j['judge'])}: {num(j['n_items'])} items with human and judge labels"
            )
        inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
        if inner is not None:
            out.append(f"Humans among themselves, leave-one-out (inner): {_est_text(inner)}")
        out.extend(table_text(tabs.judges))
    for strat in tabs.stratified:
        out += [""] + table_text(strat)
    extra = prop.get("judges_extra")
    if extra:
        out += [""] + table_text(tabs.random)
        out.append("")
        if extra.get("samples_reason"):
            out.append(
                f"Agreement among judge samples: undefined -- {plain(extra['samples_reason'])}"
            )
        else:
            out.extend(table_text(tabs.samples))
    return out


def _text_workers(prop: dict[str, Any], tabs: tables.PropertyTables) -> list[str]:
    wk = prop.get("workers")
    if not wk:
        return []
    if wk.get("reason"):
        return ["", f"Worker-weighted labels: unavailable -- {plain(wk['reason'])}"]
    return ["", *table_text(tabs.worker_methods), *table_text(tabs.workers)]


def _text_perception(prop: dict[str, Any], tabs: tables.PropertyTables) -> list[str]:
    per = prop.get("perception", {})
    if per.get("reason"):
        return ["", f"Perception chart: undefined -- {plain(per['reason'])}"]
    return ["", *table_text(tabs.perception)]


def _text_position_bias(prop: dict[str, Any], tabs: tables.PropertyTables) -> list[str]:
    if "position_bias" not in prop:
        return []
    pb = prop["position_bias"]
    if pb.get("reason"):
        return ["", f"Position bias: undefined -- {plain(pb['reason'])}"]
    ov = pb["overall"]
    flagged = [r for r in pb["annotators"] if (r.get("p_holm") or 1) < 0.05]
    return [
        "",
        f"Position bias: left chosen in {pct(ov['share_left'])} of {num(ov['n'])} "
        f"sided choices (binomial p = {num(ov['p_value'])}; {num(ov['n_excluded'])} "
        f"without a side); {len(flagged)} of {len(pb['annotators'])} annotators "
        "differ from 1/2 at Holm-adjusted p < 0.05",
        *table_text(tabs.position_bias),
    ]
