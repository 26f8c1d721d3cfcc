"""Pairwise criteria in a label export, read back for the report (pure: no Django).

A pairwise study with ``criteria`` and/or ``strength`` (kinds/criteria.py) is reported with
one ``pairwise`` property per criterion and one ``ordinal`` property ``<name>_strength``
(−2..2 in system order, +2: the item's A much better) per criterion when it asks for
strength (:func:`kinds.criteria.report_properties` / ``report_labels`` on the platform).
The export writes the same names as columns; :func:`export_criteria` finds them again so
that ``python -m analysis report`` on the export reports the same properties.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from analysis.counts import PAIRWISE_LABELS
from analysis.properties import Property
from kinds.criteria import IMPLICIT, STRENGTH_LABELS, strength_property

__all__ = ["export_criteria"]


def export_criteria(
    rows: pd.DataFrame, known: Iterable[str]
) -> tuple[list[Property], dict[str, tuple[np.ndarray, np.ndarray]], list[tuple[int, str]]]:
    """Criteria columns of a label export (for :mod:`analysis.loaders`): every column not in
    ``known`` (the export's own columns) whose filled cells are all pairwise labels is a
    criterion (a pairwise property named after it); ``<name>_strength`` beside it, or
    ``preference_strength`` (the implicit criterion), is its strength (ordinal, −2..2).
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
    for name in dict.fromkeys([*names, IMPLICIT]):
        if name in names:
            pos = np.flatnonzero(filled[name])
            values = rows[name].astype(str).to_numpy(dtype=object)[pos]
            seen = set(values) | {"A", "B"}
            labels = tuple(x for x in PAIRWISE_LABELS if x in seen)
            props.append(Property(name, "pairwise", labels, title=name, labels_inferred=True))
            found[name] = (pos, values)
        col = strength_property(name)
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
