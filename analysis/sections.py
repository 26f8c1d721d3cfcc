"""Report sections a task kind adds to the study report beyond its properties
(``Kind.report_sections`` names them; this module maps each name to its builder). Pure:
every builder takes a frame of the study's answers, one row per annotation with
``annotation``, ``item``, ``annotator``, ``input``, ``system`` (of the item's first output)
and ``answer`` (as the kind stores it), and returns the generic section the renderers show:
``{"name", "title", "figures": [estimate dicts with "name"], "tables": [{"title",
"headers", "rows"}], "notes"}``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.agreement import krippendorff_alpha
from analysis.prefill_report import prefill_block
from analysis.report import estimate_dict
from analysis.spans import mean_char_f1, mqm_by_system, systems_by_score

__all__ = ["BUILDERS", "kind_sections", "spans_section"]


def kind_sections(
    names: Sequence[str],
    frame: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """The sections ``names`` built from ``frame`` (unknown names: ``KeyError``)."""
    return [
        BUILDERS[name](frame, n_boot=n_boot, seed=seed, confidence=confidence) for name in names
    ]


def spans_section(
    frame: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The study report's section of an error-span study: the score's
    Krippendorff's alpha at the interval level, character-level span F1 between annotators
    (and its severity-aware variant), MQM-weighted error counts per system and the systems by
    mean score. ``frame``: one row per annotation with ``item``, ``annotator``, ``input``,
    ``system`` and ``answer`` (``{"spans": [...] | None, "score": int}``). Returns the
    generic section shape: ``name``, ``title``, ``figures`` (name → estimate dict),
    ``tables`` (title, headers, rows) and ``notes``."""
    answers = list(frame["answer"]) if len(frame) else []
    rows = pd.DataFrame(
        {
            "item": frame["item"].to_numpy() if len(frame) else [],
            "annotator": frame["annotator"].to_numpy() if len(frame) else [],
            "input": frame["input"].to_numpy() if len(frame) else [],
            "system": frame["system"].to_numpy() if len(frame) else [],
            "score": [a.get("score") for a in answers],
            "spans": [a.get("spans") for a in answers],
        }
    )
    notes: list[str] = []
    unrecorded = int(rows["spans"].isna().sum()) if len(rows) else 0
    if unrecorded:
        notes.append(
            f"{unrecorded} label(s) carry a score without spans (imported): they count in the "
            "score's alpha and the mean scores, not in span F1 or the error counts."
        )
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    scored = rows[rows["score"].notna()]
    alpha = krippendorff_alpha(
        scored.assign(label=scored["score"].astype(int))[["item", "annotator", "label"]],
        level="interval",
        labels=list(range(101)),
        **boot,
    )
    figures = [
        estimate_dict(alpha, name="Score: Krippendorff's alpha (interval)"),
        estimate_dict(mean_char_f1(rows, **boot), name="Span agreement: character F1"),
        estimate_dict(
            mean_char_f1(rows, severity=True, **boot),
            name="Span agreement: character F1, same severity",
        ),
    ]
    by_system = systems_by_score(scored, **boot) if len(scored) else None
    mqm = mqm_by_system(rows) if len(rows) else None
    tables = []
    if by_system is not None:
        tables.append(
            {
                "title": "Systems by mean score (0-100)",
                "headers": ["system", "rank", "labels", "mean score", "low", "high"],
                "rows": [
                    [r.system, int(r.rank), int(r.n), float(r.mean), _opt(r.low), _opt(r.high)]
                    for r in by_system.itertuples()
                ],
            }
        )
    if mqm is not None and len(mqm):
        tables.append(
            {
                "title": "MQM-weighted errors per system (minor 1, major 5)",
                "headers": ["system", "labels", "minor", "major", "weighted", "per label"],
                "rows": [
                    [
                        r.system,
                        int(r.annotations),
                        int(r.minor),
                        int(r.major),
                        float(r.mqm),
                        float(r.mqm_per_annotation),
                    ]
                    for r in mqm.itertuples()
                ],
            }
        )
    section = {
        "name": "error_spans",
        "title": "Error spans",
        "figures": figures,
        "tables": tables,
        "notes": notes,
    }
    prefill = prefill_block(list(rows["item"]), answers, confidence)
    return section if prefill is None else section | {"prefill": prefill}


def _opt(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


#: Section name → builder(frame, n_boot=, seed=, confidence=) -> section dict.
BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {"error_spans": spans_section}
