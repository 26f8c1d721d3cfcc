"""Aggregation of crowd labels: soft modes and medians, majority votes, Likert summaries,
soft voting of preferences and worker-weighted labels (Dawid-Skene, MACE).

Input frames and :class:`~analysis.counts.LabelCounts`: :mod:`analysis.counts`; estimates
and the bootstrap: :mod:`analysis.estimates`. Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pandas as pd

from analysis.counts import PAIRWISE_LABELS, LabelCounts, as_label_counts

__all__ = [
    "CROWD_KIT_MISSING",
    "WorkerModel",
    "crowd_kit_available",
    "dawid_skene",
    "dawid_skene_em",
    "likert_summary",
    "mace",
    "majority_vote",
    "median_bins",
    "median_positions",
    "modal_labels",
    "nullable_floats",
    "soft_median",
    "soft_mode",
    "soft_vote",
]


# --------------------------------------------------------------------------------------------
# Shared per-item helpers (vectorised over rows of a count matrix)
# --------------------------------------------------------------------------------------------


def soft_mode(counts: np.ndarray) -> np.ndarray:
    """Uniform distribution over each row's most frequent labels (zeros for empty rows)."""
    counts = np.asarray(counts)
    top = counts.max(axis=1, keepdims=True)
    is_mode = (counts == top) & (top > 0)
    n_modes = is_mode.sum(axis=1, keepdims=True)
    soft: np.ndarray = np.divide(is_mode, n_modes, out=np.zeros(counts.shape), where=n_modes > 0)
    return soft


def median_positions(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Label positions of the lower and upper median of each row of ordered counts."""
    counts = np.asarray(counts)
    m = counts.sum(axis=1)
    cum = counts.cumsum(axis=1)
    lo = (cum < ((m + 1) // 2)[:, None]).sum(axis=1)
    hi = (cum < (m // 2 + 1)[:, None]).sum(axis=1)
    k = counts.shape[1]
    return np.minimum(lo, k - 1), np.minimum(hi, k - 1)


def median_bins(counts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Label positions enclosing each row's median value (Beyond Correlation Eq. 1 bins).

    The median is the mean of the lower and upper median rating. When it equals a label (as for
    [2, 2, 3] or [2, 4] -> 3) both positions are that label's; otherwise (as for [2, 3] -> 2.5)
    they are the labels just below and just above it. Rows without labels give -1.
    """
    lo, hi = median_positions(counts)
    med = (values[lo] + values[hi]) / 2.0
    above = np.searchsorted(values, med, side="left")
    exact = values[np.minimum(above, len(values) - 1)] == med
    below = np.where(exact, above, above - 1)
    empty = np.asarray(counts).sum(axis=1) == 0
    return np.where(empty, -1, below), np.where(empty, -1, above)


def soft_median(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One-hot of each row's median label; a median between two labels is split ½/½ between
    the labels just below and above it (see :func:`median_bins`)."""
    below, above = median_bins(counts, values)
    out = np.zeros(np.shape(counts))
    has = np.flatnonzero(below >= 0)
    np.add.at(out, (has, below[has]), 0.5)
    np.add.at(out, (has, above[has]), 0.5)
    return out


def nullable_floats(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Store ``columns`` as pandas' nullable ``Float64``: an undefined value is ``<NA>``
    (explained by the frame's ``reason`` column), never a NaN produced by arithmetic."""
    for col in columns:
        if col in frame.columns:
            frame[col] = pd.array(
                [
                    None if v is None or (isinstance(v, float) and math.isnan(v)) else v
                    for v in frame[col]
                ],
                dtype="Float64",
            )
    return frame


# --------------------------------------------------------------------------------------------
# Majority vote and Likert summaries
# --------------------------------------------------------------------------------------------


def majority_vote(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """Most frequent human label per item, with ties reported rather than broken.

    Returns one row per item: ``item``, ``label`` (the unique mode, or missing when tied), ``n``
    (annotations), ``top_count``, ``share`` (``top_count / n``), ``n_modes`` and ``tied``.
    The tied labels themselves are listed by :func:`modal_labels`.
    """
    lc = as_label_counts(data, labels=labels)
    c = lc.human
    top = c.max(axis=1)
    is_mode = c == top[:, None]
    n_modes = is_mode.sum(axis=1)
    code = np.where(n_modes == 1, is_mode.argmax(axis=1), -1)
    n = c.sum(axis=1)
    return pd.DataFrame(
        {
            "item": lc.items,
            "label": pd.Categorical.from_codes(code, categories=lc.labels),
            "n": n,
            "top_count": top,
            "share": top / n,
            "n_modes": n_modes,
            "tied": n_modes > 1,
        }
    )


def modal_labels(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """All most-frequent labels of each item, one row per (item, label): the set of tied modes."""
    lc = as_label_counts(data, labels=labels)
    c = lc.human
    rows, cols = np.nonzero(c == c.max(axis=1, keepdims=True))
    return pd.DataFrame(
        {
            "item": lc.items[rows],
            "label": lc.labels[cols],
            "count": c[rows, cols],
            "n_modes": np.bincount(rows, minlength=c.shape[0])[rows],
        }
    )


def likert_summary(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """Per-item mean and median of numeric (Likert) labels.

    Returns ``item``, ``n``, ``mean``, ``median`` (average of the two middle ratings when ``n`` is
    even), ``median_low``, ``median_high`` and ``std`` (population standard deviation).
    """
    lc = as_label_counts(data, labels=labels)
    vals = lc.ordinal_values()
    c = lc.human.astype(np.float64)
    n = c.sum(axis=1)
    mean = (c @ vals) / n
    var = (c @ vals**2) / n - mean**2
    lo, hi = median_positions(lc.human)
    return pd.DataFrame(
        {
            "item": lc.items,
            "n": n.astype(np.int64),
            "mean": mean,
            "median": (vals[lo] + vals[hi]) / 2.0,
            "median_low": vals[lo],
            "median_high": vals[hi],
            "std": np.sqrt(np.maximum(var, 0.0)),
        }
    )


# --------------------------------------------------------------------------------------------
# Pairwise preferences: soft voting
# --------------------------------------------------------------------------------------------


def soft_vote(data: pd.DataFrame | LabelCounts, *, threshold: float = 0.1) -> pd.DataFrame:
    """Soft-voting aggregation of pairwise preferences (ORA, Section 3.4 "Aggregation").

    Each annotation is a distribution over {A, B}: ``A`` = (1, 0), ``B`` = (0, 1) and ``tie``,
    ``both_good``, ``both_bad`` = (½, ½). Per item the distributions are averaged into
    ``p_a`` and ``p_b``; the item is a tie when ``|p_a - p_b| <= threshold`` (0.1 between model
    families, 0.2 within one), else the larger side wins. Since ``p_a - p_b = (n_A - n_B) / n``
    the comparison is made on counts, so it is exact at the threshold.

    Returns ``item``, ``n``, ``n_a``, ``n_b``, ``n_tie``, ``p_a``, ``p_b`` and ``outcome`` in
    {"A", "B", "tie"}.
    """
    if not 0 <= threshold <= 1:
        raise ValueError("threshold must be within [0, 1]")
    lc = as_label_counts(data, labels=PAIRWISE_LABELS)
    c = lc.human
    n_a, n_b = c[:, 0], c[:, 1]
    n_tie = c[:, 2:].sum(axis=1)
    n = c.sum(axis=1)
    p_a = (n_a + 0.5 * n_tie) / n
    p_b = (n_b + 0.5 * n_tie) / n
    is_tie = np.abs(n_a - n_b) <= threshold * n + 1e-9
    outcome = np.where(is_tie, "tie", np.where(n_a > n_b, "A", "B"))
    return pd.DataFrame(
        {
            "item": lc.items,
            "n": n,
            "n_a": n_a,
            "n_b": n_b,
            "n_tie": n_tie,
            "p_a": p_a,
            "p_b": p_b,
            "outcome": outcome,
        }
    )


# --------------------------------------------------------------------------------------------
# Worker-weighted labels: Dawid-Skene and MACE (crowd-kit, an optional extra)
# --------------------------------------------------------------------------------------------

CROWD_KIT_MISSING = (
    "Dawid-Skene and MACE need crowd-kit, an optional extra: pip install 'humeval[crowd]'"
)


def crowd_kit_available() -> bool:
    """Whether :mod:`crowdkit` can be imported (``pip install 'humeval[crowd]'``)."""
    import importlib.util

    return importlib.util.find_spec("crowdkit") is not None


@dataclass(frozen=True)
class WorkerModel:
    """Labels and worker reliabilities estimated by a worker-quality model.

    ``labels``: one row per item with ``item`` and ``label``. ``workers``: one row per worker
    with ``worker``, ``n_labels`` and ``reliability`` in [0, 1].
    """

    labels: pd.DataFrame
    workers: pd.DataFrame


def _crowd_frame(annotations: pd.DataFrame, rater: str) -> pd.DataFrame:
    for col in ("item", rater, "label"):
        if col not in annotations.columns:
            raise ValueError(f"annotations need a {col!r} column")
    ann = annotations.loc[annotations["label"].notna()]
    return pd.DataFrame(
        {
            "task": ann["item"].to_numpy(),
            "worker": ann[rater].astype(str).to_numpy(),
            "label": ann["label"].to_numpy(),
        }
    )


def _import_crowdkit() -> ModuleType:
    try:
        from crowdkit import aggregation
    except ImportError as exc:
        raise ImportError(CROWD_KIT_MISSING) from exc
    return aggregation


def _model(frame: pd.DataFrame, labels: pd.Series, reliability: pd.Series) -> WorkerModel:
    out = pd.DataFrame({"item": labels.index.to_numpy(), "label": labels.to_numpy()})
    n = frame.groupby("worker").size()
    workers = pd.DataFrame(
        {"worker": n.index.to_numpy(), "n_labels": n.to_numpy(), "reliability": 0.0}
    )
    workers["reliability"] = reliability.reindex(workers["worker"]).to_numpy(dtype=np.float64)
    return WorkerModel(out.sort_values("item", ignore_index=True), workers)


def dawid_skene(
    annotations: pd.DataFrame, *, rater: str = "annotator", n_iter: int = 100, tol: float = 1e-5
) -> WorkerModel:
    """Dawid & Skene (1979) labels by EM over per-worker confusion matrices
    (:func:`dawid_skene_em`), initialised from the majority vote, so deterministic: crowd-kit's
    ``DawidSkene`` in NumPy (equal to 1e-9, ``tests/unit/analysis/test_worker_models.py``).

    A worker's ``reliability`` is the prior-weighted diagonal of its confusion matrix,
    ``sum_c p_c P(label c | true c)`` (Dawid & Skene 1979, Section 2): the chance that its
    label is right. A worker labelling at random among two labels gets about 0.5.
    """
    frame = _crowd_frame(annotations, rater)
    tasks, task_names = pd.factorize(frame["task"])
    workers, worker_names = pd.factorize(frame["worker"])
    labels, label_names = pd.factorize(frame["label"], sort=True)
    probas, priors, errors = dawid_skene_em(
        tasks, workers, labels, (len(task_names), len(worker_names), len(label_names)),
        n_iter=n_iter, tol=tol,
    )  # fmt: skip
    diagonal = errors[:, np.arange(len(label_names)), np.arange(len(label_names))]
    reliability = pd.Series(diagonal @ priors, index=worker_names, dtype=np.float64)
    best = pd.Series(label_names[probas.argmax(axis=1)], index=task_names)
    return _model(frame, best, reliability)


#: crowd-kit's floor for a confusion-matrix entry and a task's label probability.
DS_EPS = 1e-10


def dawid_skene_em(
    tasks: np.ndarray,
    workers: np.ndarray,
    labels: np.ndarray,
    shape: tuple[int, int, int],
    *,
    n_iter: int = 100,
    tol: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EM of Dawid & Skene (1979) on labels given as codes (``tasks``, ``workers``,
    ``labels``, one per label; ``shape``: how many tasks, workers and labels).

    Returns the tasks' label probabilities ``(T, L)``, the priors ``(L,)`` and each worker's
    confusion matrix ``(W, L observed, L true)``, zero for a label the worker never gave.
    Starts from the majority vote; each round is an E-step (the tasks' posteriors from the
    priors and confusion matrices) then an M-step (priors, and confusion matrices floored
    at :data:`DS_EPS` and normalised over the observed label); stops after ``n_iter``
    rounds or when the evidence lower bound per label gains less than ``tol``.

    >>> p, prior, e = dawid_skene_em(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
    ...                              np.array([0, 0, 1, 1]), (2, 2, 2))
    >>> p.argmax(axis=1).tolist(), prior.round(3).tolist()
    ([0, 1], [0.5, 0.5])
    """
    n_tasks, n_workers, n_labels = shape
    cell = workers * n_labels + labels  # the (worker, observed label) of each label
    seen = np.bincount(cell, minlength=n_workers * n_labels).reshape(n_workers, n_labels) > 0

    def by(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
        return np.stack(
            [np.bincount(index, weights=values[:, c], minlength=size) for c in range(n_labels)],
            axis=1,
        )

    def m_step(probas: np.ndarray) -> np.ndarray:
        counts = by(cell, probas[tasks], n_workers * n_labels).reshape(n_workers, n_labels, -1)
        counts = np.where(seen[:, :, None], np.maximum(counts, DS_EPS), 0.0)
        normalised: np.ndarray = counts / counts.sum(axis=1, keepdims=True)
        return normalised

    votes = np.zeros((n_tasks, n_labels))
    np.add.at(votes, (tasks, labels), 1.0)
    probas = votes / votes.sum(axis=1, keepdims=True)
    priors = probas.mean(axis=0)
    errors = m_step(probas)
    loss = -np.inf
    for _ in range(n_iter):
        with np.errstate(divide="ignore"):  # a label never given: no row reads it
            log_errors = np.log2(errors)
        log_like = np.log2(np.maximum(priors, DS_EPS)) + by(
            tasks, log_errors[workers, labels], n_tasks
        )
        scaled = np.exp2(log_like - log_like.max(axis=1, keepdims=True))
        probas = scaled / scaled.sum(axis=1, keepdims=True)
        priors = probas.mean(axis=0)
        errors = m_step(probas)
        joint = probas[tasks] * (
            np.log(errors[workers, labels]) + np.log(np.maximum(priors, DS_EPS))
        )
        probas = np.maximum(probas, DS_EPS)
        new_loss = (joint.sum() - (np.log(probas) * probas).sum()) / len(tasks)
        if new_loss - loss < tol:
            break
        loss = new_loss
    return probas, priors, errors


def mace(
    annotations: pd.DataFrame,
    *,
    rater: str = "annotator",
    seed: int = 0,
    n_restarts: int = 10,
    n_iter: int = 50,
) -> WorkerModel:
    """MACE labels (Hovy et al. 2013, "Learning Whom to Trust with MACE", Section 2) via
    crowd-kit's ``MACE`` (variational Bayes, ``n_restarts`` seeded restarts of ``n_iter``
    iterations each).

    A worker's ``reliability`` is its competence, the posterior probability that it is not
    spamming (``1 - theta_j`` in the paper's notation): the share of its labels that copy the
    true label rather than a draw from its own spamming distribution.
    """
    agg = _import_crowdkit()
    frame = _crowd_frame(annotations, rater)
    with warnings.catch_warnings():  # crowd-kit's pandas deprecations, not ours
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        model = _fast_mace(agg.MACE)(n_restarts=n_restarts, n_iter=n_iter, random_state=seed)
        model.fit(frame)
    _, worker_names = pd.factorize(frame["worker"])  # crowd-kit's worker order
    competence = pd.Series(model.spamming_[:, 1], index=pd.Index(worker_names, name="worker"))
    return _model(frame, model.labels_, competence)


def _fast_mace(base: type) -> type:
    """crowd-kit's ``MACE`` with its E-step in NumPy instead of one pandas ``groupby`` per
    label and iteration (about 500 E-steps for 10 restarts): the same arithmetic on the same
    arrays, in the same layout — the gold-label marginals by task in ``factorize`` order,
    the strategy counts by worker and label in *sorted* order (crowd-kit's ``unstack``), the
    knowing counts by worker in ``factorize`` order — so its labels and competences equal
    crowd-kit's (``tests/unit/analysis/test_worker_models.py``)."""

    class FastMACE(base):  # type: ignore[misc]
        def _e_step(
            self,
            annotation: pd.DataFrame,
            task_names: pd.Index,
            worker_names: pd.Index,
            label_names: pd.Index,
            tasks: np.ndarray,
            workers: np.ndarray,
            labels: np.ndarray,
        ) -> tuple[float, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
            n_tasks, n_labels, n_workers = len(task_names), len(label_names), len(worker_names)
            s0 = self.spamming_[workers, 0]
            s1 = self.spamming_[workers, 1]
            copy = s0 * self.thetas_[workers, labels]  # P(label | worker strategy), per row
            # per label: the row's likelihood if that label is the gold one
            each = copy[:, None] + s1[:, None] * (labels[:, None] == np.arange(n_labels))
            gold = np.ones((n_tasks, n_labels))
            np.multiply.at(gold, tasks, each)
            gold /= n_labels
            instance = gold.sum(axis=1)
            log_ml = float(np.log(instance + 1e-8).sum())
            strategy = (gold[tasks] / each).sum(axis=1) * copy / instance[tasks]
            knowing1 = gold[tasks, labels] * s1 / (copy + s1) / instance[tasks]
            w_order = np.argsort(np.asarray(pd.Index(worker_names).argsort()))  # code -> rank
            l_order = np.argsort(np.asarray(pd.Index(label_names).argsort()))
            strat = np.zeros((n_workers, n_labels))
            np.add.at(strat, (w_order[workers], l_order[labels]), strategy)
            know = np.zeros((n_workers, 2))
            np.add.at(know[:, 0], workers, strategy)
            np.add.at(know[:, 1], workers, knowing1)
            gold_frame = pd.DataFrame(gold, index=task_names, columns=label_names)
            strategy_frame = pd.DataFrame(strat)
            knowing_frame = pd.DataFrame(
                know,
                index=worker_names,
                columns=["knowing_expected_count_0", "knowing_expected_count_1"],
            )
            return log_ml, gold_frame, strategy_frame, knowing_frame

    return FastMACE
