"""The judge-assisted block (:mod:`analysis.assisted_report`) and the style-controlled ranking
(:mod:`analysis.style_report`) as plain text and as the data of ``analysis/_style.html`` and
``analysis/_assisted.html`` (pure; untrusted names are escaped by the template and stripped
of control characters in text)."""

from __future__ import annotations

from typing import Any

from analysis import tables
from analysis.formatting import num, pct, plain
from charts.ranking import ranking_chart

__all__ = ["assisted_context", "assisted_text"]

TITLE = "Judge-assisted estimates (PPI++)"


def _iv(lo: Any, hi: Any, digits: int = 3) -> str:
    if lo is None or hi is None:
        return "undefined"
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def _lead(a: dict[str, Any]) -> str:
    gain = a.get("effective_sample_gain")
    conf = round(100 * a.get("confidence", 0.95))
    text = (
        f"judge {a['judge']}: {num(a.get('n_human_items', 0))} items with human labels and "
        f"{num(a.get('n_judge_only_items', 0))} rated by the judge only; {conf}% intervals "
        "beside the human-only ones on the same items"
    )
    if gain is not None:
        text += (
            f"; effective sample gain {pct(gain)} (the judge is worth that many more human labels)"
        )
    return text


def _win_rows(a: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["system_a"],
            r["system_b"],
            num(r["estimate"]),
            _iv(r["low"], r["high"]),
            num(r["human_estimate"]),
            _iv(r["human_low"], r["human_high"]),
            num(r["n_human"]),
            num(r["n_judge"]),
            num(r["n_effective"], 1),
            num(r["lambda"], 2),
        ]
        for r in a.get("win_rates", [])
    ]


WIN_HEADERS = ["system a", "system b", "win rate a", "interval", "human-only", "interval"]
WIN_HEADERS += ["human items", "judge-only items", "effective n", "λ"]
RANK_HEADERS = ["system", "score", "interval", "rank-set", "human-only", "interval"]


def _rank_rows(a: dict[str, Any], digits: int) -> list[list[str]]:
    return [
        [
            r["system"],
            num(r["score"], digits),
            _iv(r["low"], r["high"], digits),
            f"{r['rank_low']}–{r['rank_high']}" if r.get("rank_low") is not None else "undefined",
            num(r["human_score"], digits),
            _iv(r["human_low"], r["human_high"], digits),
        ]
        for r in a.get("ranking", [])
    ]


def _digits(a: dict[str, Any]) -> int:
    return 1 if a.get("win_rates") else 3


def _win_table(a: dict[str, Any]) -> tables.Table:
    title = "Win rates (share of human preference for system a)"
    return tables.table(title, WIN_HEADERS, _win_rows(a), text_cols=(0, 1))


def _rank_table(a: dict[str, Any]) -> tables.Table:
    what = "Bradley-Terry scores" if a.get("win_rates") else "Mean scores"
    title = f"{what} with rank-sets"
    return tables.table(title, RANK_HEADERS, _rank_rows(a, _digits(a)), text_cols=(0,))


def assisted_text(prop: dict[str, Any]) -> list[str]:
    from analysis.plaintext import table_text  # the report's table layout

    a = prop.get("assisted")
    if not a:
        return []
    out = ["", TITLE, f"  {plain(_lead(a))}"]
    if a.get("reason"):
        return [*out, f"  undefined -- {plain(a['reason'])}"]
    if a.get("note"):
        out.append(f"  Note: {plain(a['note'])}")
    if a.get("win_rates"):
        out.extend(table_text(_win_table(a)))
    if a.get("ranking"):
        out.extend(table_text(_rank_table(a)))
    elif a.get("ranking_reason"):
        out.append(f"  Ranking undefined -- {plain(a['ranking_reason'])}")
    return out


def assisted_context(prop: dict[str, Any]) -> dict[str, Any] | None:
    """What ``analysis/_assisted.html`` shows, or None without an assisted block."""
    a = prop.get("assisted")
    if not a:
        return None
    out: dict[str, Any] = {"title": TITLE, "lead": _lead(a), "reason": a.get("reason", "")}
    out["note"] = a.get("note", "") or a.get("ranking_reason", "")
    out["source"] = "; ".join(a.get("method", {}).values())
    if a.get("win_rates"):
        out["win_table"] = _win_table(a)
    if a.get("ranking"):
        rows = [
            {**r, "rank": f"{r['rank_low']}–{r['rank_high']}" if r.get("rank_low") else None}
            for r in a["ranking"]
        ]
        what = "Bradley-Terry scores" if a.get("win_rates") else "Mean scores"
        out["chart"] = ranking_chart(rows, f"{what}: judge-assisted intervals")
        out["rank_table"] = _rank_table(a)
    return out


# --------------------------------------------------------------------------------------------
# Style-controlled ranking (analysis.style_report)
# --------------------------------------------------------------------------------------------

STYLE_TITLE = "Style-controlled ranking (Bradley-Terry with length, markdown and position)"
STYLE_RANK_HEADERS = ["rank", "system", "score", "interval", "plain rank", "plain score"]
COEF_HEADERS = ["covariate", "coefficient", "interval", "p-value", "note"]


def _style_rank_rows(block: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(r["rank"]),
            r["system"],
            num(r["score"], 1),
            _iv(r["low"], r["high"], 1),
            str(r["plain_rank"]),
            num(r["plain_score"], 1),
        ]
        for r in block.get("ranking", [])
    ]


def _coef_rows(block: dict[str, Any]) -> list[list[str]]:
    return [
        [
            c["covariate"],
            num(c["coef"]),
            _iv(c["low"], c["high"]),
            num(c["p_value"], 4),
            c.get("reason", ""),
        ]
        for c in block.get("coefficients", [])
    ]


def _length_line(s: dict[str, Any]) -> str:
    lb = s.get("length_bias")
    if not lb:
        return ""
    return (
        f"Length bias of the human raters: {num(lb['coef'])} log-odds per standard deviation "
        f"of the normalised length difference, interval {_iv(lb['low'], lb['high'])} "
        "(positive: longer answers preferred at equal system)"
    )


def _blocks(s: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("humans", s.get("humans", {}))] + [
        (f"judge {j['judge']}", j) for j in s.get("judges", [])
    ]


def _style_tables(who: str, block: dict[str, Any]) -> tuple[tables.Table, tables.Table]:
    rank = tables.table(
        f"{who} ({num(block['n'])} comparisons)",
        STYLE_RANK_HEADERS,
        _style_rank_rows(block),
        text_cols=(1,),
    )
    coef = tables.table(
        f"Style coefficients ({who})", COEF_HEADERS, _coef_rows(block), text_cols=(0, 4)
    )
    return rank, coef


def style_text(prop: dict[str, Any]) -> list[str]:
    from analysis.plaintext import table_text

    s = prop.get("style")
    if not s:
        return []
    out = ["", STYLE_TITLE]
    if _length_line(s):
        out.append(f"  {plain(_length_line(s))}")
    for who, block in _blocks(s):
        if block.get("reason"):
            out.append(f"  {plain(who)}: undefined -- {plain(block['reason'])}")
            continue
        for table in _style_tables(who, block):
            out.extend(table_text(table))
    return out


def style_context(prop: dict[str, Any]) -> dict[str, Any] | None:
    s = prop.get("style")
    if not s:
        return None
    blocks = []
    for who, block in _blocks(s):
        entry: dict[str, Any] = {"who": who, "reason": block.get("reason", "")}
        if not entry["reason"]:
            entry["n"] = num(block["n"])
            entry["ranking"], entry["coefficients"] = _style_tables(who, block)
        blocks.append(entry)
    return {
        "title": STYLE_TITLE,
        "length": _length_line(s),
        "blocks": blocks,
        "source": s["method"],
    }
