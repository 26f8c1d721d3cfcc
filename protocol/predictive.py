"""What the decision on all of a pair's inputs will be, predicted from everything seen so far.

Beyond the paper (Deriu et al. 2023, "Limitations"): each open pair gets, after every round,
the probabilities of the three outcomes of Algorithm 1 on its whole pool:

1. own evidence (:func:`pool_effect`): the effect ``δ = (W − L) / N`` on the pool, its
   predictive mean and variance from Algorithm 1's posterior (Eq. 3; with a metric, the
   latent labels ``t`` of the metric-only inputs);
2. pooling (:func:`pool_across_pairs`): ``δ_ab = q_a − q_b + e_ab``, ``e_ab ~ N(0, τ²)``,
   a Gaussian hierarchy with ``τ`` integrated out on a grid;
3. the final test (:func:`outcome_probabilities`): ``W − L > z √(W + L + 2)``,
   ``z = Φ⁻¹(1 − γ/2)``, under that predictive.

The level a decision needs is calibrated under the null (:func:`calibrate_decision_level`);
``docs/protocol.md`` explains it for users. Pure: numpy and scipy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Required, TypedDict, Unpack, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import ndtr, ndtri

from .decision import PosteriorDraws, decide, human_posterior, theta_human
from .implied import null_false_decisions

__all__ = [
    "PooledEffects",
    "blended_level",
    "calibrate_study_level",
    "NullStudyOptions",
    "null_study_bounds",
    "pooling_information",
    "first_early_look",
    "calibrate_decision_level",
    "outcome_probabilities",
    "pool_across_pairs",
    "pool_effect",
]

#: Grid of the residual sd ``τ`` of the pooling model (uniform prior on [0, 1]).
TAU_GRID: NDArray[np.float64] = np.geomspace(1e-3, 1.0, 48)
#: Prior sd of the system qualities ``q`` (effects live in [−1, 1]: vague).
QUALITY_PRIOR_SD = 1.0


# --------------------------------------------------------------------------------------------
# 1. A pair's own evidence about its effect on the whole pool
# --------------------------------------------------------------------------------------------


def _dirichlet_difference_moments(
    alpha: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Mean and variance of ``d = p> − p<`` and mean of ``s = p> + p<`` under ``Dir(alpha)``."""
    a0 = alpha.sum(axis=-1)
    aw, al = alpha[..., 0], alpha[..., 2]
    mean_d = (aw - al) / a0
    mean_s = (aw + al) / a0
    var_d = (aw * (a0 - aw) + al * (a0 - al) + 2.0 * aw * al) / (a0**2 * (a0 + 1.0))
    return mean_d, var_d, mean_s


def pool_effect(
    posterior: PosteriorDraws | ArrayLike,
    pool: ArrayLike,
    *,
    redundancy: int = 1,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Posterior predictive mean and variance of each pair's effect on its whole pool, and the
    predicted share of non-draws.

    ``δ = (W − L) / N``: wins minus losses over all ``N = pool`` annotations the pair's inputs
    allow (``W``, ``L`` include the labels already collected, ``posterior.human_counts``). The
    labels still to come are, per posterior component ``Dir(α)``, ``U`` Dirichlet-multinomial
    draws (Eq. 3: mean ``U E[d]``, variance ``U (E[s] − E[d²]) + U² Var(d)``) plus, with a metric,
    ``redundancy`` labels for each metric-only input whose latent true labels ``t = α − n − 1``
    the component fixes; the law of total variance combines the components.

    ``posterior``: a :class:`~protocol.decision.PosteriorDraws` or human counts ``(n_pairs, 3)``.
    Returns ``(mean, var, nondraw)``, each of shape ``(n_pairs,)``.
    """
    post = posterior if isinstance(posterior, PosteriorDraws) else human_posterior(posterior)
    n = post.human_counts
    total = np.asarray(pool, dtype=float)
    total = np.broadcast_to(total, (n.shape[0],))
    latent = np.maximum(post.alpha - n[None] - 1.0, 0.0)  # (S, P, 3)
    seen = n.sum(axis=1)
    future = np.maximum(total[None, :] - seen[None, :] - redundancy * latent.sum(axis=-1), 0.0)
    mean_d, var_d, mean_s = _dirichlet_difference_moments(post.alpha)
    known = redundancy * (latent[..., 0] - latent[..., 2])
    comp_mean = known + future * mean_d
    comp_var = future * np.maximum(mean_s - var_d - mean_d**2, 0.0) + future**2 * var_d
    w = post.weights
    rest_mean = (w * comp_mean).sum(axis=0)
    rest_var = np.maximum((w * (comp_var + comp_mean**2)).sum(axis=0) - rest_mean**2, 0.0)
    if post.mean_p_values is not None:
        # exactly computed pairs: every component has the same total n + t + 3, so the exact
        # posterior mean of p gives the exact mean of t and of the future labels
        size_a = post.alpha.sum(axis=-1)[0]
        exact_t = post.mean_p_values * size_a[:, None] - n - 1.0
        exact_d = post.mean_p_values[:, 0] - post.mean_p_values[:, 2]
        rest_mean = redundancy * (exact_t[:, 0] - exact_t[:, 2]) + future[0] * exact_d
    nondraw_rest = (w * (redundancy * (latent[..., 0] + latent[..., 2]) + future * mean_s)).sum(0)
    size = np.maximum(total, 1.0)
    mean = (n[:, 0] - n[:, 2] + rest_mean) / size
    var = rest_var / size**2
    nondraw = (n[:, 0] + n[:, 2] + nondraw_rest) / size
    return mean, var, np.clip(nondraw, 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# 2. Pooling across pairs: δ_ab = q_a − q_b + e_ab
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PooledEffects:
    """Posterior of every pair's pool effect ``δ`` under the pooling model: a mixture over the
    values ``tau_grid`` (G,) of ``τ`` with ``weights`` (G,), component means and variances
    (G, n_pairs)."""

    weights: NDArray[np.float64]
    mean: NDArray[np.float64]
    var: NDArray[np.float64]
    tau_grid: NDArray[np.float64]

    def first(self, k: int) -> PooledEffects:
        """The same posterior for the first ``k`` pairs only."""
        return PooledEffects(self.weights, self.mean[:, :k], self.var[:, :k], self.tau_grid)

    def summary(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Mixture mean and variance of ``δ`` per pair."""
        m = (self.weights[:, None] * self.mean).sum(axis=0)
        v = (self.weights[:, None] * (self.var + self.mean**2)).sum(axis=0) - m**2
        return m, np.maximum(v, 0.0)

    def tau(self) -> float:
        """Posterior mean of the residual sd ``τ`` (how far pairs stray from the model)."""
        return float((self.weights * self.tau_grid).sum())


def _components(
    m: NDArray[np.float64],
    v: NDArray[np.float64],
    x: NDArray[np.float64],
    tau2: NDArray[np.float64],
    prior_var: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Connected sets of pairs of one design ``x``, ``B`` at a time: log marginal likelihoods
    (B, G), posterior means and variances (B, G, P) of ``δ = x q + e`` given ``m ~ N(δ, v)``
    (``m``, ``v``: (B, P)), ``e ~ N(0, τ²)``, ``q ~ N(0, prior_var I)``.

    With ``D = τ² + v`` (diagonal) and ``A = I / prior_var + Xᵀ D⁻¹ X``: ``q | m ~ N(A⁻¹ Xᵀ D⁻¹ m,
    A⁻¹)``, ``δ_j | m, q`` shrinks ``m_j`` towards ``x_j q`` by ``v_j / D_j``; the marginal
    likelihood of ``m ~ N(0, D + prior_var X Xᵀ)`` uses the determinant lemma and Woodbury.
    """
    d = tau2[None, :, None] + v[:, None, :]  # (B, G, P)
    inv_d = 1.0 / d
    s = x.shape[1]
    outer = _outer_rows(x)
    a = np.eye(s) / prior_var + (inv_d @ outer).reshape(*inv_d.shape[:2], s, s)
    b = (m[:, None, :] * inv_d) @ x  # (B, G, S)
    a_inv = np.linalg.inv(a)
    q = (a_inv @ b[..., None])[..., 0]
    xq = q @ x.T  # (B, G, P)
    quad = (m[:, None, :] ** 2 * inv_d).sum(axis=2) - (b * q).sum(axis=2)
    logdet = np.log(d).sum(axis=2) + np.linalg.slogdet(a)[1] + s * np.log(prior_var)
    loglik = -0.5 * (logdet + quad)
    shrink = v[:, None, :] * inv_d  # weight of the model's prediction
    mean = xq + (1.0 - shrink) * (m[:, None, :] - xq)
    xax = a_inv.reshape(*a_inv.shape[:2], s * s) @ outer.T  # x_p A⁻¹ x_pᵀ
    var = shrink**2 * xax + tau2[None, :, None] * shrink
    return loglik, mean, var


def _outer_rows(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """(P, S·S): each row ``x_p`` as its flattened outer product ``x_pᵀ x_p``, so that
    ``Σ_p w_p x_pᵀ x_p`` and ``x_p M x_pᵀ`` are matrix products (BLAS, not einsum loops)."""
    return (x[:, :, None] * x[:, None, :]).reshape(x.shape[0], -1)


def pool_across_pairs(
    mean: ArrayLike,
    var: ArrayLike,
    pair_systems: ArrayLike,
    *,
    n_systems: int | None = None,
    tau_grid: NDArray[np.float64] = TAU_GRID,
    prior_sd: float = QUALITY_PRIOR_SD,
) -> PooledEffects:
    """Combine every pair's own evidence ``δ_j ~ N(mean_j, var_j)`` (:func:`pool_effect`) through
    the model ``δ_ab = q_a − q_b + e_ab``, ``e_ab ~ N(0, τ²)``.

    ``pair_systems`` (n_pairs, 2): integer ids of the two systems of each pair (``a`` first).
    ``q ~ N(0, prior_sd² I)`` (vague); ``τ`` takes the values of ``tau_grid`` with a uniform
    prior density on ``τ`` (weights ``∝ Δτ``) and is integrated out with its marginal likelihood
    (type-II, as in a random-effects meta-analysis), so a study whose pairs do not fit the model
    (intransitive preferences) gets a large ``τ`` and little pooling. Systems that share no pair
    (separate connected components) do not inform each other.
    """
    m = np.asarray(mean, dtype=float)
    v = np.maximum(np.asarray(var, dtype=float), 1e-12)
    ps = np.asarray(pair_systems, dtype=np.int64).reshape(-1, 2)
    k = m.shape[0]
    n_sys = int(ps.max()) + 1 if n_systems is None else int(n_systems)
    tau2 = np.asarray(tau_grid, dtype=float) ** 2
    edges = np.gradient(np.asarray(tau_grid, dtype=float))
    log_prior = np.log(edges / edges.sum())
    prior_var = prior_sd**2
    graph = coo_matrix((np.ones(k), (ps[:, 0], ps[:, 1])), shape=(n_sys, n_sys))
    _, label = connected_components(graph, directed=False)
    comp_of_pair = label[ps[:, 0]]
    loglik = np.zeros(tau2.size)
    out_mean = np.empty((tau2.size, k))
    out_var = np.empty((tau2.size, k))
    # components of the same design (e.g. many lone pairs) are computed together
    order = np.argsort(comp_of_pair, kind="stable")
    comps, starts = np.unique(comp_of_pair[order], return_index=True)
    sizes = np.diff(np.append(starts, k))
    designs: dict[tuple[bytes, int], tuple[NDArray[np.float64], list[NDArray[np.int64]]]] = {}
    lone = order[starts[sizes == 1]]  # a pair alone in its component: x = ±(1, −1)
    lone = lone[ps[lone, 0] != ps[lone, 1]]
    is_lone = np.zeros(k, dtype=bool)
    is_lone[lone] = True
    for sign in (1.0, -1.0):
        members = lone[(ps[lone, 0] < ps[lone, 1]) == (sign > 0)]
        if members.size:
            designs[b"lone", int(sign)] = (np.array([[sign, -sign]]), list(members[:, None]))
    for idx in np.split(order, starts[1:]) if k else []:  # each component's pairs, ascending
        if is_lone[idx[0]]:
            continue
        systems, local = np.unique(ps[idx], return_inverse=True)
        local = local.reshape(-1, 2)
        x = np.zeros((idx.size, systems.size))
        x[np.arange(idx.size), local[:, 0]] = 1.0
        x[np.arange(idx.size), local[:, 1]] = -1.0
        designs.setdefault((x.tobytes(), x.shape[1]), (x, []))[1].append(idx)
    logliks = np.empty((label.size, tau2.size))
    for x, members in designs.values():
        rows = np.stack(members)  # (B, P)
        ll, mu, var_c = _components(m[rows], v[rows], x, tau2, prior_var)
        logliks[comp_of_pair[rows[:, 0]]] = ll
        out_mean[:, rows] = mu.transpose(1, 0, 2)
        out_var[:, rows] = var_c.transpose(1, 0, 2)
    for comp in comps:  # summed in the components' order
        loglik += logliks[comp]
    logpost = loglik + log_prior
    weights = np.exp(logpost - logpost.max())
    grid = np.asarray(tau_grid, dtype=float)
    return PooledEffects(weights / weights.sum(), out_mean, np.maximum(out_var, 1e-15), grid)


def no_pooling(mean: ArrayLike, var: ArrayLike) -> PooledEffects:
    """Each pair on its own evidence (a one-point mixture; ``τ`` infinite: nothing shared)."""
    m = np.asarray(mean, dtype=float)[None, :]
    v = np.maximum(np.asarray(var, dtype=float)[None, :], 1e-15)
    return PooledEffects(np.ones(1), m, v, np.array([np.inf]))


# --------------------------------------------------------------------------------------------
# 3. The decision on all data
# --------------------------------------------------------------------------------------------


def outcome_probabilities(
    effects: PooledEffects,
    human_counts: ArrayLike,
    pool: ArrayLike,
    remaining: ArrayLike,
    nondraw: ArrayLike,
    gamma: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``P(a wins)``, ``P(b wins)``, ``P(undecided)`` per pair for Algorithm 1 at level
    ``gamma`` on the pair's human labels once ``remaining`` more are collected.

    With ``k`` labels so far (``D = W − L`` of them) out of a pool of ``N``, the ``R`` labels to
    come are a draw without replacement from the ``N − k`` left, whose wins minus losses total
    ``Nδ − D``: given ``δ`` their sum has mean ``R (Nδ − D) / (N − k)`` and variance
    ``R v (N − k − R) / (N − k − 1)`` (finite population; ``v`` = variance of one label). With
    ``R = N − k`` the final difference is exactly ``Nδ``. The final test is approximated by
    ``|W − L| > z √(W + L + 2)``; ``W + L`` is taken at its predicted value. Pairs with nothing
    left (``R = 0``) get the current decision with probability one.
    """
    n = np.asarray(human_counts, dtype=float).reshape(-1, 3)
    size = np.asarray(pool, dtype=float)
    rem = np.asarray(remaining, dtype=float)
    s_rate = np.asarray(nondraw, dtype=float)
    k = n.sum(axis=1)
    diff = n[:, 0] - n[:, 2]
    left = np.maximum(size - k, 0.0)
    rem = np.minimum(rem, left)
    frac = np.where(left > 0, rem / np.maximum(left, 1.0), 0.0)
    mean_d, _ = effects.summary()
    per_label = np.maximum(s_rate - mean_d**2, 1e-6)
    fpc = rem * np.maximum(left - rem, 0.0) / np.maximum(left - 1.0, 1.0)
    sampling = per_label * fpc
    final_mean = diff[None] + frac[None] * (size[None] * effects.mean - diff[None])
    final_var = (frac * size)[None] ** 2 * effects.var + sampling[None]
    sd = np.sqrt(np.maximum(final_var, 1e-12))
    z = ndtri(1.0 - gamma / 2.0)
    final_nondraw = n[:, 0] + n[:, 2] + rem * s_rate
    crit = z * np.sqrt(final_nondraw + 2.0)
    w = effects.weights[:, None]
    p_a = (w * ndtr((final_mean - crit) / sd)).sum(axis=0)
    p_b = (w * ndtr((-crit - final_mean) / sd)).sum(axis=0)
    now = decide(theta_human(n), gamma)
    now_a, now_b = (now > 0).astype(float), (now < 0).astype(float)
    done = rem <= 0
    p_a = np.where(done, now_a, np.clip(p_a, 0.0, 1.0))
    p_b = np.where(done, now_b, np.clip(p_b, 0.0, 1.0 - p_a))
    return p_a, p_b, np.clip(1.0 - p_a - p_b, 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Calibration of the decision level under the null
# --------------------------------------------------------------------------------------------


def first_early_look(pool: ArrayLike, min_annotations: int) -> NDArray[np.float64]:
    """Annotations a pair needs before it may stop early: ``min_annotations``, or a quarter of
    its pool when that is fewer (the normal approximations need some labels; a small pool
    should not wait for most of itself)."""
    return np.minimum(float(min_annotations), np.asarray(pool, dtype=float) / 4.0)


def calibrate_decision_level(
    n_max: int,
    batch: int,
    gamma: float = 0.05,
    *,
    futility: float = 0.2,
    min_annotations: int = 30,
    draw_rate: float = 0.4,
    n_sim: int = 20000,
    seed: int | np.random.Generator | None = 0,
    spending: float = 0.0,
    own_significance: bool = True,
) -> float:
    """The smallest predictive level that keeps a lone null pair's false-decision rate ≤ γ.

    Simulates ``n_sim`` label sequences of one pair with ``p> = p< = (1 − draw_rate) / 2`` and
    a pool of ``n_max``, looked at every ``batch`` labels as the protocol does (no pooling: the
    pair's own evidence only). At an interim look from :func:`first_early_look` on, the pair is
    decided when Algorithm 1 is significant now and :func:`outcome_probabilities` gives the same
    direction on all data a probability ≥ ``level``; it is retired undecided when ``P(undecided)
    > 1 − futility`` and more than ``batch`` labels are left (binding: no later look); at the
    last look (pool used up) Algorithm 1 at
    level γ decides. A decision is false whatever its direction. The false-decision rate falls
    as ``level`` rises; the returned level is the smallest with rate ≤ ``gamma`` (1.0 when even
    the last look alone exceeds it: then only the last look decides). With
    ``own_significance`` False an interim look needs only the predicted direction, not
    Algorithm 1 significant now.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n_max = int(n_max)
    looks = np.unique(np.minimum(np.arange(batch, n_max + batch, batch), n_max))
    pw = (1.0 - draw_rate) / 2.0
    # label counts at every look: cumulative multinomial increments between looks
    steps = np.diff(looks, prepend=0)
    counts_at = np.cumsum(
        np.stack([rng.multinomial(k, [pw, draw_rate, pw], size=n_sim) for k in steps], axis=1),
        axis=1,
    )
    wins, losses = counts_at[..., 0], counts_at[..., 2]
    top = np.full(
        n_sim, -np.inf
    )  # max over live interim looks of P(final in the significant direction)
    alive = np.ones(n_sim, dtype=bool)
    for j, k in enumerate(looks[:-1]):
        if k < first_early_look(n_max, min_annotations):
            continue
        # many sequences share their counts at a look: evaluate each distinct one once
        key, back = np.unique(wins[:, j] * (n_max + 1) + losses[:, j], return_inverse=True)
        seen = np.stack([key // (n_max + 1), key % (n_max + 1)], axis=1)
        counts = np.stack([seen[:, 0], k - seen.sum(axis=1), seen[:, 1]], axis=1).astype(float)
        mean, var, nondraw = pool_effect(counts, np.full(len(seen), float(n_max)))
        p_a, p_b, p_u = outcome_probabilities(
            no_pooling(mean, var), counts, n_max, n_max - k, nondraw, gamma
        )
        now = decide(theta_human(counts), gamma)
        if not own_significance:  # the predicted direction, significant now or not
            now = np.sign(p_a - p_b).astype(np.int8)
        sig = np.where(now > 0, p_a, np.where(now < 0, p_b, 0.0))
        # the level at this look is 1 − (1 − level)·t^spending: decided iff level ≤ this
        need = 1.0 - (1.0 - sig[back]) / (k / n_max) ** spending
        top = np.where(alive, np.maximum(top, need), top)
        if n_max - k > batch:  # futility only with more than a batch left
            alive &= ~(p_u[back] > 1.0 - futility)
    last = np.stack([wins[:, -1], n_max - wins[:, -1] - losses[:, -1], losses[:, -1]], axis=1)
    final_false = alive & (decide(theta_human(last), gamma) != 0)

    def rate(level: float) -> float:
        return float(np.mean((top >= level) | final_false))

    return _smallest_level(rate, top, gamma, hi=1.0 + 1e-12)


def _smallest_level(
    rate: Callable[[float], float],
    steps: ArrayLike,
    gamma: float,
    lo: float = 0.5,
    hi: float = 1.0,
) -> float:
    """The smallest level in ``[lo, hi]`` with ``rate(level) ≤ gamma``, or 1.0 when even
    ``hi`` exceeds it. ``rate`` counts values ``≥ level``: it falls only just above one of
    ``steps``, so the answer is ``lo`` or the next float above a step, found exactly by a
    binary search over the distinct steps (``log₂`` of their number calls of ``rate``).

    >>> top = np.array([0.6, 0.7, 0.8, 0.9])
    >>> _smallest_level(lambda level: float(np.mean(top >= level)), top, 0.25)
    0.8000000000000002
    """
    if rate(hi) > gamma:
        return 1.0
    if rate(lo) <= gamma:
        return lo
    values = np.asarray(steps, dtype=float).ravel()
    cuts = np.nextafter(np.unique(values[(values >= lo) & (values < hi)]), np.inf)
    first, last = 0, len(cuts)  # rate ≤ gamma from some cut on, or at hi (index len(cuts))
    while first < last:
        mid = (first + last) // 2
        if rate(float(cuts[mid])) <= gamma:
            last = mid
        else:
            first = mid + 1
    return float(cuts[first]) if first < len(cuts) else hi


# --------------------------------------------------------------------------------------------
# Calibration of futility over the looks
# --------------------------------------------------------------------------------------------


def _near_boundary_sequences(
    n_max: int,
    looks: NDArray[np.int64],
    gamma: float,
    draw_rate: float,
    n_sim: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Label counts (wins, losses) at every look of ``n_sim`` lone pairs whose effect puts the
    expected all-data z uniformly in ``[z_γ, z_γ + 1]`` (``z_γ = Φ⁻¹(1 − γ/2)``), kept only
    when Algorithm 1 on all ``n_max`` labels decides for the better system."""
    nondraw = 1.0 - draw_rate
    z_target = ndtri(1.0 - gamma / 2.0) + rng.random(n_sim)
    d = np.minimum(z_target * np.sqrt(nondraw / n_max), nondraw)
    probs = np.stack([(nondraw + d) / 2.0, np.full(n_sim, draw_rate), (nondraw - d) / 2.0], 1)
    steps = np.diff(looks, prepend=0)
    # cumulative labels at every look: one categorical draw per label, summed per look
    u = rng.random((n_sim, int(n_max)))
    win = u < probs[:, :1]
    loss = u >= probs[:, :1] + probs[:, 1:2]
    cuts = np.cumsum(steps)
    wins = np.cumsum(win, axis=1, dtype=np.int64)[:, cuts - 1]
    losses = np.cumsum(loss, axis=1, dtype=np.int64)[:, cuts - 1]
    final = np.stack([wins[:, -1], n_max - wins[:, -1] - losses[:, -1], losses[:, -1]], axis=1)
    keep = decide(theta_human(final), gamma) > 0
    return wins[keep], losses[keep]


def futility_scores(
    n_max: int,
    batch: int,
    gamma: float = 0.05,
    *,
    min_annotations: int = 30,
    draw_rate: float = 0.4,
    n_sim: int = 4000,
    seed: int | np.random.Generator | None = 0,
) -> NDArray[np.float64]:
    """Per simulated near-boundary pair that all data decide (see
    :func:`_near_boundary_sequences`), the highest ``P(undecided)`` over its interim looks
    (every ``batch`` labels from :func:`first_early_look` on while more than ``batch`` are
    left, its own evidence only). The pair
    is wrongly retired by a futility threshold ``f`` exactly when this exceeds ``1 − f``.
    Early decisions are ignored: a pair decided first could not be retired, so the rate this
    gives is an upper bound."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n_max = int(n_max)
    looks = np.unique(np.minimum(np.arange(batch, n_max + batch, batch), n_max))
    wins, losses = _near_boundary_sequences(n_max, looks, gamma, draw_rate, n_sim, rng)
    top = np.zeros(wins.shape[0])
    for j, k in enumerate(looks[:-1]):
        if k < first_early_look(n_max, min_annotations):
            continue
        key, back = np.unique(wins[:, j] * (n_max + 1) + losses[:, j], return_inverse=True)
        seen = np.stack([key // (n_max + 1), key % (n_max + 1)], axis=1)
        counts = np.stack([seen[:, 0], k - seen.sum(axis=1), seen[:, 1]], axis=1).astype(float)
        mean, var, nondraw = pool_effect(counts, np.full(len(seen), float(n_max)))
        _, _, p_u = outcome_probabilities(
            no_pooling(mean, var), counts, n_max, n_max - k, nondraw, gamma
        )
        if n_max - k > batch:  # futility only with more than a batch left
            top = np.maximum(top, p_u[back])
    return top


def wrong_retirement_rate(scores: NDArray[np.float64], futility: float) -> float:
    """Share of the near-boundary pairs of :func:`futility_scores` that ``futility`` retires."""
    return float(np.mean(scores > 1.0 - futility)) if scores.size else 0.0


def calibrate_futility(
    n_max: int,
    batch: int,
    gamma: float = 0.05,
    *,
    error: float = 0.2,
    ceiling: float = 0.5,
    min_annotations: int = 30,
    draw_rate: float = 0.4,
    n_sim: int = 4000,
    seed: int | np.random.Generator | None = 0,
) -> float:
    """The largest futility threshold (at most ``ceiling``) that wrongly retires at most
    ``error`` of the near-boundary pairs that all data decide (:func:`futility_scores`)."""
    scores = futility_scores(
        n_max,
        batch,
        gamma,
        min_annotations=min_annotations,
        draw_rate=draw_rate,
        n_sim=n_sim,
        seed=seed,
    )
    if scores.size == 0:
        return ceiling
    # retire iff score > 1 − f: the rate is ≤ error for f ≤ 1 − (the (1 − error) quantile)
    cut = np.quantile(scores, 1.0 - error, method="lower")
    return float(np.clip(1.0 - cut, 0.0, ceiling))


# --------------------------------------------------------------------------------------------
# Calibration on null studies of the study's own shape (pooling on)
# --------------------------------------------------------------------------------------------


def pooling_information(effects: PooledEffects, own_var: ArrayLike) -> NDArray[np.float64]:
    """How much the pooling model informs each pair: ``1 − Var_pooled(δ) / Var_own(δ)``,
    in [0, 1] (0: the pair's own evidence only, e.g. a lone pair or a study whose pairs do
    not fit the model; near 1: the other pairs pin the pair's effect down)."""
    _, pooled = effects.summary()
    own = np.maximum(np.asarray(own_var, dtype=float), 1e-15)
    info: NDArray[np.float64] = np.clip(1.0 - pooled / own, 0.0, 1.0)
    return info


def blended_level(
    study_level: float, lone_level: float, information: ArrayLike
) -> NDArray[np.float64]:
    """Per pair: the lone-pair level where pooling adds nothing, the study level where the
    other pairs pin the pair down, linearly in :func:`pooling_information` between them."""
    info: NDArray[np.float64] = np.clip(np.asarray(information, dtype=float), 0.0, 1.0)
    return lone_level + info * (study_level - lone_level)


def _pooled_batch(
    m: NDArray[np.float64],
    v: NDArray[np.float64],
    x: NDArray[np.float64],
    tau_grid: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`pool_across_pairs` for ``B`` studies of one connected design at once:
    ``m``, ``v`` (B, P), ``x`` (P, S). Returns weights (B, G), means and variances (B, G, P)."""
    grid = np.asarray(tau_grid, dtype=float)
    loglik, mean, var = _components(m, v, x, grid**2, QUALITY_PRIOR_SD**2)
    edges = np.gradient(grid)
    logpost = loglik + np.log(edges / edges.sum())[None]
    w = np.exp(logpost - logpost.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True), mean, np.maximum(var, 1e-15)


class NullStudyOptions(TypedDict, total=False):
    """The null studies' options of :func:`null_study_bounds` (``lone_level`` required)."""

    lone_level: Required[float]
    futility: float
    min_annotations: int
    draw_rate: float
    n_studies: int
    seed: int | np.random.Generator | None
    spending: float
    own_significance: bool


@overload
def null_study_bounds(
    pair_systems: ArrayLike,
    n_max: int,
    batch: int,
    gamma: float = ...,
    *,
    per_look: Literal[False] = ...,
    **options: Unpack[NullStudyOptions],
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]: ...


@overload
def null_study_bounds(
    pair_systems: ArrayLike,
    n_max: int,
    batch: int,
    gamma: float = ...,
    *,
    per_look: Literal[True],
    **options: Unpack[NullStudyOptions],
) -> tuple[NDArray[np.float64], NDArray[np.int8], NDArray[np.int8]]: ...


def null_study_bounds(
    pair_systems: ArrayLike,
    n_max: int,
    batch: int,
    gamma: float = 0.05,
    *,
    lone_level: float,
    futility: float = 0.2,
    min_annotations: int = 30,
    draw_rate: float = 0.4,
    n_studies: int = 100,
    seed: int | np.random.Generator | None = 0,
    spending: float = 0.0,
    own_significance: bool = True,
    per_look: bool = False,
) -> (
    tuple[NDArray[np.float64], NDArray[np.bool_]]
    | tuple[NDArray[np.float64], NDArray[np.int8], NDArray[np.int8]]
):
    """Simulated null studies of the given shape (every system equal; every pair a pool of
    ``n_max`` with ``p> = p< = (1 − draw_rate) / 2``, ``batch`` more labels per pair per look,
    pooling across the pairs on). Per simulated pair: the largest study level at which some
    interim look would decide it (under :func:`blended_level` with ``lone_level``; −inf if
    none, +inf if the lone level alone decides it) while futility has not retired it, and
    whether the last look (Algorithm 1 on the whole pool) decides it. Shapes (n_studies·P,).
    With ``per_look``: that bound at every interim look while the pair is alive (−inf
    otherwise) and the direction Algorithm 1 says there, shapes (looks, n_studies, P), and
    the last look's direction for pairs alive to it (0 otherwise), (n_studies, P)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    ps = np.asarray(pair_systems, dtype=np.int64).reshape(-1, 2)
    _, local = np.unique(ps, return_inverse=True)
    local = local.reshape(-1, 2)
    n_pairs = ps.shape[0]
    x = np.zeros((n_pairs, int(local.max()) + 1))
    x[np.arange(n_pairs), local[:, 0]] = 1.0
    x[np.arange(n_pairs), local[:, 1]] = -1.0
    n_max = int(n_max)
    looks = np.unique(np.minimum(np.arange(batch, n_max + batch, batch), n_max))
    pw = (1.0 - draw_rate) / 2.0
    steps = np.diff(looks, prepend=0)
    running = np.zeros((n_studies, n_pairs, 3), dtype=np.int64)  # labels so far, per look
    top = np.full((n_studies, n_pairs), -np.inf)
    alive = np.ones((n_studies, n_pairs), dtype=bool)
    z = ndtri(1.0 - gamma / 2.0)
    bounds, directions = [], []
    for j, k in enumerate(looks):
        running += rng.multinomial(steps[j], [pw, draw_rate, pw], size=(n_studies, n_pairs))
        if k == n_max or k < first_early_look(n_max, min_annotations):
            continue
        counts = running.astype(float)  # (B, P, 3)
        flat = counts.reshape(-1, 3)
        mean, var, nondraw = pool_effect(flat, np.full(flat.shape[0], float(n_max)))
        mean, var, nondraw = (a.reshape(n_studies, n_pairs) for a in (mean, var, nondraw))
        w, mu, vv = _pooled_batch(mean, np.maximum(var, 1e-12), x, TAU_GRID)
        # outcome_probabilities for every study at once (rem = n_max − k, frac = 1: the final
        # difference is N·δ; its sd is N·sd(δ) per τ component)
        mix_mean = (w[:, :, None] * mu).sum(axis=1)
        mix_var = (w[:, :, None] * (vv + mu**2)).sum(axis=1) - mix_mean**2
        crit = z * np.sqrt(counts[..., 0] + counts[..., 2] + (n_max - k) * nondraw + 2.0)
        sd = n_max * np.sqrt(vv)
        p_a = (w[:, :, None] * ndtr((n_max * mu - crit[:, None]) / sd)).sum(axis=1)
        p_b = (w[:, :, None] * ndtr((-crit[:, None] - n_max * mu) / sd)).sum(axis=1)
        p_u = np.clip(1.0 - p_a - p_b, 0.0, 1.0)
        info = np.clip(1.0 - np.maximum(mix_var, 0.0) / np.maximum(var, 1e-15), 0.0, 1.0)
        now = decide(theta_human(flat), gamma).reshape(n_studies, n_pairs)
        if not own_significance:  # the predicted direction, significant now or not
            now = np.sign(p_a - p_b).astype(np.int8)
        sig = np.where(now > 0, p_a, np.where(now < 0, p_b, 0.0))
        need = 1.0 - (1.0 - sig) / (k / n_max) ** spending  # largest level deciding here
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(
                info > 1e-9,
                (need - lone_level * (1.0 - info)) / info,
                np.where(need >= lone_level, np.inf, -np.inf),
            )
        bound = np.where(now != 0, bound, -np.inf)
        top = np.where(alive, np.maximum(top, bound), top)
        if per_look:
            bounds.append(np.where(alive, bound, -np.inf))
            directions.append(now.astype(np.int8))
        if n_max - k > batch:  # futility only with more than a batch left
            alive &= ~(p_u > 1.0 - futility)
    last = running.reshape(-1, 3).astype(float)
    final = alive.ravel() & (decide(theta_human(last), gamma) != 0)
    if per_look:
        shape = (0, n_studies, n_pairs)
        last_dir = np.where(alive, decide(theta_human(last), gamma).reshape(alive.shape), 0)
        return (
            np.array(bounds).reshape(-1, n_studies, n_pairs) if bounds else np.zeros(shape),
            np.array(directions, dtype=np.int8).reshape(-1, n_studies, n_pairs)
            if directions
            else np.zeros(shape, dtype=np.int8),
            last_dir.astype(np.int8),
        )
    return top.ravel(), final


def calibrate_study_level(
    pair_systems: ArrayLike,
    n_max: int,
    batch: int,
    gamma: float = 0.05,
    *,
    lone_level: float,
    futility: float = 0.2,
    min_annotations: int = 30,
    draw_rate: float = 0.4,
    n_studies: int = 100,
    seed: int | np.random.Generator | None = 0,
    spending: float = 0.0,
    implied: bool = False,
    own_significance: bool = True,
) -> float:
    """The smallest study level (in [0.5, 1]) whose per-pair false decisions over all looks of
    simulated null studies of this shape (:func:`null_study_bounds`) stay ≤ γ. It is above
    ``lone_level`` where pooling over few systems makes null pairs' predictions overconfident,
    below it where many pairs pin each other down. With ``implied``, pairs the decided pairs
    order through a chain count as decided too (:func:`protocol.implied.null_false_decisions`)."""
    kw = NullStudyOptions(
        lone_level=lone_level, futility=futility, min_annotations=min_annotations,
        draw_rate=draw_rate, n_studies=n_studies, seed=seed, spending=spending,
        own_significance=own_significance,
    )  # fmt: skip
    if implied:
        rate, steps = _implied_rate(pair_systems, n_max, batch, gamma, kw)
    else:
        top, final = null_study_bounds(pair_systems, n_max, batch, gamma, **kw)
        steps = top

        def rate(level: float) -> float:
            return float(np.mean((top >= level) | final))

    return _smallest_level(rate, steps, gamma)


def _implied_rate(
    pair_systems: ArrayLike, n_max: int, batch: int, gamma: float, kw: NullStudyOptions
) -> tuple[Callable[[float], float], NDArray[np.float64]]:
    """The per-pair false-decision rate of null studies at a study level, implied decisions
    (through chains of direct ones, at any look, the last included) counted; and the levels
    it steps at."""
    bounds, directions, last = null_study_bounds(
        pair_systems, n_max, batch, gamma, per_look=True, **kw
    )
    _, local = np.unique(np.asarray(pair_systems, dtype=np.int64), return_inverse=True)
    local = local.reshape(-1, 2)
    n_sys = int(local.max()) + 1
    looks = bounds.shape[0]

    def rate(level: float) -> float:
        hit = bounds >= level  # (J, B, P)
        any_hit = hit.any(axis=0) if looks else np.zeros(last.shape, dtype=bool)
        first = hit.argmax(axis=0) if looks else np.zeros(last.shape, dtype=np.int64)
        if looks:
            direction = np.take_along_axis(directions, first[None], axis=0)[0]
        else:
            direction = np.zeros(last.shape, dtype=np.int8)
        direction = np.where(any_hit, direction, last)
        first_look = np.where(any_hit | (last != 0), first, -1)
        return float(np.mean(null_false_decisions(first_look, direction, local, n_sys)))

    return rate, bounds
