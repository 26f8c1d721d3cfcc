"""Pooling across pairs whose labels share inputs: rankings, Likert and error-span scores.

A ranking of k outputs gives k(k−1)/2 pair preferences on one input from one annotator, and a
Likert (or error-span) rating of output *(i, a)* enters every pair with *a* on input *i*. The
labels of two pairs that share a system on the same input are correlated (for three outputs
with i.i.d. continuous scores, ``sgn(a − b)`` and ``sgn(a − c)`` have correlation 1/3), so the
pairs' own estimates of their pool effects are correlated too. The pooling model of
:func:`protocol.predictive.pool_across_pairs` treats them as independent and would count the
same input several times (with complete rankings of 11 systems, the indirect evidence about a
pair is worth about a quarter of what independence assumes). Here the pooling is the same
Gaussian model, ``δ_ab = q_a − q_b + e_ab``, with a full error covariance:

- :func:`shared_input_correlation`: the correlation of two pairs' prediction errors, from
  which inputs each has seen and which are still to come, times the label correlation ``ρ``
  of two pairs that share a system (sign by the side of the shared system);
- :func:`label_correlation`: ``ρ`` estimated from the inputs both pairs have seen;
- :func:`pool_across_pairs_correlated`: the pooled posterior with that covariance (dense
  Gaussian algebra; equals :func:`~protocol.predictive.pool_across_pairs` when the covariance
  is diagonal).

:func:`correlation_from_rows` builds the matrix from per-input pair preference rows (the live
study's labels). Pure: numpy, pandas and scipy. ``docs/protocol.md`` ("Rankings and scores
in the loop").
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cho_factor, cho_solve

from .predictive import QUALITY_PRIOR_SD, TAU_GRID, PooledEffects

__all__ = [
    "correlation_from_rows",
    "label_correlation",
    "orientation",
    "pool_across_pairs_correlated",
    "shared_input_correlation",
]

#: Prior value of ``ρ`` (i.i.d. continuous scores, no ties) and its weight in shared labels.
RHO_PRIOR, RHO_PRIOR_WEIGHT = 1.0 / 3.0, 20.0


def orientation(pair_systems: ArrayLike) -> NDArray[np.float64]:
    """``(P, P)``: +1 when two pairs share a system on the same side (both *a* or both *b*),
    −1 when on opposite sides, 0 when they share none (and 1 on the diagonal)."""
    ps = np.asarray(pair_systems, dtype=np.int64).reshape(-1, 2)
    a, b = ps[:, 0], ps[:, 1]
    same = (a[:, None] == a[None, :]).astype(float) + (b[:, None] == b[None, :])
    cross = (a[:, None] == b[None, :]).astype(float) + (b[:, None] == a[None, :])
    out: NDArray[np.float64] = np.sign(same - cross)
    np.fill_diagonal(out, 1.0)
    return out


def label_correlation(labels: ArrayLike, seen: ArrayLike, pair_systems: ArrayLike) -> float:
    """The correlation ``ρ`` of two pairs' labels on one input when they share a system,
    oriented by :func:`orientation` and pooled over every such couple of pairs and every input
    both have seen; shrunk towards 1/3 with the weight of 20 shared labels, clipped to
    ``[0, 0.5]`` (the range in which the implied correlation matrix stays valid).

    ``labels``: ``(P, U)`` in ``{+1, 0, −1}``; ``seen``: ``(P, U)`` booleans."""
    lab = np.asarray(labels, dtype=float)
    mask = np.asarray(seen, dtype=bool)
    n = mask.sum(axis=1)
    mean = np.where(n > 0, (lab * mask).sum(axis=1) / np.maximum(n, 1), 0.0)
    centred = np.where(mask, lab - mean[:, None], 0.0)
    var = np.where(n > 1, (centred**2).sum(axis=1) / np.maximum(n, 1), 0.0)
    orient = orientation(pair_systems)
    np.fill_diagonal(orient, 0.0)
    shared = mask.astype(float) @ mask.T.astype(float)
    num = float((orient * (centred @ centred.T)).sum())
    den = float((np.abs(orient) * shared * np.sqrt(np.outer(var, var))).sum())
    rho = (num + RHO_PRIOR * RHO_PRIOR_WEIGHT) / (den + RHO_PRIOR_WEIGHT)
    return float(np.clip(rho, 0.0, 0.5))


def shared_input_correlation(
    seen: ArrayLike, pool: ArrayLike, pair_systems: ArrayLike, rho: float
) -> NDArray[np.float64]:
    """Correlation matrix ``(P, P)`` of the pairs' errors in predicting their pool effects.

    Pair *j* has seen the inputs ``S_j`` of its pool and predicts ``δ_j`` (the mean label on
    its pool) with ``|F_j|`` inputs ``F_j`` still unseen: its error is ``(Σ_{F_j} ε − |F_j|
    ε̄_{S_j}) / N_j``. Two pairs' labels on the same input have correlation ``±ρ`` when they
    share a system (:func:`orientation`), none otherwise, so the errors' correlation is ``±ρ``
    times ``[|F_j∩F_k| − f_k |F_j∩S_k| − f_j |S_j∩F_k| + f_j f_k |S_j∩S_k|]`` normalised, with
    ``f = |F| / |S|``. A pair that has seen nothing or has nothing left gets no correlation.
    ``seen``, ``pool``: ``(P, U)`` booleans (``seen`` within ``pool``)."""
    s = np.asarray(seen, dtype=bool)
    f = np.asarray(pool, dtype=bool) & ~s
    sf, ff = s.astype(float), f.astype(float)
    n_s, n_f = sf.sum(axis=1), ff.sum(axis=1)
    ratio = np.where(n_s > 0, n_f / np.maximum(n_s, 1.0), 0.0)
    fs = ff @ sf.T  # |F_j ∩ S_k|
    bracket = ff @ ff.T - fs * ratio[None, :] - fs.T * ratio[:, None]
    bracket += np.outer(ratio, ratio) * (sf @ sf.T)
    diag = np.diag(bracket).copy()
    ok = (diag > 0) & (n_s > 0)
    scale = np.where(ok, 1.0 / np.sqrt(np.where(ok, diag, 1.0)), 0.0)
    overlap = bracket * np.outer(scale, scale)
    corr: NDArray[np.float64] = rho * orientation(pair_systems) * overlap
    np.fill_diagonal(corr, 1.0)
    return corr


def pool_across_pairs_correlated(
    mean: ArrayLike,
    cov: ArrayLike,
    pair_systems: ArrayLike,
    *,
    n_systems: int | None = None,
    tau_grid: NDArray[np.float64] = TAU_GRID,
    prior_sd: float = QUALITY_PRIOR_SD,
) -> PooledEffects:
    """The pooled posterior of :func:`protocol.predictive.pool_across_pairs` when the pairs'
    own estimates ``m ~ N(δ, V)`` have a full covariance ``V`` (``cov``, ``(P, P)``).

    ``δ = X q + e`` with ``q ~ N(0, prior_sd² I)``, ``e ~ N(0, τ² I)``: per ``τ`` on the grid,
    ``Σ = prior_sd² X Xᵀ + τ² I``, ``δ | m ~ N(Σ (Σ + V)⁻¹ m, Σ − Σ (Σ + V)⁻¹ Σ)`` and the weight
    of ``τ`` is the marginal likelihood ``N(m; 0, Σ + V)`` times the uniform prior on ``τ``."""
    m = np.asarray(mean, dtype=float)
    v = np.asarray(cov, dtype=float).reshape(m.size, m.size)
    v = 0.5 * (v + v.T) + np.eye(m.size) * 1e-12
    ps = np.asarray(pair_systems, dtype=np.int64).reshape(-1, 2)
    n_sys = int(ps.max()) + 1 if n_systems is None else int(n_systems)
    x = np.zeros((m.size, n_sys))
    x[np.arange(m.size), ps[:, 0]] = 1.0
    x[np.arange(m.size), ps[:, 1]] = -1.0
    base = prior_sd**2 * (x @ x.T)
    grid = np.asarray(tau_grid, dtype=float)
    edges = np.gradient(grid)
    log_prior = np.log(edges / edges.sum())
    loglik = np.empty(grid.size)
    out_mean = np.empty((grid.size, m.size))
    out_var = np.empty((grid.size, m.size))
    eye = np.eye(m.size)
    for g, tau in enumerate(grid):
        sigma = base + tau**2 * eye
        factor = cho_factor(sigma + v, lower=True)
        alpha = cho_solve(factor, m)
        loglik[g] = -np.log(np.diag(factor[0])).sum() - 0.5 * m @ alpha
        out_mean[g] = sigma @ alpha
        out_var[g] = np.diag(sigma) - (sigma * cho_solve(factor, sigma)).sum(axis=0)
    logpost = loglik + log_prior
    weights = np.exp(logpost - logpost.max())
    return PooledEffects(weights / weights.sum(), out_mean, np.maximum(out_var, 1e-15), grid)


def correlation_from_rows(
    rows: pd.DataFrame,
    pairs: Sequence[tuple[Hashable, Hashable]],
    pools: Sequence[Collection[Hashable]],
) -> NDArray[np.float64]:
    """The correlation matrix for :func:`protocol.rounds.decide_round` from per-input pair
    preference rows (the ``kinds`` contract's ``label_rows``: columns ``input, system,
    other_system, preference`` with 1 / 0.5 / 0 for ``system`` over ``other_system``).

    ``pairs``: the pairs in the order ``decide_round`` gets them (open, then closed), as
    ``(system_a, system_b)``; ``pools``: every pair's possible inputs. A pair's label on an
    input is the sign of its mean preference minus ½ over the rows of that input (several
    annotators of one input give one label here)."""
    systems = sorted({s for pair in pairs for s in pair}, key=str)
    sid = {s: i for i, s in enumerate(systems)}
    pair_systems = np.array([[sid[a], sid[b]] for a, b in pairs], dtype=np.int64).reshape(-1, 2)
    distinct = {id(members): members for members in pools}.values()
    inputs = sorted(set().union(*distinct) | set(rows["input"]), key=str)
    uid = {i: u for u, i in enumerate(inputs)}
    seen = np.zeros((len(pairs), len(inputs)), dtype=bool)
    labels = np.zeros(seen.shape)
    pool = np.zeros(seen.shape, dtype=bool)
    columns: dict[int, list[int]] = {}  # a pool several pairs share is indexed once
    for j, members in enumerate(pools):
        if id(members) not in columns:
            columns[id(members)] = [uid[i] for i in members]
        pool[j, columns[id(members)]] = True
    pref = rows["preference"].astype(float)
    flip = rows["system"].map(str) > rows["other_system"].map(str)
    frame = pd.DataFrame({
        "lo": np.where(flip, rows["other_system"], rows["system"]),
        "hi": np.where(flip, rows["system"], rows["other_system"]),
        "input": rows["input"], "pref": np.where(flip, 1.0 - pref, pref),
    })  # fmt: skip
    means = frame.groupby(["lo", "hi", "input"])["pref"].mean().sort_index()
    for j, (a, b) in enumerate(pairs):
        lo, hi, sign = (a, b, 1.0) if str(a) <= str(b) else (b, a, -1.0)
        try:
            block = means.loc[(lo, hi)]
        except KeyError:
            continue
        cols = [uid[i] for i in block.index]
        seen[j, cols] = True
        labels[j, cols] = sign * np.sign(block.to_numpy() - 0.5)
    pool |= seen
    rho = label_correlation(labels, seen, pair_systems)
    return shared_input_correlation(seen, pool, pair_systems, rho)
