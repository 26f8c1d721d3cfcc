"""The shared data model: per-item label counts.

Human labels are a long frame, one row per annotation: ``item`` (any hashable id),
``annotator`` and ``label`` (numbers for Likert data; ``"A"``, ``"B"``, ``"tie"``,
``"both_good"``, ``"both_bad"`` for preferences, :data:`PAIRWISE_LABELS`). Judge labels have
``item``, ``judge`` (default ``"judge"``) and ``label``. Missing labels are dropped; a label
outside the declared ``labels=`` raises :class:`ValueError`. Every statistic is a function
of the per-item label counts (:class:`LabelCounts`) and their distinct patterns
(:class:`Patterns`). Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

# pairwise preference labels; the last three count as a tie (ORA, Section 3.4)
from formats.vocab import PAIRWISE_LABELS

__all__ = [
    "PAIRWISE_LABELS",
    "LabelCounts",
    "Patterns",
    "as_label_counts",
    "find_patterns",
    "pivot_labels",
]


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


def _sorted_labels(values: np.ndarray) -> pd.Index:
    """Observed labels, sorted (numbers numerically, anything else by its text)."""
    uniq = list(pd.unique(np.asarray(values, dtype=object)))
    try:
        return pd.Index(sorted(uniq))
    except TypeError:
        return pd.Index(sorted(uniq, key=str))


def _numeric_values(labels: pd.Index) -> np.ndarray | None:
    if labels.dtype.kind in "iuf":
        numeric: np.ndarray = labels.to_numpy(dtype=float)
        return numeric
    return None


def label_codes(values: pd.Series, labels: pd.Index, what: str) -> np.ndarray:
    """Each value's position in ``labels``; ``ValueError`` naming up to five unknown values
    of ``what``."""
    codes = labels.get_indexer(values.to_numpy())
    if (codes < 0).any():
        unknown = pd.unique(values.to_numpy()[codes < 0])[:5]
        raise ValueError(
            f"{what} contain labels outside the declared label set {list(labels)}: {list(unknown)}"
        )
    coded: np.ndarray = codes.astype(np.int64, copy=False)
    return coded


def factorize_text(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(values)``: codes in order of first appearance, and the uniques. Text kept
    by pyarrow (pandas' default when it is installed) is dictionary-encoded by Arrow with the
    system allocator: pandas' route takes twice the memory, in Arrow's pool, which keeps it."""
    if isinstance(values.dtype, pd.StringDtype) and values.dtype.storage == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        arr, pool = values.array.__arrow_array__(), pa.system_memory_pool()
        if arr.null_count == 0 and len(arr):
            enc = pc.dictionary_encode(arr, memory_pool=pool).combine_chunks(memory_pool=pool)
            return enc.indices.to_numpy(), pd.Index(pd.array(enc.dictionary, dtype=values.dtype))
    codes, uniques = pd.factorize(values, sort=False)
    return codes, pd.Index(uniques)


def _sort_order(uniques: pd.Index) -> np.ndarray:
    """Positions that sort the unique values (factorising unsorted, then sorting the uniques,
    is faster than ``pd.factorize(sort=True)`` on long string columns)."""
    try:
        order: np.ndarray = np.argsort(uniques.to_numpy(), kind="stable")
    except TypeError:
        order = np.argsort(uniques.astype(str).to_numpy(), kind="stable")
    return order


#: Annotations encoded at a time: their label codes and count keys take 2 MB, not 8 MB per
#: million rows.
CHUNK_ROWS = 1 << 18


def _counts(item_code: np.ndarray, label_code: np.ndarray, n_items: int, k: int) -> np.ndarray:
    key = item_code.astype(np.int64) * k
    key += label_code
    return np.bincount(key, minlength=n_items * k).reshape(n_items, k)


@dataclass(frozen=True, eq=False)
class LabelCounts:
    """Per-item label counts for the humans and each judge, on a shared item and label index.

    Attributes
    ----------
    items:
        Item ids, in the row order of the count matrices.
    labels:
        The declared (or observed, sorted) label set, in column order.
    human:
        ``(n_items, n_labels)`` integer matrix: how many humans gave each label to each item.
    judges:
        Judge name -> ``(n_items, n_labels)`` counts of that judge's labels (zero rows for items
        the judge did not label).
    """

    items: pd.Index
    labels: pd.Index
    human: np.ndarray
    judges: Mapping[str, np.ndarray] = field(default_factory=dict)
    _cache: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_frames(
        cls,
        annotations: pd.DataFrame,
        judges: pd.DataFrame | None = None,
        *,
        labels: Sequence[Hashable] | None = None,
    ) -> LabelCounts:
        """Encode the long annotation frame (and optional judge frame); see the module docstring."""
        for col in ("item", "label"):
            if col not in annotations.columns:
                raise ValueError(f"annotations need an {col!r} column")
        ann = annotations[["item", "label"]]  # no copy of the columns
        if ann["label"].hasnans:
            ann = ann.loc[ann["label"].notna()]
        jud = None
        if judges is not None:
            for col in ("item", "label"):
                if col not in judges.columns:
                    raise ValueError(f"judge labels need an {col!r} column")
            cols = ["item", "label"] + (["judge"] if "judge" in judges.columns else [])
            jud = judges.loc[judges["label"].notna(), cols]
        if labels is None:
            observed = ann["label"]
            if jud is not None:
                observed = pd.concat([observed, jud["label"]], ignore_index=True)
            label_index = _sorted_labels(observed.unique())
        else:
            label_index = pd.Index(list(labels))
            if label_index.has_duplicates:
                raise ValueError(f"declared labels contain duplicates: {list(labels)}")
        k = len(label_index)
        item_code, uniques = factorize_text(ann["item"])
        order = _sort_order(uniques)
        items = uniques[order].rename("item")
        human = np.zeros(len(items) * k, dtype=np.int64)
        step = CHUNK_ROWS
        for start in range(0, len(ann), step):
            part = ann["label"].iloc[start : start + step]
            if (codes := label_index.get_indexer(part.to_numpy())).min(initial=0) < 0:
                label_codes(ann["label"], label_index, "annotations")  # raises, as before
            human += _counts(item_code[start : start + step], codes, len(items), k).ravel()
        human = human.reshape(len(items), k)[order]  # rows in sorted item order
        del item_code
        judge_counts: dict[str, np.ndarray] = {}
        if jud is not None:
            codes = label_codes(jud["label"], label_index, "judge labels")
            rows = items.get_indexer(jud["item"].to_numpy())
            names = jud["judge"].to_numpy() if "judge" in jud.columns else None
            keep = rows >= 0
            if names is None:
                judge_counts["judge"] = _counts(rows[keep], codes[keep], len(items), k)
            else:
                name_code, name_index = pd.factorize(names, sort=True)
                for j, name in enumerate(name_index):
                    sel = keep & (name_code == j)
                    judge_counts[str(name)] = _counts(rows[sel], codes[sel], len(items), k)
        return cls(items=items, labels=label_index, human=human, judges=judge_counts)

    @property
    def n_items(self) -> int:
        """Number of items with at least one human label."""
        return len(self.items)

    @property
    def values(self) -> np.ndarray | None:
        """Numeric label values (for ordinal/interval statistics), or ``None``."""
        return _numeric_values(self.labels)

    def ordinal_values(self) -> np.ndarray:
        """Numeric label values, checked to be strictly increasing (required for medians)."""
        vals = self.values
        if vals is None:
            raise ValueError(
                f"ordinal statistics need numeric labels, got {list(self.labels)}; "
                "declare e.g. labels=[1, 2, 3, 4, 5]"
            )
        if np.any(np.diff(vals) <= 0):
            raise ValueError(f"declared labels must be increasing for ordinal data: {list(vals)}")
        return vals

    def judge_counts(self, judge: str | None) -> tuple[str, np.ndarray]:
        """Select one judge: by name, or the only one when ``judge`` is None."""
        if not self.judges:
            raise ValueError("no judge labels were given")
        if judge is None:
            if len(self.judges) > 1:
                raise ValueError(f"several judges present {sorted(self.judges)}; pass judge=NAME")
            judge = next(iter(self.judges))
        if judge not in self.judges:
            raise ValueError(f"unknown judge {judge!r}; known: {sorted(self.judges)}")
        return judge, self.judges[judge]

    def patterns(self, judge: str | None = None) -> Patterns:
        """Distinct per-item count patterns (human counts, plus one judge's counts if named).

        Cached: every statistic on these counts shares the same pattern table.
        """
        key = ("patterns", judge)
        if key not in self._cache:
            blocks = [self.human] if judge is None else [self.human, self.judge_counts(judge)[1]]
            self._cache[key] = find_patterns(np.hstack(blocks))
        patterns: Patterns = self._cache[key]
        return patterns


def as_label_counts(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    labels: Sequence[Hashable] | None = None,
) -> LabelCounts:
    """Return ``data`` unchanged if already encoded, else encode the frames."""
    if isinstance(data, LabelCounts):
        if judges is not None:
            raise ValueError("pass judge labels to LabelCounts.from_frames, not alongside it")
        if labels is not None and list(labels) != list(data.labels):
            raise ValueError("labels differ from the label set the LabelCounts was built with")
        return data
    return LabelCounts.from_frames(data, judges, labels=labels)


# --------------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Patterns:
    """Distinct rows of an integer item matrix.

    ``rows[p]`` is pattern ``p``; ``inverse[i]`` is the pattern of item ``i``; ``freq[p]`` is how
    many items share pattern ``p``.
    """

    rows: np.ndarray
    inverse: np.ndarray
    freq: np.ndarray


def find_patterns(matrix: np.ndarray) -> Patterns:
    """Group the rows of an integer ``(n, q)`` matrix into distinct patterns."""
    m = np.ascontiguousarray(matrix)
    if m.ndim != 2:
        raise ValueError("expected a 2-d matrix")
    if m.shape[0] == 0:
        return Patterns(m[:0], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if m.dtype.kind in "iu" and m.min() >= 0:
        radix = m.max(axis=0).astype(np.float64) + 1.0
        if np.prod(radix) < 2.0**62:
            mult = np.ones(m.shape[1], dtype=np.int64)
            mult[1:] = np.cumprod(radix[:-1].astype(np.int64))
            key = m.astype(np.int64) @ mult
            _, first, inverse, freq = np.unique(
                key, return_index=True, return_inverse=True, return_counts=True
            )
            return Patterns(m[first], inverse.ravel(), freq)
    rows, inverse, freq = np.unique(m, axis=0, return_inverse=True, return_counts=True)
    return Patterns(rows, inverse.ravel(), freq)


# --------------------------------------------------------------------------------------------
# Pivot
# --------------------------------------------------------------------------------------------


def pivot_labels(annotations: pd.DataFrame, rater: str = "annotator") -> pd.DataFrame:
    """Items x raters matrix of labels, NaN where a rater did not label an item.

    Raises :class:`ValueError` if a rater labelled the same item twice.
    """
    ann = annotations.loc[annotations["label"].notna()]
    item_code, items = pd.factorize(ann["item"], sort=True)
    rater_code, raters = pd.factorize(ann[rater], sort=True)
    flat = item_code.astype(np.int64) * len(raters) + rater_code
    if len(np.unique(flat)) != len(flat):
        raise ValueError(f"some ({'item'}, {rater}) pairs have more than one label")
    labels = ann["label"].to_numpy()
    numeric = labels.dtype.kind in "iufb"
    out = np.full(
        len(items) * len(raters), np.nan if numeric else None, dtype=float if numeric else object
    )
    out[flat] = labels
    return pd.DataFrame(
        out.reshape(len(items), len(raters)),
        index=pd.Index(items, name="item"),
        columns=pd.Index(raters, name=rater),
    )
