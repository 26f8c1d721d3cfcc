"""A report dict (:func:`analysis.report.build_report`) as plain text, and as the data of the
HTML report (``report_context``) that the templates ``analysis/_report.html`` and
``charts/chart.svg.html`` write out with autoescaping, on the web page and in the standalone
file (``render_html``, Django's template engine without a project).

Untrusted text (system, judge and label names, reasons) is escaped by the templates in HTML
and stripped of control characters in plain text. An undefined figure is written
``undefined`` followed by its reason, never as a bare NaN.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis import charts
from analysis.formatting import interval, num, pct, plain, short
from analysis.render_assisted import assisted_context, assisted_text, style_context, style_text
from analysis.render_prefill import prefill_context, prefill_text
from charts.ranking import ranking_chart

if TYPE_CHECKING:
    from django.template import Engine

__all__ = ["render_html", "render_text", "report_context"]

ROOT = Path(__file__).resolve().parents[1]


def _win_rate_cells(r: dict) -> list[str]:
    """The cells of one system pair's win-rate row, shared by the text and HTML tables."""
    return [
        r["system_1"], r["system_2"], num(r["n_items"]), num(r["wins_1"]), num(r["ties"]),
        num(r["wins_2"]), pct(r["win_rate"]), pct(r["tie_rate"]),
        num(r["expected_win_rate"]),
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


_SCALE_TITLES = {
    "pairwise": "pairwise preference",
    "ordinal": "ordinal scale",
    "categorical": "categorical labels",
}


def _scale_title(prop: dict[str, Any]) -> str:
    if prop.get("bins"):
        return "interval scale (a score)"
    return _SCALE_TITLES.get(prop["scale"], prop["scale"])


def _labels_text(prop: dict[str, Any]) -> str:
    """The label set in words: a fine score as its range and bins, not 101 numbers."""
    labels = prop.get("labels", [])
    if prop.get("bins") and labels:
        bins = prop["bins"]
        return (
            f"scores {labels[0]}–{labels[-1]}, shown in {len(bins)} bins: "
            f"{', '.join(bins[:2])}, …, {bins[-1]}"
        )
    return "labels: " + ", ".join(str(x) for x in labels)


#: Said once, instead of a wall of undefined agreement figures, when no item has two labels.
SINGLE_LABEL = (
    "Every item has one label, so agreement between annotators (Krippendorff's alpha, the "
    "kappas, percentage and leave-one-out agreement, worker reliability) cannot be measured. "
    "It needs items labelled by two or more workers: raise the study's redundancy (labels per "
    "item) to 2 or more, at least on a share of the items. An adaptive study collects one "
    "label per item by design."
)


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------


def _est_text(est: dict[str, Any]) -> str:
    if est.get("value") is None:
        return f"undefined -- {est.get('reason') or 'no reason given'}"
    text = f"{num(est['value'])} {interval(est)}".rstrip()
    if est.get("reason"):
        text += f" ({est['reason']})"
    return text


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


def render_text(report: dict[str, Any]) -> str:
    """The report as plain text for a terminal."""
    out: list[str] = []
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    out.append(f"Study report: {plain(report.get('title') or '(untitled)')}")
    if report.get("source"):
        out.append(f"Source: {plain(report['source'])}")
    out.append(
        f"Annotations used: {num(counts.get('annotations', 0))} "
        f"({num(counts.get('labels', 0))} labels) on {num(counts.get('items', 0))} items "
        f"from {num(counts.get('annotators', 0))} annotators; judges: "
        f"{plain(_judges_text(counts))}"
    )
    conf = settings.get("confidence", 0.95)
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
        out.extend(_text_property(prop))
    return "\n".join(out) + "\n"


def _cell_text(value: Any) -> str:
    if value is None:
        return "undefined"
    return num(value) if isinstance(value, float) else str(value)


def _text_section(section: dict[str, Any]) -> list[str]:
    """A kind's own section (:mod:`analysis.sections`): figures, tables, notes."""
    out = [f"== {plain(section.get('title') or section.get('name', ''))} =="]
    for note in section.get("notes", []):
        out.append(f"Note: {plain(note)}")
    for fig in section.get("figures", []):
        out.append(f"{plain(fig.get('name', ''))}: {_est_text(fig)}")
    for table in section.get("tables", []):
        out.append(f"{plain(table['title'])}:")
        rows = [[_cell_text(c) for c in row] for row in table["rows"]]
        out.append(text_table(table["headers"], rows))
    return out + prefill_text(section)


def _text_property(prop: dict[str, Any]) -> list[str]:
    out = []
    head = (
        f"== {prop['name']} ({_SCALE_TITLES.get(prop['scale'], prop['scale'])}; "
        f"Krippendorff's alpha at the {prop['level']} level) =="
    )
    out.append(plain(head))
    if prop.get("title") and prop["title"] != prop["name"]:
        out.append(plain(prop["title"]))
    labels = _labels_text(prop)
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
    out.append("Inter-rater reliability (bootstrap interval over items)")
    out.append(
        text_table(
            ["statistic", "value", "interval", "items", "note"],
            [
                [
                    _metric_name(r),
                    num(r["value"]),
                    interval(r),
                    num(r["n"]),
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
                text_table(
                    ["system 1", "system 2", "items", "wins 1", "ties", "wins 2", "win rate 1"]
                    + ["tie rate", "expected win rate 1", "interval", "note"],
                    [
                        [*_win_rate_cells(r), interval(_expected_interval(r)), r.get("reason", "")]
                        for r in pw["pairs"]
                    ],
                )
            )
        else:
            out.append(f"  Win rates: undefined -- {pw.get('pairs_reason', '')}")
    if "ranking" in prop:
        out.extend(_text_ranking(prop))
    out.extend(assisted_text(prop) + style_text(prop))
    if "likert" in prop:
        lk = prop["likert"]
        out.append("")
        out.append("Ratings per system (item median: median of the item's ratings)")
        out.append(
            text_table(
                ["system", "items", "ratings", "mean rating", "mean of item means"]
                + ["median of item medians", "distribution " + "/".join(map(str, lk["labels"]))],
                [
                    [
                        r["system"],
                        num(r["n_items"]),
                        num(r["n_ratings"]),
                        num(r["mean_rating"]),
                        num(r["mean_of_item_means"]),
                        num(r["median_of_item_medians"], 1),
                        "/".join(str(x) for x in r["distribution"]),
                    ]
                    for r in lk["systems"]
                ],
            )
        )
    out.extend(_text_judges(prop))
    out.extend(_text_judges_extra(prop))
    out.extend(_text_workers(prop))
    out.extend(_text_perception(prop))
    if "position_bias" in prop:
        pb = prop["position_bias"]
        out.append("")
        if pb.get("reason"):
            out.append(f"Position bias: undefined -- {plain(pb['reason'])}")
        else:
            ov = pb["overall"]
            flagged = [r for r in pb["annotators"] if (r.get("p_holm") or 1) < 0.05]
            out.append(
                f"Position bias: left chosen in {pct(ov['share_left'])} of {num(ov['n'])} "
                f"sided choices (binomial p = {num(ov['p_value'])}; {num(ov['n_excluded'])} "
                f"without a side); {len(flagged)} of {len(pb['annotators'])} annotators "
                "differ from 1/2 at Holm-adjusted p < 0.05"
            )
            out.append(
                text_table(
                    ["annotator", "sided", "left", "share left", "p", "p (Holm)", "note"],
                    [
                        [
                            r["rater"],
                            num(r["n"]),
                            num(r["n_left"]),
                            pct(r["share_left"]),
                            num(r["p_value"]),
                            num(r.get("p_holm")),
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
            out.append(f"Prioritisation check: undefined -- {plain(pr['reason'])}")
        else:
            out.append(
                f"Prioritisation check (tie rate among the top k% by priority vs random orders; "
                f"{pr['n_ties']} ties in {pr['n_items']} items)"
            )
            out.append(
                text_table(
                    ["top k%", "items", "tie rate", "random mean", "random sd", "note"],
                    [
                        [
                            f"{r['k_percent']:g}",
                            num(r["n_top"]),
                            num(r["tie_rate"]),
                            num(r["random_mean"]),
                            num(r["random_std"]),
                            r.get("reason", ""),
                        ]
                        for r in pr["rows"]
                    ],
                )
            )
    return out


def _ranking_heading(method: dict[str, Any]) -> str:
    return (
        f"Ranking: Bradley-Terry scores ({method['scale']}; {method['ties']}); "
        f"{method['interval']}, {method.get('n_boot', 0)} resamples; rank = {method['rank']}"
    )


def _text_ranking(prop: dict[str, Any]) -> list[str]:
    method = prop.get("ranking_method", {})
    out = ["", plain(_ranking_heading(method))]
    if not prop["ranking"]:
        return [*out, f"  undefined -- {plain(method.get('reason', ''))}"]
    if method.get("reason"):
        out.append(f"  Note: {plain(method['reason'])}")
    out.append(
        text_table(
            ["rank", "system", "score", "low", "high", "wins", "ties", "losses", "comparisons"],
            [
                [num(r["rank"]), r["system"], num(r["score"], 1), num(r["low"], 1)]
                + [num(r["high"], 1), num(r["wins"]), num(r["ties"]), num(r["losses"])]
                + [num(r["n"])]
                for r in prop["ranking"]
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
            f"Judge {plain(j['judge'])}: {num(j['n_items'])} items with human and judge labels"
        )
        rows = [["leave-one-out agreement (outer)", _est_text(j["loo_outer"])]]
        if inner is not None:
            rows.append(["  humans among themselves (inner)", _est_text(inner)])
        for r in j.get("vs_majority", []):
            name = "agreement with human majority" if r["metric"] == "accuracy" else "Cohen's kappa"
            rows.append([name, _est_text(r)])
        for r in j.get("correlations", []):
            rows.append([f"{r['metric']} (human {r['aggregate']}{_p_text(r)})", _est_text(r)])
        jsd = j["binned_jsd"]
        rows.append([f"binned JSD ({jsd['binning']} bins; lower is closer)", _est_text(jsd)])
        out.append(text_table(["statistic", "value [interval]"], rows))
        strat = j["stratified"]
        out.append(
            f"  Stratified by human percentage agreement ({strat['level']}): "
            "HH = among humans, HM = human vs judge majority, delta = HH - HM"
        )
        out.append(
            text_table(
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
                        num(r["n_items"]),
                        r["metric"],
                        num(r["hh"]),
                        num(r["hm"]),
                        num(r["h1m"]),
                        num(r["delta"]),
                        interval({"low": r["delta_low"], "high": r["delta_high"]}),
                        r.get("reason", ""),
                    ]
                    for r in strat["rows"]
                    if r["metric"] in ("alpha", "percentage_agreement", "jsd_b")
                ],
                indent="    ",
            )
        )
    return out


def _p_text(row: dict[str, Any]) -> str:
    p = row.get("p_value")
    if p is None:
        return ""
    return "; p < 0.001" if p < 0.001 else f"; p = {num(p)}"


_RANDOM_TITLES = {
    "accuracy": "agreement with human majority",
    "loo_outer": "leave-one-out agreement (outer)",
}
_SAMPLE_TITLES = {
    "percentage_agreement": "percentage agreement",
    "krippendorff_alpha": "Krippendorff's alpha",
}


def _random_name(r: dict[str, Any]) -> str:
    dist = "human label distribution" if r["distribution"] == "human" else "uniform"
    return f"{_RANDOM_TITLES.get(r['metric'], r['metric'])} ({dist})"


def _text_judges_extra(prop: dict[str, Any]) -> list[str]:
    extra = prop.get("judges_extra")
    if not extra:
        return []
    out = ["", "Random-labeller baseline (expected agreement of labels drawn at random)"]
    out.append(
        text_table(
            ["statistic", "value [interval]"],
            [[_random_name(r), _est_text(r)] for r in extra["random_labeller"]],
        )
    )
    if extra.get("samples_reason"):
        out.append(f"Agreement among judge samples: undefined -- {plain(extra['samples_reason'])}")
        return out
    out.append("Agreement among each judge's samples (machine vs machine)")
    out.append(
        text_table(
            ["judge", "samples", "statistic", "value [interval]"],
            [
                [
                    plain(r["judge"]),
                    num(r["n_samples"]),
                    _SAMPLE_TITLES.get(r["metric"], r["metric"]),
                    _est_text(r),
                ]
                for r in extra["samples"]
            ],
        )
    )
    return out


def _text_workers(prop: dict[str, Any]) -> list[str]:
    wk = prop.get("workers")
    if not wk:
        return []
    if wk.get("reason"):
        return ["", f"Worker-weighted labels: unavailable -- {plain(wk['reason'])}"]
    out = ["", "Worker-weighted labels (Dawid-Skene, MACE) beside the majority"]
    out.append(
        text_table(
            ["model", "items", "same as unique majority", "labels"],
            [
                [
                    m["title"],
                    num(m["n_items"]),
                    "undefined"
                    if m["agreement_with_majority"] is None
                    else pct(m["agreement_with_majority"]),
                    ", ".join(f"{plain(d['label'])}: {d['count']}" for d in m["distribution"]),
                ]
                for m in wk["methods"]
            ],
        )
    )
    out.append(f"  Worker reliability ({wk['reliability']}); least reliable first")
    out.append(
        text_table(
            ["worker", "labels", "Dawid-Skene", "MACE"],
            [
                [plain(w["worker"]), num(w["n_labels"]), num(w["dawid_skene"]), num(w["mace"])]
                for w in wk["workers"]
            ],
            indent="    ",
        )
    )
    return out


def _text_perception(prop: dict[str, Any]) -> list[str]:
    per = prop.get("perception", {})
    if per.get("reason"):
        return ["", f"Perception chart: undefined -- {plain(per['reason'])}"]
    labels = [str(x) for x in per["labels"]]
    out = ["", f"Perception chart ({per['binning']}): label shares per bin"]
    rows = []
    for b in per["bins"]:
        for s in b["sources"]:
            shares = " ".join(
                f"{lab}:{pct(p)}" for lab, p in zip(labels, s["proportions"], strict=True)
            )
            rows.append(
                [
                    str(b["bin"]),
                    pct(b["share"]),
                    s["source"],
                    shares if b["items"] > 0 else f"undefined -- {b['reason']}",
                ]
            )
    out.append(text_table(["bin", "items", "source", "label shares"], rows))
    return out


# --------------------------------------------------------------------------------------------
# HTML: the data the templates analysis/_report.html and charts/chart.svg.html write out
# --------------------------------------------------------------------------------------------

TEMPLATE_DIRS = [Path(__file__).resolve().parent / "templates", ROOT / "templates"]
REPORT_CSS_PATH = ROOT / "static" / "humeval" / "report.css"


def _undefined(reason: Any = "") -> dict[str, str]:
    return {"undefined": str(reason or "")}


def _value(value: Any, reason: str = "", digits: int = 3, as_pct: bool = False) -> dict:
    """A table cell: the figure, or ``undefined`` with its reason."""
    if value is None:
        return _undefined(reason)
    return {"text": pct(value) if as_pct else num(value, digits)}


def _est(est: dict[str, Any]) -> dict:
    """A figure with its interval and note, or ``undefined`` with its reason."""
    if est.get("value") is None:
        return _undefined(est.get("reason", ""))
    return {"value": num(est["value"]), "ci": interval(est), "why": est.get("reason") or ""}


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], text_cols=(0,)) -> dict:
    cells = [[c if isinstance(c, dict) else {"text": str(c)} for c in row] for row in rows]
    return {"headers": list(headers), "rows": cells, "text_cols": list(text_cols)}


def _card(name: str, fig: dict, note: str = "") -> dict:
    return {"name": name, "fig": fig, "note": note}


def _card_est(name: str, est: dict[str, Any]) -> dict:
    fig = {"undefined": ""} if est.get("value") is None else _est({**est, "reason": ""})
    return _card(name, fig, est.get("reason", ""))


def _judges_text(counts: dict[str, Any]) -> str:
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


def report_context(report: dict[str, Any]) -> dict[str, Any]:
    """What ``analysis/_report.html`` shows: texts, tables and chart data of the report."""
    counts = report.get("counts", {})
    settings = report.get("settings", {})
    conf = settings.get("confidence", 0.95)
    meta = (
        f"{num(counts.get('annotations', 0))} annotations ({num(counts.get('labels', 0))} "
        f"labels) on {num(counts.get('items', 0))} items from "
        f"{num(counts.get('annotators', 0))} annotators · judges: "
        f"{_judges_text(counts)} · tie threshold "
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
        "tables": [
            {
                "title": t["title"],
                "table": _table(
                    t["headers"],
                    [
                        [_undefined() if c is None else {"text": _cell_text(c)} for c in row]
                        for row in t["rows"]
                    ],
                ),
            }
            for t in section.get("tables", [])
        ],
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
        f"annotators; {per['min']}–{per['max']} labels per item; {_labels_text(prop)}"
    )
    out["single_label"] = SINGLE_LABEL if c.get("items_with_two_or_more", 1) == 0 else ""
    out["cards"] = _key_figures(prop, single=bool(out["single_label"]))
    rel = prop["reliability"]
    out["reliability_chart"] = charts.forest_chart(
        [(_metric_name(r), r) for r in rel], "Inter-rater reliability with intervals", lo=None
    )
    out["reliability_table"] = _table(
        ["statistic", "value", f"{round(100 * conf)}% interval", "items", "source"],
        [
            [_metric_name(r), _value(r["value"], r["reason"]), interval(r), num(r["n"])]
            + [r.get("source", "")]
            for r in rel
        ],
        text_cols=(0, 4),
    )
    if "pairwise" in prop:
        out["pairwise"] = _pairwise(prop["pairwise"], conf)
    if "ranking" in prop:
        out["ranking"] = _ranking(prop, conf)
    if "likert" in prop:
        out["likert"] = _likert(prop["likert"])
    out["assisted"], out["style"] = assisted_context(prop), style_context(prop)
    out["judges"] = _judges(prop, conf)
    out["judges_extra"] = _judges_extra(prop, conf)
    out["workers"] = _workers(prop)
    out["perception"] = _perception(prop)
    if "position_bias" in prop:
        out["position_bias"] = _position_bias(prop["position_bias"])
    if "prioritisation" in prop:
        out["prioritisation"] = _prioritisation(prop["prioritisation"])
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


def _pairwise(pw: dict[str, Any], conf: float) -> dict[str, Any]:
    out: dict[str, Any] = {"threshold": pw["threshold"], "reason": pw.get("pairs_reason", "")}
    if not pw["pairs"]:
        return out
    headers = ["system 1", "system 2", "items", "wins 1", "ties", "wins 2", "win rate 1"]
    headers += ["tie rate", "expected win rate 1", f"{round(100 * conf)}% interval", "note"]
    rows = [
        [
            *_win_rate_cells(r),
            interval(_expected_interval(r)) or _undefined(r.get("reason", "")),
            r.get("reason", ""),
        ]
        for r in pw["pairs"]
    ]
    return out | {
        "chart": charts.win_chart(pw["pairs"], conf),
        "note": pw.get("pairs_note") or "",
        "table": _table(headers, rows, text_cols=(0, 1, 10)),
        "source": pw["source"],
    }


def _ranking(prop: dict[str, Any], conf: float) -> dict[str, Any]:
    """The ranking section: heading, interval chart and table (``analysis/_ranking.html``)."""
    method = prop.get("ranking_method", {})
    rows = prop["ranking"]
    out: dict[str, Any] = {"heading": _ranking_heading(method), "note": method.get("reason", "")}
    if not rows:
        return out | {"reason": method.get("reason") or "no ranking"}
    headers = ["rank", "system", "score", f"{round(100 * conf)}% interval", "wins", "ties"]
    headers += ["losses", "comparisons"]
    table = [
        [
            _value(r["rank"], r.get("reason", "")),
            r["system"],
            _value(r["score"], r.get("reason", ""), digits=1),
            f"[{num(r['low'], 1)}, {num(r['high'], 1)}]"
            if r.get("low") is not None and r.get("high") is not None
            else _undefined(r.get("reason", "")),
            num(r["wins"]),
            num(r["ties"]),
            num(r["losses"]),
            num(r["n"]),
        ]
        for r in rows
    ]
    return out | {
        "chart": ranking_chart(rows, "Bradley-Terry scores with bootstrap intervals"),
        "table": _table(headers, table, text_cols=(1,)),
        "source": f"{method.get('model', '')}; {method.get('source', '')}",
    }


def _likert(lk: dict[str, Any]) -> dict[str, Any]:
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
    headers = ["system", "items", "ratings", "mean rating", "mean of item means"]
    headers += ["median of item medians", "distribution " + " / ".join(map(str, labels))]
    table = [
        [r["system"], num(r["n_items"]), num(r["n_ratings"]), num(r["mean_rating"])]
        + [num(r["mean_of_item_means"]), num(r["median_of_item_medians"], 1)]
        + [" / ".join(map(str, r["distribution"]))]
        for r in lk["systems"]
    ]
    return {"chart": chart, "table": _table(headers, table)}


def _judges(prop: dict[str, Any], conf: float) -> dict[str, Any]:
    judges = prop.get("judges", [])
    if not judges:
        return {"reason": "no judge labels for this property"}
    inner = next((r for r in prop["reliability"] if r["metric"] == "loo_inner"), None)
    rows = [("humans (inner)", inner)] if inner else []
    rows += [(f"{j['judge']} (outer)", j["loo_outer"]) for j in judges]
    chart = charts.forest_chart(
        rows, "Leave-one-out agreement: humans among themselves and each judge", lo=0.0
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
            (f"{r['metric']} with human {r['aggregate']}{_p_text(r)}", r)
            for r in j.get("correlations", [])
        ]
        stats.append(
            (f"binned JSD ({j['binned_jsd']['binning']} bins, lower is closer)", j["binned_jsd"])
        )
        table_rows += [[j["judge"], name, _est(est), num(est.get("n"))] for name, est in stats]
    srcs = {j.get("vs_majority_source") or j.get("correlations_source") for j in judges}
    srcs |= {judges[0]["binned_jsd"]["source"], judges[0]["loo_outer"].get("source", "")}
    strat_headers = ["stratum", "items", "share", "metric", "HH", "HM", "H′M", "Δ = HH − HM"]
    strat_headers += [f"Δ {round(100 * conf)}% interval", "note"]
    stratified = [
        {
            "summary": f"Stratified agreement for {j['judge']} (by human percentage agreement; "
            "HH humans, HM human vs judge majority)",
            "table": _table(
                strat_headers,
                [
                    [r["stratum"], num(r["n_items"]), pct(r["share"]), r["metric"]]
                    + [_value(r["hh"]), _value(r["hm"]), _value(r["h1m"]), _value(r["delta"])]
                    + [interval({"low": r["delta_low"], "high": r["delta_high"]})]
                    + [r.get("reason", "")]
                    for r in j["stratified"]["rows"]
                ],
                text_cols=(0, 3, 9),
            ),
            "source": j["stratified"]["source"],
        }
        for j in judges
    ]
    return {
        "chart": chart,
        "table": _table(
            ["judge", "statistic", f"value [{round(100 * conf)}% interval]", "items"],
            table_rows,
            text_cols=(0, 1, 2),
        ),
        "source": "; ".join(sorted(s for s in srcs if s)),
        "stratified": stratified,
    }


def _judges_extra(prop: dict[str, Any], conf: float) -> dict[str, Any]:
    extra = prop.get("judges_extra")
    if not extra:
        return {}
    ci = f"value [{round(100 * conf)}% interval]"
    out: dict[str, Any] = {
        "random": _table(
            ["statistic", ci, "items"],
            [[_random_name(r), _est(r), num(r["n"])] for r in extra["random_labeller"]],
            text_cols=(0, 1),
        ),
        "random_source": extra["random_source"],
        "samples_reason": extra.get("samples_reason", ""),
    }
    if "samples" in extra:
        out["samples"] = _table(
            ["judge", "samples per item", "statistic", ci, "items"],
            [
                [r["judge"], num(r["n_samples"]), _SAMPLE_TITLES.get(r["metric"], r["metric"])]
                + [_est(r), num(r["n"])]
                for r in extra["samples"]
            ],
            text_cols=(0, 2, 3),
        )
        out["samples_source"] = extra["samples_source"]
    return out


def _workers(prop: dict[str, Any]) -> dict[str, Any]:
    wk = prop.get("workers")
    if not wk:
        return {}
    if wk.get("reason"):
        return {"reason": wk["reason"]}
    return {
        "methods": _table(
            ["model", "source", "items", "same label as the unique majority", "labels"],
            [
                [m["title"], m["source"], num(m["n_items"])]
                + [
                    _value(m["agreement_with_majority"], "no item has a unique majority", 3, True),
                    ", ".join(f"{d['label']}: {d['count']}" for d in m["distribution"]),
                ]
                for m in wk["methods"]
            ],
            text_cols=(0, 1, 4),
        ),
        "workers": _table(
            ["worker", "labels", "Dawid-Skene reliability", "MACE competence"],
            [
                [w["worker"], num(w["n_labels"]), _value(w["dawid_skene"]), _value(w["mace"])]
                for w in wk["workers"]
            ],
        ),
        "n_workers": len(wk["workers"]),
        "reliability": wk["reliability"],
    }


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


def _position_bias(pb: dict[str, Any]) -> dict[str, Any]:
    if pb.get("reason"):
        return {"reason": pb["reason"]}
    headers = ["annotator", "sided choices", "left", "share left", "p", "p (Holm)"]
    headers += ["without a side", "note"]
    rows = [
        [
            r["rater"] if r["rater"] is not None else "all annotators",
            num(r["n"]),
            num(r["n_left"]),
            _value(r["share_left"], r.get("reason", ""), as_pct=True),
            _value(r["p_value"], r.get("reason", "")),
            num(r.get("p_holm")) if r.get("p_holm") is not None else "",
            num(r["n_excluded"]),
            r.get("reason", ""),
        ]
        for r in [pb["overall"], *sorted(pb["annotators"], key=_p_key)]
    ]
    return {
        "chart": charts.bias_chart(pb),
        "n_more": max(0, len(pb["annotators"]) - 30),
        "table": _table(headers, rows, text_cols=(0, 7)),
        "source": f"{pb['source']}; {pb.get('holm', '')}",
    }


def _prioritisation(pr: dict[str, Any]) -> dict[str, Any]:
    if pr.get("reason"):
        return {"reason": pr["reason"]}
    headers = ["top k%", "items", "tie rate", "random mean", "random sd", "expected", "note"]
    rows = [
        [f"{r['k_percent']:g}", num(r["n_top"]), num(r["tie_rate"])]
        + [_value(r["random_mean"], r.get("reason", ""))]
        + [_value(r["random_std"], r.get("reason", ""))]
        + [num(r["random_expected"]), r.get("reason", "")]
        for r in pr["rows"]
    ]
    return {
        "chart": charts.prioritisation_chart(pr["rows"]),
        "note": pr.get("note") or "",
        "table": _table(headers, rows, text_cols=(6,)),
        "source": f"{pr['source']}: {pr['n_ties']} ties among {pr['n_items']} items; "
        "a useful priority puts fewer ties at the top than random orders.",
    }


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
