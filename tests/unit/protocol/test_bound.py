"""Tests of protocol.bound: the exact evaluation of a sequential rule on one pair, the Bayes
rule of a Lagrangian, and the dual bound on the annotations of any error-controlled rule."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.bound import GO_ON, Pair, dual_bound, evaluate, lagrangian, optimal_rule, paper_rule
from protocol.replay.simulation import PreferenceData, reference_decisions, replay_once
from protocol.settings import ProtocolSettings


def _replay_paper(pool_labels: list[np.ndarray], seed: int) -> tuple[float, float, float]:
    """Algorithm 2 as the product replays it (protocol.replay.simulation) on one-pair studies: the
    share decided for A, decided for B, and the mean share of the pool used. The pairs share no
    system and the paper's protocol gives every open pair a batch per round with no budget,
    pools nothing and implies nothing, so one replay of all of them, each pair with systems of
    its own, runs every pair exactly as a one-pair study of its own would."""
    k = len(pool_labels)
    systems = tuple(f"{side}{j}" for j in range(k) for side in "ab")
    data = PreferenceData(
        systems,
        tuple((f"a{j}", f"b{j}") for j in range(k)),
        tuple(pool_labels),
        tuple(np.arange(len(labels)) for labels in pool_labels),
    )
    res = replay_once(data, ProtocolSettings.paper_protocol(batch=10), np.random.default_rng(seed))
    assert res.used is not None and res.rounds <= max(len(labels) for labels in pool_labels) // 10
    spent = np.mean(res.used / np.array([len(labels) for labels in pool_labels]))
    return float(np.mean(res.decisions == 1)), float(np.mean(res.decisions == -1)), float(spent)


def _pools(pair: Pair, k: int, *, null: bool, rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` pools as H0 (i.i.d. null) or H1 (i.i.d. from the effect, kept when all data
    decide for A) of ``pair`` describe them; labels +1 / 0 / −1."""
    q = (1.0 - pair.probs[1]) / 2.0
    probs = (q, pair.probs[1], q) if null else pair.probs
    out: list[np.ndarray] = []
    while len(out) < k:
        labels = (1 - rng.choice(3, size=pair.n, p=probs)).astype(np.int8)
        data = PreferenceData(("a", "b"), (("a", "b"),), (labels,), (np.arange(pair.n),))
        if null or reference_decisions(data)[0] == 1:
            out.append(labels)
    return out


def test_exact_evaluation_of_the_paper_rule_matches_the_product_replay_of_algorithm_2():
    pair = Pair.with_z(50, 3.0)
    exact = evaluate(pair, paper_rule(pair))
    rng = np.random.default_rng(7)
    k = 1500
    a0, b0, _ = _replay_paper(_pools(pair, k, null=True, rng=rng), 1)
    a1, b1, used1 = _replay_paper(_pools(pair, k, null=False, rng=rng), 2)
    se0 = np.sqrt(exact["p0_decide"] * (1 - exact["p0_decide"]) / k)
    assert abs((a0 + b0) - exact["p0_decide"]) < 4 * se0
    assert exact["p0_decide"] == pytest.approx(0.1209, abs=5e-4)  # Algorithm 2 spends 2.4 γ
    assert abs(a1 - exact["p1_a"]) < 4 * np.sqrt(max(exact["p1_a"] * (1 - exact["p1_a"]), 1e-4) / k)
    assert b1 <= 0.005 and exact["p1_b"] < 1e-3
    # annotations: E1[N] / N within 4 SE of the replay's mean share of the pool
    assert abs(used1 - exact["e1_n"] / pair.n) < 4 * 0.2 / np.sqrt(k)


def test_the_bayes_rule_minimises_the_lagrangian_among_rules():
    pair = Pair.with_z(50, 3.0)
    lam, mu = 200.0, 90.0
    best = optimal_rule(pair, lam, mu)
    value = lagrangian(evaluate(pair, best), lam, mu)
    assert value < lagrangian(evaluate(pair, paper_rule(pair)), lam, mu)
    rng = np.random.default_rng(0)
    for _ in range(25):  # change one state's action at one look: never better
        rule = [a.copy() for a in best]
        j = int(rng.integers(len(rule)))
        w = int(rng.integers(rule[j].shape[0]))
        l = int(rng.integers(rule[j].shape[0] - w))
        choices = [0, 1, -1] + ([GO_ON] if j < len(rule) - 1 else [])
        rule[j][w, l] = rng.choice([c for c in choices if c != rule[j][w, l]])
        assert lagrangian(evaluate(pair, rule), lam, mu) >= value - 1e-9


def test_no_rule_at_gamma_matches_the_papers_correct_at_its_cost_on_a_two_system_study():
    # pool 200, expected z 3 on all data: Algorithm 2 decides a null pair 23 % of the time and
    # spends 0.36 of the pool; any rule keeping null pairs at γ = 0.05 needs > 0.5 of it for the
    # same Correct (any λ, μ ≥ 0 give a valid bound; these are near the best)
    pair = Pair.with_z(200, 3.0)
    paper = evaluate(pair, paper_rule(pair))
    assert paper["p0_decide"] == pytest.approx(0.2304, abs=5e-4)
    lam, mu = 815.0, 196.0
    res = evaluate(pair, optimal_rule(pair, lam, mu))
    bound = lagrangian(res, lam, mu) + mu * paper["p1_a"] - lam * 0.05
    assert bound / pair.n > 0.50 > 0.37 > paper["e1_n"] / pair.n
    assert bound > 1.3 * paper["e1_n"]
    # the search finds such bounds by itself; on a clear pair (z 8) the paper is near the bound
    assert dual_bound(Pair.with_z(50, 3.0), 0.9999)[0] > 0.5 * 50
    clear = Pair.with_z(200, 8.0)
    clear_paper = evaluate(clear, paper_rule(clear))
    assert dual_bound(clear, clear_paper["p1_a"])[0] < 1.05 * clear_paper["e1_n"]


# ---------------------------------------------------------------------------------------------
# the bound for rules not told the direction (γ/2 per direction) and told only a prior
# ---------------------------------------------------------------------------------------------


def _lp_least_cost(pair, gamma: float, a: float, *, both_directions: bool) -> float:
    """The least E1[N] over all randomised rules on the label counts, by linear program:
    per look and counts (W, L), the probability mass (under the average of H0 and H1, so
    coefficients stay near 1) of the label sequences that decide A, decide B, retire or go
    on. ``both_directions``: H1 is "A better" or its mirror "B better", equally likely, and
    Correct is the chance of deciding the better one; otherwise H1 is "A better" only."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    from protocol.bound import _sequences

    looks = [int(k) for k in pair.looks]
    index, n_var, probs = [], 0, []
    for k in looks:
        w, l = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        states = [(int(i), int(j)) for i, j in zip(*np.nonzero(w + l <= k), strict=True)]
        index.append({s: n_var + 4 * i for i, s in enumerate(states)})  # A, B, retire, go on
        n_var += 4 * len(states)
        lp0, lp1, _ = pair.log_paths(k)
        p0, p1 = np.exp(lp0), np.exp(lp1)
        p1_b = p1.T if both_directions else np.zeros_like(p1)
        h1 = 0.5 * (p1 + p1_b) if both_directions else p1
        probs.append((p0, p1, p1_b, h1, 0.5 * (p0 + h1)))  # per label sequence
    cost, p0_row, p1_row = np.zeros(n_var), np.zeros(n_var), np.zeros(n_var)
    eq = lil_matrix((sum(len(ix) for ix in index), n_var))
    rhs, row = [], 0
    half = 0.5 if both_directions else 1.0
    for j, k in enumerate(looks):
        p0, p1, p1_b, h1, mix = probs[j]
        step_next = looks[j + 1] - k if j + 1 < len(looks) else 0
        kernel = _sequences(k if j == 0 else k - looks[j - 1])
        for (w, l), v in index[j].items():
            m = mix[w, l]
            p0_row[v] = p0_row[v + 1] = p0[w, l] / m
            p1_row[v] = half * p1[w, l] / m
            p1_row[v + 1] = 0.5 * p1_b[w, l] / m
            cost[v + 3] = step_next * h1[w, l] / m
            eq[row, v : v + 4] = 1.0
            if j == 0:
                rhs.append(kernel[w, l] * m)
            else:
                rhs.append(0.0)
                before = probs[j - 1][4]
                for dw, dl in zip(*np.nonzero(kernel), strict=True):
                    src = index[j - 1].get((w - int(dw), l - int(dl)))
                    if src is not None:
                        ratio = m / before[w - dw, l - dl]
                        eq[row, src + 3] -= kernel[dw, dl] * ratio
            row += 1
    bounds = [(0, None)] * n_var
    for v in index[-1].values():
        bounds[v + 3] = (0, 0)
    res = linprog(
        cost, A_ub=np.vstack([p0_row, -p1_row]), b_ub=[gamma, -a], A_eq=eq.tocsr(), b_eq=rhs,
        bounds=bounds, method="highs",
    )  # fmt: skip
    assert res.status == 0, res.message
    return looks[0] + res.fun


@pytest.mark.parametrize("z", [2.5, 4.0])
def test_the_direction_agnostic_bound_is_the_least_cost_of_rules_not_told_the_direction(z):
    # pool 30, looks every 10: the linear program over every randomised rule that must serve
    # "A better" and "B better" alike with γ in all equals the dual bound at γ/2 per direction
    from protocol.bound import direction_agnostic_bound

    pair = Pair(30, Pair.with_z(30, z).probs, 10)
    a = evaluate(pair, paper_rule(pair))["p1_a"] * 0.97
    agnostic = direction_agnostic_bound(pair, a)
    lp = _lp_least_cost(pair, 0.05, a, both_directions=True)
    assert agnostic == pytest.approx(lp, rel=2e-3)
    # and told the direction, the rule may spend all of γ one way: the one-sided bound
    one_sided = dual_bound(pair, a)[0]
    lp_one_sided = _lp_least_cost(pair, 0.05, a, both_directions=False)
    assert one_sided == pytest.approx(lp_one_sided, rel=2e-3)
    assert one_sided < agnostic


def test_the_prior_bound_is_the_least_cost_of_a_rule_told_only_a_prior_over_z():
    from protocol.bound import PriorPair, prior_bound

    prior = PriorPair.over_z(30, (2.5, 4.0, 6.0))
    a = 0.9
    bound = prior_bound(prior, a)
    assert bound == pytest.approx(_lp_least_cost(prior, 0.05, a, both_directions=True), rel=2e-3)
    # a rule told the direction too pays less: the one-sided bound of the same prior
    assert dual_bound(prior, a)[0] < bound
    with pytest.raises(ValueError):
        PriorPair((Pair.with_z(30, 3.0), Pair.with_z(40, 3.0)), (0.5, 0.5))
