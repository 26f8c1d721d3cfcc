"""Rankings and Likert-style scores in the adaptive loop (protocol.replay.ranking_sim) and pooling
with the correlation of pairs that share inputs (protocol.correlation)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from protocol.correlation import (
    correlation_from_rows,
    label_correlation,
    orientation,
    pool_across_pairs_correlated,
    shared_input_correlation,
)
from protocol.predictive import pool_across_pairs
from protocol.replay.ranking_sim import (
    ScoreData,
    load_rankings,
    loop_once,
    null_likert_scores,
    null_mqm_scores,
    score_data_from_wide,
)
from protocol.replay.simulation import load_mqm
from protocol.settings import ProtocolSettings
from tests.conftest import MQM

GAMMA = 0.05


def all_pairs(s: int) -> np.ndarray:
    return np.array([(a, b) for a in range(s) for b in range(a + 1, s)])


# --- pooling with correlated errors ------------------------------------------------------------


def test_correlated_pooling_with_a_diagonal_covariance_is_the_independent_pooling() -> None:
    rng = np.random.default_rng(0)
    ps = all_pairs(5)
    m, v = rng.normal(0, 0.1, len(ps)), rng.uniform(1e-3, 1e-2, len(ps))
    a, b = pool_across_pairs(m, v, ps), pool_across_pairs_correlated(m, np.diag(v), ps)
    np.testing.assert_allclose(b.weights, a.weights, atol=1e-9)
    np.testing.assert_allclose(b.mean, a.mean, atol=1e-9)
    np.testing.assert_allclose(b.var, a.var, atol=1e-9)


def test_ranking_labels_correlate_by_a_third_and_the_errors_follow_the_shared_inputs() -> None:
    rng = np.random.default_rng(1)
    ps = all_pairs(4)
    x = rng.normal(size=(6000, 4))
    labels = np.sign(x[:, ps[:, 0]] - x[:, ps[:, 1]]).T
    seen = np.ones_like(labels, dtype=bool)
    rho = label_correlation(labels, seen, ps)
    assert rho == pytest.approx(1 / 3, abs=0.02)
    # sgn(a-b) with sgn(a-c): +; with sgn(b-c): -; with sgn(c-d): none
    orient = orientation(ps)
    assert orient[0, 1] == 1 and orient[0, 3] == -1 and orient[0, 5] == 0
    # every pair saw the same 100 of 400 inputs: the errors correlate as the labels do
    pool = np.ones((len(ps), 400), dtype=bool)
    seen = np.zeros_like(pool)
    seen[:, :100] = True
    corr = shared_input_correlation(seen, pool, ps, rho)
    np.testing.assert_allclose(corr, np.where(np.eye(len(ps)) > 0, 1.0, rho * orient), atol=1e-12)
    # disjoint seen inputs, nothing left: no shared input, no correlation
    seen = np.zeros_like(pool)
    for j in range(len(ps)):
        seen[j, j * 50 : (j + 1) * 50] = True
    corr = shared_input_correlation(seen, seen, ps, rho)
    np.testing.assert_allclose(corr, np.eye(len(ps)), atol=1e-12)
    assert np.all(np.linalg.eigvalsh(shared_input_correlation(seen, pool, ps, 0.5)) > -1e-9)


def test_correlated_pooling_of_complete_rankings_claims_less_than_independent_pooling() -> None:
    # 8 equal systems ranked completely on the same 60 inputs: the indirect evidence about a
    # pair re-uses its own inputs. Theory (i.i.d. scores, no ties, S systems): the least-squares
    # effect q_a - q_b has variance 2(S+1)/(3S) of one pair's own, independence claims 2/S
    rng = np.random.default_rng(2)
    ps = all_pairs(8)
    x = rng.normal(size=(60, 8))
    labels = np.sign(x[:, ps[:, 0]] - x[:, ps[:, 1]]).T
    m = labels.mean(axis=1)
    v = np.full(len(ps), 1.0 / 60)
    pool = np.ones((len(ps), 600), dtype=bool)
    seen = np.zeros_like(pool)
    seen[:, :60] = True
    corr = shared_input_correlation(seen, pool, ps, 1 / 3)
    naive = pool_across_pairs(m, v, ps, tau_grid=np.array([1e-3, 2e-3]))
    honest = pool_across_pairs_correlated(m, corr * v, ps, tau_grid=np.array([1e-3, 2e-3]))
    assert naive.var.mean() == pytest.approx(v[0] * 2 / 8, rel=0.02)
    assert honest.var.mean() == pytest.approx(v[0] * 2 * 9 / 24, rel=0.02)


def test_correlation_from_label_rows_matches_the_arrays_it_stands_for() -> None:
    # complete rankings of A, B, C, D on 30 of 50 inputs, as the kinds' pair preference rows
    # (one row per pair and input, in either orientation); pairs passed as (C, A) flip
    rng = np.random.default_rng(5)
    names = ["A", "B", "C", "D"]
    x = rng.integers(0, 3, size=(50, 4)).astype(float)  # ties
    pairs = [("A", "B"), ("C", "A"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D")]
    idx = [(names.index(a), names.index(b)) for a, b in pairs]
    rows = []
    for i in range(30):
        for (a, b), (ia, ib) in zip(pairs, idx, strict=True):
            pref = 0.5 + 0.5 * np.sign(x[i, ia] - x[i, ib])
            if i % 2:
                rows.append(
                    {"input": f"i{i}", "system": b, "other_system": a, "preference": 1 - pref}
                )
            else:
                rows.append({"input": f"i{i}", "system": a, "other_system": b, "preference": pref})
    pools = [{f"i{i}" for i in range(50)}] * len(pairs)
    got = correlation_from_rows(pd.DataFrame(rows), pairs, pools)
    ps = np.array(idx)
    labels = np.sign(x[:, ps[:, 0]] - x[:, ps[:, 1]]).T
    seen = np.zeros((len(pairs), 50), dtype=bool)
    seen[:, :30] = True
    rho = label_correlation(labels, seen, ps)
    want = shared_input_correlation(seen, np.ones_like(seen), ps, rho)
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert got[0, 1] < 0 < got[0, 2]  # (A, B) with (C, A): A on opposite sides
    # a pool shared by several pairs (one object, as StudyOutputs gives them) is read as
    # its copies are, beside pools of their own
    narrow = {f"i{i}" for i in range(0, 50, 2)}
    wide = {f"i{i}" for i in range(50)}
    mixed = [narrow, wide, wide, narrow, wide, {f"i{i}" for i in range(40)}]
    shared = correlation_from_rows(pd.DataFrame(rows), pairs, mixed)
    copies = correlation_from_rows(pd.DataFrame(rows), pairs, [set(p) for p in mixed])
    np.testing.assert_array_equal(shared, copies)
    assert not np.allclose(shared, correlation_from_rows(pd.DataFrame(rows), pairs, [wide] * 6))


# --- the ranking replay ---------------------------------------------------------------------


def test_ranking_file_format_and_its_errors(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"input": "i1", "annotator": "w1", "ranking": [["A"], ["B", "C"], ["D"]]}\n'
        '{"input": "i1", "annotator": "w2", "ranking": ["A", "C", "B"]}\n'
    )
    data = load_rankings(path)
    assert data.systems == ("A", "B", "C", "D")
    np.testing.assert_array_equal(data.scores[0], [0, -1, -1, -2])
    assert np.isnan(data.scores[1, 3]) and data.scores[1, 2] > data.scores[1, 1]
    pairs, labels, pool = data.pair_table()
    bc = [tuple(p) for p in pairs].index((1, 2))
    assert labels[bc].tolist() == [0, -1] and pool.sum() == 6 + 3
    for bad in ('{"input": "i", "ranking": ["A", "A"]}', '{"input": "i", "ranking": ["A"]}', "{"):
        path.write_text(bad + "\n")
        with pytest.raises(ValueError):
            load_rankings(path)


def test_a_ranking_is_one_annotation_giving_its_pairs_one_label_each_on_one_input() -> None:
    wide = load_mqm(MQM, ["Facebook-AI", "HuaweiTSC", "Nemo", "Online-W", "UEdin", "ref-A"])
    data = score_data_from_wide(wide)
    settings = ProtocolSettings(batch=10, budget=120)
    res = loop_once(data, settings, np.random.default_rng(3), mode="rank", k=3)
    assert res.annotations <= 120 and res.labels <= 3 * res.annotations
    assert res.cost == 2 * res.annotations  # a ranking of 3 is two comparisons' worth
    assert res.labels > 2 * res.annotations  # rankings serve several open pairs at once


@pytest.mark.parametrize("k", [3, 8])
def test_null_ranking_studies_keep_false_decisions_over_all_looks_below_gamma(k) -> None:
    # 8 equally good systems, MQM-like scores with ties, rankings of k: 20 studies, 560 pairs
    root = np.random.default_rng(10 + k)
    decided = []
    for child in root.spawn(20):
        data = null_mqm_scores(8, 150, child)
        res = loop_once(data, ProtocolSettings(batch=10), child, mode="rank", k=k)
        decided.append(np.mean(res.decisions != 0))
    assert np.mean(decided) <= GAMMA + 2 * np.sqrt(GAMMA * (1 - GAMMA) / 560)


def test_null_likert_studies_with_irregular_arrival_keep_false_decisions_below_gamma() -> None:
    root = np.random.default_rng(7)
    decided, irregular = [], 0
    for child in root.spawn(20):
        data = null_likert_scores(6, 150, child, raters=2)
        res = loop_once(data, ProtocolSettings(batch=10), child, mode="likert")
        decided.append(np.mean(res.decisions != 0))
        irregular += res.off_allocation
    assert irregular > 100  # pairs gain other numbers of inputs than they were allocated
    assert np.mean(decided) <= GAMMA + 2 * np.sqrt(GAMMA * (1 - GAMMA) / 300)


def test_replay_command_reads_rankings_and_simulates_them_from_mqm(tmp_path, capsys) -> None:
    path = tmp_path / "r.jsonl"
    rng = np.random.default_rng(4)
    lines = []
    for i in range(40):
        order = list(rng.permutation(["A", "B", "C", "D"]))
        if order.index("A") > 1:  # A is mostly ranked first or second
            order.remove("A")
            order.insert(0, "A")
        lines.append(json.dumps({"input": f"i{i}", "annotator": "w", "ranking": order}))
    path.write_text("\n".join(lines) + "\n")
    call_command("replay", "--rankings", str(path), "--repeats", "2", "--batch", "5", "--json")
    result = json.loads(capsys.readouterr().out)[0]
    assert result["mode"] == "rank file" and result["pool"] == 40 * 6
    s = result["summary"]
    assert abs(sum(s[o] for o in ("correct", "inversion", "omission", "insertion")) - 1) < 1e-9
    assert 0 < s["annotations"] <= 40
    call_command("replay", "--mqm", str(MQM), "--rank", "3", "--systems", "Nemo,UEdin,ref-A",
                 "--repeats", "1")  # fmt: skip
    assert "rank 3" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("replay", "--frame", str(path), "--rank", "3")


def test_score_data_keeps_only_pairs_with_a_shared_unit() -> None:
    scores = np.array([[1.0, 2.0, np.nan], [np.nan, 1.0, 3.0]])
    pairs, labels, pool = ScoreData(("a", "b", "c"), scores, np.arange(2)).pair_table()
    assert [tuple(p) for p in pairs] == [(0, 1), (1, 2)]
    assert labels.tolist() == [[-1, 0], [0, -1]] and pool.tolist() == [[1, 0], [0, 1]]
