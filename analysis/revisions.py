"""The report split by guideline revision (docs/languages.md): for each revision of a
study's wording, its labels' agreement (the report's reliability block) and position bias,
computed as :func:`analysis.report.build_report` does on that revision's labels alone; and the
labels made under superseded wording. Pure: frames in, a JSON-ready dict out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from analysis.properties import Property
from analysis.report import agreement_blocks


def by_revision(
    annotations: pd.DataFrame,
    properties: Sequence[Property],
    revision_of: Mapping[int, int],
    current: int,
    *,
    include_flagged: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """``annotations`` as :func:`build_report` reads them (an ``annotation`` column names
    each label's annotation); ``revision_of``: annotation → the revision it was made under;
    ``current``: the study's revision now. Each revision's section holds, per property, the
    ``reliability`` and ``position_bias`` blocks of the report (no bootstrap)."""
    out: dict[str, Any] = {"current": current, "revisions": [], "superseded_annotations": []}
    if not len(annotations) or "annotation" not in annotations.columns:
        return out
    revision = annotations["annotation"].map(lambda pk: revision_of.get(int(pk), 1))
    for number in sorted({int(n) for n in revision}):
        subset = annotations.loc[(revision == number).to_numpy()]
        blocks = agreement_blocks(subset, properties, include_flagged=include_flagged, seed=seed)
        out["revisions"].append(
            {
                "revision": number,
                "superseded": number != current,
                "annotations": int(subset["annotation"].nunique()),
                "properties": blocks,
            }
        )
    superseded = annotations.loc[(revision != current).to_numpy(), "annotation"]
    out["superseded_annotations"] = sorted({int(pk) for pk in superseded})
    return out
