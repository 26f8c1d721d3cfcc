"""Style-controlled Bradley–Terry: system scores with the answers' style held fixed.

Pure (NumPy, pandas, statsmodels). Chatbot Arena's style control (lmsys blog, 2024-08-28;
FastChat ``elo_analysis.py``): Bradley–Terry as a logistic regression whose features are
the system indicators (+1 for the first system, −1 for the second) *and* style covariates of
the two answers, so each system's score is what raters reward beyond the style, and each
covariate's coefficient is how much the style itself sways them:

``logit P(a preferred) = θ_a − θ_b + Σ_k γ_k s_k``

with ``s_k`` the Arena's normalised differences ``(x_a − x_b) / (x_a + x_b)`` (0 when both
are 0) of the answer length and of the markdown headers, list items and bold spans, each
standardised to mean 0 and standard deviation 1 over the comparisons (the Arena's
normalisation, so the coefficients compare), plus the display position (+1 when ``a`` was
shown on the left, −1 on the right, 0 unknown). A tie counts ½ (soft target). The fit is
statsmodels' GLM (binomial, logit link) with the robust (HC0) covariance; the scores are
centred at 0 and put on the Elo-like scale of :mod:`ranking.bradley_terry`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ranking.bradley_terry import ELO_BASE, ELO_SCALE

__all__ = ["COVARIATES", "StyleFit", "markdown_counts", "style_bradley_terry", "style_features"]

#: The covariates, in the order of :attr:`StyleFit.coefficients`.
COVARIATES = ("length", "headers", "lists", "bold", "position")

_HEADER = re.compile(r"^\s{0,3}#{1,6}\s", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def markdown_counts(text: str) -> tuple[int, int, int, int]:
    """``(characters, headers, list items, bold spans)`` of one answer, as the Arena counts
    them (lines opening with ``#``; lines opening with ``-``, ``*``, ``+`` or ``1.``;
    ``**…**`` or ``__…__``)."""
    text = text or ""
    return len(text), len(_HEADER.findall(text)), len(_LIST.findall(text)), len(_BOLD.findall(text))


def _norm_diff(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    tot = x + y
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tot > 0, (x - y) / np.where(tot > 0, tot, 1), 0.0)


def style_features(
    text_a: Sequence[str], text_b: Sequence[str], left_is_a: Sequence[float] | None = None
) -> np.ndarray:
    """``(n, 5)`` raw covariates (:data:`COVARIATES`): normalised differences of length and
    markdown counts, and the position (+1: ``a`` on the left, −1: right, 0: unknown)."""
    ca = np.array([markdown_counts(t) for t in text_a], dtype=np.float64).reshape(-1, 4)
    cb = np.array([markdown_counts(t) for t in text_b], dtype=np.float64).reshape(-1, 4)
    diffs = _norm_diff(ca, cb)
    pos = np.zeros(len(ca)) if left_is_a is None else np.asarray(left_is_a, dtype=np.float64)
    return np.column_stack([diffs, pos])


@dataclass(frozen=True)
class StyleFit:
    """Scores (Elo-like, best first in :meth:`table`) and style coefficients with intervals.

    ``coefficients``: per covariate ``(name, coef, low, high, p_value)`` in log-odds per
    standard deviation of the covariate (position: per side), ``None`` rows for covariates
    constant over the comparisons (left out of the fit)."""

    systems: list[str]
    score: np.ndarray
    low: np.ndarray
    high: np.ndarray
    coefficients: list[dict]
    n: int

    def table(self) -> list[dict]:
        order = np.argsort(-self.score, kind="stable")
        return [
            {
                "system": self.systems[i],
                "score": float(self.score[i]),
                "low": float(self.low[i]),
                "high": float(self.high[i]),
            }
            for i in order
        ]


def style_bradley_terry(
    system_a: Sequence[str],
    system_b: Sequence[str],
    outcome: Sequence[float],
    features: np.ndarray | None,
    *,
    confidence: float = 0.95,
) -> StyleFit:
    """Fit the style-controlled (``features`` from :func:`style_features`) or, with
    ``features=None``, the plain Bradley–Terry model. ``outcome``: 1 when ``a`` was
    preferred, 0 when ``b``, ½ a tie (or the share of raters preferring ``a``). Raises
    :class:`ValueError` when the outcomes are separated perfectly (no finite estimate)."""
    from statsmodels.genmod.families import Binomial  # not statsmodels.api: a third the time
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

    a = np.asarray(system_a, dtype=object).astype(str)
    b = np.asarray(system_b, dtype=object).astype(str)
    y = np.asarray(outcome, dtype=np.float64)
    systems = sorted(set(a) | set(b))
    k, n = len(systems), len(y)
    code = {s: i for i, s in enumerate(systems)}
    x = np.zeros((n, k))
    x[np.arange(n), [code[s] for s in a]] += 1.0
    x[np.arange(n), [code[s] for s in b]] -= 1.0
    cols = [x[:, : k - 1]]
    kept: list[int] = []
    if features is not None:
        f = np.asarray(features, dtype=np.float64)
        sd = f.std(axis=0)
        kept = [j for j in range(f.shape[1]) if sd[j] > 1e-12]
        z = f[:, kept].copy()
        for c, j in enumerate(kept):  # standardised, except the position (±1 per side)
            if COVARIATES[j] != "position":
                z[:, c] = (z[:, c] - z[:, c].mean()) / z[:, c].std()
        cols.append(z)
    design = np.column_stack(cols)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            fit = GLM(y, design, family=Binomial()).fit(cov_type="HC0")
        except PerfectSeparationWarning:
            raise ValueError(
                "perfect separation: the outcomes are predicted exactly, no finite scores"
            ) from None
    params, cov = np.asarray(fit.params), np.asarray(fit.cov_params())
    if not (np.all(np.isfinite(params)) and np.all(np.isfinite(cov))):
        raise ValueError("the fit did not converge to finite scores")
    amat = np.vstack([np.eye(k - 1), np.zeros((1, k - 1))]) - 1.0 / k
    theta = amat @ params[: k - 1]
    cov_t = amat @ cov[: k - 1, : k - 1] @ amat.T
    from scipy import stats  # imported when used: the web's URLconf imports this module

    q = float(stats.norm.ppf(0.5 + confidence / 2))
    se = np.sqrt(np.maximum(np.diag(cov_t), 0.0))
    coefs = []
    for j, name in enumerate(COVARIATES if features is not None else ()):
        if j not in kept:
            coefs.append(
                {
                    "covariate": name,
                    "coef": None,
                    "low": None,
                    "high": None,
                    "p_value": None,
                    "reason": "constant over the comparisons",
                }
            )
            continue
        c = k - 1 + kept.index(j)
        s = float(np.sqrt(cov[c, c]))
        coefs.append(
            {
                "covariate": name,
                "coef": float(params[c]),
                "low": float(params[c] - q * s),
                "high": float(params[c] + q * s),
                "p_value": float(2 * stats.norm.sf(abs(params[c]) / s)) if s > 0 else None,
                "reason": "",
            }
        )
    return StyleFit(
        systems=systems,
        score=ELO_BASE + ELO_SCALE * theta,
        low=ELO_BASE + ELO_SCALE * (theta - q * se),
        high=ELO_BASE + ELO_SCALE * (theta + q * se),
        coefficients=coefs,
        n=n,
    )
