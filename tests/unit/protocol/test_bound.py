"""Tests of protocol.bound: the exact evaluation of a sequential rule on one pair, the Bayes
rule of a Lagrangian, and the dual bound on the annotations of any error-controlled rule."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.bound import GO_ON, Pair, dual_bound, evaluate, lagrangian, optimal_rule, paper_rule
from protocol.settings import ProtocolSettings
from protocol.simulation import PreferenceData, reference_decisions, replay_once


def _replay_paper(pool_labels: list[np.ndarray], seed: int) -> tuple[float, float, float]:
    """Algorithm 2 as the product replays it (protocol.simulation) on one-pair studies: the
    share decided for A, decided for B, and the mean share of the pool used."""
    rng = np.random.default_rng(seed)
    a = b = spent = 0.0
    for labels in pool_labels:
        data = PreferenceData(("a", "b"), (("a", "b"),), (labels,), (np.arange(len(labels)),))
        res = replay_once(data, ProtocolSettings.paper_protocol(batch=10), rng)
        a += res.decisions[0] == 1
        b += res.decisions[0] == -1
        spent += res.fraction_used
    k = len(pool_labels)
    return a / k, b / k, spent / k


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
