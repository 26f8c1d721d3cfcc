"""One round of the budgeted protocol on a set of open system pairs (pure; no Django).

Algorithm 2 of Deriu et al. (2023) alternates *allocate* and *decide* (Algorithm 1 on every
open pair, retire the decided). This module is that step, shared by the live protocol
(``protocol.services``) and the replay (``protocol.simulation``): with ``settings.paper`` the
fixed thresholds ``θ > 1 − γ/2`` / ``θ < γ/2`` and ``batch`` inputs per open pair; otherwise
a pair is decided when Algorithm 1 is significant now and the same outcome is predicted on
all its inputs (:mod:`protocol.predictive`) with at least the calibrated level, retired as
futile or practically equivalent (ROPE), and each round's batch goes where the outcome is
least settled. Counts are annotations: a pair has ``used`` of a possible ``pool``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from .correlation import pool_across_pairs_correlated
from .decision import PosteriorDraws, decide_with_thresholds, rope_probability, sample_posterior
from .predictive import (
    calibrate_decision_level,
    first_early_look,
    no_pooling,
    outcome_probabilities,
    pool_across_pairs,
    pool_effect,
)
from .settings import ProtocolSettings

OPEN, DECIDED, EQUIVALENT, FUTILE = "open", "decided", "equivalent", "futile"
#: Closed undecided because the pair's inputs, or the study's budget, are used up.
EXHAUSTED, BUDGET = "exhausted", "budget"


@dataclass(frozen=True)
class RoundDecision:
    """Per open pair: the decision (+1 a wins, −1 b wins, 0 none), why it closes (or
    ``"open"``), ``θ``, the posterior mean of ``p``, the predicted outcome on all data
    (``p_a``, ``p_b``, ``p_u``: *a* wins, *b* wins, undecided), the pair's own evidence about
    its effect on the whole pool (``effect_mean``, ``effect_var``; kept for pooling once the
    pair is closed) and the allocation weight of the next round."""

    decision: NDArray[np.int8]
    outcome: NDArray[np.str_]
    theta: NDArray[np.float64]
    mean_p: NDArray[np.float64]
    weight: NDArray[np.float64]
    p_a: NDArray[np.float64]
    p_b: NDArray[np.float64]
    p_u: NDArray[np.float64]
    effect_mean: NDArray[np.float64]
    effect_var: NDArray[np.float64]


@dataclass(frozen=True)
class ClosedPairs:
    """What closed pairs still tell the pooling model: their own evidence about their pool
    effect and their two systems (integer ids shared with the open pairs)."""

    effect_mean: NDArray[np.float64]
    effect_var: NDArray[np.float64]
    systems: NDArray[np.int64]

    @classmethod
    def empty(cls) -> ClosedPairs:
        return cls(np.zeros(0), np.zeros(0), np.zeros((0, 2), dtype=np.int64))


@lru_cache(maxsize=64)
def calibrated_level(
    n_max: int,
    batch: int,
    gamma: float,
    futility: float,
    min_annotations: int,
    draw_rate: float,
    n_sim: int,
) -> float:
    """The decision level for looks every ``batch`` annotations up to ``n_max``."""
    return calibrate_decision_level(
        n_max,
        batch,
        gamma,
        futility=futility,
        min_annotations=min_annotations,
        draw_rate=draw_rate,
        n_sim=n_sim,
        seed=0,
    )


def null_draw_rate(human: NDArray, settings: ProtocolSettings) -> float:
    """The draw rate of the null used for calibration: the setting, or the share of draws
    among the human labels seen so far, rounded to 0.05 (no look at any decision)."""
    if settings.null_draw_rate is not None:
        rate = settings.null_draw_rate
    else:
        total = float(np.asarray(human).sum())
        rate = round(float(np.asarray(human)[:, 1].sum()) / total * 20) / 20 if total else 0.0
    return min(max(rate, 0.0), 0.95)


def decision_level(settings: ProtocolSettings, n_max: int, batch: int, human: NDArray) -> float:
    """``settings.decision_level``, or the level calibrated for this pool size and batch."""
    if settings.decision_level is not None:
        return float(settings.decision_level)
    return calibrated_level(
        int(n_max),
        int(batch),
        settings.gamma,
        settings.futility,
        settings.min_annotations,
        null_draw_rate(human, settings),
        settings.calibration_sims,
    )


def posterior(
    human: NDArray,
    confusion: NDArray | None,
    metric: NDArray | None,
    settings: ProtocolSettings,
    rng: np.random.Generator,
) -> PosteriorDraws:
    """Algorithm 1's posterior of ``p`` for every open pair at once."""
    return sample_posterior(human, confusion, metric, seed=rng, **settings.sampler)


def decide_round(
    post: PosteriorDraws,
    used: NDArray[np.int64],
    pool: NDArray[np.int64],
    budget_left: int,
    settings: ProtocolSettings,
    *,
    level: float | None,
    systems: NDArray[np.int64] | None = None,
    closed: ClosedPairs | None = None,
    redundancy: int = 1,
    correlation: NDArray[np.float64] | None = None,
) -> RoundDecision:
    """Decide every open pair after a round (Algorithm 2, inner loop) and say which close.

    ``used``/``pool``: annotations collected and possible per open pair; ``budget_left``:
    annotations the study may still collect; ``level``: the predictive level a decision needs
    (:func:`decision_level`; ignored with ``settings.paper``); ``systems``: the two system ids
    of every open pair, ``closed``: the closed pairs' evidence — with both, the prediction
    pools evidence across pairs (``settings.pooling``); ``redundancy``: annotations per input
    (metric-only inputs count that many labels to come); ``correlation``: the correlation of
    the pairs' own effect estimates, open pairs then closed ones, when their labels share
    inputs (rankings, scores: :mod:`protocol.correlation`); None: independent.
    """
    used = np.asarray(used, dtype=np.int64)
    pool = np.asarray(pool, dtype=np.int64)
    theta = post.theta()
    gamma = settings.gamma
    k = theta.shape[0]
    outcome = np.full(k, OPEN, dtype=object)
    now = decide_with_thresholds(theta, 1.0 - gamma / 2.0, gamma / 2.0)
    eff_mean, eff_var, nondraw = pool_effect(post, pool, redundancy=redundancy)
    zeros = np.zeros(k)
    if settings.paper:
        outcome[now != 0] = DECIDED
        for done, why in ((used >= pool, EXHAUSTED), (np.full(k, budget_left <= 0), BUDGET)):
            outcome[(outcome == OPEN) & done] = why
        return RoundDecision(
            now,
            outcome.astype(str),
            theta,
            post.mean_p(),
            np.ones(k),
            zeros,
            zeros,
            zeros,
            eff_mean,
            eff_var,
        )
    # what each pair can still get: the rest of its pool, or twice its even share of the
    # budget left (shares of pairs that close come free; on WMT21 with budgets of 0.25-0.45
    # of the pool, 2 beats 1 and 4)
    remaining = np.minimum(pool - used, 2.0 * max(budget_left, 0) / k).astype(float)
    effects = _effects(eff_mean, eff_var, systems, closed, settings, correlation)
    p_a, p_b, p_u = outcome_probabilities(
        effects, post.human_counts, pool, remaining, nondraw, gamma
    )
    last = (used >= pool) | (budget_left <= 0)
    early = ~last & (used >= first_early_look(pool, settings.min_annotations))
    decision = np.where(last, now, 0).astype(np.int8)
    decision[early & (now > 0) & (p_a >= level)] = 1
    decision[early & (now < 0) & (p_b >= level)] = -1
    outcome[decision != 0] = DECIDED
    undecided = decision == 0
    if settings.rope_delta > 0 and undecided.any():
        equivalent = undecided & (rope_probability(post, settings.rope_delta) > 1.0 - gamma)
        outcome[equivalent] = EQUIVALENT
        undecided &= ~equivalent
    for done, why in ((used >= pool, EXHAUSTED), (np.full(k, budget_left <= 0), BUDGET)):
        outcome[undecided & done] = why
        undecided &= ~done
    if settings.futility > 0:
        futile = undecided & early & (p_u > 1.0 - settings.futility)
        outcome[futile] = FUTILE
    weight = 1.0 - np.maximum(np.maximum(p_a, p_b), p_u)
    return RoundDecision(
        decision,
        outcome.astype(str),
        theta,
        post.mean_p(),
        weight,
        p_a,
        p_b,
        p_u,
        eff_mean,
        eff_var,
    )


def _effects(eff_mean, eff_var, systems, closed, settings: ProtocolSettings, correlation=None):
    """The pooled (or, without system ids or with ``pooling`` off, the pair's own) posterior
    of every open pair's pool effect; with ``correlation``, errors correlated across pairs."""
    if not settings.pooling or systems is None:
        return no_pooling(eff_mean, eff_var)
    closed = closed if closed is not None else ClosedPairs.empty()
    if correlation is not None:
        var = np.concatenate([eff_var, closed.effect_var])
        sd = np.sqrt(np.maximum(var, 1e-15))
        pooled = pool_across_pairs_correlated(
            np.concatenate([eff_mean, closed.effect_mean]),
            np.asarray(correlation, dtype=float) * np.outer(sd, sd),
            np.concatenate([np.asarray(systems, dtype=np.int64).reshape(-1, 2), closed.systems]),
        )
        return pooled.first(eff_mean.shape[0])
    pooled = pool_across_pairs(
        np.concatenate([eff_mean, closed.effect_mean]),
        np.concatenate([eff_var, closed.effect_var]),
        np.concatenate([np.asarray(systems, dtype=np.int64).reshape(-1, 2), closed.systems]),
    )
    return pooled.first(eff_mean.shape[0])


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
    settings: ProtocolSettings,
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
