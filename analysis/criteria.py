"""Pairwise criteria in the report: every criterion its own property (pure: no Django).

A pairwise study with ``criteria`` (kinds/criteria.py) is reported as one ``pairwise``
property per criterion, named after it; with ``strength`` each criterion also gets an
``ordinal`` property ``<name>_strength`` on −2..2 in system order (+2: the item's A much
better, −2: B much better), reported with ordinal reliability and per system pair. The
implicit criterion of a study without ``criteria`` keeps the property name ``preference``
(:data:`analysis.loaders.PREFERENCE_PROPERTY`), so such studies report exactly as before;
its strength is ``overall_strength``. Property names equal the export's column names
(``label`` is the export column of ``preference``).

Input: one row per (annotation, criterion) as :func:`kinds.criteria.criterion_labels` gives
them (``criterion``, ``label``, ``raw``, ``strength``) plus the annotation's own columns
(``annotation``, ``item``, ``annotator``, ``source``, ``flagged``, ``is_gold`` …), e.g. the
label rows a selector reads with a ``criterion`` column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from analysis.aggregation import PAIRWISE_LABELS
from analysis.loaders import PREFERENCE_PROPERTY
from analysis.properties import Property
from kinds.criteria import answer_choices, criteria_of

__all__ = [
    "STRENGTH_LABELS",
    "allowed_labels",
    "criteria_annotations",
    "criteria_properties",
    "export_criteria",
    "property_name",
    "strength_property_name",
]

STRENGTH_LABELS = (-2, -1, 0, 1, 2)
#: A display-order answer's side, as :func:`analysis.aggregation.position_bias` reads ``raw``.
_SIDE = {"left>>": "left", "left>": "left", "=": "tie", "right>": "right", "right>>": "right"}
_LABEL_OF_RAW = {"left": "A", "right": "B", "left>>": "A", "left>": "A", "=": "tie"}
_LABEL_OF_RAW |= {"right>": "B", "right>>": "B"}


def property_name(opts: Mapping[str, Any], criterion: str) -> str:
    """The report property of a criterion: its name, ``preference`` for the implicit one."""
    return criterion if opts.get("criteria") else PREFERENCE_PROPERTY


def strength_property_name(criterion: str) -> str:
    """The ordinal property of a criterion's strength (the export column's name)."""
    return f"{criterion}_strength"


def allowed_labels(opts: Mapping[str, Any]) -> set[str]:
    """The system-order labels a worker can give (``opts`` with the study's allow_* flags)."""
    return {_LABEL_OF_RAW.get(v, v) for v, _ in answer_choices(opts)}


def criteria_properties(
    opts: Mapping[str, Any], observed: Iterable[str] = (), question: str = ""
) -> list[Property]:
    """The study's properties: per criterion a pairwise property (labels: the allowed ones
    plus any observed in the data, in :data:`PAIRWISE_LABELS` order), followed by its
    strength property when the study asks for strength."""
    seen = allowed_labels(opts) | {str(x) for x in observed}
    labels = tuple(x for x in PAIRWISE_LABELS if x in seen)
    props = []
    for c in criteria_of(opts):
        title = c["label"] or question
        props.append(Property(property_name(opts, c["name"]), "pairwise", labels, title=title))
        if opts.get("strength"):
            props.append(
                Property(
                    strength_property_name(c["name"]),
                    "ordinal",
                    STRENGTH_LABELS,
                    title=f"{title or c['name']}: strength (+2 A much better … −2 B much better)",
                )
            )
    return props


def criteria_annotations(rows: pd.DataFrame, opts: Mapping[str, Any]) -> pd.DataFrame:
    """The report's annotation rows (``property``, ``label``, ``raw`` …) from one row per
    (annotation, criterion): the criterion's label under its property, with ``raw`` reduced
    to the side chosen (``left``/``right``/…, for the position-bias test), and its strength
    under ``<name>_strength`` where it has one. Other columns are carried over."""
    for col in ("criterion", "label"):
        if col not in rows.columns:
            raise ValueError(f"criterion rows need a {col!r} column")
    rows = rows.loc[rows["label"].notna()]
    rest = [c for c in rows.columns if c not in ("criterion", "label", "raw", "strength")]
    names = {c["name"] for c in criteria_of(opts)}
    unknown = sorted(set(rows["criterion"]) - names)
    if unknown:
        raise ValueError(f"labels for criteria the study does not have: {unknown}")
    raw = rows["raw"].to_numpy(dtype=object) if "raw" in rows.columns else [None] * len(rows)
    side = pd.Series(
        [None if pd.isna(r) else _SIDE.get(r, r) for r in raw], index=rows.index, dtype=object
    )
    pref = rows[rest].assign(
        property=rows["criterion"].map(lambda c: property_name(opts, c)),
        label=rows["label"].astype(str).astype(object),
        raw=side,
    )
    frames = [pref]
    if opts.get("strength") and "strength" in rows.columns:
        has = rows["strength"].notna()
        frames.append(
            rows.loc[has, rest].assign(
                property=rows.loc[has, "criterion"].map(strength_property_name),
                label=rows.loc[has, "strength"].astype(int).astype(object),
                raw=None,
            )
        )
    out = pd.concat(frames, ignore_index=True)
    out["label"] = out["label"].astype(object)
    return out


def export_criteria(
    rows: pd.DataFrame, known: Iterable[str]
) -> tuple[list[Property], dict[str, tuple[np.ndarray, np.ndarray]], list[tuple[int, str]]]:
    """Criteria columns of a label export (for :mod:`analysis.loaders`): every column not in
    ``known`` (the export's own columns) whose filled cells are all pairwise labels is a
    criterion (a pairwise property named after it); ``<name>_strength`` beside it, or
    ``overall_strength`` (the implicit criterion), is its strength (ordinal, −2..2).
    ``rationale`` and other columns are left alone. CSV cells must be unguarded first.
    When criteria columns are found, the export's ``label`` is only their summary (the
    ``overall`` or first criterion) and the loader should not report it as ``preference``
    too (the study's report has no such property).

    Returns the properties (labels as observed plus A and B, marked inferred), per property
    the row positions and values, and ``(row position, problem)`` for bad strength cells."""
    known = set(known) | {"rationale"}
    filled = {
        c: _filled(rows[c])
        for c in rows.columns
        if c not in known and not str(c).startswith("score_")
    }
    names = [
        c
        for c, mask in filled.items()
        if mask.any()
        and not str(c).endswith("_strength")
        and rows.loc[mask, c].astype(str).isin(PAIRWISE_LABELS).all()
    ]
    props: list[Property] = []
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    problems: list[tuple[int, str]] = []
    for name in [*names, "overall"]:
        if name in names:
            pos = np.flatnonzero(filled[name])
            values = rows[name].astype(str).to_numpy(dtype=object)[pos]
            seen = set(values) | {"A", "B"}
            labels = tuple(x for x in PAIRWISE_LABELS if x in seen)
            props.append(Property(name, "pairwise", labels, title=name, labels_inferred=True))
            found[name] = (pos, values)
        col = strength_property_name(name)
        if col not in filled or not filled[col].any():
            continue
        pos = np.flatnonzero(filled[col])
        strength = []
        for i, v in zip(pos, rows[col].to_numpy(dtype=object)[pos], strict=True):
            x = _strength(v)
            if x is None:
                problems.append((int(i), f"{col} must be an integer from -2 to 2, got {v!r}"))
            strength.append(x)
        ok = np.array([x is not None for x in strength], dtype=bool)
        props.append(Property(col, "ordinal", STRENGTH_LABELS, title=f"{name}: strength"))
        found[col] = (pos[ok], np.asarray([x for x in strength if x is not None], dtype=np.int64))
    return props, found, problems


def _filled(values: pd.Series) -> np.ndarray:
    v = values.astype(object)
    return (v.notna() & (v.astype(str).str.strip() != "")).to_numpy()


def _strength(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(str(v).strip())
    except ValueError:
        return None
    return int(x) if x.is_integer() and -2 <= x <= 2 else None
