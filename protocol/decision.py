"""Bayesian pairwise decision function of Deriu et al. (2023), vectorised over system pairs.

Reference: J. Deriu, P. von Däniken, D. Tuggener, M. Cieliebak (2023), "Correction of Errors in
Preference Ratings from Automated Metrics for Text Generation" (Findings of ACL 2023).

Notation (paper Definitions 1-3 and Section 3):

* a preference label is one of ``>`` (output of system *a* preferred, a *win*), ``=`` (a draw)
  and ``<`` (output of system *b* preferred, a *loss*).  Count vectors are always ordered
  ``(>, =, <)``; labels are encoded as ``+1 / 0 / -1`` (:data:`WIN`, :data:`DRAW`, :data:`LOSS`);
* ``p = (p>, p=, p<)`` is the true (oracle / human) preference distribution of the pair;
* ``mu[c, c']`` is the mixture matrix (paper Eq. 1-2): the probability that the metric says ``c``
  when the oracle says ``c'``.  Rows are metric labels, columns are true labels and every column
  sums to one, so the metric-label distribution is ``mu @ p`` (Appendix A, "Mixture");
* ``theta = P(p> > p< | data)``; Algorithm 1 says *a* wins if ``theta > 1 - gamma/2``, *b* wins if
  ``theta < gamma/2`` and the pair is undecided otherwise.

Inputs, one row per pair:

* ``human_counts`` (n_pairs, 3): every human (oracle) label of the pair, including those on inputs
  that the metric rated too (Appendix A, "Using annotations multiple times");
* ``confusion`` (n_pairs, 3, 3): ``confusion[k, c, c']`` counts inputs rated by both, where the
  metric said ``c`` and the humans ``c'`` (Section 3.3);
* ``metric_counts`` (n_pairs, 3): metric labels on inputs that *no* human rated.  Metric labels of
  human-rated inputs must not be counted here again (Appendix A).

Human-only posterior (Eq. 3): ``p ~ Dir(n + 1)``.  Since ``p> / (p> + p<) ~ Beta(n>+1, n<+1)``,
``theta = 1 - I_{1/2}(n>+1, n<+1)`` exactly (:func:`theta_human`).

With a metric (Sections 3.2-3.3, Algorithm 1) the posterior of ``(p, mu)`` has no closed form.
The paper samples it with NUTS.  :func:`sample_posterior` computes it *exactly* instead (design
notes in ``docs/protocol.md``): let ``z`` be the latent true labels of the metric-only inputs,
aggregated as a 3x3 table (metric label x true label) with column sums ``t``.  Given ``z``,
``p ~ Dir(n + t + 1)`` whatever ``mu`` is, and integrating ``p`` and ``mu`` out (Dirichlet-
multinomial conjugacy) leaves a discrete posterior of ``z`` whose sum over all tables with the
same ``t`` is a 2-D convolution of three per-metric-label tables.  An FFT convolution gives
``P(t)`` on the ``(|M| + 1)(|M| + 2) / 2`` values of ``t`` at once
(:func:`_exact_latent_totals`), and ``theta = sum_t P(t) (1 - I_1/2(n> + t> + 1, n< + t< + 1))``
is then an exact finite sum (to round-off; an a-posteriori bound is returned in
``PosteriorDraws.mcse``).  Only a window of
latent totals that holds all but a bounded sliver of the posterior is computed, by a cyclic
FFT convolution of the window's size.  Cost ``O(W log W)`` for a window of ``W <= (|M| + 1)^2``
cells, independent of the human counts.  Wide windows (weakly identified pairs with hundreds
of metric-only inputs) are computed on coarse lattices of step ``h`` and ``2h`` instead and
Richardson-extrapolated, with an error estimate (at most 1e-3, measured errors below 3e-4) in
``mcse``, which includes what the lattices get wrong at the faces of the simplex (estimated
from one-dimensional functions); posteriors with so much mass at the faces that this does not
fit keep every latent total.

Pairs with more than ``max_exact`` (default 1,200) metric-only inputs, or all pairs with
``method="gibbs"``, use a conjugate data-augmentation Gibbs sampler instead:

1. latent true labels of the metric-only inputs, aggregated as a 3x3 table ``z`` (metric label ×
   true label): row ``c`` is ``Multinomial(m_c, mu[c, :] * p / sum)``, so a step costs the same for
   10 or 10,000 metric-only inputs;
2. ``p | z ~ Dir(n + t + 1)`` with ``t = z.sum(axis=0)`` the latent true-label totals, and every
   column ``mu[:, c'] | z ~ Dir(confusion[:, c'] + z[:, c'] + 1)`` (Eq. 4 with the latent table);
3. a Metropolis "ridge" move that redraws ``mu`` from the confusion-only posterior while holding
   ``q = mu @ p`` fixed (``p`` follows as ``mu^{-1} q``).  When metric-only inputs dominate, the
   posterior is a thin ridge ``mu @ p ≈ m / |M|`` along which plain data augmentation crawls; the
   move jumps along it (made only for pairs whose metric-only inputs outnumber the doubly rated
   ones).

Chains run until the Monte Carlo standard error of ``theta`` (spread of the chain means) is below
``tol`` or a cap is reached; the error is returned per pair (``PosteriorDraws.mcse``).

Either way the posterior of ``p`` is represented as a mixture of Dirichlets ``Dir(n + t + 1)``
(:class:`PosteriorDraws`): the sampler keeps one component per sweep (summaries are Rao-
Blackwellised averages of exact Dirichlet functionals), the exact path stores the exact
``theta`` and posterior mean of ``p`` plus a systematic resample of ``P(t)`` as components for
the summaries that need draws (ROPE, predictive probability).  The human-only posterior is the
special case of a single component ``alpha = n + 1``.

Beyond the paper (its "Limitations"): :func:`rope_probability` (region of practical equivalence
on ``p> - p<``); the prediction of every pair's decision on all its inputs that corrects the
repeated tests of Algorithm 2 lives in :mod:`protocol.predictive`.

This module is pure: numpy and scipy only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.fft import next_fast_len
from scipy.special import betainc, digamma, gammaln

__all__ = [
    "DRAW",
    "LABELS",
    "LOSS",
    "WIN",
    "Decision",
    "PosteriorDraws",
    "counts_from_labels",
    "decide",
    "decide_with_thresholds",
    "human_posterior",
    "kl_divergence",
    "posterior_mean_p",
    "posterior_mode_p",
    "preferences_from_scores",
    "rope_probability",
    "sample_posterior",
    "theta_human",
    "theta_with_metric",
]

WIN = 1
"""Label: the output of system *a* is preferred (``>``, Definition 1)."""
DRAW = 0
"""Label: no preference (``=``)."""
LOSS = -1
"""Label: the output of system *b* is preferred (``<``)."""
LABELS: tuple[int, int, int] = (WIN, DRAW, LOSS)
"""Label order of every count vector: ``(>, =, <)``."""


class Decision(IntEnum):
    """Outcome of Algorithm 1 for a pair (a, b)."""

    B_WINS = -1
    UNDECIDED = 0
    A_WINS = 1


# --------------------------------------------------------------------------------------------
# Labels and counts
# --------------------------------------------------------------------------------------------


def preferences_from_scores(
    score_a: ArrayLike, score_b: ArrayLike, dead_zone: float = 0.0
) -> NDArray[np.int8]:
    """Preference labels from scalar scores by the sign of the difference (Definition 5).

    ``+1`` if ``score_a - score_b > dead_zone``, ``-1`` if it is ``< -dead_zone`` and ``0``
    (draw) otherwise.  With ``dead_zone=0`` this is exactly Definition 5; a positive dead zone is
    the "minimal threshold" the paper mentions under "Conversion to Preference Ratings".  Likert
    studies pass the two outputs' mean ratings per input.  A NaN score gives ``0``, so unrated
    inputs must be dropped before, not passed in.
    """
    if dead_zone < 0:
        raise ValueError("dead_zone must be >= 0")
    diff = np.asarray(score_a, dtype=float) - np.asarray(score_b, dtype=float)
    out = np.zeros(diff.shape, dtype=np.int8)
    out[diff > dead_zone] = WIN
    out[diff < -dead_zone] = LOSS
    return out


def counts_from_labels(labels: ArrayLike) -> NDArray[np.int64]:
    """Count vector ``(n>, n=, n<)`` of a 1-D array of labels in ``{+1, 0, -1}`` (Section 3.1)."""
    lab = np.asarray(labels).ravel()
    return np.array([(lab == WIN).sum(), (lab == DRAW).sum(), (lab == LOSS).sum()], dtype=np.int64)


def _as_counts(counts: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(counts, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"{name} must have shape (n_pairs, 3), got {arr.shape}")
    if arr.size and not arr.min() >= 0:  # (NaN fails too)
        raise ValueError(f"{name} must be non-negative")
    return arr


# --------------------------------------------------------------------------------------------
# Exact human-only posterior (Section 3.1, Eq. 3)
# --------------------------------------------------------------------------------------------


def _theta_from_alpha(alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    """``P(p> > p<)`` for ``p ~ Dir(alpha)``: ``1 - I_{1/2}(alpha>, alpha<)``.

    ``p> / (p> + p<)`` is ``Beta(alpha>, alpha<)`` whatever ``alpha=`` is (aggregation property of
    the Dirichlet), so the event ``p> > p<`` is ``Beta > 1/2``.  Uses the symmetry
    ``1 - I_x(a, b) = I_{1-x}(b, a)`` to avoid cancellation near 1.
    """
    return betainc(alpha[..., 2], alpha[..., 0], 0.5)


def theta_human(counts: ArrayLike) -> NDArray[np.float64]:
    """Exact ``theta = P(p> > p< | human counts)`` under Eq. 3, shape (n_pairs,).

    ``counts`` has shape (n_pairs, 3) or (3,), ordered ``(n>, n=, n<)``.  Replaces the Monte
    Carlo average of Algorithm 1 (lines 16-17) by ``1 - I_{1/2}(n>+1, n<+1)``.
    """
    n = _as_counts(counts, "counts")
    return _theta_from_alpha(n + 1.0)


def posterior_mode_p(counts: ArrayLike) -> NDArray[np.float64]:
    """Mode of ``Dir(n + 1)`` (Eq. 3), i.e. ``n / sum(n)``; this is ``p_hum`` of Section 6.

    Pairs without any count get the uniform vector.
    """
    n = _as_counts(counts, "counts")
    tot = n.sum(axis=1, keepdims=True)
    return np.where(tot > 0, n / np.where(tot > 0, tot, 1.0), 1.0 / 3.0)


def kl_divergence(p: ArrayLike, q: ArrayLike, eps: float = 1e-12) -> NDArray[np.float64]:
    """Row-wise ``KL(p || q) = sum p log(p / q)`` in nats (the KLD of Section 6).

    ``0 log 0 = 0``; ``q`` is floored at ``eps`` so that a zero in ``q`` gives a large finite value
    instead of ``inf``.
    """
    pa = np.atleast_2d(np.asarray(p, dtype=float))
    qa = np.atleast_2d(np.asarray(q, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pa > 0, pa * (np.log(pa) - np.log(np.maximum(qa, eps))), 0.0)
    return terms.sum(axis=-1)


# --------------------------------------------------------------------------------------------
# Posterior representation: an equally weighted mixture of Dirichlets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PosteriorDraws:
    """Posterior of ``p`` per pair as a weighted mixture of Dirichlet distributions.

    ``alpha`` has shape (n_draws, n_pairs, 3): component ``s`` says ``p | s ~ Dir(alpha[s, k])``;
    ``weights`` (n_draws, n_pairs) sums to one over ``s`` for every pair (padding components of
    pairs that needed fewer sweeps have weight zero).  Human-only pairs have the single exact
    component ``n + 1`` (Eq. 3); exactly computed pairs with metric-only inputs get
    ``_EXACT_COMPONENTS`` equally weighted components ``n + t + 1`` drawn from the exact
    ``P(t)``, Gibbs-sampled ones one component per kept sweep (Rao-Blackwellisation).
    ``theta_values`` / ``mean_p_values``, when set, hold the per-pair ``theta`` and mean of ``p``
    (exact where computed exactly) and take precedence over the mixture averages.  ``mcse`` is
    the Monte Carlo standard error of ``theta`` (spread of the chain means) for sampled pairs, an
    upper bound on the round-off error for exactly computed ones, 0 for human-only pairs.
    """

    alpha: NDArray[np.float64]
    weights: NDArray[np.float64]
    human_counts: NDArray[np.float64]
    mcse: NDArray[np.float64]
    theta_values: NDArray[np.float64] | None = None
    mean_p_values: NDArray[np.float64] | None = None

    @property
    def n_pairs(self) -> int:
        return int(self.alpha.shape[1])

    def theta(self) -> NDArray[np.float64]:
        """``P(p> > p<)`` per pair (Algorithm 1, line 17).

        Exact where the posterior was computed exactly (``theta_values``), otherwise the
        Rao-Blackwellised mixture average.
        """
        if self.theta_values is not None:
            return self.theta_values.copy()
        return (self.weights * _theta_from_alpha(self.alpha)).sum(axis=0)

    def mean_p(self) -> NDArray[np.float64]:
        """Posterior mean of ``p`` per pair, shape (n_pairs, 3)."""
        if self.mean_p_values is not None:
            return self.mean_p_values.copy()
        comp = self.alpha / self.alpha.sum(axis=-1, keepdims=True)
        return (self.weights[..., None] * comp).sum(axis=0)

    def components(self, size: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``size`` mixture components per pair drawn by weight, shape (size, n_pairs, 3)."""
        cum = np.cumsum(self.weights, axis=0)
        u = rng.random((size, self.n_pairs)) * cum[-1]
        idx = np.empty((size, self.n_pairs), dtype=np.int64)
        for k in range(self.n_pairs):
            idx[:, k] = np.searchsorted(cum[:, k], u[:, k], side="right")
        idx = np.minimum(idx, self.alpha.shape[0] - 1)
        return np.take_along_axis(self.alpha, idx[..., None], axis=0)


def human_posterior(human_counts: ArrayLike) -> PosteriorDraws:
    """The exact human-only posterior (Eq. 3) wrapped as a one-component :class:`PosteriorDraws`."""
    n = _as_counts(human_counts, "human_counts")
    k = n.shape[0]
    return PosteriorDraws(
        alpha=(n + 1.0)[None, :, :], weights=np.ones((1, k)), human_counts=n, mcse=np.zeros(k)
    )


def _validate_metric_inputs(
    human_counts: ArrayLike, confusion: ArrayLike, metric_counts: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    n = _as_counts(human_counts, "human_counts")
    m = _as_counts(metric_counts, "metric_counts")
    conf = np.asarray(confusion, dtype=float)
    if conf.ndim == 2:
        conf = conf[None, :, :]
    if conf.shape != (n.shape[0], 3, 3):
        raise ValueError(f"confusion must have shape ({n.shape[0]}, 3, 3), got {conf.shape}")
    if m.shape[0] != n.shape[0]:
        raise ValueError("human_counts and metric_counts must have the same number of pairs")
    if conf.size and not conf.min() >= 0:
        raise ValueError("confusion must be non-negative")
    if not (conf.sum(axis=1) <= n + 1e-9).all():
        raise ValueError(
            "confusion column sums (human labels of doubly rated inputs) exceed human_counts; "
            "human_counts must include every human-rated input (Appendix A)"
        )
    every = np.concatenate([n.ravel(), m.ravel(), conf.ravel()])
    if not np.array_equal(every, np.rint(every)):
        raise ValueError("counts must be integers")
    return n, conf, m


def _log_dir_kernel(p: NDArray[np.float64], n: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sum_c n_c log p_c`` (log density of ``Dir(n + 1)`` up to a constant)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(n > 0, n * np.log(np.where(p > 0, p, 1.0)), 0.0)
        terms = np.where((n > 0) & (p <= 0), -np.inf, terms)
    return terms.sum(axis=-1)


def _dirichlet(rng: np.random.Generator, alpha: NDArray[np.float64], axis: int) -> NDArray:
    g = rng.standard_gamma(alpha)
    s = g.sum(axis=axis, keepdims=True)
    # Gamma draws with alpha >= 1 are positive almost surely; guard against underflow anyway.
    return g / np.where(s > 0, s, 1.0)


def _det3(a: NDArray[np.float64]) -> NDArray[np.float64]:
    return (
        a[..., 0, 0] * (a[..., 1, 1] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 1])
        - a[..., 0, 1] * (a[..., 1, 0] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 0])
        + a[..., 0, 2] * (a[..., 1, 0] * a[..., 2, 1] - a[..., 1, 1] * a[..., 2, 0])
    )


def _solve3(a: NDArray[np.float64], b: NDArray[np.float64], det: NDArray) -> NDArray:
    """Solve ``a x = b`` for stacks of 3x3 systems by Cramer's rule (NaN where singular)."""
    out = np.empty(b.shape)
    safe = np.where(np.abs(det) > 1e-300, det, np.nan)
    for j in range(3):
        aj = a.copy()
        aj[..., :, j] = b
        out[..., j] = _det3(aj) / safe
    return out


def _ridge_move(
    rng: np.random.Generator,
    p: NDArray[np.float64],
    mu: NDArray[np.float64],
    n: NDArray[np.float64],
    a_mu: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Independence Metropolis-Hastings move along the ridge ``mu @ p = q`` (``q`` held fixed).

    In the coordinates ``(q, mu)`` with ``p = mu^{-1} q`` the marginal posterior of Algorithm 1
    is ``Dir(p; n + 1) prod_c' Dir(mu[:, c']; a_mu[:, c']) Mult(m; q) / |det mu|`` (the Jacobian
    of ``p -> mu p`` on the simplex is ``det mu`` because the columns of ``mu`` sum to one).  The
    proposal ``mu' ~ prod_c' Dir(a_mu[:, c'])`` is the confusion-only posterior (Eq. 4), so the
    acceptance ratio is ``Dir(p'; n + 1) |det mu| / (Dir(p; n + 1) |det mu'|)`` and ``p'`` must
    lie in the simplex.
    """
    shape = p.shape[:-1]
    q = np.einsum("...ij,...j->...i", mu, p)
    mu_new = _dirichlet(rng, np.broadcast_to(a_mu, mu.shape), axis=-2)
    det_new = _det3(mu_new)
    p_new = _solve3(mu_new, q, det_new)
    ok = np.all(p_new > 0, axis=-1) & np.isfinite(det_new)
    p_new = np.where(ok[..., None], p_new, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = (
            _log_dir_kernel(p_new, n)
            - np.log(np.abs(np.where(ok, det_new, 1.0)))
            - _log_dir_kernel(p, n)
            + np.log(np.abs(_det3(mu)))
        )
    accept = ok & (np.log(rng.random(shape)) < log_ratio)
    p = np.where(accept[..., None], p_new / p_new.sum(axis=-1, keepdims=True), p)
    mu = np.where(accept[..., None, None], mu_new, mu)
    return p, mu


_MAX_EXACT_METRIC = 1200
"""Default cap on the metric-only inputs of a pair for the exact posterior (``|M|^2`` cells)."""
_EXACT_COMPONENTS = 512
"""Dirichlet components kept (systematic resampling) per exactly computed pair."""
_FFT_FLOOR = 1e-12
"""Entries of the FFT convolution below this fraction of its maximum are round-off noise."""
_WINDOW_TAIL = 1e-15
"""Each tail of a latent-total bound left outside the computed window (fraction of its total)."""
_FLOOR_TIGHTEN = 1e-8
"""On the lattice of every total, a floor bound above this (relative) is tightened cell by cell
against the rows', columns' and anti-diagonals' masses."""
_EXACT_TOL = 1e-5
"""Largest accepted bound on the posterior mass the FFT floor and the window can move (else the
tilt is refined and, at the last attempt, the whole grid of latent totals is computed)."""
_SIMPLEX_SHARE = 0.9
_SIMPLEX_MIN_TOTAL = 100
"""A window of every latent total from ``t> = t= = 0`` covering more than ``_SIMPLEX_SHARE`` of
the square ``|M| x |M|`` is convolved on the simplex's lattice (:func:`_simplex_convolution`,
about 0.75 of the square) for ``|M| >= _SIMPLEX_MIN_TOTAL`` (below it the FFTs cost less than
the extra steps), not cyclically on the window."""
_COARSE_MIN_CELLS = 40_000
"""Windows of fewer latent totals are always computed on the lattice of every total."""
_COARSE_WIDTH_PER_STEP = 50
"""A coarse lattice step ``h`` needs a window at least ``50 h`` wide in both directions (the
posterior's standard deviation is then at least about ``3 h``)."""
_COARSE_MAX_STEP = 8
"""Largest coarse lattice step."""
_COARSE_TOL = 1e-3
"""Largest accepted estimate of the coarse-lattice error of ``theta`` (else every latent total is
computed)."""
_COARSE_FACES = 0.2 * _COARSE_TOL
"""Largest estimate of what a coarse step gets wrong at the faces of the simplex (the spill past
``t< = 0`` and the sharp second factor, :class:`_Faces`) for that step to be tried."""

_LOG_GAMMA = np.array([np.inf])
"""``_LOG_GAMMA[k] = log Gamma(k)`` for the integers ``k`` (grown on demand, see
:func:`_log_gamma_int`)."""


def _log_gamma_int(size: int) -> NDArray[np.float64]:
    """``log Gamma(k)`` for ``k = 0 .. size - 1`` at least (``inf`` at 0), cached across calls.

    Every Gamma function of the exact posterior has an integer argument (counts plus 1), so one
    table serves all pairs of a round.
    """
    global _LOG_GAMMA
    table = _LOG_GAMMA
    if table.size < size:
        table = np.empty(max(size, 2 * table.size, 4096))
        table[0] = np.inf
        table[1:] = gammaln(np.arange(1.0, table.size))
        _LOG_GAMMA = table
    return table


_SCRATCH = threading.local()
_SCRATCH_MAX = 1 << 22
"""Largest scratch array kept between calls (elements; 64 MB complex)."""


def _scratch(name: str, shape: tuple[int, int], dtype: type) -> NDArray:
    """An uninitialised C-contiguous array of ``shape`` on a buffer kept per thread and ``name``
    (grown on demand, up to ``_SCRATCH_MAX`` elements): the FFTs of every pair of a round write
    into the same memory instead of allocating and page-faulting megabytes per call."""
    size = shape[0] * shape[1]
    if size > _SCRATCH_MAX:
        return np.empty(shape, dtype=dtype)
    buffers = _SCRATCH.__dict__
    buf = buffers.get(name)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = np.empty(size, dtype=dtype)
        buffers[name] = buf
    return buf[:size].reshape(shape)


def _clip(x: NDArray, lo: int, hi: int) -> NDArray:
    """``np.clip(x, lo, hi)`` for the short integer vectors of the hot path, where ``np.clip``
    costs more than the arithmetic."""
    return np.minimum(np.maximum(x, lo), hi)


def _hankel(
    v: NDArray[np.float64], rows: int, cols: int, step_rows: int = 1, step_cols: int = 1
) -> NDArray[np.float64]:
    """Read-only view ``H[i, j] = v[step_rows i + step_cols j]`` (a Hankel matrix for unit steps;
    ``v`` long enough), no copy."""
    v = np.ascontiguousarray(v)
    size = v.itemsize
    view = np.ndarray((rows, cols), v.dtype, buffer=v, strides=(step_rows * size, step_cols * size))
    view.flags.writeable = False
    return view


def _product_table(e: list[NDArray[np.float64]], total: int) -> NDArray[np.float64]:
    """One row's table ``T[i, j] = e0[i] e1[j] e2[total - i - j]`` (zero where ``i + j > total``)
    from the three vectors on ``0..total``, as a product (exact to a few ulps)."""
    back = np.concatenate([e[2][::-1], np.zeros(total)])
    table = e[0][:, None] * e[1][None, :]
    table *= _hankel(back, total + 1, total + 1)
    return table


def _halved_table(e: list[NDArray[np.float64]], total: int) -> NDArray[np.float64]:
    """``_coarsen(_product_table(e, total))`` without the table of every total: along ``i`` the
    move onto the even totals is three products of a vector with a Hankel view of step 2 (row
    ``q`` takes ``T[2q] + (T[2q - 1] + T[2q + 1]) / 2``), then the columns are halved."""
    half = (total + 2) // 2 + 1  # rows of the result, as _coarsen gives
    a = np.zeros(2 * half + 2)
    a[1 : total + 2] = e[0]  # a[1 + i] = e0[i]
    back = np.zeros(2 * half + total + 4)
    back[1 : total + 2] = e[2][::-1]  # back[1 + s] = e2[total - s], zero past the simplex

    def hankel(p: int) -> NDArray[np.float64]:  # H[q, j] = back[1 + 2q + p + j]
        return _hankel(back[1 + p :], half, total + 1, 2, 1)

    rows = a[1 : 1 + 2 * half : 2][:, None] * hankel(0)
    rows += (0.5 * a[0 : 2 * half : 2])[:, None] * hankel(-1)
    rows += (0.5 * a[2 : 2 * half + 2 : 2])[:, None] * hankel(1)
    rows *= e[1][None, :]
    return _coarsen_cols(rows)


def _log_table(log_w: list[NDArray[np.float64]], total: int) -> NDArray[np.float64]:
    """:func:`_product_table` of ``exp(log_w)`` scaled to a largest entry of 1, from the exponential
    of the summed logarithms (for tables whose product of separately scaled vectors would
    underflow)."""
    back_log = np.concatenate([log_w[2][::-1], np.full(total, -np.inf)])
    lp = log_w[0][:, None] + log_w[1][None, :] + _hankel(back_log, total + 1, total + 1)
    return np.exp(lp - lp.max())


def _fold(x: NDArray, size: int, shift: int, axis: int, out: NDArray | None = None) -> NDArray:
    """``out[(i - shift) mod size] += x[i]`` along ``axis`` (0 or 1) of a 2-D array.

    The input of a cyclic convolution of length ``size`` whose output index ``r`` stands for the
    linear index ``shift + r`` (mod ``size``); with ``size`` at least the linear length it is a
    plain rotation.
    """
    length = x.shape[axis]
    if out is None:
        shape = (size, x.shape[1]) if axis == 0 else (x.shape[0], size)
        out = np.zeros(shape, dtype=x.dtype)
    i = 0
    while i < length:
        dst = (i - shift) % size
        step = min(size - dst, length - i)
        if axis == 0:
            out[dst : dst + step] += x[i : i + step]
        else:
            out[:, dst : dst + step] += x[:, i : i + step]
        i += step
    return out


def _window(full: NDArray[np.float64], lo0: int, rows: int, lo1: int, cols: int) -> NDArray:
    """``full[(lo0 + i) mod size0, (lo1 + j) mod size1]`` for ``i < rows``, ``j < cols``: the window
    of a cyclic convolution's output (``rows <= size0``, ``cols <= size1``), as a new array."""
    size0, size1 = full.shape
    out = np.empty((rows, cols))
    r0, c0 = lo0 % size0, lo1 % size1
    rs = [(0, r0, min(rows, size0 - r0))]
    if rs[0][2] < rows:
        rs.append((rs[0][2], 0, rows - rs[0][2]))
    cs = [(0, c0, min(cols, size1 - c0))]
    if cs[0][2] < cols:
        cs.append((cs[0][2], 0, cols - cs[0][2]))
    for dst_r, src_r, nr in rs:
        for dst_c, src_c, nc in cs:
            out[dst_r : dst_r + nr, dst_c : dst_c + nc] = full[
                src_r : src_r + nr, src_c : src_c + nc
            ]
    return out


def _central(v: NDArray[np.float64], tail: float) -> tuple[int, int]:
    """Smallest ``[lo, hi)`` leaving at most ``tail * sum(v)`` of the non-negative ``v`` on each
    side."""
    cum = np.cumsum(v)
    total = cum[-1]
    lo = int(np.searchsorted(cum, tail * total, side="right"))
    hi = int(np.searchsorted(cum, total - tail * total, side="left")) + 1
    return min(lo, v.size - 1), max(min(hi, v.size), min(lo, v.size - 1) + 1)


def _outside(v: NDArray[np.float64], lo: int, hi: int) -> float:
    """Sum of ``v`` outside ``[lo, hi)``."""
    return float(v[: max(lo, 0)].sum() + v[max(hi, 0) :].sum())


def _fold_margin(v: NDArray[np.float64], lo: int, hi: int, budget: float) -> int:
    """Smallest ``p >= 0`` with the sum of the non-negative ``v`` outside ``[lo - p, hi + p)`` at
    most ``budget`` (or the ``p`` that leaves nothing outside)."""
    cum = np.concatenate([[0.0], np.cumsum(v)])
    p = np.arange(max(lo, v.size - hi, 0) + 1)
    outside = cum[np.clip(lo - p, 0, v.size)] + (cum[-1] - cum[np.clip(hi + p, 0, v.size)])
    ok = np.flatnonzero(outside <= budget)
    return int(p[ok[0]] if ok.size else p[-1])


def _binomial_bands(sizes: NDArray[np.int64]) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """The CDF of ``Binomial(N, 1/2)`` in a band around ``N / 2`` for each ``N`` of the sorted,
    distinct ``sizes`` (all ``>= 0``), as one flat array: the segment of ``N`` starts at
    ``offset[i]`` and holds ``0, F(lo), F(lo + 1), ..., F(hi), 1`` with ``[lo, hi]`` =
    ``[N/2 - w, N/2 + w]`` (clipped to ``[0, N]``), ``w = 4.5 sqrt(N) + 2``.  Beyond the band
    the CDF is within ``2 exp(-40)`` of 0 or 1 (Hoeffding), which the two sentinels stand for.

    ``F(lo)`` is ``betainc``; the probabilities after it follow from the ratio
    ``pmf(k) / pmf(k - 1) = (N - k + 1) / k``.  Returns ``flat, offset, lo, hi``.
    """
    half = np.ceil(4.5 * np.sqrt(sizes)).astype(np.int64) + 2
    lo = np.maximum(sizes // 2 - half, 0)
    hi = np.minimum(sizes // 2 + half, sizes)
    length = hi - lo + 1
    j = np.arange(int(length.max()))[None, :]
    k = np.minimum(lo[:, None] + j, hi[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        pmf = np.where(j > 0, (sizes[:, None] - k + 1.0) / k, 1.0)
    lf = _log_gamma_int(int(sizes.max()) + 2)[1:]  # lf[i] = log i!
    with np.errstate(under="ignore"):
        pmf[:, 0] = np.exp(lf[sizes] - lf[lo] - lf[sizes - lo] - sizes * np.log(2.0))
    np.cumprod(pmf, axis=1, out=pmf)
    below = np.maximum(sizes - lo, 1).astype(float)
    pmf[:, 0] = np.where(lo < sizes, betainc(below, lo + 1.0, 0.5), 1.0)
    cdf = np.cumsum(pmf, axis=1, out=pmf)
    offset = np.concatenate([[0], np.cumsum(length + 2)[:-1]])
    flat = np.ones(int((length + 2).sum()))
    flat[offset] = 0.0
    inside = j < length[:, None]
    flat[(offset[:, None] + 1 + j)[inside]] = cdf[inside]
    return flat, offset, lo, hi


_THETA_DIRECT_CELLS = 65_536
"""Boxes of latent totals up to this size get theta's binomial CDF read for every cell (faster
than the band sums up to about 100,000 cells)."""
_BINOMIAL_CACHE_MAX = 4096
"""Binomial sizes up to this have their CDF bands cached (about 13 MB at most)."""
_BINOMIAL: tuple[NDArray, NDArray, NDArray, NDArray] = _binomial_bands(np.arange(2))
""":func:`_binomial_bands` of ``N = 0, 1, ...`` (grown on demand, up to ``_BINOMIAL_CACHE_MAX``)."""


def _binomial_cdf_bands(sizes: NDArray[np.int64]) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """:func:`_binomial_bands` indexed like ``sizes`` (any order, repeats): ``flat`` and per entry
    its segment's ``offset``, ``lo`` and ``hi``.  Cached up to ``_BINOMIAL_CACHE_MAX``."""
    global _BINOMIAL
    top = int(sizes.max())
    if top > _BINOMIAL_CACHE_MAX:
        distinct, where = np.unique(sizes, return_inverse=True)
        flat, offset, lo, hi = _binomial_bands(distinct)
        return flat, offset[where], lo[where], hi[where]
    if top >= _BINOMIAL[1].size:
        grown = min(max(top + 1, 2 * _BINOMIAL[1].size, 1024), _BINOMIAL_CACHE_MAX + 1)
        _BINOMIAL = _binomial_bands(np.arange(grown))
    flat, offset, lo, hi = _BINOMIAL
    return flat, offset[sizes], lo[sizes], hi[sizes]


def _theta_sum(
    prob: NDArray[np.float64],
    lo_eq: int,
    lo_gt: int,
    n: NDArray[np.float64],
    big_m: int,
    step: int = 1,
    step_gt: int | None = None,
) -> float:
    """``sum_t prob[t] (1 - I_1/2(n> + t> + 1, n< + t< + 1))`` over a box of latent totals
    (``t= = lo_eq + step * row``, ``t> = lo_gt + step_gt * column`` with ``step_gt`` = ``step``
    unless given, ``t< = |M| - t> - t=``; a coarse lattice may hold cells just off the simplex,
    ``t< < 0``, where the binomial CDF below goes on, 1 from ``n> + t> >= N'``).

    For integer arguments ``1 - I_1/2(a>, a<)`` is the CDF of ``Binomial(N', 1/2)`` at
    ``a> - 1 = n> + t>`` with ``N' = a> + a< - 1 = n> + n< + 1 + |M| - t=``, the same ``N'`` along
    a row.  The CDF is read from the cached bands of :func:`_binomial_cdf_bands` in the columns
    of each row's band; the cells after it count with CDF 1 and those before with 0.  In boxes
    of at most ``_THETA_DIRECT_CELLS`` cells, where finding the bands costs more than it saves,
    the CDF is read for every cell instead.
    """
    n0, n2 = int(n[0]), int(n[2])
    rows, cols = prob.shape
    # binomial size per row (rows wholly off the simplex, t= > |M|, keep a size >= 1)
    big_n = np.maximum(n0 + n2 + 1 + big_m - (lo_eq + step * np.arange(rows)), 1)
    step = step if step_gt is None else step_gt  # from here on: along t>
    flat_cdf, offset, lo, hi = _binomial_cdf_bands(big_n)
    k0 = n0 + lo_gt  # binomial argument n> + t> in column 0
    every_cell = rows * cols <= _THETA_DIRECT_CELLS  # (a box of up to ~250 x 250 cells)
    if every_cell:
        start, width = np.zeros(rows, dtype=np.int64), cols
    else:
        # each row's band in columns: [first, last)
        first = _clip(-((k0 - lo) // step), 0, cols)
        last = _clip((hi - k0) // step + 1, 0, cols)
        width = int(max((last - first).max(), 1))
        start = np.minimum(first, cols - width)
    j = np.arange(width)[None, :]
    # index into the flat bands, clipped to each segment's sentinels (0 before the band, 1
    # after it)
    index = (offset + 1 + k0 - lo + step * start)[:, None] + step * j
    np.maximum(index, offset[:, None], out=index)
    np.minimum(index, (offset + hi - lo + 2)[:, None], out=index)
    cdf = flat_cdf.take(index)
    if every_cell:
        return float(np.vdot(cdf, prob))
    row0 = np.arange(rows) * cols
    flat = prob.ravel()
    band = flat.take((row0 + start)[:, None] + j)
    # the cells after each row's band: sums over flat segments [row0 + start + width, next row)
    # (the last one runs to the end)
    after = start + width < cols
    bounds = np.empty(2 * rows - 1, dtype=np.int64)
    bounds[0::2] = row0 + np.minimum(start + width, cols - 1)
    bounds[1::2] = row0[1:]
    segments = np.add.reduceat(flat, bounds)[0::2]
    return float(np.vdot(cdf, band)) + float(segments @ after)


def _systematic_cells(
    prob: NDArray[np.float64], size: int, rng: np.random.Generator, block: int = 32
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``size`` cells (row, column) of a non-negative 2-D array drawn with probability
    proportional to their value by systematic resampling (row-major order), through sums over
    blocks of ``block`` consecutive cells so that only the chosen blocks are accumulated cell by
    cell."""
    flat = prob.ravel()
    if flat.size <= 4 * block * size:  # small: accumulate every cell
        cum = np.cumsum(flat)
        u = (rng.random() + np.arange(size)) / size * cum[-1]
        idx = np.minimum(np.searchsorted(cum, u, side="right"), cum.size - 1)
        return np.divmod(idx, prob.shape[1])
    whole = flat.size // block * block
    sums = flat[:whole].reshape(-1, block) @ np.ones(block)
    if whole < flat.size:
        sums = np.append(sums, flat[whole:].sum())
    cum = np.cumsum(sums)
    u = (rng.random() + np.arange(size)) / size * cum[-1]
    pick = np.minimum(np.searchsorted(cum, u, side="right"), cum.size - 1)
    rest = u - (cum[pick] - sums[pick])  # position inside the chosen block
    cell = pick[:, None] * block + np.arange(block)[None, :]
    vals = flat.take(cell, mode="clip")
    vals[cell >= flat.size] = 0.0
    inside = (np.cumsum(vals, axis=1) <= rest[:, None]).sum(axis=1)
    last = block - 1 - np.argmax(vals[:, ::-1] > 0, axis=1)  # round-off: stay on a positive cell
    return np.divmod(pick * block + np.minimum(inside, last), prob.shape[1])


def _coarsen_rows(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """A table on ``0..L-1`` along its first axis (``t>``) moved onto the lattice ``0, 2, 4, ...``
    by linear (cloud-in-cell) weights: an even index keeps its value, an odd one ``2q + 1``
    gives half to ``q`` and half to ``q + 1``, so mass and first moments are kept exactly."""
    rows = table.shape[0]
    pairs = rows // 2
    out = np.zeros(((rows + 1) // 2 + 1,) + table.shape[1:])
    odd = 0.5 * table[1 : 2 * pairs : 2]
    np.add(table[0 : 2 * pairs : 2], odd, out=out[:pairs])
    if rows % 2:
        out[pairs] = table[-1]
    out[1 : pairs + 1] += odd
    return out


def _coarsen_cols(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`_coarsen_rows` along the second axis (``t=``), through the pairs ``(2q, 2q + 1)`` of
    each row (a contiguous reshape)."""
    rows, cols = table.shape
    pairs = cols // 2
    out = np.zeros((rows, (cols + 1) // 2 + 1))
    pair = table[:, : 2 * pairs].reshape(rows, pairs, 2)
    odd = 0.5 * pair[:, :, 1]
    np.add(pair[:, :, 0], odd, out=out[:, :pairs])
    if cols % 2:
        out[:, pairs] = table[:, -1]
    out[:, 1 : pairs + 1] += odd
    return out


def _coarsen(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """A table moved onto the lattice ``0, 2, 4, ...`` along both axes (:func:`_coarsen_rows`,
    then :func:`_coarsen_cols`).  Nested linear interpolation is linear interpolation, so
    applying this ``k`` times is the same move onto the lattice of step ``2**k``."""
    return _coarsen_cols(_coarsen_rows(table))


def _stride(v: NDArray[np.float64], start: int, step: int, size: int) -> NDArray[np.float64]:
    """``v[start + step * i]`` for ``i < size``, zero past the end of ``v`` (``start >= 0``)."""
    out = np.zeros(size)
    part = v[start::step][:size]
    out[: part.size] = part
    return out


def _second_on_lattice(
    second: list[NDArray[np.float64]],
    big_m: int,
    lo_eq: int,
    rows: int,
    lo_gt: int,
    cols: int,
    step_eq: int = 1,
    step_gt: int = 1,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The second factor's three parts on a box of a lattice (steps ``step_eq`` along ``t=`` and
    ``step_gt`` along ``t>``; first cell ``t= = step_eq lo_eq``, ``t> = step_gt lo_gt``): ``e1``
    along ``t=``, ``e0`` along ``t>``, and ``e2`` (``t< = |M| - t> - t=``, zero off the simplex)
    as a vector ``back`` with ``e2`` of cell ``(r, c)`` at ``back[step_eq r + step_gt c]``
    (:func:`_hankel`)."""
    e_eq = _stride(second[1], step_eq * lo_eq, step_eq, rows)
    e_gt = _stride(second[0], step_gt * lo_gt, step_gt, cols)
    # back[k] = e2[|M| - first - k], first = t= + t> of cell (0, 0): e2 reversed from there on
    first = step_eq * lo_eq + step_gt * lo_gt
    back = _stride(second[2][::-1], first, 1, step_eq * (rows - 1) + step_gt * (cols - 1) + 1)
    return e_eq, e_gt, back


class _Lattices(dict):
    """The three row tables of one tilt (one per metric label ``c``: ``T[i, j]`` = ``w0[i] w1[j]
    w2[m_c - i - j]``, the rows of ``log_w[c]`` holding the logarithms of the three factors) on
    the lattices of step 1, 2, 4, ..., each built when first asked for, and their exact
    one-dimensional margins.

    A table is the product of its three exponentiated factors (each scaled to a largest entry
    of 1, then the first so that the table's largest row sum is 1), so its margins are direct
    1-D convolutions of the factors: summed over ``j``, ``w0[i] (w1 * w2)[m - i]``; over ``i``,
    ``w1[j] (w0 * w2)[m - j]``; along ``i + j = m - k``, ``w2[k] (w0 * w1)[m - k]``.  The step-2
    table is built without the table of every total (:func:`_halved_table`), coarser ones by
    :func:`_coarsen`.  Only where that product would underflow (largest row sum below 1e-200) is
    a table built from its summed logarithms (:func:`_log_table`) and its margins summed.
    """

    def __init__(self, log_w: list[NDArray[np.float64]], totals: NDArray[np.int64]) -> None:
        super().__init__()
        self.factors: list[list[NDArray[np.float64]] | None] = []
        self.totals = [int(m) for m in totals]
        self.margins: list[tuple[NDArray, NDArray]] = []  # over (t>, t=)
        self._over_lt: dict[int, NDArray[np.float64]] = {}  # (tables built from logarithms)
        self._marginal_lt: NDArray[np.float64] | None = None
        self.unit: dict[int, NDArray[np.float64]] = {}
        for c, (lw, m) in enumerate(zip(log_w, self.totals, strict=True)):
            lw = np.asarray(lw)  # (3, m + 1)
            e = list(np.exp(lw - lw.max(axis=1, keepdims=True)))
            over_gt = e[0] * np.convolve(e[1], e[2])[m::-1]
            top = float(over_gt.max())
            if top > 1e-200:
                e[0] = e[0] / top
                self.factors.append(e)
                self.margins.append((over_gt / top, e[1] * np.convolve(e[0], e[2])[m::-1]))
            else:
                table = _log_table(lw, m)
                self.factors.append(None)
                self.unit[c] = table
                self.margins.append((table.sum(1), table.sum(0)))
                self._over_lt[c] = _anti_diagonal_sums(table)[::-1]

    def marginal_lt(self) -> NDArray[np.float64]:
        """The exact 1-D marginal of the tables' convolution along ``t<`` (``|M| + 1`` entries):
        the direct convolution of the tables' margins along their anti-diagonals (computed when
        first asked for; only coarse lattices and the tightened floor bound need it)."""
        if self._marginal_lt is None:
            over = [
                self._over_lt[c] if e is None else e[2] * np.convolve(e[0], e[1])[m::-1]
                for c, (e, m) in enumerate(zip(self.factors, self.totals, strict=True))
            ]
            self._marginal_lt = np.convolve(np.convolve(over[0], over[1]), over[2])
        return self._marginal_lt

    def __missing__(self, steps: tuple[int, int]) -> list[NDArray[np.float64]]:
        """The tables on the lattice of steps ``(along t>, along t=)``: equal steps, or 1 along
        one axis (powers of two)."""
        gt, eq = steps
        if min(gt, eq) < 1 or gt & (gt - 1) or eq & (eq - 1) or (gt != eq and min(gt, eq) > 1):
            raise ValueError(f"no lattice of steps {steps}")
        if steps == (1, 1):
            tables = [
                self.unit[c] if e is None else _product_table(e, m)
                for c, (e, m) in enumerate(zip(self.factors, self.totals, strict=True))
            ]
        elif steps == (2, 2):
            tables = [
                _halved_table(e, m) if e is not None and (1, 1) not in self else _coarsen(unit)
                for e, m, unit in zip(self.factors, self.totals, self.unit_tables(), strict=True)
            ]
        elif gt == eq:
            tables = [_coarsen(tab) for tab in self[gt // 2, eq // 2]]
        elif eq == 1:
            tables = [_coarsen_rows(tab) for tab in self[gt // 2, 1]]
        else:
            tables = [_coarsen_cols(tab) for tab in self[1, eq // 2]]
        self[steps] = tables
        return tables

    def unit_tables(self) -> list[NDArray[np.float64] | None]:
        """The tables of every total where already built (``None`` elsewhere)."""
        if (1, 1) in self:
            return self[1, 1]
        return [self.unit.get(c) for c in range(len(self.totals))]


@dataclass
class _Level:
    """The posterior of the latent totals on one lattice (``step_eq`` apart along ``t=``,
    ``step_gt`` along ``t>``, first cell at ``t= = lo_eq``, ``t> = lo_gt``), unnormalised, rows
    ``t=`` and columns ``t>``; ``h`` is the coarse step (1 on the lattice of every total)."""

    prob: NDArray[np.float64]
    lo_eq: int
    lo_gt: int
    step_eq: int
    step_gt: int
    cmax: float
    total: float
    mean_t: NDArray[np.float64]
    _theta: float | None = None

    @property
    def h(self) -> int:
        return max(self.step_eq, self.step_gt)

    def theta(self, n: NDArray[np.float64], big_m: int) -> float:
        """``theta`` on this lattice (computed once: a level belongs to one pair)."""
        if self._theta is None:
            total = _theta_sum(
                self.prob, self.lo_eq, self.lo_gt, n, big_m, self.step_eq, self.step_gt
            )
            self._theta = total / self.total
        return self._theta


def _cyclic_window(
    tables: list[NDArray[np.float64]],
    box: tuple[int, int, int, int],
    margin: tuple[int, int],
    s_eq: int,
    s_gt: int,
) -> NDArray[np.float64]:
    """The cyclic 2-D convolution of the three row tables (indexed ``[t>, t=]``) of the size of
    the window ``box = (lo_eq, rows, lo_gt, cols)`` (lattice units) plus ``margin`` latent totals
    on each side, read on the window as ``out[t=, t>]`` (a new array)."""
    lo_eq, rows, lo_gt, cols = box
    size0 = next_fast_len(rows + 2 * -(-margin[0] // s_eq))
    size1 = next_fast_len(cols + 2 * -(-margin[1] // s_gt), real=True)
    # 2-D real FFTs of the three tables (cyclic, of the window's size): along t> (real), then
    # along t= (complex, over contiguous rows), into scratch arrays
    shape = (size1 // 2 + 1, size0)
    prod, spec = _scratch("prod", shape, np.complex128), _scratch("spec", shape, np.complex128)
    for k, tab in enumerate(tables):
        if tab.shape[0] > size1:
            tab = _fold(tab, size1, 0, axis=0)
        if tab.shape[1] > size0:
            tab = _fold(tab, size0, 0, axis=1)
        out = prod if k == 0 else spec
        np.fft.rfft(tab, n=size1, axis=0, out=out[:, : tab.shape[1]])
        out[:, tab.shape[1] :] = 0.0
        np.fft.fft(out, axis=1, out=out)
        if k:
            prod *= spec
    np.fft.ifft(prod, axis=1, out=prod)
    # the cyclic convolution, indexed [t= mod size0, t> mod size1]
    full = np.fft.irfft(prod.T, n=size1, axis=1, out=_scratch("full", (size0, size1), np.float64))
    return _window(full, lo_eq, rows, lo_gt, cols)


def _simplex_convolution(
    tables: list[NDArray[np.float64]], big_m: int, rows: int, cols: int
) -> NDArray[np.float64]:
    """The 2-D convolution of the three row tables of every latent total on the whole simplex
    ``t> + t= <= |M|``, read on the window ``t= < rows``, ``t> < cols`` as ``out[t=, t>]`` (a new
    array; its cells off the simplex hold other cells' values, which the second factor zeroes),
    by FFTs of about 0.75 of the square ``(|M| + 1)^2``.

    The convolution is supported on the triangle ``x = t> >= 0``, ``y = t= >= 0``,
    ``x + y <= |M|``, and so are the tables on theirs.  A cyclic convolution needs a
    periodisation whose translates of that support do not overlap; squares of side ``|M| + 1``
    do, and so does the lattice spanned by ``(P, 0)`` and ``(Q, Q)`` for ``2 Q > |M|`` and
    ``P > |M| + Q`` (no difference of two points of the triangle is a lattice vector), of
    determinant ``P Q``, about ``0.75 (|M| + 1)^2``.  The map ``(x, y) -> (x - y mod P, y mod Q)``
    has exactly that kernel, so the convolution is a cyclic one on a ``P x Q`` array: each table
    placed at ``u = i - j + m_c`` (``v = j``), real FFTs along ``v``, complex along ``u``, and the
    result read back at ``u = x - y + |M|`` (mod ``P``), ``v = y`` (mod ``Q``).
    """
    q = next_fast_len((big_m + 2) // 2, real=True)
    p = next_fast_len(big_m + 1 + q, real=True)
    shape = (p, q // 2 + 1)
    prod, spec = _scratch("prod", shape, np.complex128), _scratch("spec", shape, np.complex128)
    for k, tab in enumerate(tables):
        m = tab.shape[0] - 1
        skew = _scratch("skew", (2 * m + 1, m + 1), np.float64)
        skew[...] = 0.0
        # skew[i - j + m, j] = tab[i, j]: a view of skew with strides (row, 1 - row)
        size = skew.itemsize
        view = np.ndarray(
            (m + 1, m + 1),
            skew.dtype,
            buffer=skew,
            offset=m * (m + 1) * size,
            strides=((m + 1) * size, -m * size),
        )
        view[...] = tab
        if m + 1 > q:
            skew = _fold(skew, q, 0, axis=1)
        if 2 * m + 1 > p:
            skew = _fold(skew, p, 0, axis=0)
        out = prod if k == 0 else spec
        used = skew.shape[0]
        np.fft.rfft(skew, n=q, axis=1, out=out[:used])
        out[used:] = 0.0
        np.fft.fft(out, axis=0, out=out)
        if k:
            prod *= spec
    np.fft.ifft(prod, axis=0, out=prod)
    # rows u = 0 .. 2|M| (those from P on wrap round), columns v
    cyc = _scratch("full", (max(p, 2 * big_m + 1), q), np.float64)
    np.fft.irfft(prod, n=q, axis=1, out=cyc[:p])
    cyc[p : 2 * big_m + 1] = cyc[: max(2 * big_m + 1 - p, 0)]
    out = np.empty((rows, cols))
    size = cyc.itemsize
    for first, count in ((0, min(q, rows)), (q, rows - q)):
        # out[y, x] = cyc[|M| - y + x, y - first] for y = first + r: strides (1 - q, q)
        if count > 0:
            out[first : first + count] = np.ndarray(
                (count, cols),
                cyc.dtype,
                buffer=cyc,
                offset=(big_m - first) * q * size,
                strides=((1 - q) * size, q * size),
            )
    return out


def _lattice_steps(h: int, direction: tuple[int, int]) -> tuple[int, int]:
    """Steps ``(along t=, along t>)`` of the lattice of step ``h`` coarse along the axes flagged
    in ``direction`` (``(1, 1)`` both, ``(1, 0)`` only ``t=``, ``(0, 1)`` only ``t>``)."""
    return (h if direction[0] else 1, h if direction[1] else 1)


def _latent_level(
    tables: _Lattices,
    second: list[NDArray[np.float64]],
    big_m: int,
    window: tuple[int, int, int, int],
    step: int,
    margin: tuple[int, int] = (0, 0),
    direction: tuple[int, int] = (1, 1),
) -> _Level:
    """Posterior of the latent totals on the window ``[lo_eq, hi_eq) x [lo_gt, hi_gt)``: the
    cyclic 2-D convolution of the three row tables (of the window's size plus ``margin`` latent
    totals on each side along ``t=`` and ``t>``, where what it folds in from outside lands off
    the window; tables larger than that folded first) times the second factor.  ``step == 1``
    is the exact lattice of every latent total; ``step > 1`` (a power of two) convolves the
    tables moved onto a coarser lattice, along the axes flagged in ``direction``
    (:func:`_lattice_steps`), by :func:`_coarsen` (mass that this moves off the simplex,
    ``t< < 0``, is dropped)."""
    lo_eq, hi_eq, lo_gt, hi_gt = window
    s_eq, s_gt = _lattice_steps(step, direction)
    tables = tables[s_gt, s_eq]
    if s_eq > 1:
        lo_eq, hi_eq = lo_eq // s_eq, (hi_eq - 1) // s_eq + 2
    if s_gt > 1:
        lo_gt, hi_gt = lo_gt // s_gt, (hi_gt - 1) // s_gt + 2
    rows, cols = hi_eq - lo_eq, hi_gt - lo_gt
    if (
        s_eq == s_gt == 1
        and lo_eq == lo_gt == 0
        and big_m >= _SIMPLEX_MIN_TOTAL
        and rows * cols > _SIMPLEX_SHARE * big_m**2
    ):  # a window holding about the whole simplex
        conv = _simplex_convolution(tables, big_m, rows, cols)
    else:
        conv = _cyclic_window(tables, (lo_eq, rows, lo_gt, cols), margin, s_eq, s_gt)
    cmax = float(conv.max())
    conv[conv < _FFT_FLOOR * cmax] = 0.0
    # the second factor on the window, tilted back: e1[t=] e0[t>] e2[|M| - t> - t=]
    e_eq, e_gt, back = _second_on_lattice(second, big_m, lo_eq, rows, lo_gt, cols, s_eq, s_gt)
    prob = conv  # (a copy of the window: multiplied in place)
    prob *= e_eq[:, None]
    prob *= e_gt[None, :]
    prob *= _hankel(back, rows, cols, s_eq, s_gt)
    row_mass = prob.sum(axis=1)
    col_mass = prob.sum(axis=0)
    total = float(row_mass.sum())
    mean_gt = s_gt * (col_mass @ (lo_gt + np.arange(cols, dtype=float))) / total
    mean_eq = s_eq * (row_mass @ (lo_eq + np.arange(rows, dtype=float))) / total
    mean_t = np.array([mean_gt, mean_eq, big_m - mean_gt - mean_eq])
    return _Level(prob, s_eq * lo_eq, s_gt * lo_gt, s_eq, s_gt, cmax, total, mean_t)


def _anti_diagonal_sums(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """``out[s] = sum_{i + j = s} table[i, j]`` for a square row table (zero where
    ``i + j >= len(table)``): column ``s`` of the view ``V[i, s] = flat[i (L - 1) + s]`` is the
    anti-diagonal ``s``, its wrapped cells (``i > s``) lie beyond it, where the table is zero,
    except for ``s = 0``."""
    size = table.shape[0]
    flat = np.ascontiguousarray(table).ravel()
    step = flat.strides[0]
    view = np.lib.stride_tricks.as_strided(
        flat, shape=(size, size), strides=((size - 1) * step, step), writeable=False
    )
    out = view.sum(axis=0)
    out[0] = table[0, 0]
    return out


def _interpolation_error(s: NDArray[np.float64], step: int, offset: int = 0) -> NDArray[np.float64]:
    """Relative error ``s_hat(t) / s(t) - 1`` of the linear interpolation of ``s`` (positive, on
    ``t = 0 .. n - 1`` along its last axis, every row alike) from the lattice points
    ``offset + k step`` (constant before the first and past the last one)."""
    first = offset % step
    points = s[..., first::step]
    inside = (points.shape[-1] - 1) * step
    out = np.empty(s.shape)
    out[..., :first] = points[..., :1]
    out[..., first + inside :] = points[..., -1:]
    # between lattice points k and k + 1: points[k] + (r / step) (points[k + 1] - points[k])
    slope = (points[..., 1:] - points[..., :-1])[..., None]
    segments = points[..., :-1, None] + slope * (np.arange(step) / step)
    out[..., first : first + inside] = segments.reshape(s.shape[:-1] + (inside,))
    return out / s - 1.0


class _Faces:
    """What coarse lattices get wrong near the faces of the simplex, from one-dimensional
    functions of the latent totals ``t>``, ``t=`` and ``t<`` (index ``j``).

    ``weight[j]`` bounds the posterior mass along ``t_j`` (normalised).  A coarse lattice of step
    ``h`` moves the latent totals: each of the three tables rounds every entry to a neighbouring
    lattice point along ``t>`` and along ``t=`` with linear weights, i.e. by an independent move
    of mean zero within an interval of length ``h``, so some mass near the face ``t< = 0`` lands
    past it and is dropped (:meth:`spill`).  Near each face ``t_j = 0`` the second factor
    ``second[j]`` has a pole at ``t_j = -n_j - 1``; for few human labels ``j`` it varies there on
    a scale below the lattice step, where the Richardson extrapolation in ``h^2`` fails.
    :meth:`sharp` measures that failure on the factor itself.
    """

    def __init__(
        self, second: list[NDArray[np.float64]], weight: list[NDArray[np.float64]]
    ) -> None:
        self.weight = weight
        self._spill: dict[int, float] = {}
        self._weighted: dict[int, NDArray[np.float64]] = {}
        # along t< the lattice points are |M| - k h: reversed, k h like the others
        self._oriented = np.stack([second[0], second[1], second[2][::-1]])
        self._oriented_weight = np.stack([weight[0], weight[1], weight[2][::-1]])

    def _weighted_error(self, j: int, step: int) -> float:
        """``sum_t weight[j](t) (s_hat(t) / s(t) - 1)`` for the lattice of step ``step`` (the
        three ``j`` at once, cached per step)."""
        if step not in self._weighted:
            error = _interpolation_error(self._oriented, step)
            self._weighted[step] = (self._oriented_weight * error).sum(axis=1)
        return float(self._weighted[step][j])

    def spill(self, step: int) -> float:
        """Bound on the error of ``theta`` extrapolated from steps ``h = step`` and ``2h`` from the
        mass they drop past ``t< = 0``: at most ``(1 + 2 c)`` times the mass the lattice of step
        ``2h`` drops, ``c = (h^2 - 1) / (3 h^2)`` the extrapolation's weight.  That lattice moves
        ``t<`` by the sum of six independent moves of mean zero, each within an interval of
        length ``2h``, so a latent total at ``t< = d`` lands past the face with probability at most
        ``exp(-2 (d + 1)^2 / (6 (2h)^2))`` (Hoeffding's inequality)."""
        if step not in self._spill:
            c1 = (step * step - 1.0) / (3.0 * step * step)
            d = np.arange(1.0, self.weight[2].size + 1.0)
            tail = np.exp(-(d * d) / (12.0 * step * step))
            self._spill[step] = float((1.0 + 2.0 * c1) * (self.weight[2] @ tail))
        return self._spill[step]

    def sharp(self, step: int, direction: tuple[int, int] = (1, 1)) -> float:
        """Twice the summed residuals, over the faces the lattice is coarse along (``t>``,
        ``t=``; ``t<`` always), of the Richardson extrapolation from steps ``h = step`` and
        ``2h`` of the mass-weighted relative interpolation error
        ``sum_t weight[j](t) (s_hat(t) / s(t) - 1)`` of ``second[j]`` (along ``t<`` the lattice
        points are ``|M| - k h``, and where both axes are coarse a cell's two directions add up,
        so it counts twice)."""
        c1 = (step * step - 1.0) / (3.0 * step * step)
        total = 0.0
        if direction == (1, 1):
            faces = ((0, 1.0), (1, 1.0), (2, 2.0))
        elif direction == (1, 0):  # coarse along t= only
            faces = ((1, 1.0), (2, 1.0))
        else:  # along t> only
            faces = ((0, 1.0), (2, 1.0))
        for j, count in faces:
            fine, rough = self._weighted_error(j, step), self._weighted_error(j, 2 * step)
            total += count * abs(fine - c1 * (rough - fine))
        return 2.0 * total


def _coarse_step(rows: int, cols: int, faces: _Faces) -> tuple[int, tuple[int, int]]:
    """Lattice step ``h`` (a power of two) and the axes it is coarse along (``(1, 1)`` both,
    ``(1, 0)`` only ``t=``, ``(0, 1)`` only ``t>``, see :func:`_lattice_steps`) for a window of
    ``rows x cols`` latent totals: 1 (every total) unless the window is wide enough, along the
    coarse axes, that a posterior spread over it is smooth on the lattices of step ``h`` and
    ``2h`` and what they get wrong at the faces of the simplex is at most ``_COARSE_FACES``
    (:class:`_Faces`).  Both axes first; where a face makes that fail, one axis (the other
    face's axis then keeps every total)."""
    best = (1, (1, 1))
    for direction, width in (((1, 1), min(rows, cols)), ((1, 0), rows), ((0, 1), cols)):
        step = 1
        while 2 * step <= min(width // _COARSE_WIDTH_PER_STEP, _COARSE_MAX_STEP):
            step *= 2
        while step > 1 and (
            faces.spill(step) > _COARSE_FACES  # (then no need for the sharper estimate)
            or faces.spill(step) + faces.sharp(step, direction) > _COARSE_FACES
        ):
            step //= 2
        if step > 1 and direction == (1, 1):
            return step, direction
        # one axis coarse: worth it at a larger step than the other axis would take
        if step > best[0]:
            best = (step, direction)
    return best


def _exact_latent_totals(
    n: NDArray[np.float64],
    conf: NDArray[np.float64],
    m: NDArray[np.float64],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], float, NDArray[np.float64], float]:
    """Posterior of the latent true-label totals ``t`` of one pair's metric-only inputs.

    With ``z`` the latent table (metric label ``c`` x true label ``c'``, row sums ``m``) and
    ``t = z.sum(axis=0)``, integrating ``p`` and ``mu`` out of Algorithm 1's model (Dirichlet-
    multinomial conjugacy) gives, with ``a = confusion + 1`` and ``A = a.sum(axis=0)``::

        P(z | data) ∝ prod_{c,c'} Gamma(a[c,c'] + z[c,c']) / z[c,c']!
                      * prod_{c'} Gamma(n[c'] + t[c'] + 1) / Gamma(A[c'] + t[c'])

    and ``p | z ~ Dir(n + t + 1)``.  The first product factorises over the rows ``c`` of ``z``,
    so summing it over all tables with column sums ``t`` is the 2-D convolution (over
    ``(t=, t>)``; ``t< = |M| - t> - t=``) of three per-row tables, done by FFT; the second
    product is a function of ``t=``, of ``t>`` and of ``t<`` (an anti-diagonal).

    Numerics (bounds in ``docs/protocol.md``):

    * both factors are exponentially tilted by ``lambda**t`` (``log lambda`` = gradient of the log
      of the second factor at the posterior mean of ``t``) so that the FFT's round-off, a fixed
      fraction of the largest entry, is negligible where the posterior has mass; entries below
      ``_FFT_FLOOR`` of the largest are set to zero;
    * only a window of latent totals is computed: the exact 1-D marginals of the convolution
      (direct convolutions of the row tables' margins) bound the posterior mass outside any
      window, and the window keeps all but ``_WINDOW_TAIL`` of them on each side.  The FFT is
      then a cyclic convolution of the window's size; what it folds into the window from outside
      (positive, at most the convolution's mass outside) is bounded too, and where that bound is
      too large the convolution is padded by a margin (:func:`_fold_margin`) so that what it
      folds lands off the window.  A window holding about the whole simplex is convolved on
      the simplex's own lattice instead, which folds nothing (:func:`_simplex_convolution`);
    * the three bounds, divided by the computed posterior mass, are returned as ``err``
      (``|theta error| <= err``); while it exceeds ``_EXACT_TOL`` the tilt is refined and the
      computation repeated (the last attempt on the whole grid).

    Then ``theta = sum_t P(t) (1 - I_1/2(n> + t> + 1, n< + t< + 1))`` is evaluated exactly
    (:func:`_theta_sum`).

    Wide posteriors (weakly identified pairs with hundreds of metric-only inputs: windows of
    ``650 x 850`` latent totals) are computed on coarser lattices instead (:func:`_coarse_step`):
    the row tables are moved onto the lattice of step ``h`` by linear weights that keep their
    mass and mean (:func:`_coarsen`), so that the lattice sum of a smooth function errs by
    ``c (h^2 - 1) + O(h^4)``.  ``theta`` and the mean of ``t`` are Richardson-extrapolated from
    ``h`` and ``2h``; the correction estimates the error (where it is large, a third lattice
    ``4h`` must converge as ``h^2`` predicts and the spread of the two extrapolations is the
    estimate), plus what the faces add (:class:`_Faces`: the mass moved past ``t< = 0`` and the
    sharp second factor at faces with few human labels).  Above ``_COARSE_TOL`` the step is
    halved, down to every latent total.  Where a sharp face along ``t>`` (or ``t=``) rules out
    both axes, the lattice is coarse along the other axis only.

    Returns ``_EXACT_COMPONENTS`` latent totals drawn from ``P(t)`` by systematic resampling
    (shape (K, 3)), ``theta``, the posterior mean of ``t`` and ``err`` (the bound, plus the
    coarse-lattice error estimate where one was used).
    """
    ai = (conf + 1.0).astype(np.int64)
    big_a = ai.sum(axis=0)
    mi = m.astype(np.int64)
    ni = n.astype(np.int64)
    big_m = int(mi.sum())
    lg = _log_gamma_int(int(max(ni.max() + 2, big_a.max(), ai.max())) + big_m + 1)
    ti = np.arange(big_m + 1)
    tf = ti.astype(float)
    # log of the second factor per true label j (row j) on t_j = 0..|M|, and of the row tables'
    # factors Gamma(a[c, j] + k) / k! on k = 0..m_c (row j of l_row[c]); integer arguments, so
    # all are read from one table
    l_second = lg[(ni + 1)[:, None] + ti] - lg[big_a[:, None] + ti]
    l_row = [lg[ai[c][:, None] + ti[: mi[c] + 1]] - lg[1 + ti[: mi[c] + 1]] for c in range(3)]
    mean_t = big_m * (n + 1.0) / (n.sum() + 3.0)  # first guess: the human-only posterior mean
    coarse_err = 0.0
    faces = None
    for attempt in range(3):
        lt = digamma(n + mean_t + 1.0) - digamma(big_a + mean_t)
        # tables indexed [t>, t=], tilted by lambda**t
        lattices = _Lattices([l_row[c] + lt[:, None] * tf[: mi[c] + 1] for c in range(3)], mi)
        over_gt, over_eq = zip(*lattices.margins, strict=True)
        # exact 1-D marginals of the convolution in t> and in t= (direct convolutions)
        marg_gt = np.convolve(np.convolve(over_gt[0], over_gt[1]), over_gt[2])
        marg_eq = np.convolve(np.convolve(over_eq[0], over_eq[1]), over_eq[2])
        logs = l_second - lt[:, None] * tf
        e = np.exp(logs - logs.max(axis=1, keepdims=True))  # (row j: the factor of t_j)
        # upper bound of the second factor along a line of fixed t= (or t>): prefix maxima
        pmax = np.maximum.accumulate(e, axis=1)
        w_eq = marg_eq * e[1] * (pmax[0] * pmax[2])[::-1]
        w_gt = marg_gt * e[0] * (pmax[1] * pmax[2])[::-1]
        if attempt < 2:
            lo_eq, hi_eq = _central(w_eq, _WINDOW_TAIL)
            lo_gt, hi_gt = _central(w_gt, _WINDOW_TAIL)
        else:
            lo_eq, hi_eq, lo_gt, hi_gt = 0, big_m + 1, 0, big_m + 1
        window = (lo_eq, hi_eq, lo_gt, hi_gt)
        rows, cols = hi_eq - lo_eq, hi_gt - lo_gt
        step, direction = 1, (1, 1)
        if attempt < 2 and rows * cols >= _COARSE_MIN_CELLS:
            # a coarse lattice moves a little mass past t< = 0 (2 (h - 1) per table): bound the
            # posterior mass along t< like the others
            w_lt = lattices.marginal_lt() * e[2] * (pmax[0] * pmax[1])[::-1]
            faces = _Faces(e, [w / w.sum() for w in (w_gt, w_eq, w_lt)])
            step, direction = _coarse_step(rows, cols, faces)
        # the coarser lattice first (cheap): it refines the tilt and the window
        margin = (0, 0)
        level = _latent_level(
            lattices, e, big_m, window, 2 * step if step > 1 else 1, margin, direction
        )
        mean_t = level.mean_t
        # bounds: (1) the floor (and the round-off it covers) in every window cell, (2) what the
        # cyclic convolution folds in from outside the window, (3) the mass outside the window
        e_eq, e_gt, e2_back = _second_on_lattice(e, big_m, lo_eq, rows, lo_gt, cols)
        r_window = float(np.convolve(e_eq, e_gt) @ e2_back)
        # (a coarse cell holds step_eq * step_gt latent totals)
        floor = _FFT_FLOOR * level.cmax / (level.step_eq * level.step_gt)
        err_floor = floor * r_window
        if level.h == 1 and err_floor > _FLOOR_TIGHTEN * level.total:
            # a cell's error is also at most its row's and its column's mass (kept cells err
            # by the round-off, ~5e-15 of the largest entry, and lie where both are above the
            # floor): min(a, x, y) <= sqrt(min(a, x) min(a, y)) makes it a 1-D convolution
            # again, far tighter where the second factor is largest off the posterior's mass
            # (three more convolutions of the window's length: only where the plain bound is
            # above _FLOOR_TIGHTEN)
            cap = 1.01 * floor
            row, col = np.minimum(cap, marg_eq[lo_eq:hi_eq]), np.minimum(cap, marg_gt[lo_gt:hi_gt])
            err_floor = min(
                err_floor, float(np.convolve(np.sqrt(row) * e_eq, np.sqrt(col) * e_gt) @ e2_back)
            )
            # and its anti-diagonal's mass (t<):
            # min(a, x, y, z) <= (min(a, x) min(a, y) min(a, z))^(1/3)
            t_lt = big_m - lo_eq - lo_gt - np.arange(e2_back.size)
            diag = np.minimum(cap, lattices.marginal_lt()[_clip(t_lt, 0, big_m)])
            third = np.convolve(np.cbrt(row) * e_eq, np.cbrt(col) * e_gt) @ (
                np.cbrt(diag) * e2_back
            )
            err_floor = min(err_floor, float(third))
        s_max = e_eq.max() * e_gt.max() * e2_back.max()
        err_fold = (_outside(marg_eq, lo_eq, hi_eq) + _outside(marg_gt, lo_gt, hi_gt)) * s_max
        if err_fold > 0.5 * _EXACT_TOL * level.total:
            # a larger cyclic convolution instead: the mass within the margin folds in off the
            # window (on a lattice of step h the three tables' moves shift it by less than 3h,
            # 12 times the finest step for the coarsest lattice, 4h)
            budget = 0.125 * _EXACT_TOL * level.total / s_max
            shift = 12 * step if step > 1 else 0
            margin = (
                _fold_margin(marg_eq, lo_eq, hi_eq, budget) + shift,
                _fold_margin(marg_gt, lo_gt, hi_gt, budget) + shift,
            )
            level = _latent_level(lattices, e, big_m, window, level.h, margin, direction)
            conv_out = _outside(marg_eq, lo_eq - margin[0] + shift, hi_eq + margin[0] - shift)
            conv_out += _outside(marg_gt, lo_gt - margin[1] + shift, hi_gt + margin[1] - shift)
            err_fold = conv_out * s_max
        err_out = w_eq[:lo_eq].sum() + w_eq[hi_eq:].sum() + w_gt[:lo_gt].sum() + w_gt[hi_gt:].sum()
        err = float(min(1.0, (err_floor + err_fold + err_out) / level.total))
        if err > _EXACT_TOL:
            continue
        if step == 1:
            theta = level.theta(n, big_m)
            break

        # coarse lattices h and 2h: Richardson extrapolation in h^2 - 1; where the estimated
        # error is too large, h / 2 and h (while h is even), then every latent total
        rough, rougher = level, None
        while rough.h % 2 == 0:
            step = rough.h // 2
            fine = _latent_level(lattices, e, big_m, window, step, margin, direction)
            if step == 1:
                level = fine
                break
            th_fine, th_rough = fine.theta(n, big_m), rough.theta(n, big_m)
            d1 = th_rough - th_fine
            c1 = (step * step - 1.0) / (3.0 * step * step)  # (h^2 - 1) / ((2h)^2 - h^2)
            extrapolated = th_fine - c1 * d1
            spill, sharp = faces.spill(step), faces.sharp(step, direction)
            # the correction: an estimate of th_fine's error, far above the extrapolation's
            # as long as the lattice sums are smooth in h; plus what is not (the spill past
            # t< = 0 and the faces' sharp second factor)
            estimate = c1 * abs(d1) + spill + sharp
            if estimate > _COARSE_TOL:
                # what the faces do to 2h and 4h: the second extrapolation's error, beyond
                # its spread from the first one
                faces_2h = faces.spill(2 * step) + faces.sharp(2 * step, direction)
                if faces_2h < _COARSE_TOL:
                    # a third lattice (4h): if the three converge as h^2 predicts, the two
                    # extrapolations (h, 2h and 2h, 4h) differ by about 15 times the first one's
                    # error (their errors are of order h^4); five times that error is the estimate,
                    # plus faces_2h (which the spread may hide)
                    if rougher is None:
                        rougher = _latent_level(
                            lattices, e, big_m, window, 4 * step, margin, direction
                        )
                    d2 = rougher.theta(n, big_m) - th_rough
                    c2 = (4.0 * step * step - 1.0) / (12.0 * step * step)
                    if d1 != 0.0 and 3.0 <= d2 / d1 <= 5.5:
                        spread = abs(extrapolated - (th_rough - c2 * d2))
                        estimate = min(estimate, spread / 3.0 + faces_2h)
            if estimate <= _COARSE_TOL:
                theta = extrapolated
                mean_t = fine.mean_t - c1 * (rough.mean_t - fine.mean_t)
                level, coarse_err = fine, float(estimate)
                break
            rough, rougher = fine, rough
        else:
            level = _latent_level(lattices, e, big_m, window, 1, margin)
        if level.h == 1:
            theta = level.theta(n, big_m)
            mean_t = level.mean_t
        break
    else:  # the last attempt (the whole grid) is accepted whatever its bound
        theta = level.theta(n, big_m)

    theta = min(max(float(theta), 0.0), 1.0)
    prob = level.prob
    if level.h > 1:
        # components only from cells on the simplex (the coarse lattice's spill off it is tiny)
        t_eq_v = level.lo_eq + level.step_eq * np.arange(prob.shape[0])
        t_gt_v = level.lo_gt + level.step_gt * np.arange(prob.shape[1])
        prob = np.where(t_eq_v[:, None] + t_gt_v[None, :] <= big_m, prob, 0.0)
    t_eq, t_gt = _systematic_cells(prob, _EXACT_COMPONENTS, rng)
    t_eq, t_gt = level.lo_eq + level.step_eq * t_eq, level.lo_gt + level.step_gt * t_gt
    t = np.stack([t_gt, t_eq, big_m - t_gt - t_eq], axis=-1).astype(float)
    return t, theta, mean_t, err + coarse_err


def sample_posterior(
    human_counts: ArrayLike,
    confusion: ArrayLike | None = None,
    metric_counts: ArrayLike | None = None,
    *,
    n_samples: int = 100,
    burn_in: int = 50,
    chains: int = 8,
    seed: int | np.random.Generator | None = None,
    tol: float | None = 0.005,
    max_samples: int = 300,
    ridge_moves: bool = True,
    method: str = "auto",
    max_exact: int = _MAX_EXACT_METRIC,
) -> PosteriorDraws:
    """Posterior of ``p`` under the model of Algorithm 1 (Sections 3.1-3.3).

    Pairs whose ``metric_counts`` are all zero get the exact posterior ``Dir(n + 1)`` (with no
    metric-only input the confusion counts only inform ``mu``, which is then independent of
    ``p``).

    ``method="auto"`` (default) computes the posterior of the other pairs *exactly* when they
    have at most ``max_exact`` metric-only inputs (:func:`_exact_latent_totals`: the latent
    true-label totals ``t`` of the metric-only inputs have a discrete posterior that the 2-D
    convolution of three per-metric-label tables gives in at most ``O(|M|^2 log |M|)``;
    ``theta`` and the mean of ``p`` are then exact sums, ``mcse`` is the a-posteriori bound on
    their error (about 1e-11 to 1e-8; for wide posteriors on coarse lattices an estimate, at
    most 1e-3) and the returned mixture holds
    ``_EXACT_COMPONENTS`` components drawn by systematic resampling for the summaries that need
    draws).  Pairs above the cap, or all pairs with ``method="gibbs"``, are sampled jointly,
    vectorised over pairs and ``chains``, by the Gibbs sampler of the module docstring.  Chains
    start from independent draws ``p ~ Dir(n + 1)``, ``mu[:, c'] ~ Dir(confusion[:, c'] + 1)``;
    ``burn_in`` sweeps per chain are discarded, then blocks of ``n_samples`` sweeps are kept.
    With ``tol`` set, a pair keeps sampling in further blocks until the Monte Carlo standard
    error of ``theta`` (spread of the ``chains`` chain means) is at most ``tol`` or
    ``max_samples`` sweeps per chain are kept; ``tol=None`` keeps exactly ``n_samples``.
    ``method="exact"`` forces the exact computation whatever the number of metric-only inputs
    (memory and time grow as ``|M|^2``).  ``seed`` seeds a :class:`numpy.random.Generator`.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if confusion is None or metric_counts is None:
        return human_posterior(human_counts)
    n, conf, m = _validate_metric_inputs(human_counts, confusion, metric_counts)
    n_pairs = n.shape[0]
    if n_samples < 1 or chains < 2 or burn_in < 0:
        raise ValueError("n_samples >= 1, chains >= 2 and burn_in >= 0 are required")
    if method not in ("auto", "exact", "gibbs"):
        raise ValueError("method must be 'auto', 'exact' or 'gibbs'")
    max_samples = max(max_samples, n_samples) if tol is not None else n_samples
    m_tot = m.sum(axis=1)
    active = m_tot > 0
    if not active.any():
        return human_posterior(n)
    if method == "gibbs":
        exact = np.zeros(n_pairs, dtype=bool)
    elif method == "exact":
        exact = active.copy()
    else:
        exact = active & (m_tot <= max_exact)
    gibbs = np.flatnonzero(active & ~exact)

    comps: list[NDArray[np.float64]] = [(n[k] + 1.0)[None, :] for k in range(n_pairs)]
    wts: list[NDArray[np.float64]] = [np.ones(1) for _ in range(n_pairs)]
    theta = _theta_from_alpha(n + 1.0)
    mean_p = (n + 1.0) / (n + 1.0).sum(axis=1, keepdims=True)
    mcse = np.zeros(n_pairs)
    for k in np.flatnonzero(exact):
        t, th, mean_t, mcse[k] = _exact_latent_totals(n[k], conf[k], m[k], rng)
        comps[k] = n[k] + t + 1.0
        wts[k] = np.full(t.shape[0], 1.0 / t.shape[0])
        theta[k] = th
        mean_p[k] = (n[k] + mean_t + 1.0) / (n[k].sum() + m_tot[k] + 3.0)
    if gibbs.size:
        post = _gibbs_posterior(
            n[gibbs],
            conf[gibbs],
            m[gibbs],
            rng,
            n_samples=n_samples,
            burn_in=burn_in,
            chains=chains,
            tol=tol,
            max_samples=max_samples,
            ridge_moves=ridge_moves,
        )
        theta[gibbs] = post.theta()
        mean_p[gibbs] = post.mean_p()
        mcse[gibbs] = post.mcse
        for j, k in enumerate(gibbs):
            comps[k] = post.alpha[:, j, :]
            wts[k] = post.weights[:, j]
    size = max(c.shape[0] for c in comps)
    alpha = np.empty((size, n_pairs, 3))
    alpha[...] = n + 1.0
    weights = np.zeros((size, n_pairs))
    for k in range(n_pairs):
        alpha[: comps[k].shape[0], k] = comps[k]
        weights[: wts[k].shape[0], k] = wts[k]
    return PosteriorDraws(
        alpha=alpha,
        weights=weights,
        human_counts=n,
        mcse=mcse,
        theta_values=theta,
        mean_p_values=mean_p,
    )


def _gibbs_posterior(
    n: NDArray[np.float64],
    conf: NDArray[np.float64],
    m: NDArray[np.float64],
    rng: np.random.Generator,
    *,
    n_samples: int,
    burn_in: int,
    chains: int,
    tol: float | None,
    max_samples: int,
    ridge_moves: bool,
) -> PosteriorDraws:
    """The Gibbs sampler of the module docstring for validated pairs (see
    :func:`sample_posterior`); pairs without metric-only inputs get ``Dir(n + 1)``."""
    n_pairs = n.shape[0]
    active = np.flatnonzero(m.sum(axis=1) > 0)
    if active.size == 0:
        return human_posterior(n)

    na, ca, ma = n[active], conf[active], m[active]
    shape = (chains, active.size)
    n_b = np.broadcast_to(na, shape + (3,))
    m_int = np.broadcast_to(ma.astype(np.int64), shape + (3,))
    a_mu = ca + 1.0  # confusion-only posterior of mu (Eq. 4)
    p = _dirichlet(rng, np.broadcast_to(na + 1.0, shape + (3,)), axis=-1)
    mu = _dirichlet(rng, np.broadcast_to(a_mu, shape + (3, 3)), axis=-2)

    # The ridge move only pays where metric-only inputs outnumber the doubly rated ones (with
    # few metric-only inputs plain data augmentation already mixes in a few sweeps).
    needs_ridge = ridge_moves & (ma.sum(axis=1) > ca.sum(axis=(1, 2)) + 3.0)

    def sweep(
        p: NDArray, mu: NDArray, n_b: NDArray, m_int: NDArray, a_mu: NDArray, ridge: NDArray
    ) -> tuple[NDArray, NDArray, NDArray]:
        if ridge.all():
            p, mu = _ridge_move(rng, p, mu, n_b, a_mu)
        elif ridge.any():
            p, mu = p.copy(), mu.copy()
            p[:, ridge], mu[:, ridge] = _ridge_move(
                rng, p[:, ridge], mu[:, ridge], n_b[:, ridge], a_mu[ridge]
            )
        # Latent true labels of the metric-only inputs, aggregated per metric label.
        resp = mu * p[..., None, :]
        resp /= resp.sum(axis=-1, keepdims=True)
        z = rng.multinomial(m_int, resp)  # (chains, pairs, metric label, true label)
        alpha_p = n_b + z.sum(axis=-2) + 1.0
        p = _dirichlet(rng, alpha_p, axis=-1)
        mu = _dirichlet(rng, a_mu + z, axis=-2)
        return p, mu, alpha_p

    for _ in range(burn_in):
        p, mu, _unused = sweep(p, mu, n_b, m_int, a_mu, needs_ridge)

    n_blocks = -(-max_samples // n_samples)
    kept = np.zeros((n_blocks * n_samples, chains, active.size, 3))
    n_kept = np.zeros(active.size, dtype=np.int64)
    theta_sum = np.zeros(shape)
    mcse = np.zeros(active.size)
    running = np.arange(active.size)  # indices into ``active`` still sampling
    for block in range(n_blocks):
        sub = running
        p_s, mu_s = p[:, sub], mu[:, sub]
        n_s, m_s, a_s = n_b[:, sub], m_int[:, sub], a_mu[sub]
        lo = block * n_samples
        for i in range(n_samples):
            p_s, mu_s, alpha_p = sweep(p_s, mu_s, n_s, m_s, a_s, needs_ridge[sub])
            kept[lo + i][:, sub] = alpha_p
            theta_sum[:, sub] += _theta_from_alpha(alpha_p)
        p[:, sub], mu[:, sub] = p_s, mu_s
        n_kept[sub] += n_samples
        chain_means = theta_sum[:, sub] / n_kept[sub]
        mcse[sub] = chain_means.std(axis=0, ddof=1) / np.sqrt(chains)
        if tol is None:
            break
        running = sub[mcse[sub] > tol]
        if running.size == 0:
            break

    total = n_kept.max()
    alpha = np.broadcast_to(n + 1.0, (total * chains, n_pairs, 3)).copy()
    weights = np.zeros((total * chains, n_pairs))
    weights[0, :] = 1.0
    draws = kept[:total].reshape(total * chains, active.size, 3)
    valid = (np.arange(total)[:, None] < n_kept[None, :]).repeat(chains, axis=0)
    # padding components (pairs that stopped early) get weight 0 and a harmless alpha
    alpha[:, active, :] = np.where(valid[..., None], draws, na[None, :, :] + 1.0)
    weights[:, active] = valid / valid.sum(axis=0, keepdims=True)
    full_mcse = np.zeros(n_pairs)
    full_mcse[active] = mcse
    return PosteriorDraws(alpha=alpha, weights=weights, human_counts=n, mcse=full_mcse)


def theta_with_metric(
    human_counts: ArrayLike,
    confusion: ArrayLike,
    metric_counts: ArrayLike,
    *,
    n_samples: int = 100,
    burn_in: int = 50,
    chains: int = 8,
    seed: int | np.random.Generator | None = None,
    tol: float | None = 0.005,
    max_samples: int = 300,
    method: str = "auto",
    max_exact: int = _MAX_EXACT_METRIC,
) -> NDArray[np.float64]:
    """``theta = P(p> > p< | humans, confusion, metric-only)`` per pair (Algorithm 1, line 17).

    Exact (or, above ``max_exact`` metric-only inputs or with ``method="gibbs"``, a
    Rao-Blackwellised Gibbs estimate), see :func:`sample_posterior`.
    """
    return sample_posterior(
        human_counts,
        confusion,
        metric_counts,
        n_samples=n_samples,
        burn_in=burn_in,
        chains=chains,
        seed=seed,
        tol=tol,
        max_samples=max_samples,
        method=method,
        max_exact=max_exact,
    ).theta()


def posterior_mean_p(
    human_counts: ArrayLike,
    confusion: ArrayLike | None = None,
    metric_counts: ArrayLike | None = None,
    **sampler_kwargs: object,
) -> NDArray[np.float64]:
    """Posterior mean of ``p`` per pair (``p_prot`` of Section 6), shape (n_pairs, 3).

    Human-only: ``(n + 1) / (sum n + 3)``.  With metric data: Rao-Blackwellised Gibbs average.
    """
    return sample_posterior(human_counts, confusion, metric_counts, **sampler_kwargs).mean_p()  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Decisions (Algorithm 1, lines 18-24)
# --------------------------------------------------------------------------------------------


def decide(theta: ArrayLike, gamma: float = 0.05) -> NDArray[np.int8]:
    """Algorithm 1 decision: ``+1`` if ``theta > 1 - gamma/2``, ``-1`` if ``theta < gamma/2``.

    Returns an int8 array of :class:`Decision` values (``0`` = undecided).
    """
    if not 0 < gamma < 1:
        raise ValueError("gamma must be in (0, 1)")
    return decide_with_thresholds(theta, 1.0 - gamma / 2.0, gamma / 2.0)


def decide_with_thresholds(
    theta: ArrayLike, upper: ArrayLike, lower: ArrayLike
) -> NDArray[np.int8]:
    """Decision with per-pair thresholds: ``+1`` if ``theta > upper``, ``-1`` if below ``lower``."""
    th = np.asarray(theta, dtype=float)
    out = np.zeros(th.shape, dtype=np.int8)
    out[th > np.asarray(upper)] = Decision.A_WINS
    out[th < np.asarray(lower)] = Decision.B_WINS
    return out


# --------------------------------------------------------------------------------------------
# Beyond the paper: practical equivalence
# --------------------------------------------------------------------------------------------


def _rope_from_alpha(alpha: NDArray[np.float64], delta: float, nodes: int) -> NDArray:
    """``P(|p> - p<| < delta)`` for ``p ~ Dir(alpha)``, averaged over the leading axis.

    ``s = p> + p< ~ Beta(a> + a<, a=)`` and ``x = p> / s ~ Beta(a>, a<)`` are independent and
    ``p> - p< = s (2x - 1)``; the outer expectation over ``s`` uses ``nodes`` quantile midpoints.
    """
    from scipy.stats import beta as beta_dist

    a_w, a_d, a_l = alpha[..., 0], alpha[..., 1], alpha[..., 2]
    u = (np.arange(nodes) + 0.5) / nodes
    s = beta_dist.ppf(u.reshape((-1,) + (1,) * a_w.ndim), a_w + a_l, a_d)
    half = delta / (2.0 * np.maximum(s, 1e-300))
    hi = np.clip(0.5 + half, 0.0, 1.0)
    lo = np.clip(0.5 - half, 0.0, 1.0)
    prob = betainc(a_w, a_l, hi) - betainc(a_w, a_l, lo)
    return prob.mean(axis=0)


def rope_probability(
    posterior: PosteriorDraws | ArrayLike,
    delta: float,
    *,
    nodes: int = 32,
    max_components: int = 64,
) -> NDArray[np.float64]:
    """``P(|p> - p<| < delta | data)`` per pair (region of practical equivalence, ROPE).

    ``posterior`` is a :class:`PosteriorDraws` or human counts (n_pairs, 3).  A pair whose ROPE
    probability exceeds ``1 - gamma`` is practically equivalent: it answers the paper's
    "Limitations: Draws are ignored" (e.g. ``p = (0.02, 0.97, 0.01)``).  Mixture posteriors are
    thinned to ``max_components`` evenly spaced components.
    """
    post = posterior if isinstance(posterior, PosteriorDraws) else human_posterior(posterior)
    if post.alpha.shape[0] == 1:
        return _rope_from_alpha(post.alpha, delta, nodes)[0]
    alpha = post.components(max_components, np.random.default_rng(0))
    return _rope_from_alpha(alpha, delta, nodes).mean(axis=0)
