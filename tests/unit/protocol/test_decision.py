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
    # theta and the posterior mean of p, E[(n + t + 1) / (N + M + 3)], summed over every
    # enumerated latent table (plain_posterior_sums: the loop of exact_theta_with_metric,
    # vectorised; the two agree to 1e-14 on all twelve cases)
    theta, mean_p = plain_posterior_sums(n, conf, m)
    assert post.theta()[0] == pytest.approx(theta, abs=1e-10)
    assert post.mcse[0] < 1e-5  # the a-posteriori bound of the FFT floor
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


def test_exact_band_theta_equals_direct_betainc_sum() -> None:
    # _theta_sum reads every cell's binomial CDF from the bands around N'/2 (0 and 1 outside);
    # check against betainc everywhere (rows: t=, columns: t>)
    from protocol.decision import _theta_sum

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
    from protocol import decision

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


# bench cases (bench/decision.py, seed 0) with wide windows of latent totals:
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
        # or two human labels each)
        ([2, 2, 1], [[2, 1, 0], [0, 0, 0], [0, 1, 1]], [173, 80, 159]),
    ],
)
def test_a_posterior_at_the_faces_is_computed_on_every_total(monkeypatch, n, conf, m) -> None:
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    _, th, _, err = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert err < 1e-7
    # the same as the whole grid by a linear convolution
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)
    _, th_full, _, _ = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert th == pytest.approx(th_full, abs=1e-9)


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
        # folds in was above 1e-5: a larger one (a margin round the window) is computed instead
        ([27, 24, 40], [[5, 0, 1], [0, 2, 0], [0, 0, 1]], [232, 375, 384]),
        ([23, 23, 19], [[1, 0, 0], [0, 1, 0], [0, 0, 0]], [343, 269, 197]),
    ],
)
def test_a_larger_cyclic_convolution_replaces_the_whole_grid(monkeypatch, n, conf, m) -> None:
    from protocol import decision

    windows: list[tuple] = []
    level = decision._latent_level

    def spy(tables, e, big_m, window, margin=(0, 0)):
        windows.append((window, margin))
        return level(tables, e, big_m, window, margin)

    monkeypatch.setattr(decision, "_latent_level", spy)
    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    _, th, _, err = decision._exact_latent_totals(*args, np.random.default_rng(0))
    # one window, then the same window with a margin; no second attempt, no whole grid
    assert len(windows) == 2 and windows[0][0] == windows[1][0] and max(windows[1][1]) > 0
    assert err < decision._EXACT_TOL
    monkeypatch.setattr(decision, "_latent_level", level)
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)
    _, th_full, _, err_full = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert abs(th - th_full) <= err + err_full


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


def test_row_table_margins_and_the_logarithm_path_equal_the_table_of_every_total() -> None:
    # each row table is a product of its three factors with margins by 1-D convolutions, or
    # (where that product would underflow) the exponential of the summed logarithms
    from protocol.decision import _row_table

    rng = np.random.default_rng(8)
    for steep in (False, True):  # steep: w0 w1 w2 <= exp(-24 m) underflows for m = 40, 41
        for m in (0, 1, 2, 7, 40, 41):
            log_w = np.array(
                [
                    12.0 * np.arange(m + 1.0) if steep else np.cumsum(rng.normal(0.0, 0.3, m + 1))
                    for _ in range(3)
                ]
            )
            table, over_gt, over_eq = _row_table(log_w, m)
            i, j = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
            lp = log_w[0][i] + log_w[1][j] + log_w[2][np.maximum(m - i - j, 0)]
            direct = np.exp(np.where(i + j <= m, lp, -np.inf) - lp.max())
            np.testing.assert_allclose(table, direct * (table.max() / direct.max()), rtol=1e-12)
            np.testing.assert_allclose(over_gt, table.sum(1), rtol=1e-12)
            np.testing.assert_allclose(over_eq, table.sum(0), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# theta is exact: against a plain sum over every latent table of the metric-only inputs
# ---------------------------------------------------------------------------------------------


def plain_posterior_sums(n, conf, m) -> tuple[float, np.ndarray]:
    """theta and the posterior mean of p from the model's definition (Deriu et al. 2023,
    Sections 3.1-3.3; Dir(1) priors on p and on every column of mu), summed over every latent
    table z of the metric-only inputs' true labels (row c: the m_c inputs the metric labelled
    c; t = z.sum(axis=0)), with p and mu integrated out in closed form:

        P(z | data) ∝ prod_c m_c! / prod_c' z[c, c']!  *  B(n + t + 1)
                      * prod_c' B(conf[:, c'] + z[:, c'] + 1)

    P(p> > p< | z) = P(Beta(n> + t> + 1, n< + t< + 1) > 1/2), E[p | z] = (n + t + 1) / (N + M + 3).
    Vectorised over the product of the three rows' compositions; slow, for small |M| only."""
    n, conf, m = np.asarray(n, float), np.asarray(conf, float), np.asarray(m, int)
    rows = [_compositions(int(mc)).astype(float) for mc in m]
    z = np.zeros((len(rows[0]), len(rows[1]), len(rows[2]), 3, 3))
    z[:, :, :, 0] = rows[0][:, None, None, :]
    z[:, :, :, 1] = rows[1][None, :, None, :]
    z[:, :, :, 2] = rows[2][None, None, :, :]
    z = z.reshape(-1, 3, 3)  # every latent table: [table, metric label c, true label c']
    t = z.sum(axis=1)
    log_w = -gammaln(z + 1.0).sum(axis=(1, 2)) + _log_beta(n + t + 1.0)
    log_w += sum(_log_beta(conf[:, c] + z[:, :, c] + 1.0) for c in range(3))
    w = np.exp(log_w - log_w.max())
    theta = betainc(n[2] + t[:, 2] + 1.0, n[0] + t[:, 0] + 1.0, 0.5)
    mean_p = (n + t + 1.0) / (n.sum() + m.sum() + 3.0)
    return float(w @ theta / w.sum()), (w @ mean_p) / w.sum()


@pytest.mark.parametrize(
    ("n", "conf", "m"),
    [
        # weakly identified: few human labels, a vague metric (about 1.5 million latent tables)
        ([2, 1, 2], [[1, 0, 0], [0, 1, 0], [0, 0, 1]], [15, 12, 14]),
        # many human labels (a strong tilt) and a sharp metric
        ([250, 40, 120], [[20, 3, 1], [2, 10, 2], [1, 4, 15]], [14, 9, 16]),
        # lopsided, no metric label > and no human label >
        ([0, 3, 9], [[0, 1, 0], [0, 2, 1], [0, 0, 8]], [0, 11, 25]),
        # one-sided humans, metric labels at both ends only
        ([30, 0, 0], [[5, 0, 0], [0, 0, 0], [0, 0, 0]], [20, 0, 10]),
        # a bench-like pair (the simulated metric of Appendix E), scaled down
        ([9, 6, 7], [[6, 2, 1], [1, 3, 0], [1, 1, 5]], [13, 8, 12]),
    ],
)
def test_theta_is_exact_against_a_plain_sum_over_every_latent_total(n, conf, m) -> None:
    theta, mean_p = plain_posterior_sums(n, conf, m)
    post = sample_posterior([n], [conf], [m], seed=0)
    assert abs(post.theta()[0] - theta) <= 1e-9
    np.testing.assert_allclose(post.mean_p()[0], mean_p, rtol=0, atol=1e-9)
    assert post.mcse[0] < 1e-5


@pytest.mark.parametrize(("n", "conf", "m"), _WIDE_CASES)
def test_wide_posteriors_equal_the_whole_grid_of_latent_totals(monkeypatch, n, conf, m) -> None:
    # the bench's wide posteriors (once computed on coarse lattices, error up to 1e-3): the
    # window equals the whole grid of latent totals (a linear convolution) to 1e-9
    from protocol import decision

    args = (np.array(n, float), np.array(conf, float), np.array(m, float))
    t, th, mean_t, err = decision._exact_latent_totals(*args, np.random.default_rng(0))
    monkeypatch.setattr(decision, "_WINDOW_TAIL", -1.0)  # every latent total
    _, th_full, mean_full, _ = decision._exact_latent_totals(*args, np.random.default_rng(0))
    assert err < 1e-5 and abs(th - th_full) <= 1e-9
    np.testing.assert_allclose(mean_t, mean_full, rtol=0, atol=1e-6)
    assert np.all(t >= 0) and np.all(t.sum(axis=1) == sum(m))
