"""Bayesian pairwise decision of Deriu et al. (2023), vectorised over system pairs.

J. Deriu, P. von Däniken, D. Tuggener, M. Cieliebak (2023), "Correction of Errors in Preference
Ratings from Automated Metrics for Text Generation" (Findings of ACL 2023), Sections 3.1-3.3,
Algorithm 1.  Count vectors are ordered ``(>, =, <)``; ``p`` is the true preference distribution,
``mu[c, c']`` the probability that the metric says ``c`` when humans say ``c'`` (Eq. 1-2);
``theta = P(p> > p< | data)``; *a* wins if ``theta > 1 - gamma/2``, *b* if ``theta < gamma/2``.

Human-only (Eq. 3): ``p ~ Dir(n + 1)`` and ``theta = 1 - I_1/2(n> + 1, n< + 1)``.  With metric
data, ``theta`` is an exact finite sum over the latent true-label totals ``t`` of the metric-only
inputs (:func:`_exact_latent_totals`), or, above ``max_exact`` metric-only inputs, a
Rao-Blackwellised Gibbs estimate (:func:`_gibbs_posterior`).  Either way the posterior of ``p`` is
a mixture of ``Dir(n + t + 1)`` (:class:`PosteriorDraws`).  Pure: numpy and scipy only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TypedDict, TypeVar, Unpack

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
    "SamplerOptions",
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


def _theta_from_alpha(alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    """``P(p> > p<)`` for ``p ~ Dir(alpha)``: ``1 - I_{1/2}(alpha>, alpha<)``.

    ``p> / (p> + p<)`` is ``Beta(alpha>, alpha<)`` whatever ``alpha=`` is (aggregation property of
    the Dirichlet), so the event ``p> > p<`` is ``Beta > 1/2``.  Uses the symmetry
    ``1 - I_x(a, b) = I_{1-x}(b, a)`` to avoid cancellation near 1.
    """
    theta: NDArray[np.float64] = betainc(alpha[..., 2], alpha[..., 0], 0.5)
    return theta


def theta_human(counts: ArrayLike) -> NDArray[np.float64]:
    """Exact ``theta = P(p> > p< | human counts) = 1 - I_1/2(n> + 1, n< + 1)`` under Eq. 3 (in
    place of Algorithm 1's Monte Carlo average, lines 16-17); counts (n_pairs, 3) or (3,)."""
    n = _as_counts(counts, "counts")
    return _theta_from_alpha(n + 1.0)


def posterior_mode_p(counts: ArrayLike) -> NDArray[np.float64]:
    """Mode of ``Dir(n + 1)`` (Eq. 3), ``n / sum(n)`` (``p_hum`` of Section 6; uniform if empty)."""
    n = _as_counts(counts, "counts")
    tot = n.sum(axis=1, keepdims=True)
    return np.where(tot > 0, n / np.where(tot > 0, tot, 1.0), 1.0 / 3.0)


def kl_divergence(p: ArrayLike, q: ArrayLike, eps: float = 1e-12) -> NDArray[np.float64]:
    """Row-wise ``KL(p || q) = sum p log(p / q)`` in nats (KLD of Section 6); ``0 log 0 = 0``,
    ``q`` floored at ``eps``."""
    pa = np.atleast_2d(np.asarray(p, dtype=float))
    qa = np.atleast_2d(np.asarray(q, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pa > 0, pa * (np.log(pa) - np.log(np.maximum(qa, eps))), 0.0)
    kl: NDArray[np.float64] = terms.sum(axis=-1)
    return kl


@dataclass(frozen=True)
class PosteriorDraws:
    """Posterior of ``p`` per pair as a weighted mixture of Dirichlets ``Dir(alpha[s, k])``.

    ``alpha`` (n_draws, n_pairs, 3); ``weights`` (n_draws, n_pairs) sum to one per pair.
    Human-only pairs: the single component ``n + 1`` (Eq. 3); exact pairs: ``_EXACT_COMPONENTS``
    components ``n + t + 1`` resampled from ``P(t)``; sampled pairs: one per kept sweep.
    ``theta_values`` / ``mean_p_values``, when set, take precedence over the mixture averages.
    ``mcse``: the sampler's standard error of ``theta``, the exact path's error bound, or 0.
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
        """``P(p> > p<)`` per pair (Algorithm 1, line 17): exact or the mixture average."""
        if self.theta_values is not None:
            return self.theta_values.copy()
        theta: NDArray[np.float64] = (self.weights * _theta_from_alpha(self.alpha)).sum(axis=0)
        return theta

    def mean_p(self) -> NDArray[np.float64]:
        """Posterior mean of ``p`` per pair, shape (n_pairs, 3)."""
        if self.mean_p_values is not None:
            return self.mean_p_values.copy()
        comp = self.alpha / self.alpha.sum(axis=-1, keepdims=True)
        mean: NDArray[np.float64] = (self.weights[..., None] * comp).sum(axis=0)
        return mean

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
    kernel: NDArray[np.float64] = terms.sum(axis=-1)
    return kernel


def _dirichlet(
    rng: np.random.Generator, alpha: NDArray[np.float64], axis: int
) -> NDArray[np.float64]:
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


def _solve3(
    a: NDArray[np.float64], b: NDArray[np.float64], det: NDArray[np.float64]
) -> NDArray[np.float64]:
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
_FFT_FLOOR = 1e-14
"""Entries of the FFT convolution below this fraction of its maximum are round-off noise."""
_WINDOW_TAIL = 1e-14
"""Each tail of a latent-total bound left outside the computed window (fraction of its total)."""
_EXACT_TOL = 1e-5
"""Largest accepted bound on what the floor, the fold and the window move (relative to the
posterior mass); above it the tilt is refined and, at the last attempt, every total computed."""


def _hankel(v: NDArray[np.float64], rows: int, cols: int) -> NDArray[np.float64]:
    """Read-only view ``H[i, j] = v[i + j]`` (``v`` at least ``rows + cols - 1`` long)."""
    v = np.ascontiguousarray(v)
    return np.lib.stride_tricks.as_strided(
        v, (rows, cols), (v.itemsize, v.itemsize), writeable=False
    )


def _row_table(
    log_w: NDArray[np.float64], total: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``T[i, j] = w0[i] w1[j] w2[total - i - j]`` (zero off the simplex) from the rows of
    ``log_w = log(w0, w1, w2)``, scaled, and its margins over ``j`` and over ``i``.

    The margins are 1-D convolutions of the factors; where the product of the separately scaled
    factors would underflow, the table is the exponential of the summed logarithms instead.
    """
    e = list(np.exp(log_w - log_w.max(axis=1, keepdims=True)))
    back = np.concatenate([e[2][::-1], np.zeros(total)])  # back[i + j] = w2[total - i - j]
    over_gt = e[0] * np.convolve(e[1], e[2])[total::-1]
    top = float(over_gt.max())
    if top > 1e-200:
        e[0] = e[0] / top
        table = e[0][:, None] * e[1][None, :] * _hankel(back, total + 1, total + 1)
        return table, over_gt / top, e[1] * np.convolve(e[0], e[2])[total::-1]
    back_log = np.concatenate([log_w[2][::-1], np.full(total, -np.inf)])
    lp = log_w[0][:, None] + log_w[1][None, :] + _hankel(back_log, total + 1, total + 1)
    table = np.exp(lp - lp.max())
    return table, table.sum(axis=1), table.sum(axis=0)


_SCRATCH = threading.local()
_Scalar = TypeVar("_Scalar", bound=np.generic)


def _buffer(name: str, shape: tuple[int, int], dtype: type[_Scalar]) -> NDArray[_Scalar]:
    """An uninitialised array of ``shape`` on a buffer kept per thread and ``name``: the FFTs of
    every pair write into the same memory instead of page-faulting fresh megabytes per call."""
    size = shape[0] * shape[1]
    buf: NDArray[_Scalar] | None = getattr(_SCRATCH, name, None)
    if buf is None or buf.size < size:
        buf = np.empty(size, dtype=dtype)
        setattr(_SCRATCH, name, buf)
    return buf[:size].reshape(shape)


def _wrap(x: NDArray[np.float64], shape: tuple[int, int]) -> NDArray[np.float64]:
    """``out[i mod shape[0], j mod shape[1]] += x[i, j]`` along the axes longer than ``shape``."""
    for axis, size in enumerate(shape):
        if x.shape[axis] > size:
            pad = [(0, 0), (0, 0)]
            pad[axis] = (0, -x.shape[axis] % size)
            x = np.pad(x, pad)
            x = x.reshape(x.shape[:axis] + (-1, size) + x.shape[axis + 1 :]).sum(axis=axis)
    return x


def _central(v: NDArray[np.float64], tail: float) -> tuple[int, int]:
    """Smallest ``[lo, hi)`` leaving at most ``tail * sum(v)`` of ``v >= 0`` on each side."""
    cum = np.cumsum(v)
    total = cum[-1]
    lo = min(int(np.searchsorted(cum, tail * total, side="right")), v.size - 1)
    hi = int(np.searchsorted(cum, total - tail * total, side="left")) + 1
    return lo, max(min(hi, v.size), lo + 1)


def _outside(v: NDArray[np.float64], lo: int, hi: int) -> float:
    """Sum of ``v`` outside ``[lo, hi)``."""
    return float(v[: max(lo, 0)].sum() + v[max(hi, 0) :].sum())


def _fold_margin(v: NDArray[np.float64], lo: int, hi: int, budget: float) -> int:
    """Smallest ``p >= 0`` leaving at most ``budget`` of ``v >= 0`` outside ``[lo - p, hi + p)``
    (or the ``p`` that leaves nothing outside)."""
    cum = np.concatenate([[0.0], np.cumsum(v)])
    p = np.arange(max(lo, v.size - hi, 0) + 1)
    outside = cum[np.clip(lo - p, 0, v.size)] + (cum[-1] - cum[np.clip(hi + p, 0, v.size)])
    ok = np.flatnonzero(outside <= budget)
    return int(p[ok[0]] if ok.size else p[-1])


_Bands = tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]
"""A binomial CDF band table: ``flat, offset, lo, hi`` (:func:`_binomial_bands`)."""


def _binomial_bands(sizes: NDArray[np.int64]) -> _Bands:
    """CDF of ``Binomial(N, 1/2)`` on ``[lo, hi] = N/2 -+ (4.5 sqrt(N) + 2)`` for each ``N`` of
    ``sizes`` (sorted, distinct), as one flat array: the segment of ``N`` starts at ``offset``
    and holds ``0, F(lo), ..., F(hi), 1``.  Outside the band the CDF is within ``2 exp(-40)``
    of 0 or 1 (Hoeffding).  ``F(lo)`` is ``betainc``, the rest the ratio
    ``pmf(k) / pmf(k - 1) = (N - k + 1) / k``.  Returns ``flat, offset, lo, hi``."""
    half = np.ceil(4.5 * np.sqrt(sizes)).astype(np.int64) + 2
    lo = np.maximum(sizes // 2 - half, 0)
    hi = np.minimum(sizes // 2 + half, sizes)
    length = hi - lo + 1
    j = np.arange(int(length.max()))[None, :]
    k = np.minimum(lo[:, None] + j, hi[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        pmf = np.where(j > 0, (sizes[:, None] - k + 1.0) / k, 1.0)
    lf = gammaln(np.arange(1.0, sizes.max() + 2.0))  # lf[i] = log i!
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


_BINOMIAL_CACHE_MAX = 4096
"""Binomial sizes up to this have their CDF bands cached (about 13 MB at most)."""
_BINOMIAL: _Bands = _binomial_bands(np.arange(2))
""":func:`_binomial_bands` of ``N = 0, 1, ...``, grown on demand up to ``_BINOMIAL_CACHE_MAX``."""


def _binomial_cdf_bands(sizes: NDArray[np.int64]) -> _Bands:
    """:func:`_binomial_bands` indexed like ``sizes`` (any order, repeats): ``flat`` and per
    entry its segment's ``offset``, ``lo`` and ``hi``."""
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
    prob: NDArray[np.float64], lo_eq: int, lo_gt: int, n: NDArray[np.float64], big_m: int
) -> float:
    """``sum_t prob[t] (1 - I_1/2(n> + t> + 1, n< + t< + 1))`` over a box of latent totals (rows
    ``t= = lo_eq + r``, columns ``t> = lo_gt + c``, ``t< = |M| - t> - t=``).

    For integer arguments ``1 - I_1/2(a>, a<)`` is the CDF of ``Binomial(a> + a< - 1, 1/2)`` at
    ``a> - 1``; it is read from :func:`_binomial_cdf_bands` (one binomial size per row).
    """
    rows, cols = prob.shape
    n0, n2 = int(n[0]), int(n[2])
    big_n = np.maximum(n0 + n2 + 1 + big_m - (lo_eq + np.arange(rows)), 1)
    flat, offset, lo, hi = _binomial_cdf_bands(big_n)
    index = (offset + 1 + n0 + lo_gt - lo)[:, None] + np.arange(cols)[None, :]
    np.maximum(index, offset[:, None], out=index)
    np.minimum(index, (offset + hi - lo + 2)[:, None], out=index)
    return float(np.vdot(flat.take(index), prob))


def _systematic_cells(
    prob: NDArray[np.float64], size: int, rng: np.random.Generator, block: int = 32
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``size`` cells (row, column) of a non-negative 2-D array drawn with probability
    proportional to their value by systematic resampling (row-major order), through sums over
    blocks of ``block`` cells so that only the chosen blocks are accumulated cell by cell."""
    flat = prob.ravel()
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


def _second_on_window(
    e: NDArray[np.float64], big_m: int, window: tuple[int, int, int, int]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The second factor's parts on ``window = (lo_eq, hi_eq, lo_gt, hi_gt)``: ``e[1]`` along
    ``t=``, ``e[0]`` along ``t>`` and ``back`` with ``e[2][t<]`` of cell ``(r, c)`` at
    ``back[r + c]`` (zero off the simplex)."""
    lo_eq, hi_eq, lo_gt, hi_gt = window
    size = hi_eq - lo_eq + hi_gt - lo_gt - 1
    back = np.zeros(size)
    part = e[2][::-1][lo_eq + lo_gt :][:size]
    back[: part.size] = part
    return e[1][lo_eq:hi_eq], e[0][lo_gt:hi_gt], back


@dataclass
class _Level:
    """Unnormalised posterior of the latent totals on a window (rows ``t=``, columns ``t>``)."""

    prob: NDArray[np.float64]
    cmax: float
    total: float
    mean_t: NDArray[np.float64]


def _latent_level(
    tables: Sequence[NDArray[np.float64]],
    e: NDArray[np.float64],
    big_m: int,
    window: tuple[int, int, int, int],
    margin: tuple[int, int] = (0, 0),
) -> _Level:
    """Posterior of the latent totals on ``window = (lo_eq, hi_eq, lo_gt, hi_gt)``: the cyclic
    2-D convolution (by FFT) of the three row tables (indexed ``[t>, t=]``), of the window's
    size plus ``margin`` on each side, times the second factor ``e``."""
    lo_eq, hi_eq, lo_gt, hi_gt = window
    rows, cols = hi_eq - lo_eq, hi_gt - lo_gt
    s_eq = next_fast_len(rows + 2 * margin[0])
    s_gt = next_fast_len(cols + 2 * margin[1], real=True)
    # real FFT along t>, complex along t= (over contiguous rows), into per-thread buffers
    spec = _buffer("spec", (s_gt // 2 + 1, s_eq), np.complex128)
    part = _buffer("part", (s_gt // 2 + 1, s_eq), np.complex128)
    for k, tab in enumerate(tables):
        tab = _wrap(tab, (s_gt, s_eq))
        out = part if k else spec
        np.fft.rfft(tab, n=s_gt, axis=0, out=out[:, : tab.shape[1]])
        out[:, tab.shape[1] :] = 0.0
        np.fft.fft(out, axis=1, out=out)
        if k:
            spec *= part
    np.fft.ifft(spec, axis=1, out=spec)
    full = np.fft.irfft(spec.T, n=s_gt, axis=1, out=_buffer("full", (s_eq, s_gt), np.float64))
    # the window (a copy): cyclic indices wrap round at most once per axis
    prob = np.empty((rows, cols))
    r0, c0 = lo_eq % s_eq, lo_gt % s_gt
    for dst_r, src_r, nr in ((0, r0, min(rows, s_eq - r0)), (s_eq - r0, 0, rows - s_eq + r0)):
        for dst_c, src_c, nc in ((0, c0, min(cols, s_gt - c0)), (s_gt - c0, 0, cols - s_gt + c0)):
            if nr > 0 and nc > 0:
                prob[dst_r : dst_r + nr, dst_c : dst_c + nc] = full[
                    src_r : src_r + nr, src_c : src_c + nc
                ]
    cmax = float(prob.max())
    prob[prob < _FFT_FLOOR * cmax] = 0.0
    e_eq, e_gt, back = _second_on_window(e, big_m, window)
    prob *= e_eq[:, None]
    prob *= e_gt[None, :]
    prob *= _hankel(back, rows, cols)
    row_mass, col_mass = prob.sum(axis=1), prob.sum(axis=0)
    total = float(row_mass.sum())
    mean_gt = col_mass @ np.arange(lo_gt, hi_gt, dtype=float) / total
    mean_eq = row_mass @ np.arange(lo_eq, hi_eq, dtype=float) / total
    return _Level(prob, cmax, total, np.array([mean_gt, mean_eq, big_m - mean_gt - mean_eq]))


def _exact_latent_totals(
    n: NDArray[np.float64],
    conf: NDArray[np.float64],
    m: NDArray[np.float64],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], float, NDArray[np.float64], float]:
    """Exact posterior of the latent true-label totals ``t`` of one pair's metric-only inputs.

    With ``a = confusion + 1``, ``A = a.sum(axis=0)`` and ``z`` the latent table (rows ``m``,
    columns ``t``), integrating ``p`` and ``mu`` out (Dirichlet-multinomial conjugacy) gives::

        P(z | data) ∝ prod_{c,c'} Gamma(a[c,c'] + z[c,c']) / z[c,c']!
                      * prod_{c'} Gamma(n[c'] + t[c'] + 1) / Gamma(A[c'] + t[c'])

    Summed over the tables with column sums ``t``, the first product is a 2-D convolution of
    three row tables (FFT, both factors tilted by ``lambda**t`` so round-off is negligible where
    the mass is; on a window holding all but ``_WINDOW_TAIL`` of the exact 1-D marginals).
    Returns ``_EXACT_COMPONENTS`` totals drawn from ``P(t)``, ``theta`` (Algorithm 1, line 17),
    the mean of ``t`` and a bound on the relative error of the sums (floor, fold and window).
    """
    ai = (conf + 1.0).astype(np.int64)
    big_a = ai.sum(axis=0)
    mi, ni = m.astype(np.int64), n.astype(np.int64)
    big_m = int(mi.sum())
    lg = gammaln(np.arange(float(max(ni.max() + 2, big_a.max(), ai.max()) + big_m + 1)))
    ti = np.arange(big_m + 1)
    tf = ti.astype(float)
    # logs of the second factor (row j: t_j = 0..|M|) and of the row tables' factors
    # Gamma(a[c, j] + k) / k! (row j of l_row[c], k = 0..m_c)
    l_second = lg[(ni + 1)[:, None] + ti] - lg[big_a[:, None] + ti]
    l_row = [lg[ai[c][:, None] + ti[: mi[c] + 1]] - lg[1 + ti[: mi[c] + 1]] for c in range(3)]
    mean_t = big_m * (n + 1.0) / (n.sum() + 3.0)  # first guess: the human-only posterior mean
    for attempt in range(3):
        # tilt by lambda**t, log lambda = gradient of the second factor's log at the mean
        lt = digamma(n + mean_t + 1.0) - digamma(big_a + mean_t)
        tables, over_gt, over_eq = zip(
            *(_row_table(l_row[c] + lt[:, None] * tf[: mi[c] + 1], int(mi[c])) for c in range(3)),
            strict=True,
        )
        # exact 1-D marginals of the convolution along t> and t=
        marg_gt = np.convolve(np.convolve(over_gt[0], over_gt[1]), over_gt[2])
        marg_eq = np.convolve(np.convolve(over_eq[0], over_eq[1]), over_eq[2])
        logs = l_second - lt[:, None] * tf
        e = np.exp(logs - logs.max(axis=1, keepdims=True))
        # bounds on the posterior mass along t= and t> (prefix maxima of the second factor)
        pmax = np.maximum.accumulate(e, axis=1)
        w_eq = marg_eq * e[1] * (pmax[0] * pmax[2])[::-1]
        w_gt = marg_gt * e[0] * (pmax[1] * pmax[2])[::-1]
        if attempt < 2:
            window = _central(w_eq, _WINDOW_TAIL) + _central(w_gt, _WINDOW_TAIL)
        else:
            window = (0, big_m + 1, 0, big_m + 1)
        lo_eq, hi_eq, lo_gt, hi_gt = window
        level = _latent_level(tables, e, big_m, window)
        mean_t = level.mean_t
        # bounds: (1) the floor in every window cell, (2) what the cyclic convolution folds in
        # from outside the window, (3) the mass outside the window
        e_eq, e_gt, back = _second_on_window(e, big_m, window)
        floor = _FFT_FLOOR * level.cmax
        err_floor = floor * float(np.convolve(e_eq, e_gt) @ back)
        # a cell's floor error is also at most its row's and column's mass:
        # min(a, x, y) <= sqrt(min(a, x) min(a, y))
        row = np.minimum(1.01 * floor, marg_eq[lo_eq:hi_eq])
        col = np.minimum(1.01 * floor, marg_gt[lo_gt:hi_gt])
        err_floor = min(
            err_floor, float(np.convolve(np.sqrt(row) * e_eq, np.sqrt(col) * e_gt) @ back)
        )
        s_max = e_eq.max() * e_gt.max() * back.max()
        err_fold = (_outside(marg_eq, lo_eq, hi_eq) + _outside(marg_gt, lo_gt, hi_gt)) * s_max
        if err_fold > 0.5 * _EXACT_TOL * level.total:
            # a larger cyclic convolution: the mass within the margin folds in off the window
            budget = 0.125 * _EXACT_TOL * level.total / s_max
            margin = (
                _fold_margin(marg_eq, lo_eq, hi_eq, budget),
                _fold_margin(marg_gt, lo_gt, hi_gt, budget),
            )
            level = _latent_level(tables, e, big_m, window, margin)
            err_fold = s_max * (
                _outside(marg_eq, lo_eq - margin[0], hi_eq + margin[0])
                + _outside(marg_gt, lo_gt - margin[1], hi_gt + margin[1])
            )
        err_out = _outside(w_eq, lo_eq, hi_eq) + _outside(w_gt, lo_gt, hi_gt)
        err = float(min(1.0, (err_floor + err_fold + err_out) / level.total))
        if err <= _EXACT_TOL:
            break
    theta = min(max(_theta_sum(level.prob, lo_eq, lo_gt, n, big_m) / level.total, 0.0), 1.0)
    t_eq, t_gt = _systematic_cells(level.prob, _EXACT_COMPONENTS, rng)
    t_eq, t_gt = t_eq + lo_eq, t_gt + lo_gt
    t = np.stack([t_gt, t_eq, big_m - t_gt - t_eq], axis=-1).astype(float)
    return t, theta, level.mean_t, err


class SamplerOptions(TypedDict, total=False):
    """The keyword options of :func:`sample_posterior`, as the wrappers pass them on."""

    n_samples: int
    burn_in: int
    chains: int
    seed: int | np.random.Generator | None
    tol: float | None
    max_samples: int
    ridge_moves: bool
    method: str
    max_exact: int


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
    """Posterior of ``p`` under the model of Algorithm 1 (Sections 3.1-3.3), per pair.

    No metric-only input: the exact ``Dir(n + 1)`` (Eq. 3).  ``method="auto"``: exact (to
    round-off, :func:`_exact_latent_totals`) up to ``max_exact`` metric-only inputs, the Gibbs
    sampler above; ``"exact"`` / ``"gibbs"`` force one.  The sampler runs ``chains`` chains,
    discards ``burn_in`` sweeps, keeps blocks of ``n_samples`` until the MCSE of ``theta`` is at
    most ``tol`` or ``max_samples`` are kept (``tol=None``: exactly ``n_samples``).  ``mcse``
    holds that standard error, or the exact path's error bound.  ``seed`` seeds the generator.
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
    for i in range(n_pairs):
        alpha[: comps[i].shape[0], i] = comps[i]
        weights[: wts[i].shape[0], i] = wts[i]
    return PosteriorDraws(alpha, weights, n, mcse, theta, mean_p)


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
    """Conjugate data-augmentation Gibbs sampler of Algorithm 1's model, vectorised over pairs
    and chains: latent true labels ``z[c, :] ~ Mult(m_c, mu[c, :] p / sum)``, then
    ``p ~ Dir(n + t + 1)`` and ``mu[:, c'] ~ Dir(confusion[:, c'] + z[:, c'] + 1)`` (Eq. 4), plus
    :func:`_ridge_move` where metric-only inputs dominate.  Pairs without any get ``Dir(n + 1)``."""
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
        p: NDArray[np.float64],
        mu: NDArray[np.float64],
        n_b: NDArray[np.float64],
        m_int: NDArray[np.int64],
        a_mu: NDArray[np.float64],
        ridge: NDArray[np.bool_],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
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
    **sampler_kwargs: Unpack[SamplerOptions],
) -> NDArray[np.float64]:
    """``theta = P(p> > p< | humans, confusion, metric-only)`` per pair (Algorithm 1, line 17),
    by :func:`sample_posterior` with ``sampler_kwargs``."""
    return sample_posterior(human_counts, confusion, metric_counts, **sampler_kwargs).theta()


def posterior_mean_p(
    human_counts: ArrayLike,
    confusion: ArrayLike | None = None,
    metric_counts: ArrayLike | None = None,
    **sampler_kwargs: Unpack[SamplerOptions],
) -> NDArray[np.float64]:
    """Posterior mean of ``p`` per pair (``p_prot`` of Section 6), shape (n_pairs, 3)."""
    return sample_posterior(human_counts, confusion, metric_counts, **sampler_kwargs).mean_p()


def decide(theta: ArrayLike, gamma: float = 0.05) -> NDArray[np.int8]:
    """Algorithm 1: ``+1`` if ``theta > 1 - gamma/2``, ``-1`` if ``theta < gamma/2``, else 0."""
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


def _rope_from_alpha(alpha: NDArray[np.float64], delta: float, nodes: int) -> NDArray[np.float64]:
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
    prob: NDArray[np.float64] = betainc(a_w, a_l, hi) - betainc(a_w, a_l, lo)
    mean: NDArray[np.float64] = prob.mean(axis=0)
    return mean


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
    rope: NDArray[np.float64]
    if post.alpha.shape[0] == 1:
        rope = _rope_from_alpha(post.alpha, delta, nodes)[0]
        return rope
    alpha = post.components(max_components, np.random.default_rng(0))
    rope = _rope_from_alpha(alpha, delta, nodes).mean(axis=0)
    return rope
