"""Shared pieces of the study report (:mod:`analysis.report`): JSON-safe values, estimates
as dicts, the report options."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.estimates import Estimate

REPORT_SCHEMA = "humeval.report/1"


def json_safe(obj: Any) -> Any:
    """Plain Python for ``json.dumps(..., allow_nan=False)``: numpy scalars become numbers,
    NaN, infinities and ``pd.NA`` become ``None`` (callers attach the reason), tuples lists."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | np.ndarray | pd.Index):
        return [json_safe(v) for v in obj]
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def estimate_dict(est: Estimate, **extra: Any) -> dict[str, Any]:
    """An :class:`~analysis.estimates.Estimate` as a dict, ``extra`` keys first."""
    return {**extra, **json_safe(est.as_dict())}


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    names = list(frame.columns)
    cols = [frame.iloc[:, j].tolist() for j in range(len(names))]  # json_safe maps NA to None
    return [json_safe(dict(zip(names, row, strict=True))) for row in zip(*cols, strict=True)]


def with_reason(rows: list[dict[str, Any]], fields: Sequence[str], why: str) -> None:
    """Give rows whose ``fields`` are missing a reason (unless they already have one)."""
    for row in rows:
        if any(row.get(f) is None for f in fields) and not row.get("reason"):
            row["reason"] = why
        row.setdefault("reason", "")


@dataclass(frozen=True)
class ReportOptions:
    threshold: float
    n_boot: int
    seed: int
    confidence: float
    interval: bool
    worker_models: bool = False

    @property
    def kw(self) -> dict[str, Any]:
        return {"n_boot": self.n_boot, "seed": self.seed, "confidence": self.confidence}
