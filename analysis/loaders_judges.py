"""Judge files for the report (:mod:`analysis.loaders`): read judge labels and map them onto
the items and properties of a dataset."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.loaders import JUDGE_COLUMNS, Dataset, Errors, parse_number, read_file_text
from analysis.properties import Property
from formats.ratings import rating_records
from formats.vocab import FLIP, PAIRWISE_WORDS

__all__ = ["attach_judges", "load_judges", "read_judges"]

# --------------------------------------------------------------------------------------------
# Judge files
# --------------------------------------------------------------------------------------------


def read_judges(path: str | Path) -> pd.DataFrame:
    """Read a judge file: one judge label per JSONL line, CSV row or JSON array element.

    Columns (:data:`JUDGE_COLUMNS`): ``judge``; either ``item`` (a pairwise label then in the
    item's own A/B order) or ``input_id`` and ``system`` (plus ``system_b`` for a preference,
    in that order); ``criterion`` (optional with a single property, or for preferences);
    ``label`` (``A``/``B``/``tie``, the preferred system's name, a Judge-Bench label, or a
    categorical label) or ``score`` (a number; per output without ``criterion`` a metric,
    whose sign of difference makes a preference). The format of ``import_ratings`` plus
    ``item``. Returns the records with a ``where`` column (file and line); raises
    :class:`ValueError` with the file and line of every malformed record.
    """
    path = Path(path)
    text = read_file_text(path)
    errors = Errors(path)
    records, faults = rating_records(text, path.name)
    if faults:
        raise ValueError(f"{path}: {faults[0]}")
    out = []
    for where, record in records:
        if isinstance(record, str):
            errors.add(where, record)
            continue
        row = _judge_record(record, where, errors)
        if row is not None:
            out.append(row)
    errors.raise_if_any()
    if not out:
        raise ValueError(f"{path}: the file holds no judge labels")
    frame = pd.DataFrame(out, columns=[*JUDGE_COLUMNS, "where"])
    frame["where"] = [f"{path.name} {w}" for w in frame["where"]]
    return frame


def _text(record: dict, key: str) -> str | None:
    v = record.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, str | int | float):
        return None
    text = str(v).strip()
    return text or None


def _judge_record(record: dict, where: str, errors: Errors) -> dict | None:
    judge = _text(record, "judge")
    if not judge:
        errors.add(where, "no 'judge'")
        return None
    item = record.get("item")
    item = None if item is None or (isinstance(item, str) and not item.strip()) else item
    input_id, system = _text(record, "input_id"), _text(record, "system")
    if item is None and not (input_id and system):
        errors.add(where, "give 'item', or 'input_id' and 'system'")
        return None
    score = None
    if record.get("score") not in (None, ""):
        score = parse_number(record["score"])
        if score is None or not math.isfinite(score):
            errors.add(where, f"score {record['score']!r} is not a finite number")
            return None
    label = _text(record, "label")
    if label is None and score is None:
        errors.add(where, "give a 'label' or a 'score'")
        return None
    system_b = _text(record, "system_b")
    if system_b and system_b == system:
        errors.add(where, "'system' and 'system_b' must differ")
        return None
    return {
        "judge": judge,
        "item": item,
        "input_id": input_id,
        "system": system,
        "system_b": system_b,
        "criterion": _text(record, "criterion") or _text(record, "property"),
        "label": label,
        "score": score,
        "where": where,
    }


def _preference(label: str | None, system: str | None, system_b: str | None, prop: Property):
    """A judge's preference in the order (``system``, ``system_b``)."""
    if label is None:
        return None
    if label in prop.label_map:
        return prop.label_map[label]
    low = label.strip().lower()
    if low in PAIRWISE_WORDS:
        return PAIRWISE_WORDS[low]
    if system and low == system.lower():
        return "A"
    if system_b and low == system_b.lower():
        return "B"
    return None


def _scale_value(label: str | None, score: float | None, prop: Property) -> Hashable | None:
    """A judge's value on a Likert or categorical property, or None if outside its labels."""
    if prop.scale == "ordinal":
        x = score if score is not None else parse_number(label)
        if x is None:
            return None
        for v in prop.labels:
            if float(v) == x:
                return v
        return None
    if label is not None:
        text = label
    elif score is not None and float(score).is_integer():
        text = str(int(score))
    else:
        text = str(score)
    for v in prop.labels:
        if str(v) == text:
            return v
    return None


def attach_judges(
    records: pd.DataFrame, items: pd.DataFrame, properties: Sequence[Property]
) -> tuple[pd.DataFrame, list[str]]:
    """Map judge records (:func:`read_judges` columns) onto items and properties.

    A preference between ``system`` and ``system_b`` on ``input_id`` goes to every item that
    shows that input with those two systems; where the item's A is ``system_b`` the label is
    flipped (A <-> B; ties stay). A score or label of one output on a criterion goes to the
    Likert item of that output. Per-output metric scores without a criterion become
    preferences by the sign of their difference (A if A's score is higher, tie if equal).

    Returns the judge frame (``item``, ``judge``, ``label``, ``property``) and notes that count
    the records left out and why (unknown item, label outside the property's set, ...).
    """
    props = {p.name: p for p in properties}
    pairwise = [p for p in properties if p.scale == "pairwise"]
    single = [p for p in properties if p.scale != "pairwise"]
    info: dict[Hashable, tuple[Any, Any, Any]] = {}
    by_pair: dict[tuple[str, frozenset], list[Hashable]] = {}
    by_output: dict[tuple[str, str], list[Hashable]] = {}
    pairs_of_input: dict[str, list[Hashable]] = {}

    def column(name: str) -> np.ndarray:
        if name in items.columns:
            return items[name].to_numpy()
        return np.full(len(items), None, dtype=object)

    for it, inp, sa, sb in zip(
        column("item"), column("input_id"), column("system_a"), column("system_b"), strict=True
    ):
        inp, sa, sb = _clean(inp), _clean(sa), _clean(sb)
        info[it] = (inp, sa, sb)
        if inp is None or sa is None:
            continue
        if sb is not None:
            by_pair.setdefault((str(inp), frozenset((str(sa), str(sb)))), []).append(it)
            pairs_of_input.setdefault(str(inp), []).append(it)
        else:
            by_output.setdefault((str(inp), str(sa)), []).append(it)
    int_ids = len(info) > 0 and all(isinstance(k, int | np.integer) for k in info)

    out_item: list[Hashable] = []
    out_judge: list[str] = []
    out_label: list[Hashable] = []
    out_prop: list[str] = []
    problems: dict[tuple[str, str], list[str]] = {}

    def emit(item: Hashable, judge: str, label: Hashable, prop: Property) -> None:
        out_item.append(item)
        out_judge.append(judge)
        out_label.append(label)
        out_prop.append(prop.name)

    def problem(judge: str, why: str, where: str) -> None:
        problems.setdefault((judge, why), []).append(where)

    metric: dict[tuple[str, str], dict[str, tuple[float, str]]] = {}
    for r in records.to_dict("records"):
        judge, where = str(r["judge"]), str(r.get("where") or "")
        crit = _clean(r.get("criterion"))
        label, score = _clean(r.get("label")), _clean(r.get("score"))
        system, system_b = _clean(r.get("system")), _clean(r.get("system_b"))
        if crit is not None and crit not in props:
            problem(judge, f"unknown criterion '{crit}'", where)
            continue
        item = _clean(r.get("item"))
        if item is not None:
            key = _item_key(item, int_ids)
            if key not in info:
                problem(judge, "unknown item", where)
                continue
            _, sa, sb = info[key]
            prop = props[crit] if crit else _default(sb is not None, pairwise, single)
            if prop is None:
                problem(judge, "several properties: name one in 'criterion'", where)
                continue
            if prop.scale == "pairwise":
                value = _preference(label, system, system_b, prop)
                if value is not None and system is not None and str(system) == str(sb):
                    value = FLIP.get(value, value)
            else:
                value = _scale_value(label, score, prop)
            if value is None or value not in prop.labels:
                problem(judge, f"label outside the labels of '{prop.name}'", where)
                continue
            emit(key, judge, value, prop)
            continue
        if system_b is not None:
            prop = props[crit] if crit else (pairwise[0] if len(pairwise) == 1 else None)
            if prop is None or prop.scale != "pairwise":
                problem(judge, "a preference needs pairwise data", where)
                continue
            value = _preference(label, system, system_b, prop)
            if value is None or value not in prop.labels:
                problem(judge, f"label outside the labels of '{prop.name}'", where)
                continue
            matches = by_pair.get((str(r["input_id"]), frozenset((system, system_b))))
            if not matches:
                problem(judge, "no item shows this input with these two systems", where)
                continue
            for it in matches:
                emit(it, judge, value if info[it][1] == system else FLIP.get(value, value), prop)
            continue
        if crit is None and label is None and score is not None:
            metric.setdefault((judge, str(r["input_id"])), {})[system] = (float(score), where)
            continue
        prop = props[crit] if crit else (single[0] if len(single) == 1 else None)
        if prop is None or prop.scale == "pairwise":
            problem(judge, "a label of one output needs a Likert or categorical criterion", where)
            continue
        value = _scale_value(label, score, prop)
        if value is None:
            problem(judge, f"label outside the labels of '{prop.name}'", where)
            continue
        matches = by_output.get((str(r["input_id"]), system))
        if not matches:
            problem(judge, "no item shows this input's output of this system", where)
            continue
        for it in matches:
            emit(it, judge, value, prop)
    for (judge, input_id), scores in metric.items():  # per-output metric scores
        wheres = [w for _, w in scores.values()]
        if len(pairwise) != 1:
            problem(judge, "metric scores without a criterion are not on a label scale", wheres[0])
            continue
        prop = pairwise[0]
        used = False
        for it in pairs_of_input.get(input_id, []):
            _, sa, sb = info[it]
            if str(sa) in scores and str(sb) in scores:
                diff = scores[str(sa)][0] - scores[str(sb)][0]
                value = "A" if diff > 0 else "B" if diff < 0 else "tie"
                if value not in prop.labels:
                    problem(judge, f"label outside the labels of '{prop.name}'", wheres[0])
                    continue
                emit(it, judge, value, prop)
                used = True
        if not used:
            problem(judge, "metric scores that complete no pair of an item", wheres[0])
    frame = pd.DataFrame(
        {
            "item": pd.Series(out_item, dtype=object),
            "judge": pd.Series(out_judge, dtype=object),
            "label": pd.Series(out_label, dtype=object),
            "property": pd.Series(out_prop, dtype=object),
        }
    )
    if int_ids and len(frame):
        frame["item"] = frame["item"].astype(np.int64)
    notes = [
        f"judge '{judge}': {len(wheres)} rating(s) left out: {why} (e.g. {wheres[0]})"
        for (judge, why), wheres in sorted(problems.items())
    ]
    return frame, notes


def _clean(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        v = v.strip()
        return v or None
    return v


def _item_key(item: Any, int_ids: bool) -> Hashable:
    if int_ids:
        try:
            return int(str(item).strip())
        except ValueError:
            return item
    return str(item)


def _default(is_pair: bool, pairwise: list[Property], single: list[Property]) -> Property | None:
    group = pairwise if is_pair else single
    return group[0] if len(group) == 1 else None


def load_judges(paths: Iterable[str | Path], dataset: Dataset) -> tuple[pd.DataFrame, list[str]]:
    """Read judge files and attach them to ``dataset``'s items (see :func:`attach_judges`)."""
    frames, notes = [], []
    for path in paths:
        frame, more = attach_judges(read_judges(path), dataset.items, dataset.properties)
        frames.append(frame)
        notes += more
    if not frames:
        return pd.DataFrame(columns=["item", "judge", "label", "property"]), notes
    return pd.concat(frames, ignore_index=True), notes
