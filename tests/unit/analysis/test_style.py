"""Style-controlled Bradley-Terry: markdown counts, the covariates, a cross-check of the
plain fit against the bootstrap-free maximum likelihood of choix, and the issue's test:
raters who prefer longer answers on top of a true order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from analysis import style

TRUE = np.linspace(1.0, -1.0, 8)  # systems s0 (best) .. s7
SYSTEMS = [f"s{i}" for i in range(8)]


def test_markdown_counts():
    text = "# Title\n\nSome **bold** and __more__.\n\n- one\n- two\n1. three\n## Sub\n"
    assert style.markdown_counts(text) == (len(text), 2, 3, 2)
    assert style.markdown_counts("") == (0, 0, 0, 0)


def test_features_are_normalised_differences():
    f = style.style_features(["aaaa", "# h\n"], ["aa", "# h\n# g\n"], [1, -1])
    assert f[0, 0] == pytest.approx((4 - 2) / 6)
    assert f[1, 1] == pytest.approx((1 - 2) / 3)
    assert list(f[:, 4]) == [1, -1]
    assert f[0, 1] == 0  # no headers on either side


def _comparisons(rng, n=12000, length_weight=2.0):
    a = rng.integers(0, 8, n)
    b = (a + rng.integers(1, 8, n)) % 8
    # worse systems write longer answers, with variation within each system
    mean_len = np.exp(5 + 0.35 * np.arange(8))
    len_a = rng.lognormal(np.log(mean_len[a]), 0.5).astype(int) + 1
    len_b = rng.lognormal(np.log(mean_len[b]), 0.5).astype(int) + 1
    left = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    d_len = (len_a - len_b) / (len_a + len_b)
    p = special.expit(TRUE[a] - TRUE[b] + length_weight * d_len + 0.2 * left)
    y = (rng.random(n) < p).astype(float)
    texts_a = ["x" * m for m in len_a]
    texts_b = ["x" * m for m in len_b]
    return np.array(SYSTEMS)[a], np.array(SYSTEMS)[b], y, texts_a, texts_b, left


def _tau(fit: style.StyleFit) -> float:
    order = [fit.score[fit.systems.index(s)] for s in SYSTEMS]
    return float(stats.kendalltau(order, TRUE).statistic)


def test_style_control_recovers_the_true_order_where_the_plain_ranking_fails():
    rng = np.random.default_rng(28)
    a, b, y, ta, tb, left = _comparisons(rng)
    plain = style.style_bradley_terry(a, b, y, None)
    controlled = style.style_bradley_terry(a, b, y, style.style_features(ta, tb, left))
    assert _tau(controlled) >= 0.9
    assert _tau(plain) < 0.9
    coefs = {c["covariate"]: c for c in controlled.coefficients}
    length = coefs["length"]
    assert length["low"] > 0 and length["p_value"] < 1e-6  # raters reward length
    assert coefs["position"]["low"] < 0.2 < coefs["position"]["high"]
    assert coefs["headers"]["coef"] is None and coefs["headers"]["reason"]


def test_plain_fit_matches_choix_maximum_likelihood():
    import choix

    rng = np.random.default_rng(3)
    a, b, y, *_ = _comparisons(rng, n=3000, length_weight=0.0)
    fit = style.style_bradley_terry(a, b, y, None)
    idx = {s: i for i, s in enumerate(SYSTEMS)}
    data = [
        (idx[x], idx[z]) if w == 1 else (idx[z], idx[x]) for x, z, w in zip(a, b, y, strict=True)
    ]
    ref = choix.ilsr_pairwise(8, data, alpha=0.0)
    ref = ref - ref.mean()
    theta = (fit.score - 1000.0) / (400 / np.log(10))
    assert theta == pytest.approx(ref[[idx[s] for s in fit.systems]], abs=1e-4)
