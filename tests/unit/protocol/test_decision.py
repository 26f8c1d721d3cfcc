"""Tests of protocol.decision (Deriu et al. 2023, Eq. 3-4, Algorithm 1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import betainc, gammaln

from protocol.decision import (
    Decision,
    counts_from_labels,
    decide,
    decide_with_thresholds,
    kl_divergence,
    posterior_mean_p,
    posterior_mode_p,
    preferences_from_scores,
    rope_probability,
    sample_posterior,
    theta_human,
    theta_with_metric,
)

# ---------------------------------------------------------------------------------------------
# exact human-only theta
# ---------------------------------------------------------------------------------------------


def test_theta_human_hand_derived_cases() -> None:
    # no data: p> / (p> + p<) ~ Beta(1, 1), P(> 1/2) = 1/2 exactly
    assert theta_human([0, 0, 0])[0] == 0.5
    # one win: Beta(2, 1) has cdf x^2, so P(x > 1/2) = 1 - 1/4
    assert theta_human([1, 0, 0])[0] == pytest.approx(0.75, abs=1e-15)
    # two wins: Beta(3, 1) has cdf x^3 -> 1 - 1/8
    assert theta_human([2, 0, 0])[0] == pytest.approx(0.875, abs=1e-15)
    # one loss, draws do not matter: Beta(1, 2) has cdf 1 - (1 - x)^2 -> P(x > 1/2) = 1/4
    assert theta_human([0, 5, 1])[0] == pytest.approx(0.25, abs=1e-15)
    # one win and one loss: Beta(2, 2) is symmetric
    assert theta_human([1, 0, 1])[0] == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("counts", [(0, 0, 0), (3, 4, 3), (10, 0, 10), (57, 200, 57)])
def test_theta_human_symmetric_counts_give_one_half(counts: tuple[int, int, int]) -> None:
    assert theta_human(counts)[0] == pytest.approx(0.5, abs=1e-12)


def test_theta_human_equals_betainc_formula_to_the_digit() -> None:
    counts = np.array([[12, 30, 7], [0, 3, 9], [140, 251, 112]])
    expected = 1.0 - betainc(counts[:, 0] + 1.0, counts[:, 2] + 1.0, 0.5)
    np.testing.assert_allclose(theta_human(counts), expected, rtol=0, atol=1e-14)


def test_theta_human_matches_brute_force_dirichlet_monte_carlo() -> None:
    rng = np.random.default_rng(123)
    counts = np.array([[5, 3, 2], [20, 10, 25], [1, 0, 0], [40, 80, 30]])
    draws = 200_000
    for row, th in zip(counts, theta_human(counts), strict=True):
        p = rng.dirichlet(row + 1.0, size=draws)
        mc = np.mean(p[:, 0] > p[:, 2])
        se = np.sqrt(th * (1 - th) / draws)
        assert abs(mc - th) < 5 * se + 1e-12


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300), st.integers(0, 300))
def test_theta_human_swapping_systems_mirrors_theta(w: int, d: int, l: int) -> None:
    assert theta_human([w, d, l])[0] == pytest.approx(1.0 - theta_human([l, d, w])[0], abs=1e-12)


def test_theta_human_vectorised_equals_per_pair() -> None:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 200, size=(40, 3))
    vec = theta_human(counts)
    single = np.array([theta_human(c)[0] for c in counts])
    np.testing.assert_array_equal(vec, single)


# ---------------------------------------------------------------------------------------------
# theta with metric data: independent slow reference by exact enumeration
# ---------------------------------------------------------------------------------------------


def _log_beta(a: np.ndarray) -> np.ndarray:
    return gammaln(a).sum(axis=-1) - gammaln(a.sum(axis=-1))


def _compositions(k: int) -> np.ndarray:
    return np.array([(i, j, k - i - j) for i in range(k + 1) for j in range(k + 1 - i)])


def exact_theta_with_metric(n, conf, m) -> float:
    """Exact theta for tiny cases: sum over every latent table z of true labels of the metric-only
    inputs (rows = metric label, row sums = m) with p and mu integrated out analytically:
    P(z | data) ∝ prod_c multinomial(m_c; z_c) * B(n + t + 1)
                  * prod_c' B(conf[:, c'] + z[:, c'] + 1)
    and P(p> > p< | z) = 1 - I_1/2(n> + t> + 1, n< + t< + 1) with t = column sums of z."""
    n, conf, m = np.asarray(n, float), np.asarray(conf, float), np.asarray(m, int)
    rows = [_compositions(int(mc)) for mc in m]
    total, acc = -np.inf, []
    for r0, r1, r2 in itertools.product(*rows):
        z = np.stack([r0, r1, r2]).astype(float)
        t = z.sum(axis=0)
        lw = sum(gammaln(m[c] + 1) - gammaln(z[c] + 1).sum() for c in range(3))
        lw += _log_beta(n + t + 1) + sum(_log_beta(conf[:, c] + z[:, c] + 1) for c in range(3))
        th = 1.0 - betainc(n[0] + t[0] + 1, n[2] + t[2] + 1, 0.5)
        acc.append((lw, th))
    lws = np.array([a[0] for a in acc])
    ths = np.array([a[1] for a in acc])
    w = np.exp(lws - lws.max())
    total = w.sum()
    return float((w * ths).sum() / total)


TINY_CASES = [
    ((2, 1, 0), [[1, 0, 0], [0, 1, 0], [1, 0, 0]], (4, 2, 1)),
    ((3, 2, 3), [[2, 0, 0], [1, 2, 1], [0, 0, 2]], (6, 3, 1)),
    ((1, 0, 4), [[1, 0, 1], [0, 0, 0], [0, 0, 3]], (2, 4, 5)),
]


@pytest.mark.parametrize(("n", "conf", "m"), TINY_CASES)
def test_metric_sampler_agrees_with_exact_enumeration(n, conf, m) -> None:
    # Tolerance 0.015: about 4 Monte Carlo standard errors of this run (16 chains x 1,500 sweeps).
    exact = exact_theta_with_metric(n, conf, m)
    est = theta_with_metric(
        [n], [conf], [m], chains=16, n_samples=1500, burn_in=100, tol=None, seed=7, method="gibbs"
    )[0]
    assert est == pytest.approx(exact, abs=0.015)


def _random_small_case(rng: np.random.Generator, extra_humans: bool):
    conf = rng.integers(0, 4, (3, 3))
    n = conf.sum(axis=0) + (rng.integers(0, 300, 3) if extra_humans else rng.integers(0, 3, 3))
    m = rng.integers(0, 7, 3)
    m[rng.integers(3)] += 1
    return n, conf, m


@pytest.mark.parametrize("seed", range(12))
def test_exact_posterior_equals_enumeration(seed: int) -> None:
    # The default (exact) path: theta and the posterior mean of p to round-off, also with many
    # human-only inputs (n >> confusion column sums: the strongly tilted case).
    rng = np.random.default_rng(seed)
    n, conf, m = _random_small_case(rng, extra_humans=seed % 2 == 1)
    post = sample_posterior([n], [conf], [m], seed=0)
    assert post.theta()[0] == pytest.approx(exact_theta_with_metric(n, conf, m), abs=1e-10)
    assert post.mcse[0] < 1e-5  # the a-posteriori bound of the FFT floor
    # posterior mean of p: E[(n + t + 1) / (N + M + 3)] over the enumerated latent tables
    rows = [_compositions(int(mc)) for mc in m]
    lws, ps = [], []
    for r0, r1, r2 in itertools.product(*rows):
        z = np.stack([r0, r1, r2]).astype(float)
        t = z.sum(axis=0)
        lw = sum(gammaln(m[c] + 1) - gammaln(z[c] + 1).sum() for c in range(3))
        lw += _log_beta(n + t + 1.0) + sum(_log_beta(conf[:, c] + z[:, c] + 1.0) for c in range(3))
        lws.append(lw)
        ps.append((n + t + 1.0) / (n.sum() + m.sum() + 3.0))
    w = np.exp(np.array(lws) - max(lws))
    mean_p = (w[:, None] * np.array(ps)).sum(axis=0) / w.sum()
    np.testing.assert_allclose(post.mean_p()[0], mean_p, atol=1e-10)
    # the resampled mixture components are draws of the same posterior
    np.testing.assert_allclose(post.weights.sum(axis=0), 1.0)
    comp_mean = (post.weights[..., None] * post.alpha / post.alpha.sum(-1, keepdims=True)).sum(0)
    np.testing.assert_allclose(comp_mean[0], mean_p, atol=0.02)


def test_exact_posterior_edge_cases_without_warnings() -> None:
    # no human label at all, a single metric-only input, one category only
    import warnings

    cases = [
        ((0, 0, 0), np.zeros((3, 3), int), (5, 0, 0)),
        ((0, 0, 0), np.zeros((3, 3), int), (0, 0, 1)),
        ((1, 0, 0), [[1, 0, 0], [0, 0, 0], [0, 0, 0]], (0, 3, 0)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n, conf, m in cases:
            th = theta_with_metric([n], [conf], [m], seed=0)[0]
            assert th == pytest.approx(exact_theta_with_metric(n, np.asarray(conf), m), abs=1e-10)


def test_binomial_cdf_bands_equal_betainc_and_stand_for_0_and_1_outside() -> None:
    from protocol import decision

    # cached sizes, repeated and unordered, and sizes above the cache (computed per call)
    for sizes in ([1, 2, 7, 7, 400, 3], [decision._BINOMIAL_CACHE_MAX + 1, 9000, 9000]):
        sizes = np.array(sizes)
        flat, offset, lo, hi = decision._binomial_cdf_bands(sizes)
        for size, off, a, b in zip(sizes, offset, lo, hi, strict=True):
            k = np.arange(a, b + 1)
            expected = np.where(k < size, betainc(np.maximum(size - k, 1.0), k + 1.0, 0.5), 1.0)
            np.testing.assert_allclose(flat[off + 1 : off + b - a + 2], expected, rtol=1e-10)
            assert flat[off] == 0.0 and flat[off + b - a + 2] == 1.0
            # outside the band the CDF is within 1e-17 of the sentinels
            if a > 0:
                assert betainc(size - a + 1.0, float(a), 0.5) < 1e-17
            if b < size:
                assert 1.0 - betainc(float(size - b), b + 1.0, 0.5) < 1e-15


@pytest.mark.parametrize("direct_cells", [0, 10**9])  # band sums / every cell's CDF
def test_exact_band_theta_equals_direct_betainc_sum(monkeypatch, direct_cells) -> None:
    # _theta_sum sums binomial CDFs only in a band around N'/2 (or, in small boxes, reads the
    # CDF of every cell from the bands); check against betainc everywhere (rows: t=, columns: t>)
    from protocol import decision
    from protocol.decision import _theta_sum

    monkeypatch.setattr(decision, "_THETA_DIRECT_CELLS", direct_cells)

    rng = np.random.default_rng(5)
    for n, big_m, shape, lo in [
        ((3, 4, 5), 300, (180, 200), (30, 40)),
        ((90, 5, 1), 80, (81, 81), (0, 0)),
        ((1, 0, 40), 500, (150, 420), (10, 60)),
    ]:
        prob = rng.random(shape)
        t1 = lo[0] + np.arange(shape[0])[:, None]
        t0 = lo[1] + np.arange(shape[1])[None, :]
        t2 = big_m - t0 - t1
        prob = np.where(t2 >= 0, prob, 0.0)
        h = betainc(n[2] + np.maximum(t2, 0) + 1.0, n[0] + t0 + 1.0, 0.5)
        direct = (prob * h).sum()
        band = _theta_sum(prob, lo[0], lo[1], np.array(n, float), big_m)
        assert band == pytest.approx(direct, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "conf", "m"),
    [
        # bench cases 12 and 23 (well and weakly identified), and a lopsided pair
        ([73, 69, 77], [[50, 8, 3], [12, 40, 10], [4, 9, 60]], [230, 210, 236]),
        ([2, 8, 11], [[2, 1, 0], [0, 5, 2], [0, 2, 9]], [40, 130, 167]),
        ([150, 20, 10], [[90, 3, 1], [10, 12, 2], [5, 5, 7]], [300, 60, 40]),
    ],
)
def test_exact_window_equals_whole_grid(monkeypatch, n, conf, m) -> None:
    # the default computes a window of latent totals by a cyclic convolution of its size; the
    # whole grid (a linear convolution, nothing left out or folded in) gives the same posterior
    # (both on the lattice of every total; coarse lattices are tested below)
    from protocol import decision

    _every_total(monkeypatch)
    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    t_w, th_w, mean_w, err_w = decision._exact_latent_totals(*args, np.random.default_rng(0))
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)  # every latent total
    t_f, th_f, mean_f, err_f = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert err_w < 1e-6 and err_f < 1e-5  # the a-posteriori bounds
    assert th_w == pytest.approx(th_f, abs=1e-11)
    np.testing.assert_allclose(mean_w, mean_f, atol=1e-8)
    # the resampled latent totals are draws of the same posterior, on the simplex
    assert np.all(t_w >= 0) and np.all(t_w.sum(axis=1) == sum(m))
    np.testing.assert_allclose(t_w.mean(axis=0), mean_f, rtol=0.02, atol=1.0)


@pytest.mark.parametrize(
    "totals", [(60, 50, 40), (173, 80, 159), (300, 5, 5), (0, 0, 120), (101, 0, 0)]
)
def test_simplex_convolution_equals_the_linear_convolution(totals) -> None:
    # the convolution on the simplex's lattice (P x Q, about 0.75 of the square) equals the
    # linear 2-D convolution on every cell of the simplex, read on the whole square and on a
    # window from the origin; (300, 5, 5) has a table wider than the lattice along both axes
    # (folded first)
    from scipy.signal import fftconvolve

    from protocol.decision import _simplex_convolution

    rng = np.random.default_rng(sum(totals))
    tables = []
    for m in totals:
        i, j = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
        tables.append(np.where(i + j <= m, rng.random((m + 1, m + 1)) + 0.1, 0.0))
    big_m = sum(totals)
    linear = fftconvolve(fftconvolve(tables[0], tables[1]), tables[2])  # [t>, t=]
    x, y = np.meshgrid(np.arange(big_m + 1), np.arange(big_m + 1), indexing="xy")  # [t=, t>]
    for rows, cols in ((big_m + 1, big_m + 1), (big_m + 1, big_m), (big_m - 3, big_m + 1)):
        out = _simplex_convolution(tables, big_m, rows, cols)
        assert out.shape == (rows, cols)
        on = (x + y <= big_m)[:rows, :cols]
        np.testing.assert_allclose(
            out[on], linear.T[:rows, :cols][on], rtol=0, atol=1e-12 * linear.max()
        )


def test_systematic_cells_follow_the_weights() -> None:
    from protocol.decision import _systematic_cells

    rng = np.random.default_rng(3)
    # every cell accumulated (small arrays) and block-wise (210,000 cells for 256 draws)
    for shape, size in [((7, 5), 4096), ((300, 700), 4096), ((300, 700), 256), ((301, 33), 64)]:
        prob = rng.random(shape) ** 8
        prob[:, ::3] = 0.0
        rows, cols = _systematic_cells(prob, size, np.random.default_rng(1))
        assert np.all(prob[rows, cols] > 0)
        counts = np.zeros(shape)
        np.add.at(counts, (rows, cols), 1.0)
        # systematic resampling: every cell is drawn floor or ceil of its expected count
        expected = prob / prob.sum() * size
        assert np.all(np.abs(counts - expected) < 1.0 + 1e-9)


def test_exact_and_gibbs_agree_on_a_large_weakly_identified_pair() -> None:
    # bench case 11: 27 human labels, 952 metric-only; an independent importance-sampling run
    # (confusion-posterior proposal for mu, ESS 5e5) gave 0.5428 +- 0.0007
    n, conf, m = [12, 3, 12], [[10, 1, 0], [0, 2, 5], [2, 0, 7]], [380, 208, 364]
    exact = theta_with_metric([n], [conf], [m], seed=0)[0]
    gibbs = theta_with_metric([n], [conf], [m], seed=0, method="gibbs", tol=0.004)
    assert exact == pytest.approx(0.5428, abs=0.003)
    assert gibbs[0] == pytest.approx(exact, abs=0.04)


def test_metric_sampler_is_vectorised_and_reproducible() -> None:
    n = np.array([c[0] for c in TINY_CASES])
    conf = np.array([c[1] for c in TINY_CASES])
    m = np.array([c[2] for c in TINY_CASES])
    a = sample_posterior(n, conf, m, seed=3, tol=None, n_samples=200)
    b = sample_posterior(n, conf, m, seed=3, tol=None, n_samples=200)
    np.testing.assert_array_equal(a.theta(), b.theta())
    np.testing.assert_allclose(a.weights.sum(axis=0), 1.0)
    # all pairs at once give the same answer as one pair at a time (within Monte Carlo error)
    single = [
        theta_with_metric(
            n[k : k + 1], conf[k : k + 1], m[k : k + 1], seed=k, tol=None, n_samples=500
        )[0]
        for k in range(3)
    ]
    vec = theta_with_metric(n, conf, m, seed=11, tol=None, n_samples=500)
    np.testing.assert_allclose(vec, single, atol=0.04)


def test_no_metric_only_inputs_gives_the_exact_human_posterior() -> None:
    n = np.array([[10, 5, 3], [4, 4, 9]])
    conf = np.array([[[5, 1, 0], [2, 3, 1], [0, 1, 2]], [[2, 0, 1], [1, 4, 1], [1, 0, 7]]])
    m = np.zeros((2, 3))
    np.testing.assert_array_equal(theta_with_metric(n, conf, m, seed=0), theta_human(n))
    np.testing.assert_allclose(
        posterior_mean_p(n, conf, m), (n + 1) / (n + 1).sum(1, keepdims=True)
    )


def test_perfect_metric_with_many_metric_only_inputs_acts_like_human_labels() -> None:
    # mu is learnt from 300 doubly rated inputs on which the metric never errs
    conf = np.diag([100.0, 100.0, 100.0])[None]
    n = np.array([[100, 100, 100]])
    m = np.array([[60, 0, 40]])
    th = theta_with_metric(n, conf, m, seed=1, tol=None, n_samples=400)[0]
    assert th == pytest.approx(theta_human([[160, 100, 140]])[0], abs=0.03)


def test_metric_inputs_are_validated() -> None:
    with pytest.raises(ValueError, match="human_counts must include"):
        theta_with_metric([[1, 0, 0]], [[[2, 0, 0], [0, 0, 0], [0, 0, 0]]], [[1, 1, 1]])
    with pytest.raises(ValueError, match="shape"):
        theta_with_metric([[1, 0, 0]], np.zeros((2, 3, 3)), [[1, 1, 1]])


# ---------------------------------------------------------------------------------------------
# decisions, thresholds, summaries
# ---------------------------------------------------------------------------------------------


def test_decide_respects_gamma_half_thresholds() -> None:
    gamma = 0.05
    theta = np.array([0.9751, 0.975, 0.5, 0.025, 0.0249])
    np.testing.assert_array_equal(decide(theta, gamma), [1, 0, 0, 0, -1])
    assert decide(np.array([0.991]), 0.02)[0] == Decision.A_WINS
    assert decide(np.array([0.989]), 0.02)[0] == Decision.UNDECIDED
    assert decide(np.array([0.009]), 0.02)[0] == Decision.B_WINS
    np.testing.assert_array_equal(
        decide_with_thresholds(theta, np.full(5, 0.99), np.full(5, 0.01)), [0, 0, 0, 0, 0]
    )
    with pytest.raises(ValueError):
        decide(theta, 1.5)


def test_preferences_from_scores_definition_5_and_dead_zone() -> None:
    a = np.array([1.0, 0.0, -2.0, 0.5, 0.3])
    b = np.array([0.0, 0.0, -1.0, 0.45, 0.3])
    np.testing.assert_array_equal(preferences_from_scores(a, b), [1, 0, -1, 1, 0])
    np.testing.assert_array_equal(preferences_from_scores(a, b, dead_zone=0.1), [1, 0, -1, 0, 0])
    np.testing.assert_array_equal(counts_from_labels([1, 0, -1, 1, 1]), [3, 1, 1])


def test_posterior_mode_mean_and_kl() -> None:
    np.testing.assert_allclose(posterior_mode_p([[2, 1, 1]]), [[0.5, 0.25, 0.25]])
    np.testing.assert_allclose(posterior_mean_p([[2, 1, 1]]), [[3 / 7, 2 / 7, 2 / 7]])
    assert kl_divergence([0.5, 0.5, 0.0], [0.5, 0.5, 0.0])[0] == 0.0
    assert kl_divergence([0.5, 0.25, 0.25], [0.25, 0.25, 0.5])[0] == pytest.approx(
        0.5 * np.log(2) + 0.25 * np.log(0.5)
    )


def test_rope_probability_matches_dirichlet_monte_carlo() -> None:
    rng = np.random.default_rng(5)
    counts = np.array([[30, 100, 28], [50, 10, 20], [3, 1, 2]])
    rope = rope_probability(counts, 0.05, nodes=64)
    for row, r in zip(counts, rope, strict=True):
        p = rng.dirichlet(row + 1.0, size=100_000)
        mc = np.mean(np.abs(p[:, 0] - p[:, 2]) < 0.05)
        assert r == pytest.approx(mc, abs=0.005)


@pytest.fixture
def lattice_steps(monkeypatch) -> list[int]:
    """The lattice steps of every posterior level computed while the test runs."""
    from protocol import decision

    steps: list[int] = []
    level = decision._latent_level

    def spy(tables, e, big_m, window, step, *margin):
        steps.append(step)
        return level(tables, e, big_m, window, step, *margin)

    monkeypatch.setattr(decision, "_latent_level", spy)
    return steps


def _every_total(monkeypatch) -> None:
    from protocol import decision

    monkeypatch.setattr(decision, "_COARSE_MIN_CELLS", 10**12)


# bench cases (bench/decision.py, seed 0) whose windows are wide enough for coarse lattices:
# weakly identified (3), well identified (4, 12, 24), posteriors reaching t= = 0 where the second
# factor is sharp (7, 11) and reaching t> = 0 and t< = 0 (15)
_WIDE_CASES = [
    ([5, 9, 10], [[4, 0, 2], [1, 8, 4], [0, 1, 4]], [290, 319, 138]),
    ([16, 3, 10], [[16, 1, 4], [0, 1, 0], [0, 1, 6]], [272, 91, 192]),
    ([12, 3, 12], [[10, 1, 0], [0, 2, 5], [2, 0, 7]], [380, 208, 364]),
    ([6, 9, 6], [[5, 1, 0], [1, 6, 0], [0, 2, 6]], [125, 121, 151]),
    ([43, 78, 33], [[35, 22, 3], [3, 37, 0], [5, 19, 30]], [237, 215, 243]),
    ([73, 69, 77], [[53, 4, 4], [2, 61, 9], [18, 4, 64]], [175, 220, 281]),
    ([91, 70, 49], [[60, 13, 1], [2, 27, 20], [29, 30, 28]], [204, 136, 249]),
]


@pytest.mark.parametrize(("n", "conf", "m"), _WIDE_CASES)
def test_coarse_lattices_give_theta_within_their_estimate(
    monkeypatch, lattice_steps, n, conf, m
) -> None:
    # wide posteriors are computed on lattices of step h and 2h and extrapolated; the result
    # must be within the returned error estimate (and 2e-4) of the lattice of every total
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    t_c, th_c, mean_c, err_c = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert min(lattice_steps) >= 2  # the coarse path was taken
    _every_total(monkeypatch)
    t_f, th_f, mean_f, err_f = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert err_f < 1e-5
    assert abs(th_c - th_f) <= err_c + err_f
    assert abs(th_c - th_f) < 2e-4
    np.testing.assert_allclose(mean_c, mean_f, rtol=1e-3, atol=0.05)
    # the components are latent totals on the simplex, drawn from the same posterior
    assert np.all(t_c >= 0) and np.all(t_c.sum(axis=1) == sum(m))
    np.testing.assert_allclose(t_c.mean(axis=0), mean_f, rtol=0.02, atol=2.0)


@pytest.mark.parametrize(
    ("n", "conf", "m"),
    [
        # random wide pairs (bench/coarse_lattice.py, seeds 5 and 2) with few human labels and
        # much mass near the faces, whose three lattices (8, 16, 32) converge as h^2 predicts:
        # their spread alone once made estimates of 1.6e-4 and 2.2e-5 for errors of 1.4e-4
        # and 3.2e-5
        ([5, 9, 11], [[4, 0, 0], [1, 8, 0], [0, 1, 11]], [129, 190, 243]),
        ([15, 13, 26], [[4, 0, 5], [6, 10, 10], [5, 3, 11]], [72, 298, 262]),
    ],
)
def test_a_third_lattice_counts_what_the_faces_do_to_it(monkeypatch, n, conf, m) -> None:
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    _, th_c, _, err_c = decision._exact_latent_totals(*args, np.random.default_rng(0))
    _every_total(monkeypatch)
    _, th_f, _, err_f = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert abs(th_c - th_f) <= err_c + err_f
    assert err_c > 4 * abs(th_c - th_f)


def test_scratch_buffers_carry_nothing_between_pairs_or_threads() -> None:
    # the FFTs write into buffers kept per thread: a pair gives bit for bit the same posterior
    # before and after a larger one, and in two threads at once
    from concurrent.futures import ThreadPoolExecutor

    from protocol import decision

    pairs = [
        (
            np.array([5.0, 9, 10]),
            np.array([[4.0, 0, 2], [1, 8, 4], [0, 1, 4]]),
            np.array([29.0, 31, 13]),
        ),
        (
            np.array(_WIDE_CASES[2][0], float),
            np.array(_WIDE_CASES[2][1], float),
            np.array(_WIDE_CASES[2][2], float),
        ),
        (
            np.array([2.0, 2, 1]),
            np.array([[2.0, 1, 0], [0, 0, 0], [0, 1, 1]]),
            np.array([173.0, 80, 159]),
        ),
    ]

    def run(pair):
        return decision._exact_latent_totals(*pair, np.random.default_rng(0))

    first = [run(p) for p in pairs]
    again = [run(p) for p in reversed(pairs)][::-1]
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(run, pairs * 3))
    for a, b in zip(first * 3 + first, threaded + again, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1] and a[3] == b[3]


@pytest.mark.parametrize(
    ("n", "conf", "m"),
    [
        # bench case 19: much mass at all three faces, where the second factor is sharp (one
        # or two human labels each) and a coarse lattice would move mass off the simplex
        ([2, 2, 1], [[2, 1, 0], [0, 0, 0], [0, 1, 1]], [173, 80, 159]),
    ],
)
def test_a_posterior_at_the_faces_is_computed_on_every_total(
    monkeypatch, lattice_steps, n, conf, m
) -> None:
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    _, th, _, err = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert lattice_steps == [1] and err < 1e-7
    # the same as the whole grid by a linear convolution
    _every_total(monkeypatch)
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)
    _, th_full, _, _ = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert th == pytest.approx(th_full, abs=1e-9)


def test_a_sharp_face_on_one_axis_keeps_every_total_along_that_axis(monkeypatch) -> None:
    # bench case 23: much mass at t> = 0 with two human labels >, none near t= = 0 or t< = 0:
    # coarse along t= only, every total along t>
    from protocol import decision

    directions = []
    level = decision._latent_level

    def spy(tables, e, big_m, window, step, margin=(0, 0), direction=(1, 1)):
        directions.append((step, direction))
        return level(tables, e, big_m, window, step, margin, direction)

    monkeypatch.setattr(decision, "_latent_level", spy)
    args = (np.array([2.0, 8, 11]), np.array([[2.0, 1, 2], [0, 7, 1], [0, 0, 8]]))
    args += (np.array([54.0, 143, 140]),)
    t_c, th_c, mean_c, err_c = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert min(step for step, _ in directions) >= 2
    assert {direction for _, direction in directions} == {(1, 0)}
    _every_total(monkeypatch)
    _, th_f, mean_f, err_f = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert abs(th_c - th_f) <= err_c + err_f and abs(th_c - th_f) < 1e-5
    np.testing.assert_allclose(mean_c, mean_f, rtol=1e-3)
    assert np.all(t_c >= 0) and np.all(t_c.sum(axis=1) == 337)


def test_the_floor_bound_uses_the_margins_where_the_second_factor_peaks_off_the_mass() -> None:
    # no human draw (n= = 0) and 1,077 metric-only inputs: the second factor along t= is a power
    # law, largest where the posterior has no mass; the bound on what the FFT floor moves was
    # (floor x largest entry) x (sum of the second factor) = 9.9 of the posterior mass, and is
    # now summed cell by cell against the row and column masses
    from protocol import decision

    args = (np.array([0.0, 12, 3]), np.array([[0.0, 1, 2], [0, 6, 0], [0, 5, 1]]))
    _, th, _, err = decision._exact_latent_totals(
        *args, np.array([381.0, 356, 340]), np.random.default_rng(0)
    )
    assert err < 1e-4 and 0.0 < th < 0.2


def test_fold_margin_is_the_smallest_that_leaves_the_budget_outside() -> None:
    from protocol.decision import _fold_margin, _outside

    v = np.array([1e-9, 1e-6, 1e-3, 1.0, 2.0, 1.0, 1e-3, 1e-5, 1e-8])
    assert _outside(v, 3, 6) == pytest.approx(2e-3 + 1e-6 + 1e-5 + 1e-9 + 1e-8)
    assert _fold_margin(v, 3, 6, 1.0) == 0
    assert _fold_margin(v, 3, 6, 1.5e-5) == 1  # leaves 1e-6 + 1e-5 + 1e-9 + 1e-8
    assert _fold_margin(v, 3, 6, 1e-8) == 3  # nothing outside
    assert _fold_margin(v, 3, 6, 0.0) == 3


@pytest.mark.parametrize(
    ("n", "conf", "m"),
    [
        # weakly identified pairs (2-9 confusion counts) whose second factor is so much larger at
        # the window's edges that the bound on what a cyclic convolution of the window's size
        # folds in was above 1e-5: they were computed again, then on the whole grid
        ([27, 24, 40], [[5, 0, 1], [0, 2, 0], [0, 0, 1]], [232, 375, 384]),
        ([23, 23, 19], [[1, 0, 0], [0, 1, 0], [0, 0, 0]], [343, 269, 197]),
    ],
)
def test_a_larger_cyclic_convolution_replaces_the_whole_grid(
    monkeypatch, lattice_steps, n, conf, m
) -> None:
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    _, th, _, err = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert min(lattice_steps) > 1 and err < decision._COARSE_TOL  # no second attempt
    _every_total(monkeypatch)
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)
    _, th_full, _, err_full = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert abs(th - th_full) <= err + err_full


def test_coarse_lattices_stay_within_their_estimate_on_random_wide_pairs(monkeypatch) -> None:
    # pairs with 250-1,200 metric-only inputs, few to many human labels, sharp to vague metrics
    from protocol import decision

    rng = np.random.default_rng(11)
    coarse = 0
    for _ in range(24):
        n_h = int(rng.choice([rng.integers(0, 15), rng.integers(15, 60), rng.integers(60, 400)]))
        draw, share = rng.uniform(0.02, 0.6), rng.uniform(0.2, 0.8)
        p = np.array([(1 - draw) * share, draw, (1 - draw) * (1 - share)])
        conc = rng.choice([2.0, 8.0, 30.0])
        mu = np.stack([rng.dirichlet(np.where(np.arange(3) == c, conc, 1.5)) for c in range(3)], 1)
        true = rng.choice(3, size=n_h + int(rng.integers(250, 1200)), p=p)
        met = np.array([rng.choice(3, p=mu[:, c]) for c in true])
        n = np.bincount(true[:n_h], minlength=3).astype(float)
        conf = np.zeros((3, 3))
        np.add.at(conf, (met[:n_h], true[:n_h]), 1.0)
        m = np.bincount(met[n_h:], minlength=3).astype(float)
        monkeypatch.setattr(decision, "_COARSE_MIN_CELLS", 40_000)
        _, th, _, err = decision._exact_latent_totals(n, conf, m, np.random.default_rng(0))
        monkeypatch.setattr(decision, "_COARSE_MIN_CELLS", 10**12)
        _, th_f, _, err_f = decision._exact_latent_totals(n, conf, m, np.random.default_rng(0))
        coarse += err > 1e-6
        assert abs(th - th_f) <= err + err_f
    assert coarse >= 6  # the coarse path was exercised


def test_face_estimates_tell_a_sharp_second_factor_from_a_smooth_one() -> None:
    from scipy.special import gammaln

    from protocol.decision import _Faces, _interpolation_error

    t = np.arange(401.0)
    # linear interpolation is exact on a line and at the lattice points (offset or not)
    assert np.abs(_interpolation_error(1.0 + 0.01 * t, 8)).max() < 1e-14
    wavy = np.exp(np.sin(t / 7.0))
    for offset in (0, 3, 401):
        err = _interpolation_error(wavy, 4, offset)
        assert np.all(err[offset % 4 :: 4] == 0.0) and np.abs(err).max() > 1e-3
    # second factors Gamma(n + t + 1) / Gamma(A + t): one human label (pole at t = -2) or 200
    sharp = np.exp(gammaln(t + 2.0) - gammaln(t + 5.0))
    smooth = np.exp(gammaln(t + 201.0) - gammaln(t + 204.0))
    near_face = np.exp(-t / 10.0)
    away = np.exp(-0.5 * ((t - 250.0) / 30.0) ** 2)
    weight = [w / w.sum() for w in (near_face, away)]

    def faces(second_gt: np.ndarray, weight_gt: np.ndarray) -> _Faces:
        return _Faces([second_gt, smooth, smooth], [weight_gt, weight[1], weight[1]])

    assert faces(sharp, weight[0]).sharp(4) > 0.1  # mass where the factor is sharp
    assert faces(sharp, weight[1]).sharp(4) < 1e-5  # the same factor, mass away from the face
    assert faces(smooth, weight[0]).sharp(4) < 2e-5  # many labels: smooth at the face too
    assert faces(sharp, weight[0]).sharp(2) < faces(sharp, weight[0]).sharp(4) / 4
    # a lattice coarse along t= only keeps every t>: the sharp t> face does not count there
    assert faces(sharp, weight[0]).sharp(4, (1, 0)) < 2e-5
    assert faces(sharp, weight[0]).sharp(4, (0, 1)) == pytest.approx(
        faces(sharp, weight[0]).sharp(4), rel=1e-5
    )
    # the spill past t< = 0: none far from that face, some near it
    assert faces(smooth, weight[1]).spill(4) < 1e-10
    lt_heavy = _Faces([smooth] * 3, [weight[1], weight[1], weight[0]])
    assert lt_heavy.spill(4) > 0.1


def _move_tail(offsets: np.ndarray, step: int, d: int) -> float:
    """P(sum of the moves >= d + 1) where a latent total ``u`` past a lattice point of step
    ``step`` moves by ``-u`` (probability ``1 - u / step``) or ``step - u`` (``u / step``)."""
    dist = {0: 1.0}
    for u in offsets:
        nxt: dict[int, float] = {}
        for x, p in dist.items():
            for move, q in ((-u, 1.0 - u / step), (step - u, u / step)):
                if q > 0:
                    nxt[x + move] = nxt.get(x + move, 0.0) + p * q
        dist = nxt
    return sum(p for x, p in dist.items() if x >= d + 1)


def test_spill_bounds_the_mass_a_coarse_lattice_moves_past_t_lt_0() -> None:
    # on the lattice of step 2h each of the three tables moves every entry to a neighbouring
    # lattice point along t> and along t= with linear weights: t< moves by a sum of six
    # independent moves; the exact chance that a total at t< = d lands past the face must stay
    # within what spill() counts for it, for any offsets from the lattice
    from protocol.decision import _Faces

    rng = np.random.default_rng(3)
    flat = np.ones(401)
    for step in (2, 4, 8):
        rough = 2 * step
        weight_of = 1.0 + 2.0 * (step * step - 1.0) / (3.0 * step * step)
        for d in (0, 1, rough // 2, rough, 2 * rough, 4 * rough):
            at_d = np.zeros(401)
            at_d[d] = 1.0
            bound = _Faces([flat] * 3, [at_d] * 3).spill(step) / weight_of
            offsets = [np.full(6, rough // 2), np.full(6, rough - 1), np.ones(6, dtype=int)]
            offsets += [rng.integers(0, rough, 6) for _ in range(30)]
            worst = max(_move_tail(u, rough, d) for u in offsets)
            assert worst <= bound
            if d >= 2 * rough:
                assert bound < 0.3  # not the whole mass within six moves of the face


def test_coarsen_keeps_mass_and_mean_and_nests() -> None:
    from protocol.decision import _coarsen

    rng = np.random.default_rng(2)
    for size in (1, 2, 7, 40, 41):
        table = rng.random((size, size))
        once = _coarsen(table)
        i = np.arange(size)
        q = np.arange(once.shape[0])
        assert once.sum() == pytest.approx(table.sum(), rel=1e-13)
        assert (2 * q) @ once.sum(axis=1) == pytest.approx(i @ table.sum(axis=1), rel=1e-13)
        assert (2 * q) @ once.sum(axis=0) == pytest.approx(i @ table.sum(axis=0), rel=1e-13)
        # twice is the linear move onto the lattice of step 4, computed directly
        twice = _coarsen(once)
        direct = np.zeros((size // 4 + 2, size // 4 + 2))
        for a in range(size):
            for b in range(size):
                qa, ra = divmod(a, 4)
                qb, rb = divmod(b, 4)
                for da, wa in ((0, 1 - ra / 4), (1, ra / 4)):
                    for db, wb in ((0, 1 - rb / 4), (1, rb / 4)):
                        direct[qa + da, qb + db] += wa * wb * table[a, b]
        rows, cols = min(direct.shape[0], twice.shape[0]), min(direct.shape[1], twice.shape[1])
        np.testing.assert_allclose(twice[:rows, :cols], direct[:rows, :cols], atol=1e-12)
        assert twice[rows:].sum() == 0 and direct[rows:].sum() == 0


def test_anti_diagonal_sums_of_a_row_table() -> None:
    from protocol.decision import _anti_diagonal_sums

    rng = np.random.default_rng(4)
    for size in (1, 2, 5, 60):
        i, j = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
        table = np.where(i + j < size, rng.random((size, size)), 0.0)
        expected = np.array([table[i + j == s].sum() for s in range(size)])
        np.testing.assert_allclose(_anti_diagonal_sums(table), expected, rtol=1e-13, atol=0)


def test_row_tables_margins_and_halved_tables_equal_the_table_of_every_total() -> None:
    # _Lattices builds each row table from its three factors: its margins by 1-D convolutions,
    # its step-2 table without the unit table, and (where the product would underflow) from
    # the summed logarithms
    from protocol.decision import (
        _anti_diagonal_sums,
        _coarsen,
        _coarsen_cols,
        _coarsen_rows,
        _Lattices,
    )

    rng = np.random.default_rng(8)
    totals = np.array([0, 1, 2, 7, 40, 41])
    for steep in (False, True):  # steep: w0 w1 w2 <= exp(-24 m) underflows, the logarithm path
        log_w = [
            [
                12.0 * np.arange(m + 1.0) if steep else np.cumsum(rng.normal(0.0, 0.3, m + 1))
                for j in range(3)
            ]
            for m in totals
        ]
        first = _Lattices(log_w, totals)
        assert [e is None for e in first.factors] == [steep and m >= 40 for m in totals]
        halved = first[2, 2]  # built before the unit tables
        second = _Lattices(log_w, totals)
        for c, m in enumerate(totals):
            i, j = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
            lp = log_w[c][0][i] + log_w[c][1][j] + log_w[c][2][np.maximum(m - i - j, 0)]
            lp = np.where(i + j <= m, lp, -np.inf)
            direct = np.exp(lp - lp.max())
            unit = first[1, 1][c]
            scale = unit.max() / direct.max()
            np.testing.assert_allclose(unit, direct * scale, rtol=1e-12, atol=1e-300)
            over_gt, over_eq = first.margins[c]
            np.testing.assert_allclose(over_gt, unit.sum(1), rtol=1e-12)
            np.testing.assert_allclose(over_eq, unit.sum(0), rtol=1e-12)
            # the table's largest row sum is 1 (the product path) or its largest entry
            assert over_gt.max() == pytest.approx(1.0) or unit.max() == 1.0
            np.testing.assert_allclose(halved[c], _coarsen(unit), rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(second[2, 2][c], halved[c], rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(first[4, 4][c], _coarsen(_coarsen(unit)), rtol=1e-12)
            # along one axis: (steps along t>, along t=)
            np.testing.assert_allclose(first[1, 4][c], _coarsen_cols(_coarsen_cols(unit)))
            np.testing.assert_allclose(first[2, 1][c], _coarsen_rows(unit))
        # the convolution's marginal along t<: the tables' anti-diagonal sums, convolved
        over_lt = [_anti_diagonal_sums(unit)[::-1] for unit in first[1, 1]]
        expected = np.convolve(np.convolve(over_lt[0], over_lt[1]), over_lt[2])
        np.testing.assert_allclose(first.marginal_lt(), expected, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("direct_cells", [0, 10**9])  # band sums / every cell's CDF
def test_strided_band_theta_equals_direct_betainc_sum(monkeypatch, direct_cells) -> None:
    # _theta_sum on a coarse lattice (every step-th latent total), including cells just off
    # the simplex (t< < 0), where the binomial CDF goes on (and is 1 once N' - k < 1)
    from protocol import decision
    from protocol.decision import _theta_sum

    monkeypatch.setattr(decision, "_THETA_DIRECT_CELLS", direct_cells)

    rng = np.random.default_rng(6)
    # (steps along t= and along t>: equal, or 1 along one axis)
    for n, big_m, shape, lo, step_eq, step_gt in [
        ((3, 4, 5), 300, (70, 80), (30, 40), 4, 4),
        ((90, 5, 1), 80, (30, 30), (0, 0), 3, 3),
        ((1, 0, 40), 500, (80, 200), (10, 60), 2, 2),
        ((2, 8, 11), 337, (85, 278), (0, 0), 4, 1),
        ((6, 9, 6), 397, (381, 50), (0, 0), 1, 8),
    ]:
        prob = rng.random(shape)
        t1 = lo[0] + step_eq * np.arange(shape[0])[:, None]
        t0 = lo[1] + step_gt * np.arange(shape[1])[None, :]
        t2 = big_m - t0 - t1
        prob = np.where(t2 >= -3 * max(step_eq, step_gt), prob, 0.0)
        a_lt = n[2] + t2 + 1.0  # the binomial CDF continued: 1 once N' - k < 1
        h = np.where(a_lt > 0, betainc(np.maximum(a_lt, 1e-300), n[0] + t0 + 1.0, 0.5), 1.0)
        direct = (prob * h).sum()
        band = _theta_sum(prob, lo[0], lo[1], np.array(n, float), big_m, step_eq, step_gt)
        assert band == pytest.approx(direct, rel=1e-12, abs=1e-12)
