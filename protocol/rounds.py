"""One round of the budgeted protocol on a set of open system pairs (pure; no Django).

Algorithm 2 of Deriu et al. (2023) alternates *allocate* (give open pairs more human
annotations) and *decide* (Algorithm 1 on every open pair, retire the decided). This module
is that step, shared by the live protocol (``protocol.services``) and the replay
(``protocol.simulation``) so both run the same rules:

* ``settings.paper``: the paper's fixed thresholds ``θ > 1 − γ/2`` / ``θ < γ/2`` at every
  look and ``batch`` new annotations for every open pair;
* otherwise the corrections beyond the paper (its Limitations section): a group-sequential
  boundary calibrated by simulation under the null so that repeated looks spend ``γ`` in
  all (:func:`protocol.decision.calibrate_boundary`), retirement of practically equivalent
  pairs (ROPE) and of pairs that cannot be decided within their inputs and the budget
  (futility), and allocation in proportion to each pair's predictive chance of a decision.

All counts are in annotations: a pair that has ``used`` annotations of a possible ``pool``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from .decision import (
    PosteriorDraws,
    boundary_thresholds,
    calibrate_boundary,
    decide_with_thresholds,
    predictive_decision_probability,
    rope_probability,
    sample_posterior,
)

OPEN, DECIDED, EQUIVALENT, FUTILE = "open", "decided", "equivalent", "futile"
#: Closed undecided because the pair's inputs, or the study's budget, are used up.
EXHAUSTED, BUDGET = "exhausted", "budget"


@dataclass(frozen=True)
class RoundDecision:
    """Per open pair: the decision (+1 a wins, −1 b wins, 0 none), why it closes (or
    ``"open"``), ``θ``, the posterior mean of ``p`` and the predictive chance of a decision
    (the allocation weight of the next round)."""

    decision: NDArray[np.int8]
    outcome: NDArray[np.str_]
    theta: NDArray[np.float64]
    mean_p: NDArray[np.float64]
    weight: NDArray[np.float64]


@lru_cache(maxsize=64)
def calibrated_constant(
    n_max: int,
    batch: int,
    gamma: float,
    rho: float,
    final_gamma: float | None,
    futility: float,
    futility_min_fraction: float,
    draw_rate: float,
    n_sim: int,
) -> float:
    """The boundary constant for looks every ``batch`` annotations up to ``n_max``."""
    looks = np.unique(np.minimum(np.arange(batch, n_max + batch, batch), n_max))
    return calibrate_boundary(
        looks,
        n_max,
        gamma,
        rho=rho,
        final_gamma=final_gamma,
        futility=futility,
        futility_min_fraction=futility_min_fraction,
        draw_rate=draw_rate,
        n_sim=n_sim,
        seed=0,
    )


def null_draw_rate(human: NDArray, settings) -> float:
    """The draw rate of the null used for calibration: the setting, or the share of draws
    among the human labels seen so far, rounded to 0.05 (no look at any decision)."""
    if settings.null_draw_rate is not None:
        rate = settings.null_draw_rate
    else:
        total = float(np.asarray(human).sum())
        rate = round(float(np.asarray(human)[:, 1].sum()) / total * 20) / 20 if total else 0.0
    return min(max(rate, 0.0), 0.95)


def boundary_constant(settings, n_max: int, batch: int, human: NDArray) -> float:
    final_gamma = _final_gamma(settings)
    return calibrated_constant(
        int(n_max),
        int(batch),
        settings.gamma,
        settings.boundary_rho,
        final_gamma,
        settings.futility if settings.binding_futility else 0.0,
        settings.futility_min_fraction,
        null_draw_rate(human, settings),
        settings.calibration_sims,
    )


def _final_gamma(settings) -> float | None:
    share = settings.final_gamma_share
    return None if share is None else share * settings.gamma


def thresholds(
    frac: NDArray[np.float64], last: NDArray[np.bool_], constant: float, settings
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-pair ``(upper, lower)`` thresholds on θ: the calibrated boundary at interim
    looks, the fixed final level at a pair's last look."""
    upper, lower = boundary_thresholds(frac, constant, settings.boundary_rho)
    final_gamma = _final_gamma(settings)
    if final_gamma is not None:
        upper = np.where(last, 1.0 - final_gamma / 2.0, upper)
        lower = np.where(last, final_gamma / 2.0, lower)
    return upper, lower


def posterior(
    human: NDArray,
    confusion: NDArray | None,
    metric: NDArray | None,
    settings,
    rng: np.random.Generator,
) -> PosteriorDraws:
    """Algorithm 1's posterior of ``p`` for every open pair at once."""
    return sample_posterior(human, confusion, metric, seed=rng, **settings.sampler)


def decide_round(
    post: PosteriorDraws,
    used: NDArray[np.int64],
    pool: NDArray[np.int64],
    budget_left: int,
    settings,
    *,
    constant: float | None,
    prior_var: float | None = None,
) -> RoundDecision:
    """Decide every open pair after a round (Algorithm 2, inner loop) and say which close.

    ``used``/``pool``: annotations collected and possible per pair; ``budget_left``:
    annotations the study may still collect; ``constant``: the calibrated boundary
    constant (ignored with ``settings.paper``).
    """
    used = np.asarray(used, dtype=np.int64)
    pool = np.asarray(pool, dtype=np.int64)
    theta = post.theta()
    gamma = settings.gamma
    k = theta.shape[0]
    outcome = np.full(k, OPEN, dtype=object)
    weight = np.ones(k)
    if settings.paper:
        decision = decide_with_thresholds(theta, 1.0 - gamma / 2.0, gamma / 2.0)
    else:
        frac = used / np.maximum(pool, 1)
        last = (used >= pool) | (budget_left <= 0)
        upper, lower = thresholds(frac, last, constant, settings)
        decision = decide_with_thresholds(theta, upper, lower)
    outcome[decision != 0] = DECIDED
    undecided = decision == 0
    if not settings.paper and settings.rope_delta > 0 and undecided.any():
        equivalent = undecided & (rope_probability(post, settings.rope_delta) > 1.0 - gamma)
        outcome[equivalent] = EQUIVALENT
        undecided &= ~equivalent
    for done, why in ((used >= pool, EXHAUSTED), (np.full(k, budget_left <= 0), BUDGET)):
        outcome[undecided & done] = why
        undecided &= ~done
    if not settings.paper and undecided.any():
        if settings.futility > 0 or settings.allocation == "adaptive":
            remaining = np.minimum(pool - used, max(budget_left, 0))
            up_f, lo_f = thresholds(
                (used + remaining) / np.maximum(pool, 1),
                np.ones(k, dtype=bool),
                constant,
                settings,
            )
            weight = predictive_decision_probability(
                post, remaining, up_f, lo_f, prior_var=prior_var
            )
        if settings.futility > 0:
            futile = (
                undecided
                & (weight < settings.futility)
                & (used / np.maximum(pool, 1) >= settings.futility_min_fraction)
            )
            outcome[futile] = FUTILE
    return RoundDecision(decision, outcome.astype(str), theta, post.mean_p(), weight)


def allocate(total: int, weights: NDArray[np.float64], cap: NDArray[np.int64]) -> NDArray[np.int64]:
    """Split ``total`` in proportion to ``weights`` (largest remainder), each at most
    ``cap``; capacity left by capped pairs goes on to the others."""
    alloc = np.zeros(weights.size, dtype=np.int64)
    remaining = int(min(total, cap.sum()))
    w = np.where(cap > 0, np.maximum(weights, 0.0), 0.0)
    while remaining > 0 and np.any((cap - alloc > 0) & (w > 0)):
        free = (cap - alloc > 0) & (w > 0)
        share = remaining * w * free / (w * free).sum()
        add = np.minimum(np.floor(share).astype(np.int64), cap - alloc)
        if add.sum() == 0:
            order = np.argsort(-(share - np.floor(share)) - free * 1e-9)
            for j in order[:remaining]:
                if free[j]:
                    add[j] = 1
        add = np.minimum(add, cap - alloc)
        alloc += add
        remaining -= int(add.sum())
        if add.sum() == 0:
            break
    return alloc


def round_allocation(
    weights: NDArray[np.float64],
    capacity: NDArray[np.int64],
    budget_left: int,
    settings,
    *,
    first: bool,
) -> NDArray[np.int64]:
    """Annotations to give each open pair in the next round, within ``capacity`` (what its
    inputs still allow) and the budget: ``batch`` each in pair order while the budget lasts
    (the paper, the first round, ``allocation="uniform"``), else the same round total split
    by ``weights`` with at most ``max_chunk × batch`` per pair."""
    cap = np.minimum(np.asarray(capacity, dtype=np.int64), max(budget_left, 0))
    if settings.paper or settings.allocation == "uniform" or first:
        want = np.minimum(settings.batch, cap)
        csum = np.cumsum(want)
        return np.where(csum <= budget_left, want, np.maximum(0, budget_left - (csum - want)))
    cap = np.minimum(cap, settings.max_chunk * settings.batch)
    round_total = min(settings.batch * weights.size, max(budget_left, 0))
    give = allocate(round_total, weights, cap)
    if give.sum() == 0:
        give = allocate(round_total, np.ones(weights.size), cap)
    return give
