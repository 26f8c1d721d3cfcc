"""Pairs whose order the decided pairs imply: worked examples, the replay, the null control."""

import numpy as np

from protocol import rounds
from protocol.decision import human_posterior
from protocol.implied import implied_orders, null_false_decisions, reachable
from protocol.predictive import calibrate_decision_level, calibrate_study_level
from protocol.replay.simulation import PreferenceData, replay_once
from protocol.settings import ProtocolSettings


def test_a_chain_of_decided_pairs_implies_the_order_with_its_chain() -> None:
    # decided: 0 > 1, 1 > 2 (given as (2, 1) with −1), 3 > 2; open: (0, 2), (2, 0), (0, 3), (3, 1)
    decided = [(0, 1), (2, 1), (3, 2)]
    found = implied_orders([(0, 2), (2, 0), (0, 3), (3, 1)], decided, [1, -1, 1])
    assert found.direction.tolist() == [1, -1, 0, 0]
    assert found.chains == [(0, 1, 2), (0, 1, 2), (), ()]


def test_the_shortest_chain_is_kept_and_a_cycle_implies_nothing() -> None:
    # 0 > 1 > 2 > 3 and 0 > 4 > 3: the chain of (0, 3) is the shorter one
    decided = [(0, 1), (1, 2), (2, 3), (0, 4), (4, 3)]
    found = implied_orders([(0, 3)], decided, [1, 1, 1, 1, 1])
    assert found.direction.tolist() == [1] and found.chains == [(0, 4, 3)]
    # 0 > 1 > 2 > 0 decided: (0, 2) is ordered both ways, so left open
    cycle = implied_orders([(0, 2)], [(0, 1), (1, 2), (2, 0), (3, 4)], [1, 1, 1, 1])
    assert cycle.direction.tolist() == [0] and cycle.chains == [()]


def test_the_closure_of_a_batch_and_the_null_count() -> None:
    adj = np.zeros((2, 3, 3), dtype=bool)
    adj[0, 0, 1] = adj[0, 1, 2] = True  # study 0: 0 > 1 > 2
    adj[1, 2, 1] = True  # study 1: 2 > 1 only
    r = reachable(adj)
    assert r[0, 0, 2] and not r[0, 2, 0] and not r[1, 0, 2]
    pairs = np.array([(0, 1), (1, 2), (0, 2)])
    # study 0: pairs (0,1) and (1,2) decided directly, (0,2) through them; study 1: (1,2) only
    first = np.array([[0, 3, -1], [-1, 1, -1]])
    direction = np.array([[1, 1, 0], [0, -1, 0]], dtype=np.int8)
    assert null_false_decisions(first, direction, pairs, 3).tolist() == [
        [True, True, True],
        [False, True, False],
    ]


def _round_inputs(counts: list[list[int]]):
    post = human_posterior(np.array(counts, dtype=float))
    return post, np.array([c[0] + c[1] + c[2] for c in counts])


def test_decide_round_closes_an_implied_pair_and_not_without_the_rule() -> None:
    # open pair (0, 2) is tied so far; closed pairs 0 > 1 and 1 > 2 were decided
    post, used = _round_inputs([[20, 20, 20]])
    closed = rounds.ClosedPairs(
        np.zeros(2), np.ones(2), np.array([(0, 1), (1, 2)]), np.array([1, 1], dtype=np.int8)
    )
    kw = dict(level=0.99, systems=np.array([(0, 2)]), closed=closed)
    on = rounds.decide_round(post, used, np.array([500]), 10_000, ProtocolSettings(), **kw)
    assert on.outcome.tolist() == [rounds.IMPLIED] and on.decision.tolist() == [1]
    assert on.chains == ((0, 1, 2),)
    off = ProtocolSettings(implied=False)
    rest = rounds.decide_round(post, used, np.array([500]), 10_000, off, **kw)
    assert rest.outcome.tolist() == [rounds.OPEN] and rest.decision.tolist() == [0]
    # the paper's Algorithm 2 has no such rule
    paper = rounds.decide_round(
        post, used, np.array([500]), 10_000, ProtocolSettings.paper_protocol(), **kw
    )
    assert paper.outcome.tolist() == [rounds.OPEN]


def _null_study(systems: int, pool: int, seed: int) -> PreferenceData:
    rng = np.random.default_rng(seed)
    pairs = [(f"s{a}", f"s{b}") for a in range(systems) for b in range(a + 1, systems)]
    labels = tuple(
        rng.choice([1, 0, -1], size=pool, p=[0.3, 0.4, 0.3]).astype(np.int8) for _ in pairs
    )
    names = tuple(sorted({s for p in pairs for s in p}))
    return PreferenceData(names, tuple(pairs), labels, tuple(np.arange(pool) for _ in pairs))


def test_counting_implied_decisions_in_the_calibration_never_loosens_the_level() -> None:
    pairs = [(a, b) for a in range(6) for b in range(a + 1, 6)]
    lone = calibrate_decision_level(100, 10, 0.05, draw_rate=0.4, spending=1.0, seed=3)
    kw = dict(lone_level=lone, draw_rate=0.4, spending=1.0, seed=3, n_studies=60)
    plain = calibrate_study_level(pairs, 100, 10, 0.05, **kw)
    with_rule = calibrate_study_level(pairs, 100, 10, 0.05, implied=True, **kw)
    assert with_rule >= plain


def test_null_studies_false_decisions_implied_included_stay_at_gamma() -> None:
    # fresh null studies of 6 systems through the replay with the rule on (the default):
    # every decision of a null pair is false, direct or implied, at any look
    settings = ProtocolSettings(batch=10, null_draw_rate=0.4, calibration_studies=60)
    assert settings.implied
    rates = []
    for seed in range(16):
        res = replay_once(_null_study(6, 100, 200 + seed), settings, np.random.default_rng(seed))
        rates.append(np.mean(res.decisions != 0))
        assert len(res.implied) == res.retired["implied"]
    assert np.mean(rates) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / (16 * 15))
