"""The report's tables as one typed model, built once from the report dict
(:func:`analysis.report.build_report`) and written out by both renderers: the plain-text
report (:mod:`analysis.plaintext`) and the HTML report (the template
``analysis/_table.html``, with autoescaping). Both show the same title, columns and rows, so
they cannot drift apart.

A :class:`Cell` is a piece of text, a figure with its interval and note, or ``undefined``
with its reason. Pure: no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.formatting import interval, num, pct

__all__ = ["Cell", "Table", "property_tables", "report_tables"]


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text``; or a figure ``value`` with its interval ``ci`` and note
    ``why``; or, when ``undefined`` is not None, undefined with that reason."""

    text: str = ""
    value: str | None = None
    ci: str = ""
    why: str = ""
    undefined: str | None = None

    def plain(self) -> str:
        """The cell as one line of text (the text report)."""
        if self.undefined is not None:
            return f"undefined -- {self.undefined}" if self.undefined else "undefined"
        if self.value is not None:
            text = f"{self.value} {self.ci}".rstrip()
            return f"{text} ({self.why})" if self.why else text
        return self.text


@dataclass(frozen=True)
class Table:
    """A titled table: column names, rows of cells, the columns holding text (left-aligned
    in HTML), notes said above it and the source of its figures."""

    title: str
    columns: list[str]
    rows: list[list[Cell]]
    text_cols: tuple[int, ...] = (0,)
    notes: list[str] = field(default_factory=list)
    source: str = ""


def cell(value: Any) -> Cell:
    """A cell from a cell or a value (``None`` is undefined, a float is a figure)."""
    if isinstance(value, Cell):
        return value
    if value is None:
        return Cell(undefined="")
    return Cell(text=num(value) if isinstance(value, float) else str(value))


def table(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    text_cols: Sequence[int] = (0,),
    notes: Sequence[str] = (),
    source: str = "",
) -> Table:
    return Table(
        title=str(title),
        columns=[str(c) for c in columns],
        rows=[[cell(c) for c in row] for row in rows],
        text_cols=tuple(text_cols),
        notes=[str(n) for n in notes],
        source=str(source or ""),
    )


def undefined(reason: Any = "") -> Cell:
    return Cell(undefined=str(reason or ""))


def value(v: Any, reason: str = "", digits: int = 3, as_pct: bool = False) -> Cell:
    """A figure, or ``undefined`` with its reason."""
    if v is None:
        return undefined(reason)
    return Cell(text=pct(v) if as_pct else num(v, digits))


def est(e: dict[str, Any]) -> Cell:
    """A figure with its interval and note, or ``undefined`` with its reason."""
    if e.get("value") is None:
        return undefined(e.get("reason", ""))
    return Cell(value=num(e["value"]), ci=interval(e), why=e.get("reason") or "")


def ci_label(conf: float) -> str:
    return f"{round(100 * conf)}% interval"


# --------------------------------------------------------------------------------------------
# Names shared by the tables and the texts around them
# --------------------------------------------------------------------------------------------


def metric_name(row: dict[str, Any]) -> str:
    name = row.get("title") or row.get("metric", "")
    if row.get("metric") == "krippendorff_alpha":
        name = f"{name} ({row.get('level')})"
    if row.get("metric") == "percentage_agreement" and row.get("reference"):
        name = f"{name} ({row['reference']})"
    return name


def p_key(row: dict[str, Any]) -> tuple:
    p = row.get("p_value")
    return (p is None, p if p is not None else 1.0, str(row.get("rater")))


def p_text(row: dict[str, Any]) -> str:
    p = row.get("p_value")
    if p is None:
        return ""
    return "; p < 0.001" if p < 0.001 else f"; p = {num(p)}"


RANDOM_TITLES = {
    "accuracy": "agreement with human majority",
    "loo_outer": "leave-one-out agreement (outer)",
}
SAMPLE_TITLES = {
    "percentage_agreement": "percentage agreement",
    "krippendorff_alpha": "Krippendorff's alpha",
}


def random_name(r: dict[str, Any]) -> str:
    dist = "human label distribution" if r["distribution"] == "human" else "uniform"
    return f"{RANDOM_TITLES.get(r['metric'], r['metric'])} ({dist})"


def judge_statistic(r: dict[str, Any]) -> str:
    """A judge's agreement with the human majority, by its metric."""
    if r["metric"] == "accuracy":
        return "agreement with human majority"
    return "Cohen's kappa vs human majority"


# --------------------------------------------------------------------------------------------
# The tables of one property
# --------------------------------------------------------------------------------------------


def reliability_table(prop: dict[str, Any], conf: float) -> Table:
    return table(
        "Inter-rater reliability",
        ["statistic", "value", ci_label(conf), "items", "note", "source"],
        [
            [metric_name(r), value(r["value"], r.get("reason", "")), interval(r), num(r["n"])]
            + [r.get("reason", ""), r.get("source", "")]
            for r in prop["reliability"]
        ],
        text_cols=(0, 4, 5),
    )


def pairwise_table(pw: dict[str, Any], conf: float) -> Table:
    headers = ["system 1", "system 2", "items", "wins 1", "ties", "wins 2", "win rate 1"]
    headers += ["tie rate", "expected win rate 1", ci_label(conf), "note"]
    rows = [
        [
            r["system_1"], r["system_2"], num(r["n_items"]), num(r["wins_1"]), num(r["ties"]),
            num(r["wins_2"]), pct(r["win_rate"]), pct(r["tie_rate"]),
            num(r["expected_win_rate"]),
            interval({"low": r["expected_win_rate_low"], "high": r["expected_win_rate_high"]})
            or undefined(r.get("reason", "")),
            r.get("reason", ""),
        ]
        for r in pw["pairs"]
    ]  # fmt: skip
    return table(
        "Win rates per system pair",
        headers,
        rows,
        text_cols=(0, 1, 10),
        notes=[pw["pairs_note"]] if pw.get("pairs_note") else [],
        source=pw.get("source", ""),
    )


def ranking_table(prop: dict[str, Any], conf: float) -> Table:
    method = prop.get("ranking_method", {})
    headers = ["rank", "system", "score", ci_label(conf), "wins", "ties", "losses"]
    headers += ["comparisons"]
    rows = [
        [
            value(r["rank"], r.get("reason", "")),
            r["system"],
            value(r["score"], r.get("reason", ""), digits=1),
            f"[{num(r['low'], 1)}, {num(r['high'], 1)}]"
            if r.get("low") is not None and r.get("high") is not None
            else undefined(r.get("reason", "")),
            num(r["wins"]),
            num(r["ties"]),
            num(r["losses"]),
            num(r["n"]),
        ]
        for r in prop["ranking"]
    ]
    return table(
        "Ranking (Bradley-Terry)",
        headers,
        rows,
        text_cols=(1,),
        source=f"{method.get('model', '')}; {method.get('source', '')}",
    )


def likert_table(lk: dict[str, Any]) -> Table:
    labels = lk["labels"]
    headers = ["system", "items", "ratings", "mean rating", "mean of item means"]
    headers += ["median of item medians", "distribution " + " / ".join(map(str, labels))]
    rows = [
        [r["system"], num(r["n_items"]), num(r["n_ratings"]), num(r["mean_rating"])]
        + [num(r["mean_of_item_means"]), num(r["median_of_item_medians"], 1)]
        + [" / ".join(map(str, r["distribution"]))]
        for r in lk["systems"]
    ]
    return table(
        "Ratings per system (item median: median of the item's ratings)",
        headers,
        rows,
    )


def judges_table(prop: dict[str, Any], conf: float) -> Table:
    judges = prop["judges"]
    rows = []
    for j in judges:
        stats = [("leave-one-out agreement (outer)", j["loo_outer"])]
        stats += [(judge_statistic(r), r) for r in j.get("vs_majority", [])]
        stats += [
            (f"{r['metric']} with human {r['aggregate']}{p_text(r)}", r)
            for r in j.get("correlations", [])
        ]
        jsd = j["binned_jsd"]
        stats.append((f"binned JSD ({jsd['binning']} bins, lower is closer)", jsd))
        rows += [[j["judge"], name, est(e), num(e.get("n"))] for name, e in stats]
    srcs = {j.get("vs_majority_source") or j.get("correlations_source") for j in judges}
    srcs |= {judges[0]["binned_jsd"]["source"], judges[0]["loo_outer"].get("source", "")}
    return table(
        "Human vs judge",
        ["judge", "statistic", f"value [{ci_label(conf)}]", "items"],
        rows,
        text_cols=(0, 1, 2),
        source="; ".join(sorted(s for s in srcs if s)),
    )


def stratified_table(j: dict[str, Any], conf: float) -> Table:
    """Every stratum and metric of one judge's stratified agreement (no row left out)."""
    headers = ["stratum", "items", "share", "metric", "HH", "HM", "H′M", "Δ = HH − HM"]
    headers += [f"Δ {ci_label(conf)}", "note"]
    strat = j["stratified"]
    return table(
        f"Stratified agreement for {j['judge']} (by human percentage agreement; "
        "HH humans, HM human vs judge majority)",
        headers,
        [
            [r["stratum"], num(r["n_items"]), pct(r["share"]), r["metric"]]
            + [value(r["hh"]), value(r["hm"]), value(r["h1m"]), value(r["delta"])]
            + [interval({"low": r["delta_low"], "high": r["delta_high"]})]
            + [r.get("reason", "")]
            for r in strat["rows"]
        ],
        text_cols=(0, 3, 9),
        source=strat.get("source", ""),
    )


def random_table(extra: dict[str, Any], conf: float) -> Table:
    return table(
        "Random-labeller baseline",
        ["statistic", f"value [{ci_label(conf)}]", "items"],
        [[random_name(r), est(r), num(r["n"])] for r in extra["random_labeller"]],
        text_cols=(0, 1),
        notes=[
            "Expected agreement of a labeller that draws labels at random; a judge should do "
            "clearly better."
        ],
        source=extra.get("random_source", ""),
    )


def samples_table(extra: dict[str, Any], conf: float) -> Table:
    return table(
        "Agreement among a judge's samples",
        ["judge", "samples per item", "statistic", f"value [{ci_label(conf)}]", "items"],
        [
            [r["judge"], num(r["n_samples"]), SAMPLE_TITLES.get(r["metric"], r["metric"])]
            + [est(r), num(r["n"])]
            for r in extra["samples"]
        ],
        text_cols=(0, 2, 3),
        source=extra.get("samples_source", ""),
    )


def worker_methods_table(wk: dict[str, Any]) -> Table:
    return table(
        "Worker-weighted labels (Dawid-Skene, MACE) beside the majority",
        ["model", "source", "items", "same label as the unique majority", "labels"],
        [
            [m["title"], m["source"], num(m["n_items"])]
            + [
                value(m["agreement_with_majority"], "no item has a unique majority", 3, True),
                ", ".join(f"{d['label']}: {d['count']}" for d in m["distribution"]),
            ]
            for m in wk["methods"]
        ],
        text_cols=(0, 1, 4),
    )


def workers_table(wk: dict[str, Any]) -> Table:
    return table(
        f"Reliability of each of the {len(wk['workers'])} workers, least reliable first",
        ["worker", "labels", "Dawid-Skene reliability", "MACE competence"],
        [
            [w["worker"], num(w["n_labels"]), value(w["dawid_skene"]), value(w["mace"])]
            for w in wk["workers"]
        ],
        source=wk.get("reliability", ""),
    )


def perception_table(prop: dict[str, Any]) -> Table:
    per = prop["perception"]
    labels = [str(x) for x in per["labels"]]
    rows = []
    empty = [str(b["bin"]) for b in per["bins"] if b["items"] <= 0]
    for b in per["bins"]:
        if b["items"] <= 0 and prop.get("bins"):  # a fine score's empty bins: named once
            continue
        for s in b["sources"]:
            shares = " ".join(
                f"{lab}: {pct(p)}" for lab, p in zip(labels, s["proportions"], strict=True)
            )
            rows.append(
                [str(b["bin"]), pct(b["share"]), s["source"]]
                + [shares if b["items"] > 0 else undefined(b.get("reason", ""))]
            )
    return table(
        f"Perception chart: label shares per bin ({per['binning']})",
        ["bin", "share of items", "source", "label shares"],
        rows,
        text_cols=(0, 2, 3),
        notes=[f"No items in the bins {', '.join(empty)}"] if empty and prop.get("bins") else [],
    )


def position_bias_table(pb: dict[str, Any]) -> Table:
    headers = ["annotator", "sided choices", "left", "share left", "p", "p (Holm)"]
    headers += ["without a side", "note"]
    rows = [
        [
            r["rater"] if r["rater"] is not None else "all annotators",
            num(r["n"]),
            num(r["n_left"]),
            value(r["share_left"], r.get("reason", ""), as_pct=True),
            value(r["p_value"], r.get("reason", "")),
            num(r.get("p_holm")) if r.get("p_holm") is not None else "",
            num(r["n_excluded"]),
            r.get("reason", ""),
        ]
        for r in [pb["overall"], *sorted(pb["annotators"], key=p_key)]
    ]
    return table(
        "Position bias per annotator",
        headers,
        rows,
        text_cols=(0, 7),
        source=f"{pb['source']}; {pb.get('holm', '')}",
    )


def prioritisation_table(pr: dict[str, Any]) -> Table:
    headers = ["top k%", "items", "tie rate", "random mean", "random sd", "expected", "note"]
    rows = [
        [f"{r['k_percent']:g}", num(r["n_top"]), num(r["tie_rate"])]
        + [value(r["random_mean"], r.get("reason", ""))]
        + [value(r["random_std"], r.get("reason", ""))]
        + [num(r["random_expected"]), r.get("reason", "")]
        for r in pr["rows"]
    ]
    return table(
        "Prioritisation check (tie rate among the top k% by priority vs random orders)",
        headers,
        rows,
        text_cols=(6,),
        notes=[pr["note"]] if pr.get("note") else [],
        source=f"{pr['source']}: {pr['n_ties']} ties among {pr['n_items']} items; "
        "a useful priority puts fewer ties at the top than random orders.",
    )


def section_tables(section: dict[str, Any]) -> list[Table]:
    """The tables of a kind's own section (:mod:`analysis.sections`)."""
    return [table(t["title"], t["headers"], t["rows"]) for t in section.get("tables", [])]


@dataclass
class PropertyTables:
    """Every table of one property, by the place it takes in the report (None: not shown)."""

    reliability: Table | None = None
    pairwise: Table | None = None
    ranking: Table | None = None
    likert: Table | None = None
    judges: Table | None = None
    stratified: list[Table] = field(default_factory=list)
    random: Table | None = None
    samples: Table | None = None
    worker_methods: Table | None = None
    workers: Table | None = None
    perception: Table | None = None
    position_bias: Table | None = None
    prioritisation: Table | None = None

    def all(self) -> list[Table]:
        """The tables in the order the report shows them."""
        head = [self.reliability, self.pairwise, self.ranking, self.likert, self.judges]
        tail = [self.random, self.samples, self.worker_methods, self.workers, self.perception]
        tail += [self.position_bias, self.prioritisation]
        return [t for t in [*head, *self.stratified, *tail] if t is not None]


def property_tables(prop: dict[str, Any], conf: float) -> PropertyTables:
    """The tables of one property of the report (none for a property without figures)."""
    out = PropertyTables()
    if prop.get("empty"):
        return out
    out.reliability = reliability_table(prop, conf)
    if prop.get("pairwise", {}).get("pairs"):
        out.pairwise = pairwise_table(prop["pairwise"], conf)
    if prop.get("ranking"):
        out.ranking = ranking_table(prop, conf)
    if "likert" in prop:
        out.likert = likert_table(prop["likert"])
    if prop.get("judges"):
        out.judges = judges_table(prop, conf)
        out.stratified = [stratified_table(j, conf) for j in prop["judges"]]
    extra = prop.get("judges_extra")
    if extra:
        out.random = random_table(extra, conf)
        if "samples" in extra and not extra.get("samples_reason"):
            out.samples = samples_table(extra, conf)
    wk = prop.get("workers")
    if wk and not wk.get("reason"):
        out.worker_methods, out.workers = worker_methods_table(wk), workers_table(wk)
    if prop.get("perception") and not prop["perception"].get("reason"):
        out.perception = perception_table(prop)
    pb = prop.get("position_bias")
    if pb and not pb.get("reason"):
        out.position_bias = position_bias_table(pb)
    pr = prop.get("prioritisation")
    if pr and not pr.get("reason"):
        out.prioritisation = prioritisation_table(pr)
    return out


def report_tables(report: dict[str, Any]) -> list[Table]:
    """Every table of the report, in the order both renderers show them: the kind's own
    sections first, then each property's."""
    conf = report.get("settings", {}).get("confidence", 0.95)
    out = [t for sec in report.get("sections", []) for t in section_tables(sec)]
    for prop in report.get("properties", []):
        out += property_tables(prop, conf).all()
    return out
