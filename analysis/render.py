"""A report dict (:func:`analysis.report.build_report`) as the data of the HTML report
(``report_context``) that the templates ``analysis/_report.html``, ``analysis/_table.html``
and ``charts/chart.svg.html`` write out with autoescaping, on the web page and in the
standalone file (``render_html``, Django's template engine without a project); and, from
:mod:`analysis.plaintext`, as plain text (``render_text``).

Both renderers show the same tables (:mod:`analysis.tables`): built once per property from
the report dict, they cannot drift apart. Untrusted text (system, judge and label names,
reasons) is escaped by the templates. An undefined figure is written ``undefined`` followed
by its reason, never as a bare NaN.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis import charts, tables
from analysis.formatting import num, pct, short
from analysis.plaintext import (
    SINGLE_LABEL,
    judges_text,
    labels_text,
    ranking_heading,
    render_text,
    text_table,
)
from analysis.render_assisted import assisted_context, style_context
from analysis.render_prefill import prefill_context
from charts.ranking import ranking_chart

if TYPE_CHECKING:
    from django.template import Engine

__all__ = ["SINGLE_LABEL", "render_html", "render_text", "report_context", "text_table"]

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_DIRS = [Path(__file__).resolve().parent / "templates", ROOT / "templates"]
REPORT_CSS_PATH = ROOT / "static" / "humeval" / "report.css"

_SCALE_TITLES = {
    "pairwise": "pairwise preference",
    "ordinal": "ordinal scale",
    "categorical": "categorical labels",
}


def _scale_title(prop: dict[str, Any]) -> str:
    if prop.get("bins"):
        return "interval scale (a score)"
    return _SCALE_TITLES.get(prop["scale"], prop["scale"])


def _est(est: dict[str, Any]) -> tables.Cell:
    return tables.est(est)


def _card(name: str, fig: dict, note: str = "") -> dict:
    return {"name": name, "fig": fig, "note": note}


def _card_est(name: str, est: dict[str, Any]) -> dict:
    fig = {"undefined": ""} if est.get("value") is None else _est({**est, "reason": ""})
    return _card(name, fig, est.get("reason", ""))


def report_context(report: dict[str, Any]) -> dict[str, Any]:
    """What ``analysis/_report.html`` shows: texts, tables and chart data of the report."""
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    conf = settings.get("confidence", 0.95)
    meta = (
        f"{num(counts.get('annotations', 0))} annotations ({num(counts.get('labels', 0))} "
        f"labels) on {num(counts.get('items', 0))} items from "
        f"{num(counts.get('annotators', 0))} annotators · judges: "
        f"{judges_text(counts)} · tie threshold "
        f"{settings.get('threshold')} · {settings.get('n_boot')} bootstrap resamples over "
        f"items, {round(100 * conf)}% percentile intervals"
    )
    props = report.get("properties", [])
    return {
        "title": report.get("title") or "(untitled)",
        "meta": meta,
        "source": report.get("source") or "",
        "notes": report.get("notes", []),
        "properties": [_property(p, f"hv-p{i}", conf) for i, p in enumerate(props)],
        "sections": [_section(sec, f"hv-k{i}") for i, sec in enumerate(report.get("sections", []))],
        "conf": round(100 * conf),
    }


def _section(section: dict[str, Any], anchor: str) -> dict[str, Any]:
    """A kind's own section (:mod:`analysis.sections`) as cards and tables."""
    return {
        "anchor": anchor,
        "title": section.get("title") or section.get("name", ""),
        "notes": list(section.get("notes", [])),
        "cards": [_card_est(f.get("name", ""), f) for f in section.get("figures", [])],
        "tables": tables.section_tables(section),
        "prefill": prefill_context(section),
    }


def _property(prop: dict[str, Any], anchor: str, conf: float) -> dict[str, Any]:
    notes = list(prop.get("notes", []))
    exc = prop.get("excluded", {})
    if exc.get("flagged") or exc.get("gold"):
        notes.append(
            f"flagged labels: {exc.get('flagged', 0)}; gold labels excluded: {exc.get('gold', 0)}"
        )
    out: dict[str, Any] = {
        "anchor": anchor,
        "name": prop["name"],
        "scale": _scale_title(prop),
        "title": prop["title"] if prop.get("title") and prop["title"] != prop["name"] else "",
        "notes": notes,
        "empty": prop.get("empty") or "",
    }
    if prop.get("empty"):
        return out
    c = prop["counts"]
    per = c["labels_per_item"]
    out["meta"] = (
        f"{num(c['labels'])} labels on {num(c['items'])} items by {num(c['annotators'])} "
        f"annotators; {per['min']}–{per['max']} labels per item; {labels_text(prop)}"
    )
    out["single_label"] = SINGLE_LABEL if c.get("items_with_two_or_more", 1) == 0 else ""
    out["cards"] = _key_figures(prop, single=bool(out["single_label"]))
    rel = prop["reliability"]
    out["reliability_chart"] = charts.forest_chart(
        [(tables.metric_name(r), r) for r in rel], "Inter-rater reliability with intervals", lo=None
    )
    tabs = tables.property_tables(prop, conf)
    out["reliability_table"] = tabs.reliability
    if "pairwise" in prop:
        out["pairwise"] = _pairwise(prop["pairwise"], conf, tabs.pairwise)
    if "ranking" in prop:
        out["ranking"] = _ranking(prop, tabs.ranking)
    if "likert" in prop:
        out["likert"] = _likert(prop["likert"], tabs.likert)
    out["assisted"], out["style"] = assisted_context(prop), style_context(prop)
    out["judges"] = _judges(prop, tabs)
    out["judges_extra"] = _judges_extra(prop, tabs)
    out["workers"] = _workers(prop, tabs)
    out["perception"] = _perception(prop) | {"table": tabs.perception}
    if "position_bias" in prop:
        out["position_bias"] = _position_bias(prop["position_bias"], tabs.position_bias)
    if "prioritisation" in prop:
        out["prioritisation"] = _prioritisation(prop["prioritisation"], tabs.prioritisation)
    return out


def _key_figures(prop: dict[str, Any], single: bool = False) -> list[dict]:
    """The headline cards; with one label per item (``single``) no agreement cards (the
    page says once why), and for a pairwise property the order of every system."""
    cards = []
    alpha = next(r for r in prop["reliability"] if r["metric"] == "krippendorff_alpha")
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    if not single:
        cards.append(_card_est(f"Krippendorff's α ({alpha['level']})", alpha))
        if inner:
            cards.append(_card_est("Leave-one-out agreement (humans)", inner))
    if "pairwise" in prop:
        o = prop["pairwise"]["outcomes"]
        total = sum(o.values()) or 1
        cards.append(
            _card(
                "Soft-voted ties", {"text": pct(o["tie"] / total)}, f"{o['tie']} of {total} items"
            )
        )
        cards.extend(_order_card(prop))
    if "likert" in prop:
        rows = [r for r in prop["likert"]["systems"] if r["system"] != "all"]
        top = max(rows, key=lambda r: r["mean_rating"])
        cards.append(
            _card(
                f"Highest mean rating: {short(top['system'], 30)}",
                {"text": num(top["mean_rating"], 2)},
                f"median of item medians {num(top['median_of_item_medians'], 1)}",
            )
        )
    for j in prop.get("judges", [])[:4]:
        cards.append(
            _card_est(f"Judge {short(j['judge'], 30)}: leave-one-out (outer)", j["loo_outer"])
        )
    return cards


def _order_card(prop: dict[str, Any]) -> list[dict]:
    """Every system at once: the Bradley-Terry order with ranks (shared ranks cannot be told
    apart), or, without a ranking, every pair's expected win rate."""
    ranked = [r for r in prop.get("ranking") or [] if r.get("score") is not None]
    if ranked:
        order = " · ".join(f"{r['rank']}. {short(r['system'], 24)}" for r in ranked)
        note = (
            f"all {len(ranked)} systems by Bradley–Terry score; a shared rank: the intervals "
            "overlap"
        )
        if prop.get("ranking_method", {}).get("prior_used"):
            note += "; scores with a small prior (a system never lost or never won)"
        return [_card("Order of the systems", {"text": order}, note)]
    pairs = prop["pairwise"]["pairs"]
    if not pairs:
        return []
    rates = " · ".join(
        f"{short(r['system_1'], 16)} vs {short(r['system_2'], 16)} {num(r['expected_win_rate'])}"
        for r in pairs
    )
    return [_card("Expected win rate of system 1, every pair", {"text": rates}, "")]


def _pairwise(pw: dict[str, Any], conf: float, table: tables.Table | None) -> dict[str, Any]:
    out: dict[str, Any] = {"threshold": pw["threshold"], "reason": pw.get("pairs_reason", "")}
    if table is None:
        return out
    return out | {"chart": charts.win_chart(pw["pairs"], conf), "table": table}


def _ranking(prop: dict[str, Any], table: tables.Table | None) -> dict[str, Any]:
    """The ranking section: heading, interval chart and table (``analysis/_ranking.html``)."""
    method = prop.get("ranking_method", {})
    out: dict[str, Any] = {"heading": ranking_heading(method), "note": method.get("reason", "")}
    if table is None:
        return out | {"reason": method.get("reason") or "no ranking"}
    chart = ranking_chart(prop["ranking"], "Bradley-Terry scores with bootstrap intervals")
    return out | {"chart": chart, "table": table}


def _likert(lk: dict[str, Any], table: tables.Table | None) -> dict[str, Any]:
    labels = lk["labels"]
    rows = [
        (r["system"], r["distribution"], f"mean {num(r['mean_rating'], 2)}") for r in lk["systems"]
    ]
    chart = charts.stacked_chart(
        [(None, rows)],
        labels,
        charts.colors("ordinal", labels),
        "Distribution of ratings per system",
        "rating",
    )
    return {"chart": chart, "table": table}


def _judges(prop: dict[str, Any], tabs: tables.PropertyTables) -> dict[str, Any]:
    judges = prop.get("judges", [])
    if not judges:
        return {"reason": "no judge labels for this property"}
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    rows = [("humans (inner)", inner)] if inner else []
    rows += [(f"{j['judge']} (outer)", j["loo_outer"]) for j in judges]
    chart = charts.forest_chart(
        rows, "Leave-one-out agreement: humans among themselves and each judge", lo=0.0
    )
    return {"chart": chart, "table": tabs.judges, "stratified": tabs.stratified}


def _judges_extra(prop: dict[str, Any], tabs: tables.PropertyTables) -> dict[str, Any]:
    extra = prop.get("judges_extra")
    if not extra:
        return {}
    return {
        "random": tabs.random,
        "samples_reason": extra.get("samples_reason", ""),
        "samples": tabs.samples,
    }


def _workers(prop: dict[str, Any], tabs: tables.PropertyTables) -> dict[str, Any]:
    wk = prop.get("workers")
    if not wk:
        return {}
    if wk.get("reason"):
        return {"reason": wk["reason"]}
    return {"methods": tabs.worker_methods, "workers": tabs.workers}


def _position_bias(pb: dict[str, Any], table: tables.Table | None) -> dict[str, Any]:
    if pb.get("reason"):
        return {"reason": pb["reason"]}
    return {
        "chart": charts.bias_chart(pb),
        "n_more": max(0, len(pb["annotators"]) - 30),
        "table": table,
    }


def _prioritisation(pr: dict[str, Any], table: tables.Table | None) -> dict[str, Any]:
    if pr.get("reason"):
        return {"reason": pr["reason"]}
    return {"chart": charts.prioritisation_chart(pr["rows"]), "table": table}


def _perception(prop: dict[str, Any]) -> dict[str, Any]:
    per = prop.get("perception", {})
    if per.get("reason"):
        return {"reason": per["reason"]}
    labels = per["labels"]
    what = "human median" if prop["scale"] == "ordinal" else "human majority"
    groups = []
    empty = [str(b["bin"]) for b in per["bins"] if b["items"] <= 0]
    for b in per["bins"]:
        if b["items"] <= 0 and prop.get("bins"):
            continue
        head = f"{what} = {b['bin']} · {pct(b['share'])} of items ({num(b['items'], 1)})"
        rows = [
            (
                s["source"],
                s["proportions"] if b["items"] > 0 else [0.0] * len(labels),
                "" if b["items"] > 0 else b["reason"],
            )
            for s in b["sources"]
        ]
        groups.append((head, rows))
    chart = charts.stacked_chart(
        groups,
        labels,
        charts.colors(prop["scale"], labels),
        f"Perception chart: label shares per {what} bin",
        "label",
    )
    if empty and prop.get("bins"):
        chart_note = f"No items in the bins {', '.join(empty)} (not drawn). "
    else:
        chart_note = ""
    return {"chart": chart, "source": f"{chart_note}Bins: {per['binning']}. "
            f"{per.get('note', '')} {per['source']}"}  # fmt: skip


@lru_cache(maxsize=1)
def _engine() -> Engine:
    """Django's template engine over the project's templates, for use without a project
    (``python -m analysis``): minimal settings if none are configured, no database."""
    from django.conf import settings
    from django.template import Engine

    if not settings.configured:
        settings.configure(USE_I18N=False)
    return Engine(dirs=[str(d) for d in TEMPLATE_DIRS], app_dirs=False, autoescape=True)


def render_html(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML document (its style sheet inlined)."""
    from django.template import Context

    context = {
        "report": report_context(report),
        "css": REPORT_CSS_PATH.read_text(encoding="utf-8"),
    }
    return _engine().get_template("analysis/report_file.html").render(Context(context))
