"""Judge-assisted estimates: prediction-powered inference with power tuning (PPI++).

Pure (NumPy/SciPy, no Django). A judge rates many items; humans label a subset of them. Each
estimate below is the human-only estimate plus a judge *rectifier*: the judge's figure on the
items humans did not label minus the judge's figure on the items they did, weighted by a
power-tuning weight ``λ``. The human labels remove the judge's bias, so the interval is
valid whatever the judge's quality; the judge only narrows it, by as much as it predicts the
human labels. With ``λ = 0`` every estimate is the human-only one.

Sources (formulas written out in each function):

* PPI++: Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference",
  arXiv 2311.01453 — the λ-weighted loss ``L_n(θ) + λ (L̃_N^f(θ) − L_n^f(θ))``, its
  asymptotic (sandwich) covariance and the power-tuned ``λ̂`` that minimises it.
* Bradley–Terry with PPI: Boyeau, Angelopoulos, Yosef, Malik & Jordan, "AutoEval Done
  Right", ICML 2025, arXiv 2403.07008 — the Bradley–Terry model as a logistic regression
  (features +1 for the first system, −1 for the second) fitted with the PPI++ loss.
* Rank-sets: Chatzi, Straitouri, Thejaswi & Gomez Rodriguez, "Prediction-Powered Ranking
  of Large Language Models", NeurIPS 2024, arXiv 2402.17826 — from an estimate and its
  covariance, the confidence ellipsoid at level 1−α (χ² quantile with as many degrees of
  freedom as free parameters); system ``j`` is certainly above ``i`` when the ellipsoid lies
  entirely on one side of ``θ_i = θ_j``; the rank-set of ``i`` runs from 1 + (systems
  certainly above) to K − (systems certainly below). All rank-sets cover the true ranks
  together with probability ≥ 1−α (asymptotically).

Assumption (when to trust it): the items humans labelled are a random sample of the items
the judge rated (as the platform's assignment draws them); the judge's labels are not
trained on those human labels. Users' view: ``docs/analysis.md`` ("Judge-assisted
estimates").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = [
    "BTEstimate",
    "MeanEstimates",
    "effective_gain",
    "ppi_bradley_terry",
    "ppi_means",
    "rank_sets",
]

#: The power-tuning weight is clipped to [0, 1] (PPI++ allows any real λ; outside [0, 1] it
#: only helps with a judge that predicts the human label backwards, and [0, 1] keeps both
#: the human-only (0) and the plain PPI (1) estimators as the ends).
LAMBDA_RANGE = (0.0, 1.0)


def critical(confidence: float, dof: np.ndarray | float) -> np.ndarray:
    """The interval's half-width in standard errors: Student's t with ``dof`` degrees of
    freedom (the labelled sample less the fitted parameters), the usual small-sample form
    of the normal interval PPI++ gives; it tends to ``z_{1−α/2}`` as the sample grows."""
    from scipy import stats  # imported when used: the web's URLconf imports this module

    return stats.t.ppf(0.5 + confidence / 2, np.maximum(dof, 1))


# --------------------------------------------------------------------------------------------
# Means (win rates, score means)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeanEstimates:
    """Per group: the assisted mean and interval, the human-only mean and interval, the
    power-tuning weight, the counts and the effective human sample size. NaN where a group
    has fewer than two human labels."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    se: np.ndarray
    human_estimate: np.ndarray
    human_low: np.ndarray
    human_high: np.ndarray
    human_se: np.ndarray
    lam: np.ndarray
    n_human: np.ndarray
    n_judge: np.ndarray

    @property
    def n_effective(self) -> np.ndarray:
        """``n · Var(human-only) / Var(assisted)``: how many human labels alone would give
        the assisted interval's width."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.n_human * (self.human_se / self.se) ** 2


def _group_sums(values: np.ndarray, group: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(group, weights=values, minlength=k).astype(np.float64)


def ppi_means(
    y: np.ndarray,
    f_lab: np.ndarray,
    group_lab: np.ndarray,
    f_unl: np.ndarray,
    group_unl: np.ndarray,
    n_groups: int,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
) -> MeanEstimates:
    """PPI++ mean per group (a system pair's win rate, a system's mean score).

    ``y``: human values on the ``n`` labelled items, ``f_lab``: the judge's values on the
    same items, ``f_unl``: the judge's values on the ``N`` items without human labels;
    ``group_*``: group index of each item. Per group (PPI++, mean estimation):

    * ``θ̂_λ = ȳ + λ (mean(f_unl) − mean(f_lab))``
    * ``Var(θ̂_λ) = Var(y − λ f)/n + λ² Var(f_unl)/N``
    * power tuning, which minimises that variance:
      ``λ̂ = Cov(y, f) / ((1 + n/N) Var(f))``, clipped to :data:`LAMBDA_RANGE` (``Var(f)``
      over all ``n + N`` judge values);
    * interval ``θ̂ ± t_{n−1, 1−α/2} · se`` (PPI++'s normal interval, with the
      small-sample t quantile of :func:`critical`).

    ``lam``: a fixed weight instead of the tuned one (0: human-only). The human-only
    figures are ``ȳ ± z · sd(y)/√n`` on the same items.
    """
    y = np.asarray(y, dtype=np.float64)
    f_lab = np.asarray(f_lab, dtype=np.float64)
    f_unl = np.asarray(f_unl, dtype=np.float64)
    g, gu, k = np.asarray(group_lab), np.asarray(group_unl), n_groups
    n = np.bincount(g, minlength=k).astype(np.float64)
    big_n = np.bincount(gu, minlength=k).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        my = _group_sums(y, g, k) / n
        mf = _group_sums(f_lab, g, k) / n
        mu = _group_sums(f_unl, gu, k) / big_n
        dy, df = y - my[g], f_lab - mf[g]
        du = f_unl - mu[gu]
        var_y = _group_sums(dy * dy, g, k) / (n - 1)
        var_f = _group_sums(df * df, g, k) / (n - 1)
        cov = _group_sums(dy * df, g, k) / (n - 1)
        var_u = _group_sums(du * du, gu, k) / (big_n - 1)
        # Var(f) over all judge values: the pooled sum of squares around the pooled mean
        m_all = (n * mf + big_n * np.nan_to_num(mu)) / (n + big_n)
        ss_all = (
            _group_sums(df * df, g, k)
            + _group_sums(du * du, gu, k)
            + n * (mf - m_all) ** 2
            + big_n * (np.nan_to_num(mu) - m_all) ** 2
        )
        var_all = ss_all / (n + big_n - 1)
        if lam is None:
            tuned = cov / ((1 + n / big_n) * var_all)
            tuned = np.where(np.isfinite(tuned), tuned, 0.0)
            lam_g = np.clip(tuned, *LAMBDA_RANGE)
        else:
            lam_g = np.full(k, float(lam))
        lam_g = np.where(big_n >= 2, lam_g, 0.0)  # no judge-only items: human-only
        est = my + lam_g * (np.nan_to_num(mu) - mf)
        var = (var_y - 2 * lam_g * cov + lam_g**2 * var_f) / n
        var = var + np.where(lam_g > 0, lam_g**2 * np.nan_to_num(var_u) / big_n, 0.0)
        se = np.sqrt(np.maximum(var, 0.0))
        se_h = np.sqrt(var_y / n)
    z = critical(confidence, n - 1)
    bad = n < 2
    nan = np.where(bad, np.nan, 0.0)
    return MeanEstimates(
        estimate=est + nan,
        low=est - z * se + nan,
        high=est + z * se + nan,
        se=se + nan,
        human_estimate=my + nan,
        human_low=my - z * se_h + nan,
        human_high=my + z * se_h + nan,
        human_se=se_h + nan,
        lam=lam_g,
        n_human=n.astype(int),
        n_judge=big_n.astype(int),
    )


# --------------------------------------------------------------------------------------------
# Bradley–Terry (AutoEval Done Right)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BTEstimate:
    """Bradley–Terry log-strengths ``θ`` (natural log scale, centred at 0) with covariance,
    assisted and human-only, and the power-tuning weight. ``converged`` is False when the
    fit did not settle (a system that never lost or never won: no finite estimate)."""

    theta: np.ndarray
    cov: np.ndarray
    human_theta: np.ndarray
    human_cov: np.ndarray
    lam: float
    n_human: int
    n_judge: int
    converged: bool

    def intervals(self, confidence: float = 0.95) -> tuple[np.ndarray, ...]:
        """``(low, high, human_low, human_high)``: ``θ̂ ± t · se`` with ``n − (K − 1)``
        degrees of freedom (:func:`critical`)."""
        t = critical(confidence, self.n_human - (len(self.theta) - 1))
        se, se_h = (np.sqrt(np.maximum(np.diag(c), 0.0)) for c in (self.cov, self.human_cov))
        return (
            self.theta - t * se,
            self.theta + t * se,
            self.human_theta - t * se_h,
            (self.human_theta + t * se_h),
        )


@dataclass(frozen=True)
class _Pairs:
    """Comparisons summed per ordered system pair (the design row ``e_a − e_b`` depends on
    the pair only, so every sum over comparisons is a sum over pairs): ``x`` the pairs'
    design rows without the last system's column (its θ is fixed at 0); per pair the
    labelled count ``n``, sums of ``y``, ``f``, ``y²``, ``f²``, ``y·f`` and the judge-only
    count ``nu`` with sums of ``f̃`` and ``f̃²``."""

    x: np.ndarray
    n: np.ndarray
    sy: np.ndarray
    sf: np.ndarray
    syy: np.ndarray
    sff: np.ndarray
    syf: np.ndarray
    nu: np.ndarray
    su: np.ndarray
    suu: np.ndarray

    @classmethod
    def build(cls, a, b, y, f, au, bu, fu, k: int) -> _Pairs:
        a, b, au, bu = (np.asarray(v, dtype=np.int64) for v in (a, b, au, bu))
        code, code_u = a * k + b, au * k + bu
        keys = np.unique(np.concatenate([code, code_u]))
        i, iu = np.searchsorted(keys, code), np.searchsorted(keys, code_u)
        m = len(keys)

        def s(idx: np.ndarray, v: np.ndarray | None = None) -> np.ndarray:
            return np.bincount(idx, weights=v, minlength=m).astype(np.float64)

        x = np.zeros((m, k))
        x[np.arange(m), keys // k] += 1.0
        x[np.arange(m), keys % k] -= 1.0
        return cls(
            x=x[:, : k - 1],
            n=s(i),
            sy=s(i, y),
            sf=s(i, f),
            syy=s(i, y * y),
            sff=s(i, f * f),
            syf=s(i, y * f),
            nu=s(iu),
            su=s(iu, fu),
            suu=s(iu, fu * fu),
        )


def _fit(d: _Pairs, lam: float, big_n: float) -> tuple[np.ndarray, bool]:
    """Newton's method on the PPI++ logistic loss (convex for λ in [0, 1]):
    ``(1/n) Σ ℓ(x_i β, y_i) + λ [(1/N) Σ ℓ(x̃_j β, f̃_j) − (1/n) Σ ℓ(x_i β, f_i)]`` with
    ``ℓ(η, t) = log(1 + e^η) − t η`` (soft targets: a tie is ½)."""
    n = d.n.sum()
    wu = lam / big_n if lam > 0 and big_n else 0.0
    beta = np.zeros(d.x.shape[1])
    target = (d.sy - lam * d.sf) / n + wu * d.su
    count = (1 - lam) * d.n / n + wu * d.nu
    for _ in range(100):
        p = special.expit(d.x @ beta)
        grad = d.x.T @ (count * p - target)
        hess = (d.x.T * (count * p * (1 - p))) @ d.x
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            return beta, False
        beta = beta - step
        if not np.all(np.isfinite(beta)) or np.abs(beta).max() > 30:
            return beta, False
        if np.abs(step).max() < 1e-10:
            return beta, True
    return beta, False


def _centre(k: int) -> np.ndarray:
    """``A``: β (θ with the last system at 0) → θ centred at 0."""
    p = np.vstack([np.eye(k - 1), np.zeros((1, k - 1))])
    return (np.eye(k) - 1.0 / k) @ p


def _pair_cov(x: np.ndarray, count: float, s1: np.ndarray, t1: np.ndarray, s12: np.ndarray):
    """Sample covariance (ddof 1) between ``u_i = x_p r_i`` and ``v_i = x_p q_i`` over
    ``count`` comparisons, from per-pair sums ``s1 = Σ r``, ``t1 = Σ q``, ``s12 = Σ r q``."""
    if count < 2:
        return np.zeros((x.shape[1],) * 2)
    mu, mv = x.T @ s1 / count, x.T @ t1 / count
    return ((x.T * s12) @ x - count * np.outer(mu, mv)) / (count - 1)


def ppi_bradley_terry(
    a_lab: np.ndarray,
    b_lab: np.ndarray,
    y: np.ndarray,
    f_lab: np.ndarray,
    a_unl: np.ndarray,
    b_unl: np.ndarray,
    f_unl: np.ndarray,
    k: int,
    *,
    lam: float | None = None,
) -> BTEstimate:
    """PPI++ Bradley–Terry (AutoEval Done Right, Section 4's Bradley–Terry as a logistic
    regression, fitted with the PPI++ loss).

    ``a_*``, ``b_*``: system indices (0..k−1) of each comparison; ``y``: the human value of
    the labelled comparisons (1: ``a`` preferred, 0: ``b``, ½: tie or the share of human
    labels preferring ``a``); ``f_*``: the judge's value on the same scale. With
    ``g_i = x_i (σ(x_i β) − y_i)`` the human gradients, ``g^f_i`` the judge's on the same
    items and ``g̃_j`` the judge's on the others, ``H`` the Hessian ``E[σ(1−σ) x xᵀ]`` (over
    all ``n + N`` comparisons: it does not depend on the labels):

    * ``Σ_λ = H⁻¹ [Cov(g − λ g^f)/n + λ² Cov(g̃)/N] H⁻¹`` (PPI++, asymptotic covariance);
    * ``λ̂ = tr(M (C_{g,f} + C_{f,g}) Mᵀ) / (2 (1 + n/N) tr(M C_{f,f} Mᵀ))`` with
      ``M = A H⁻¹`` (``A``: to centred θ), which minimises the summed variance of the
      centred scores (PPI++ power tuning), evaluated at the human-only fit, clipped to
      :data:`LAMBDA_RANGE`.

    The human-only estimate is the same fit with ``λ = 0`` on the labelled comparisons
    (sandwich covariance ``H_n⁻¹ Cov(g)/n H_n⁻¹``). Every sum runs over system pairs
    (:class:`_Pairs`), so the cost does not grow with the number of comparisons.
    """
    y, f_lab, f_unl = (np.asarray(v, dtype=np.float64) for v in (y, f_lab, f_unl))
    d = _Pairs.build(a_lab, b_lab, y, f_lab, a_unl, b_unl, f_unl, k)
    n, big_n = float(len(y)), float(len(f_unl))
    amat = _centre(k)

    def hessian(beta: np.ndarray, count: np.ndarray) -> np.ndarray:
        p = special.expit(d.x @ beta)
        return (d.x.T * (count * p * (1 - p))) @ d.x / count.sum()

    def grads(beta: np.ndarray, lam_: float):
        """Per-pair sums for the covariances of ``g − λ g^f``, ``g``, ``g^f`` and ``g̃``."""
        p = special.expit(d.x @ beta)
        # r_i = (1 − λ) p − y_i + λ f_i ; g_i − λ g^f_i = x_p r_i
        c = (1 - lam_) * p
        s_lin = d.sy - lam_ * d.sf
        s_sq = d.syy - 2 * lam_ * d.syf + lam_**2 * d.sff
        r1 = d.n * c - s_lin
        r2 = d.n * c * c - 2 * c * s_lin + s_sq
        u1 = d.nu * p - d.su  # Σ (p − f̃)
        u2 = d.nu * p * p - 2 * p * d.su + d.suu
        return p, r1, r2, u1, u2

    beta_h, ok_h = _fit(d, 0.0, big_n)
    try:
        h_n_inv = np.linalg.inv(hessian(beta_h, d.n))
    except np.linalg.LinAlgError:
        ok_h, h_n_inv = False, np.full((k - 1, k - 1), np.nan)
    _, r1, r2, _, _ = grads(beta_h, 0.0)
    cov_bh = h_n_inv @ _pair_cov(d.x, n, r1, r1, r2) @ h_n_inv / n
    human_theta, human_cov = amat @ beta_h, amat @ cov_bh @ amat.T
    fallback = BTEstimate(
        human_theta, human_cov, human_theta, human_cov, 0.0, int(n), int(big_n), ok_h
    )
    if not ok_h or big_n < 2:
        return fallback
    if lam is None:
        p = special.expit(d.x @ beta_h)
        hinv = np.linalg.inv(hessian(beta_h, d.n + d.nu))
        m = amat @ hinv
        g1, gf1 = d.n * p - d.sy, d.n * p - d.sf
        cross = d.n * p * p - p * (d.sy + d.sf) + d.syf  # Σ (p − y)(p − f)
        c_gf = _pair_cov(d.x, n, g1, gf1, cross)
        f_lin = gf1 + d.nu * p - d.su
        f_sq = d.n * p * p - 2 * p * d.sf + d.sff + d.nu * p * p - 2 * p * d.su + d.suu
        c_ff = _pair_cov(d.x, n + big_n, f_lin, f_lin, f_sq)
        num = np.trace(m @ (c_gf + c_gf.T) @ m.T)
        den = 2 * (1 + n / big_n) * np.trace(m @ c_ff @ m.T)
        lam = float(np.clip(num / den, *LAMBDA_RANGE)) if den > 0 else 0.0
    beta, ok = _fit(d, lam, big_n)
    if not ok:
        return fallback
    hinv = np.linalg.inv(hessian(beta, d.n + d.nu))
    _, r1, r2, u1, u2 = grads(beta, lam)
    v = _pair_cov(d.x, n, r1, r1, r2) / n
    if lam > 0:
        v = v + lam**2 * _pair_cov(d.x, big_n, u1, u1, u2) / big_n
    cov_b = hinv @ v @ hinv
    return BTEstimate(
        amat @ beta, amat @ cov_b @ amat.T, human_theta, human_cov, lam, int(n), int(big_n), ok
    )


# --------------------------------------------------------------------------------------------
# Rank-sets (Chatzi et al.) and the effective sample gain
# --------------------------------------------------------------------------------------------


def rank_sets(
    estimate: np.ndarray, cov: np.ndarray, *, confidence: float = 0.95, dof: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rank-sets with joint coverage ``confidence`` (Chatzi et al. 2024, Section 3): with
    ``c = χ²_{dof}(confidence)``, system ``j`` is certainly above ``i`` when
    ``θ̂_j − θ̂_i > √c · sd(θ̂_j − θ̂_i)`` — the confidence ellipsoid
    ``(θ̂ − θ)ᵀ Σ⁺ (θ̂ − θ) ≤ c`` lies entirely on that side. Rank 1 is the best (largest θ).
    Returns ``(rank_low, rank_high)``: 1 + systems certainly above, K − systems certainly
    below. ``dof``: free parameters (default K; K − 1 for centred scores)."""
    est = np.asarray(estimate, dtype=np.float64)
    k = len(est)
    from scipy import stats

    c = float(stats.chi2.ppf(confidence, k if dof is None else dof))
    var = np.diag(cov)
    sd = np.sqrt(np.maximum(var[:, None] + var[None, :] - 2 * cov, 0.0))
    diff = est[None, :] - est[:, None]  # [i, j]: θ_j − θ_i
    above = diff > np.sqrt(c) * sd  # [i, j]: j certainly above i
    np.fill_diagonal(above, False)
    return 1 + above.sum(axis=1), k - above.sum(axis=0)


def effective_gain(human_var: np.ndarray, var: np.ndarray) -> float | None:
    """``Σ Var(human-only) / Σ Var(assisted) − 1``: how much larger a human-only sample
    would have to be for the same (summed) interval widths; 0.5 is 50 % more labels."""
    hv, v = np.nansum(human_var), np.nansum(var)
    if not (np.isfinite(hv) and np.isfinite(v)) or v <= 0:
        return None
    return float(hv / v - 1)
