"""Read label files into the frames of :mod:`analysis.report` (pure: no Django, no database).

Three kinds of file hold human labels (docs/analysis.md, "Input files", has the details):

* the platform's **label export** (``export_labels``, the API's ``annotations`` route) as
  JSON Lines, a JSON array, the API's JSON page or CSV, read by :mod:`formats.labels`;
* a **Judge-Bench** JSON file (Bavaresco et al. 2025), read by :mod:`formats.judgebench`:
  pairwise when every instance has ``output_a``/``output_b`` and one categorical property
  names the preferred output; the systems are those the instances name (``system_a``,
  ``system_b`` or ``system``, as ``export_labels --format judgebench`` writes), else
  ``output_a``/``output_b`` (``response``);
* **judge files** (``--judge``), see :func:`read_judges` and :func:`attach_judges`.

Malformed input raises :class:`ValueError` naming the file and line (or record).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.counts import PAIRWISE_LABELS
from analysis.criteria import export_criteria
from analysis.properties import Property
from formats import judgebench
from formats.labels import LabelRows, read_export
from kinds.criteria import EXPORT_COLUMNS
from kinds.ranking import export_pairs

__all__ = [
    "JUDGE_COLUMNS",
    "Dataset",
    "load_dataset",
    "parse_labels_option",
    "with_labels",
]

#: Columns of a judge file (JSONL keys or CSV header); see :func:`read_judges`.
JUDGE_COLUMNS = ("judge", "item", "input_id", "system", "system_b", "criterion", "label", "score")

PREFERENCE_PROPERTY = "preference"
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_MAX_ERRORS = 20


@dataclass
class Dataset:
    """Frames and property declarations read from one file (see :mod:`analysis.report`)."""

    annotations: pd.DataFrame
    items: pd.DataFrame
    properties: list[Property]
    title: str = ""
    source: str = ""
    notes: list[str] = field(default_factory=list)


class Errors:
    def __init__(self, path: Path) -> None:
        self.path, self.messages = path, []

    def add(self, where: str, message: str) -> None:
        self.messages.append(f"{self.path}: {where}: {message}")

    def raise_if_any(self) -> None:
        if self.messages:
            more = len(self.messages) - _MAX_ERRORS
            text = "\n".join(self.messages[:_MAX_ERRORS])
            raise ValueError(text + (f"\n... and {more} more" if more > 0 else ""))


def load_dataset(path: str | Path) -> Dataset:
    """Read any label export the platform writes, or a Judge-Bench ``.json`` file.

    Label exports: JSON Lines and CSV (``export_labels``, ``GET …/annotations/?format=jsonl``
    or ``csv``), a JSON array of rows (``export_labels --format json``) and the API's JSON
    page (``?format=json``: an object with ``next``, ``previous`` and a ``results`` list).
    The format is read from the content; the suffix only breaks a tie (``.csv``).
    """
    path = Path(path)
    text = read_file_text(path)
    try:
        read = read_export(text, path.suffix)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(read, LabelRows):
        return _judgebench(read, path)
    if read.errors:
        errors = Errors(path)
        errors.messages += [f"{path}: {e}" for e in read.errors]
        errors.raise_if_any()
    data = _export_dataset(read, path)
    if read.next_page:
        data.notes.append(
            f"{path.name} is one page of the export; more labels are at {read.next_page} "
            "(or export with a larger page_size, or as JSON Lines or CSV)"
        )
    return data


def read_file_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    return text


# --------------------------------------------------------------------------------------------
# Label exports
# --------------------------------------------------------------------------------------------


def _uncell(values: pd.Series) -> pd.Series:
    """Undo the export's spreadsheet guard: ``'=x`` -> ``=x`` (only before a formula prefix)."""
    s = values.astype(object)
    strs = s.map(lambda v: isinstance(v, str) and len(v) > 1 and v[0] == "'")
    if not strs.any():
        return s
    fix = s[strs].map(lambda v: v[1:] if v[1:].startswith(_FORMULA_PREFIXES) else v)
    s = s.copy()
    s[strs] = fix
    return s


def _blank(values: pd.Series) -> np.ndarray:
    """Missing: None, NaN or empty text."""
    v = values.astype(object)
    return (v.isna() | (v.map(lambda x: isinstance(x, str) and not x.strip()))).to_numpy()


def _as_ids(values: pd.Series) -> pd.Series:
    """Item ids as integers when every id is a whole number (as the database has them)."""
    text = values.astype(str).str.strip()
    if len(text) and text.str.fullmatch(r"-?\d+").all():
        return text.astype(np.int64)
    return values.astype(object)


def _as_bool(values: pd.Series, col: str, where: list[str], errors: Errors) -> np.ndarray:
    """True/false cells (JSON booleans, or CSV ``True``/``False`` text; empty is false)."""
    v = values.astype(object)
    if v.map(lambda x: isinstance(x, bool | np.bool_)).all():
        return v.to_numpy(dtype=bool)
    text = v.map(lambda x: "" if x is None else str(x)).str.strip().str.lower()
    true = text.isin(["true", "1", "yes", "t"]).to_numpy()
    false = text.isin(["false", "0", "no", "f", "", "none", "nan"]).to_numpy()
    for i in np.flatnonzero(~(true | false))[:_MAX_ERRORS]:
        errors.add(where[i], f"{col} must be true or false, got {v.iloc[i]!r}")
    return true


def _export_dataset(parsed: LabelRows, path: Path) -> Dataset:
    rows, where, csv_cells = parsed.rows, parsed.where, parsed.csv
    errors = Errors(path)
    if not len(rows):
        raise ValueError(f"{path}: the file holds no labels")
    score_cols = [c for c in rows.columns if str(c).startswith("score_")]
    missing = [c for c in ("item_id", "annotator") if c not in rows.columns]
    ranked = {"ranking", "systems"} <= set(rows.columns)
    if not ({"label", "scores", "score"} & set(rows.columns)) and not score_cols and not ranked:
        missing.append("label, scores, score or ranking")
    if missing:
        raise ValueError(
            f"{path}: not a label export: missing {', '.join(missing)} "
            "(see formats.labels.LABEL_FIELDS)"
        )
    if csv_cells:
        for col in ("input_id", "system_a", "system_b", "annotator", "item_id"):
            if col in rows.columns:
                rows[col] = _uncell(rows[col])
        for col in score_cols:
            rows[col] = _uncell(rows[col])
    no_item = _blank(rows["item_id"])
    no_annotator = _blank(rows["annotator"])
    for i in np.flatnonzero(no_item | no_annotator)[:_MAX_ERRORS]:
        errors.add(where[i], "every label needs an item_id and an annotator")
    errors.raise_if_any()
    item = _as_ids(rows["item_id"])
    flagged = (
        _as_bool(rows["flagged"], "flagged", where, errors)
        if "flagged" in rows.columns
        else np.zeros(len(rows), dtype=bool)
    )
    gold = (
        _as_bool(rows["is_gold"], "is_gold", where, errors)
        if "is_gold" in rows.columns
        else np.zeros(len(rows), dtype=bool)
    )

    def col(name: str) -> np.ndarray:
        if name not in rows.columns:
            return np.full(len(rows), None, dtype=object)
        v = rows[name].astype(object).to_numpy().copy()
        v[_blank(rows[name])] = None
        return v

    base = {
        "item": item.to_numpy(),
        "annotator": rows["annotator"].astype(str).to_numpy(),
        "flagged": flagged,
        "is_gold": gold,
        "raw": col("raw_answer"),
        "source": col("source"),
        "annotation": col("annotation_id"),
    }
    frames = []
    properties: list[Property] = []
    label = col("label")
    has_label = np.array([v is not None for v in label])
    pair_props, pair_found, pair_problems = export_criteria(rows, EXPORT_COLUMNS)
    for i, problem in pair_problems[:_MAX_ERRORS]:
        errors.add(where[i], problem)
    if any(p.scale == "pairwise" for p in pair_props):
        has_label[:] = False  # the label is only the summary of the criteria columns
    for prop in pair_props:
        pos, values = pair_found[prop.name]
        frames.append(
            pd.DataFrame(
                {k: v[pos] for k, v in base.items()} | {"label": values, "property": prop.name}
            )
        )
        properties.append(prop)
    pairs, pair_items = (
        _ranking_pairs(rows, base, col("input_id"), gold, where, errors) if ranked else ([], [])
    )
    if has_label.any() or pairs:
        bad = has_label & ~np.isin(label.astype(str), PAIRWISE_LABELS)
        for i in np.flatnonzero(bad)[:_MAX_ERRORS]:
            errors.add(where[i], f"label {label[i]!r} is not one of {list(PAIRWISE_LABELS)}")
        sel = has_label & ~bad
        frames.append(
            pd.DataFrame(
                {k: v[sel] for k, v in base.items()}
                | {"label": label[sel].astype(str), "property": PREFERENCE_PROPERTY}
            )
        )
        if pairs:
            frames.append(pd.DataFrame(pairs).assign(property=PREFERENCE_PROPERTY))
        observed = set(label[sel].astype(str)) | {p["label"] for p in pairs} | {"A", "B"}
        properties.append(
            Property(
                PREFERENCE_PROPERTY,
                "pairwise",
                tuple(x for x in PAIRWISE_LABELS if x in observed),
                title="Pairwise preference",
                labels_inferred=True,
            )
        )
    criteria = _score_columns(rows, score_cols, where, errors)
    for name, (pos, values) in criteria.items():
        frames.append(
            pd.DataFrame({k: v[pos] for k, v in base.items()} | {"label": values, "property": name})
        )
        properties.append(_inferred_property(name, values))
    errors.raise_if_any()
    if not frames:
        raise ValueError(f"{path}: no row has a label or scores")
    annotations = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    items = pd.DataFrame(
        {
            "item": item.to_numpy(),
            "input_id": col("input_id"),
            "system_a": col("system_a"),
            "system_b": col("system_b"),
            "is_gold": gold,
        }
    )
    if "priority" in rows.columns:
        prio = pd.to_numeric(pd.Series(col("priority")), errors="coerce")
        items["priority"] = prio.to_numpy()
    if pair_items:  # a ranked item is read as its pairs (as the study's report reads it)
        plain = ~np.isin(item.to_numpy(), [r["_of"] for r in pair_items])
        items = pd.concat(
            [items[plain], pd.DataFrame(pair_items).drop(columns="_of")], ignore_index=True
        )
    items = items.drop_duplicates("item", ignore_index=True)
    return Dataset(annotations, items, properties, title=path.name, source=str(path))


def _json_cell(value: Any) -> Any:
    """A list column's cell: a list (JSON) or its JSON text (CSV); None when empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        return json.loads(value)
    return value


def _ranking_pairs(
    rows: pd.DataFrame,
    base: dict[str, np.ndarray],
    input_ids: np.ndarray,
    gold: np.ndarray,
    where: list[str],
    errors: Errors,
) -> tuple[list[dict], list[dict]]:
    """A ranking export's rows (``systems`` in system order, ``ranking`` tiers of their
    names) as the pairwise rows the study's report reads: per pair of positions i < j the
    item ``"<item_id>:<i>-<j>"`` labelled ``A``/``B``/``tie`` (:func:`kinds.ranking.export_pairs`),
    and those pair items with their two systems (``_of``: the ranked item)."""
    pairs: list[dict] = []
    items: dict[str, dict] = {}
    for n, (systems, ranking) in enumerate(
        zip(rows["systems"].to_numpy(), rows["ranking"].to_numpy(), strict=True)
    ):
        try:
            systems, ranking = _json_cell(systems), _json_cell(ranking)
            if ranking is None:
                continue
            if not isinstance(systems, list) or not isinstance(ranking, list):
                raise ValueError("systems and ranking must be lists of system names")
            found = export_pairs([str(s) for s in systems], ranking)
        except (ValueError, TypeError) as exc:
            errors.add(where[n], f"ranking: {exc}")
            continue
        for i, j, label in found:
            key = f"{base['item'][n]}:{i}-{j}"
            pairs.append({k: v[n] for k, v in base.items()} | {"item": key, "label": label})
            items.setdefault(
                key,
                {
                    "item": key,
                    "input_id": input_ids[n],
                    "system_a": str(systems[i]),
                    "system_b": str(systems[j]),
                    "is_gold": bool(gold[n]),
                    "_of": base["item"][n],
                },
            )
    return pairs, list(items.values())


def _score_columns(
    rows: pd.DataFrame, score_cols: list[str], where: list[str], errors: Errors
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Criterion -> (row positions, values) from a ``scores`` object or ``score_*`` columns."""
    found: dict[str, tuple[list[int], list[Any]]] = {}
    if "scores" in rows.columns:
        for i, scores in enumerate(rows["scores"].astype(object).to_numpy()):
            if scores is None or (isinstance(scores, float) and math.isnan(scores)):
                continue
            if not isinstance(scores, dict):
                errors.add(where[i], "scores must be an object of criterion -> value")
                continue
            for name, value in scores.items():
                if value is None or value == "":
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float | str):
                    errors.add(where[i], f"score of {name!r} must be a number or a label")
                    continue
                pos, vals = found.setdefault(str(name), ([], []))
                pos.append(i)
                vals.append(value)
    for column in score_cols:
        name = column.removeprefix("score_")
        cells = rows[column].astype(str).to_numpy()
        keep = np.flatnonzero(np.char.str_len(cells.astype(str)) > 0)
        pos, vals = found.setdefault(name, ([], []))
        pos.extend(keep.tolist())
        vals.extend(cells[keep].tolist())
    if "score" in rows.columns and not found.get("score", ([], []))[0]:
        # one score per label in a column of its own (error spans), read as ``scores.score``
        blank = _blank(rows["score"])
        keep = np.flatnonzero(~blank)
        cells = rows["score"].astype(object).to_numpy()
        pos, vals = found.setdefault("score", ([], []))
        pos.extend(keep.tolist())
        vals.extend(cells[keep].tolist())
    out = {}
    for name, (pos, vals) in found.items():
        if pos:
            out[name] = (np.asarray(pos, dtype=np.int64), _typed(vals))
    return out


def parse_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(str(v).strip())
    except ValueError:
        return None


def _typed(values: list[Any]) -> np.ndarray:
    """Numbers (ints when whole) if every value is numeric, else text labels."""
    nums = [parse_number(v) for v in values]
    if all(x is not None and math.isfinite(x) for x in nums):
        if all(float(x).is_integer() for x in nums):
            return np.asarray([int(x) for x in nums], dtype=np.int64)
        return np.asarray(nums, dtype=np.float64)
    return np.asarray([str(v) for v in values], dtype=object)


def _inferred_property(name: str, values: np.ndarray) -> Property:
    if values.dtype.kind in "iu":
        lo, hi = int(values.min()), int(values.max())
        labels: tuple = tuple(range(lo, hi + 1)) if hi - lo <= 100 else tuple(np.unique(values))
        return Property(name, "ordinal", labels, title=name, labels_inferred=True)
    if values.dtype.kind == "f":
        labels = tuple(float(x) for x in np.unique(values))
        return Property(name, "ordinal", labels, title=name, labels_inferred=True)
    return Property(
        name, "categorical", tuple(sorted(set(values.tolist()))), title=name, labels_inferred=True
    )


def parse_labels_option(text: str) -> tuple[str, tuple[Hashable, ...]]:
    """``NAME=l1,l2,...`` -> (NAME, labels); numbers become numbers (``1,2,3`` or ``1:5``)."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise ValueError(f"--labels wants NAME=l1,l2,... or NAME=lo:hi, got {text!r}")
    rest = rest.strip()
    if re.fullmatch(r"-?\d+:-?\d+", rest):
        lo, hi = (int(x) for x in rest.split(":"))
        return name.strip(), tuple(range(min(lo, hi), max(lo, hi) + 1))
    parts = [p.strip() for p in rest.split(",") if p.strip()]
    return name.strip(), tuple(_typed(parts).tolist())


def with_labels(dataset: Dataset, overrides: Mapping[str, Sequence[Hashable]]) -> Dataset:
    """Declare the label set of some properties (an export does not carry the scale)."""
    props = []
    known = {p.name for p in dataset.properties}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"--labels: unknown properties {sorted(unknown)}; known: {sorted(known)}")
    for p in dataset.properties:
        if p.name in overrides:
            p = replace(p, labels=tuple(overrides[p.name]), labels_inferred=False)
        props.append(p)
    return replace(dataset, properties=props)


# --------------------------------------------------------------------------------------------
# Judge-Bench
# --------------------------------------------------------------------------------------------


def _judgebench(doc: Any, path: Path) -> Dataset:
    errors = Errors(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("instances"), list):
        raise ValueError(
            f"{path}: neither a label export (a list of label rows, or the API's JSON page "
            "with a 'results' list) nor a Judge-Bench file (an object with an 'instances' list)"
        )
    declared = doc.get("annotations")
    try:
        specs, faults = judgebench.judged_properties(declared)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    errors.messages += [f"{path}: {fault}" for fault in faults]
    errors.raise_if_any()
    instances = doc["instances"]
    paired = (
        bool(instances)
        and len(specs) == 1
        and next(iter(specs.values()))["category"] == "categorical"
        and all(
            isinstance(inst, dict)
            and isinstance(inst.get("instance"), dict)
            and {"output_a", "output_b"} <= inst["instance"].keys()
            for inst in instances
        )
    )
    label_map: dict[str, str] = {}
    if paired:
        prop = next(iter(specs.values()))
        label_map = judgebench.label_preferences(prop)
        paired = all(v is not None for v in label_map.values())
    named = _system_names(instances, paired)
    items, rows, seen = [], [], {}
    for index, inst in enumerate(instances):
        where = f"instances[{index}]"
        if not isinstance(inst, dict):
            errors.add(where, "each instance must be an object")
            continue
        ident = str(inst.get("id", index))
        if ident in seen:
            errors.add(where, f"duplicate id '{ident}' (first at instances[{seen[ident]}])")
            continue
        seen[ident] = index
        body = inst.get("instance") if named else {}
        if not named:
            system_a, system_b = ("output_a", "output_b") if paired else ("response", None)
        elif paired:
            system_a, system_b = str(body["system_a"]), str(body["system_b"])
        else:
            system_a, system_b = str(body["system"]), None
        input_id = str(body["input_id"]) if named and _named(body.get("input_id")) else ident
        items.append(
            {"item": ident, "input_id": input_id, "system_a": system_a, "system_b": system_b}
        )
        judged = judgebench.human_scores(
            inst, where, lambda m: errors.messages.append(f"{path}: {m}")
        )
        for metric, (_, scores) in judged.items():
            if metric not in specs:
                errors.add(where, f"property '{metric}' is not declared in 'annotations'")
                continue
            for position, score in enumerate(scores):
                if score is None:
                    continue
                value = _jb_value(score, specs[metric], label_map if paired else None)
                if value is None:
                    errors.add(
                        where + f" (id '{ident}')",
                        f"'{metric}' score {score!r} is outside its scale or labels_list",
                    )
                    continue
                rows.append((ident, str(position), value, metric))
    errors.raise_if_any()
    annotations = pd.DataFrame(rows, columns=["item", "annotator", "label", "property"])
    items_frame = pd.DataFrame(items)
    if seen and all(re.fullmatch(r"-?[1-9]\d*|0", ident) for ident in seen):
        # whole-number ids as integers, as the database and the label exports have them
        annotations["item"] = annotations["item"].astype(np.int64)
        items_frame["item"] = items_frame["item"].astype(np.int64)
    if not len(annotations):
        raise ValueError(f"{path}: no instance has human scores")
    properties = []
    for metric, prop in specs.items():
        values = annotations.loc[annotations["property"] == metric, "label"]
        if paired:
            mapped = set(label_map.values())
            labels = tuple(x for x in PAIRWISE_LABELS if x in mapped)
            properties.append(
                Property(metric, "pairwise", labels, title=metric, label_map=label_map)
            )
        elif prop["category"] == "categorical":
            labels = tuple(str(x) for x in prop["labels_list"])
            properties.append(Property(metric, "categorical", labels, title=metric))
        else:
            lo, hi = sorted((prop["worst"], prop["best"]))
            whole = float(lo).is_integer() and float(hi).is_integer() and hi - lo <= 100
            if whole and all(float(v).is_integer() for v in values):
                labels = tuple(range(int(lo), int(hi) + 1))
            else:
                labels = tuple(sorted({float(v) for v in values} | {float(lo), float(hi)}))
            properties.append(Property(metric, "ordinal", labels, title=metric))
    if any(p.scale == "ordinal" for p in properties):
        annotations["label"] = annotations["label"].astype(object)
    title = str(doc.get("dataset") or path.name)
    return Dataset(annotations, items_frame, properties, title=title, source=str(path), notes=[])


def _named(v: Any) -> bool:
    return isinstance(v, str | int) and not isinstance(v, bool) and bool(str(v).strip())


def _system_names(instances: list, paired: bool) -> bool:
    """Whether every instance names its systems (``system_a`` and ``system_b`` that differ,
    or a Likert ``system``), as :mod:`formats.judgebench_export` writes them."""
    keys = ("system_a", "system_b") if paired else ("system",)
    for inst in instances:
        body = inst.get("instance") if isinstance(inst, dict) else None
        if not isinstance(body, dict) or not all(_named(body.get(k)) for k in keys):
            return False
        if paired and str(body["system_a"]) == str(body["system_b"]):
            return False
    return bool(instances)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _jb_value(score: Any, prop: dict, label_map: dict | None) -> Hashable | None:
    if prop["category"] == "categorical":
        text = str(score)
        if text not in map(str, prop["labels_list"]):
            return None
        return label_map[text] if label_map is not None else text
    if not _is_num(score):
        return None
    lo, hi = sorted((prop["worst"], prop["best"]))
    if not lo <= score <= hi:
        return None
    return int(score) if float(score).is_integer() else float(score)
