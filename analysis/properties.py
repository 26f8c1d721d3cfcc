"""A judged property: its scale (pairwise, ordinal, categorical) and its label set.

Declared by the loaders and the platform's selectors, read by :mod:`analysis.report`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from analysis.counts import PAIRWISE_LABELS

__all__ = ["Property", "Scale"]

Scale = Literal["pairwise", "ordinal", "categorical"]

_SCALES = ("pairwise", "ordinal", "categorical")

#: An ordinal property with more whole-number labels than this is a fine score (a 0-100
#: slider): an interval scale, reported in :data:`N_BINS` bins of equal width.
FINE_SCALE = 11
N_BINS = 10


@dataclass(frozen=True)
class Property:
    """One judged property: what a label answers and which labels it may take.

    ``name``: the key in the frames' ``property`` column; ``scale``: ``"pairwise"`` (preference
    in system order), ``"ordinal"`` or ``"categorical"``; ``labels``: the declared label set in
    order (Randolph's kappa counts it); ``title``: the question workers saw;
    ``labels_inferred``: the set was read from the data (noted in the report); ``label_map``:
    raw label -> label for judge labels (e.g. Judge-Bench ``model_a`` -> ``A``).
    """

    name: str
    scale: Scale
    labels: tuple[Hashable, ...]
    title: str = ""
    labels_inferred: bool = False
    label_map: Mapping[str, Hashable] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.scale not in _SCALES:
            raise ValueError(f"property {self.name!r}: scale must be one of {_SCALES}")
        labels = tuple(self.labels)
        object.__setattr__(self, "labels", labels)
        if len(set(labels)) != len(labels):
            raise ValueError(f"property {self.name!r}: labels contain duplicates {list(labels)}")
        if self.scale == "pairwise":
            extra = [x for x in labels if x not in PAIRWISE_LABELS]
            if extra:
                raise ValueError(
                    f"property {self.name!r}: pairwise labels must be among "
                    f"{list(PAIRWISE_LABELS)}, got {extra}"
                )
        if self.scale == "ordinal":
            if not all(_is_number(x) for x in labels):
                raise ValueError(f"property {self.name!r}: ordinal labels must be numbers")
            if any(b <= a for a, b in zip(labels, labels[1:], strict=False)):
                raise ValueError(f"property {self.name!r}: ordinal labels must be increasing")

    @property
    def bins(self) -> list[tuple[int, int]]:
        """A fine score's display bins, ``(low, high)`` inclusive, :data:`N_BINS` of equal
        width over its range (0-100: 0-9, 10-19, ..., 90-100); ``[]`` for any other property.
        A fine score is ordinal with more than :data:`FINE_SCALE` whole-number labels."""
        if self.scale != "ordinal" or len(self.labels) <= FINE_SCALE:
            return []
        if not all(float(x).is_integer() for x in self.labels):
            return []
        lo, hi = int(self.labels[0]), int(self.labels[-1])
        edges = [lo + (i * (hi - lo + 1)) // N_BINS for i in range(N_BINS + 1)]
        return [(a, b - 1) for a, b in zip(edges, edges[1:], strict=False) if b > a]

    @property
    def bin_names(self) -> list[str]:
        return [f"{a}–{b}" if a != b else str(a) for a, b in self.bins]

    def bin_matrix(self) -> np.ndarray:
        """``(n_labels, n_bins)`` 0/1: which bin each label falls in (counts @ it: bin counts)."""
        m = np.zeros((len(self.labels), len(self.bins)))
        for j, (a, b) in enumerate(self.bins):
            for i, x in enumerate(self.labels):
                if a <= x <= b:
                    m[i, j] = 1.0
        return m

    @property
    def level(self) -> str:
        """Level of measurement for Krippendorff's alpha: interval for a fine score."""
        if self.scale != "ordinal":
            return "nominal"
        return "interval" if self.bins else "ordinal"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scale": self.scale,
            "title": self.title or self.name,
            "labels": list(self.labels),
            "labels_inferred": self.labels_inferred,
            "level": self.level,
            **({"bins": self.bin_names} if self.bins else {}),
        }


def _is_number(x: object) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------
