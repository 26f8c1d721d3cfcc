"""One round of the budgeted protocol on a set of open system pairs (pure; no Django).

Algorithm 2 of Deriu et al. (2023) alternates *allocate* and *decide* (Algorithm 1 on every
open pair, retire the decided). This module is that step, shared by the live protocol
(``protocol.services``) and the replay (``protocol.replay.simulation``): with ``settings.paper`` the
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
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .correlation import pool_across_pairs_correlated
from .decision import PosteriorDraws, decide_with_thresholds, rope_probability, sample_posterior
from .implied import implied_orders
from .predictive import (
    PooledEffects,
    blended_level,
    calibrate_decision_level,
    calibrate_futility,
    calibrate_study_level,
    first_early_look,
    no_pooling,
    outcome_probabilities,
    pool_across_pairs,
    pool_effect,
    pooling_information,
)
from .settings import ProtocolSettings

OPEN, DECIDED, EQUIVALENT, FUTILE = "open", "decided", "equivalent", "futile"
#: Closed undecided because the pair's inputs, or the study's budget, are used up.
EXHAUSTED, BUDGET = "exhausted", "budget"
#: Decided because decided pairs imply its order (:mod:`protocol.implied`).
IMPLIED = "implied"


@dataclass(frozen=True)
class RoundDecision:
    """Per open pair: the decision (+1 a wins, −1 b wins, 0 none), why it closes (or
    ``"open"``), ``θ``, the posterior mean of ``p``, the predicted outcome on all data
    (``p_a``, ``p_b``, ``p_u``: *a* wins, *b* wins, undecided), the pair's own evidence about
    its effect on the whole pool (``effect_mean``, ``effect_var``; kept for pooling once the
    pair is closed) and the allocation weight of the next round; ``chains``: per pair decided
    by implication (outcome ``"implied"``), the system ids from winner to loser of the
    decided pairs that imply it (empty for the others)."""

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
    chains: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class ClosedPairs:
    """What closed pairs still tell the pooling model: their own evidence about their pool
    effect and their two systems (integer ids shared with the open pairs); and what was
    decided (+1 first system wins, −1 second, 0 not decided; None: nothing), from which
    :func:`decide_round` closes open pairs by implication."""

    effect_mean: NDArray[np.float64]
    effect_var: NDArray[np.float64]
    systems: NDArray[np.int64]
    decision: NDArray[np.int8] | None = None

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
    spending: float = 0.0,
    own_significance: bool = True,
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
        spending=spending,
        own_significance=own_significance,
    )


def null_draw_rate(human: ArrayLike, settings: ProtocolSettings) -> float:
    """The draw rate of the null used for calibration: the setting, or the share of draws
    among the human labels seen so far, rounded to 0.05 (no look at any decision)."""
    if settings.null_draw_rate is not None:
        rate = settings.null_draw_rate
    else:
        total = float(np.asarray(human).sum())
        rate = round(float(np.asarray(human)[:, 1].sum()) / total * 20) / 20 if total else 0.0
    return min(max(rate, 0.0), 0.95)


@lru_cache(maxsize=64)
def calibrated_futility(
    n_max: int, batch: int, gamma: float, error: float, ceiling: float, min_annotations: int,
    draw_rate: float,
) -> float:  # fmt: skip
    """The futility threshold for looks every ``batch`` annotations up to ``n_max``."""
    return calibrate_futility(
        n_max,
        batch,
        gamma,
        error=error,
        ceiling=ceiling,
        min_annotations=min_annotations,
        draw_rate=draw_rate,
        seed=0,
    )


def futility_threshold(
    settings: ProtocolSettings, n_max: int, batch: int, human: ArrayLike
) -> float:
    """``settings.futility``, or (with ``settings.futility_error``) the threshold calibrated
    for this pool size and batch, at most ``settings.futility``."""
    if settings.futility_error is None or settings.futility <= 0:
        return float(settings.futility)
    return calibrated_futility(
        int(n_max),
        int(batch),
        settings.gamma,
        float(settings.futility_error),
        float(settings.futility),
        settings.min_annotations,
        null_draw_rate(human, settings),
    )


def decision_level(settings: ProtocolSettings, n_max: int, batch: int, human: ArrayLike) -> float:
    """``settings.decision_level``, or the level calibrated for this pool size and batch
    (with the futility rule of :func:`futility_threshold` binding)."""
    if settings.decision_level is not None:
        return float(settings.decision_level)
    return calibrated_level(
        int(n_max),
        int(batch),
        settings.gamma,
        futility_threshold(settings, n_max, batch, human),
        settings.min_annotations,
        null_draw_rate(human, settings),
        settings.calibration_sims,
        settings.spending,
        settings.own_significance,
    )


@lru_cache(maxsize=64)
def _study_level(
    pairs: tuple[tuple[int, int], ...],
    n_max: int,
    batch: int,
    gamma: float,
    lone: float,
    futility: float,
    min_annotations: int,
    draw_rate: float,
    n_studies: int,
    spending: float,
    implied: bool = False,
    own_significance: bool = True,
) -> float:
    return calibrate_study_level(
        np.array(pairs), n_max, batch, gamma, lone_level=lone, futility=futility,
        min_annotations=min_annotations, draw_rate=draw_rate, n_studies=n_studies, seed=0,
        spending=spending, implied=implied, own_significance=own_significance,
    )  # fmt: skip


def study_level(
    settings: ProtocolSettings,
    systems: ArrayLike,
    n_max: int,
    batch: int,
    human: ArrayLike,
    lone: float,
) -> float:
    """The level of a pair that the other pairs pin down (:func:`blended_level`), calibrated on
    null studies of this study's shape with pooling on
    (:func:`protocol.predictive.calibrate_study_level`); ``lone`` without pooling or with
    ``settings.pooled_calibration`` off, or when ``settings.decision_level`` fixes the level."""
    if (
        settings.decision_level is not None
        or not settings.pooling
        or not settings.pooled_calibration
    ):
        return float(lone)
    # the shape only: systems relabelled 0..S-1, pairs sorted (the live study and the replay
    # number systems and order pairs differently; the calibration must not depend on it)
    # (a study whose systems fall apart into unconnected groups: the largest group's shape)
    ids = np.asarray(systems, dtype=np.int64).reshape(-1, 2)
    n_sys = int(ids.max()) + 1
    graph = coo_matrix((np.ones(len(ids)), (ids[:, 0], ids[:, 1])), shape=(n_sys, n_sys))
    _, comp = connected_components(graph, directed=False)
    of_pair = comp[ids[:, 0]]
    ids = ids[of_pair == np.bincount(of_pair).argmax()]
    _, ids = np.unique(ids, return_inverse=True)
    ids = np.sort(ids.reshape(-1, 2), axis=1)
    pairs = tuple(sorted((int(a), int(b)) for a, b in ids))
    return _study_level(
        pairs,
        int(n_max),
        int(batch),
        settings.gamma,
        float(lone),
        futility_threshold(settings, n_max, batch, human),
        settings.min_annotations,
        null_draw_rate(human, settings),
        settings.calibration_studies,
        settings.spending,
        settings.implied,
        settings.own_significance,
    )


def posterior(
    human: ArrayLike,
    confusion: ArrayLike | None,
    metric: ArrayLike | None,
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
    futility: float | None = None,
    lone_level: float | None = None,
) -> RoundDecision:
    """Decide every open pair after a round (Algorithm 2, inner loop) and say which close.

    ``used``/``pool``: annotations collected and possible per open pair; ``budget_left``:
    annotations the study may still collect; ``level``: the predictive level a decision needs
    (:func:`decision_level`; ignored with ``settings.paper``); ``systems``: the two system ids
    of every open pair, ``closed``: the closed pairs' evidence — with both, the prediction
    pools evidence across pairs (``settings.pooling``); ``redundancy``: annotations per input
    (metric-only inputs count that many labels to come); ``correlation``: the correlation of
    the pairs' own effect estimates, open pairs then closed ones, when their labels share
    inputs (rankings, scores: :mod:`protocol.correlation`; None: independent);
    ``futility``: the threshold of :func:`futility_threshold` (None: ``settings.futility``);
    ``lone_level``: the level of a pair pooling does not inform — with it, ``level`` is the
    study level of :func:`study_level` and each pair needs
    :func:`~protocol.predictive.blended_level` of the two (None: ``level`` for every pair).
    With ``settings.implied``, ``systems`` and the closed pairs' ``decision``, a pair not
    decided now and not equivalent (open, or closing undecided now) whose order the decided
    pairs (closed ones and those decided now) imply is decided by implication (outcome
    ``"implied"``, its chain in ``chains``).
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
    pair_level: float | NDArray[np.float64] | None = level
    if lone_level is not None and level is not None:
        info = pooling_information(effects, eff_var)
        pair_level = blended_level(level, lone_level, info)
    level_now = look_level(pair_level, used, pool, settings.spending)
    # the direction an early decision takes: Algorithm 1's now, or (own_significance off)
    # the predicted one, whether or not the pair's own labels are significant yet
    way = now if settings.own_significance else np.sign(p_a - p_b)
    decision[early & (way > 0) & (p_a >= level_now)] = 1
    decision[early & (way < 0) & (p_b >= level_now)] = -1
    outcome[decision != 0] = DECIDED
    undecided = decision == 0
    if settings.rope_delta > 0 and undecided.any():
        equivalent = undecided & (rope_probability(post, settings.rope_delta) > 1.0 - gamma)
        outcome[equivalent] = EQUIVALENT
        undecided &= ~equivalent
    for done, why in ((used >= pool, EXHAUSTED), (np.full(k, budget_left <= 0), BUDGET)):
        outcome[undecided & done] = why
        undecided &= ~done
    futility = settings.futility if futility is None else futility
    if futility > 0:
        # retiring with at most a batch left saves little and loses the last look's decision
        futile = undecided & early & (remaining > settings.batch) & (p_u > 1.0 - futility)
        outcome[futile] = FUTILE
    weight = 1.0 - np.maximum(np.maximum(p_a, p_b), p_u)
    chains: tuple[tuple[int, ...], ...] = ()
    if settings.implied and systems is not None:
        chains = _imply(decision, outcome, systems, closed)
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
        chains,
    )


def _imply(
    decision: NDArray[np.int8],
    outcome: NDArray[np.object_],
    systems: NDArray[np.int64],
    closed: ClosedPairs | None,
) -> tuple[tuple[int, ...], ...]:
    """Decide by implication the pairs not decided now (open, or closing undecided; not
    equivalent) that the decided pairs order, in place on ``decision`` and ``outcome``; the
    chains, one per pair of the round (empty if not implied)."""
    systems = np.asarray(systems, dtype=np.int64).reshape(-1, 2)
    edges, directions = [systems[decision != 0]], [decision[decision != 0]]
    if closed is not None and closed.decision is not None:
        done = np.asarray(closed.decision) != 0
        edges.append(closed.systems[done])
        directions.append(np.asarray(closed.decision)[done])
    chains: list[tuple[int, ...]] = [()] * decision.shape[0]
    still = np.flatnonzero(np.isin(outcome, (OPEN, FUTILE, EXHAUSTED, BUDGET)))
    if still.size == 0 or sum(e.shape[0] for e in edges) < 2:
        return tuple(chains)
    found = implied_orders(systems[still], np.concatenate(edges), np.concatenate(directions))
    for j, k in enumerate(still):
        if found.direction[j]:
            decision[k] = found.direction[j]
            outcome[k] = IMPLIED
            chains[k] = found.chains[j]
    return tuple(chains)


def _effects(
    eff_mean: NDArray[np.float64],
    eff_var: NDArray[np.float64],
    systems: NDArray[np.int64] | None,
    closed: ClosedPairs | None,
    settings: ProtocolSettings,
    correlation: NDArray[np.float64] | None = None,
) -> PooledEffects:
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


def look_level(
    level: float | NDArray[np.float64] | None,
    used: NDArray[np.int64],
    pool: NDArray[np.int64],
    spending: float,
) -> NDArray[np.float64]:
    """The predictive level a decision needs at this look: ``1 − (1 − level)·t^spending`` with
    ``t = used / pool`` (stricter early, ``level`` at the pool's end; ``spending = 0``: flat)."""
    frac = np.clip(np.asarray(used, dtype=float) / np.maximum(pool, 1), 0.0, 1.0)
    base = np.asarray(level if level is not None else 1.0, dtype=float)
    needed: NDArray[np.float64] = 1.0 - (1.0 - base) * frac**spending
    return needed
