"""Tests of protocol.replay.simulation (Deriu et al. 2023, Algorithm 2, error types, Appendix E)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from protocol.replay.simulation import (
    PreferenceData,
    _simulate_metric,
    build_parser,
    classify_outcomes,
    frame_from_judgebench,
    load_mqm,
    parse_mixture_matrix,
    preference_data_from_frame,
    preference_data_from_scores,
    reference_decisions,
    render_table,
    replay,
    replay_once,
    run_from_args,
    subset_inputs,
)
from protocol.replay.synthetic import synthetic_mqm
from protocol.settings import ProtocolSettings


def _data(pools: dict[tuple[str, str], list[int]]) -> PreferenceData:
    systems = tuple(sorted({s for pair in pools for s in pair}))
    labels = tuple(np.array(v, dtype=np.int8) for v in pools.values())
    inputs = tuple(np.arange(len(v)) for v in pools.values())
    return PreferenceData(systems, tuple(pools), labels, inputs)


def test_classify_outcomes_follows_the_paper_error_types() -> None:
    ref = np.array([1, 1, 1, -1, 0, 0, 0])
    dec = np.array([1, -1, 0, -1, 0, 1, -1])
    out = classify_outcomes(ref, dec)
    assert list(out) == [
        "correct",  # same significant direction
        "inversion",  # opposite direction
        "omission",  # reference significant, protocol undecided
        "correct",
        "correct",  # both undecided
        "insertion",  # reference undecided, protocol significant
        "insertion",
    ]


def test_paper_protocol_on_hand_made_pools() -> None:
    data = _data(
        {
            ("A", "B"): [1] * 40,  # a always better: decided after the first batch
            ("A", "C"): [0] * 40,  # only draws: theta stays 1/2, never decided
            ("B", "C"): [-1] * 30,  # b always better
        }
    )
    ref = reference_decisions(data)
    np.testing.assert_array_equal(ref, [1, 0, -1])
    settings = ProtocolSettings.paper_protocol(batch=10)
    res = replay_once(data, settings, np.random.default_rng(0))
    np.testing.assert_array_equal(res.decisions, [1, 0, -1])
    assert list(res.outcomes) == ["correct", "correct", "correct"]
    # 10 + all 40 draws + 10 annotations out of a pool of 110
    assert res.annotations == 60 and res.pool == 110
    assert res.fraction_used == pytest.approx(60 / 110)
    # KLD(p_prot || p_hum): p_hum of the all-draw pair is (0, 1, 0), p_prot = (1, 41, 1) / 43
    assert res.kld > 0


def test_budget_shortfall_produces_an_omission() -> None:
    data = _data({("A", "B"): [1] * 40, ("A", "C"): [1] * 40})
    settings = ProtocolSettings.paper_protocol(batch=10, budget=10)
    res = replay_once(data, settings, np.random.default_rng(0))
    # the budget of 10 is spent on the first pair; the second (significant on all data) starves
    assert list(res.outcomes) == ["correct", "omission"]
    assert res.annotations == 10
    assert res.retired["budget"] == 1


def test_default_protocol_on_hand_made_pools() -> None:
    data = _data({("A", "B"): [1] * 200, ("A", "C"): [0] * 200, ("B", "C"): [-1, 1] * 100})
    res = replay_once(data, ProtocolSettings(batch=10), np.random.default_rng(1))
    assert res.decisions[0] == 1 and res.decisions[1] == 0
    assert res.outcomes[0] == "correct" and res.outcomes[1] == "correct"
    # the all-draw pair is retired for futility long before its pool is used up
    assert res.retired["futile"] >= 1
    assert res.annotations < 0.7 * res.pool


def _null_data(n_pairs: int, pool: int, seed: int) -> PreferenceData:
    rng = np.random.default_rng(seed)
    pools = {
        (f"s{k}", f"t{k}"): list(rng.choice([1, 0, -1], size=pool, p=[0.3, 0.4, 0.3]))
        for k in range(n_pairs)
    }
    return _data(pools)


def test_sequential_correction_keeps_null_false_decision_rate_near_gamma() -> None:
    # 600 independent null pairs (p> = p<), pool 200, batch 10: a decision is a false decision.
    data = _null_data(600, 200, seed=2)
    rng = np.random.default_rng(3)
    default = replay_once(data, ProtocolSettings(batch=10, allocation="uniform"), rng)
    paper = replay_once(data, ProtocolSettings.paper_protocol(batch=10), np.random.default_rng(3))
    rate_default = np.mean(default.decisions != 0)
    rate_paper = np.mean(paper.decisions != 0)
    assert rate_default <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 600)  # within ~3 SE of gamma
    assert rate_paper > 0.12  # repeated fixed-gamma tests inflate false decisions


def test_simulated_metric_draws_from_the_columns_of_mu() -> None:
    rng = np.random.default_rng(0)
    true = np.repeat(np.array([1, 0, -1], dtype=np.int8), 20000)
    ident = _simulate_metric([true], np.eye(3), rng)[0]
    np.testing.assert_array_equal(ident, true)
    mu = parse_mixture_matrix("0.8,0.25,0.1;0.1,0.5,0.1;0.1,0.25,0.8")
    met = _simulate_metric([true], mu, rng)[0]
    for col, lab in enumerate([1, 0, -1]):
        sel = met[true == lab]
        freq = [np.mean(sel == 1), np.mean(sel == 0), np.mean(sel == -1)]
        np.testing.assert_allclose(freq, mu[:, col], atol=0.015)


def test_parse_mixture_matrix_checks_columns() -> None:
    mu = parse_mixture_matrix("0.8,0.25,0.1;0.1,0.5,0.1;0.1,0.25,0.8")
    assert mu[0, 1] == 0.25  # row = metric label '>', column = true label '='
    with pytest.raises(ValueError):
        parse_mixture_matrix("0.8,0.1,0.1;0.1,0.8,0.1;0.2,0.1,0.7")  # rows, not columns, sum to 1
    with pytest.raises(ValueError):
        parse_mixture_matrix("1,0;0,1")


def test_replay_with_metric_runs_and_is_json_serialisable() -> None:
    data = _data({("A", "B"): [1, 0, 1, -1, 1, 1] * 10, ("A", "C"): [0, 1, -1] * 20})
    mu = parse_mixture_matrix("0.8,0.25,0.1;0.1,0.5,0.1;0.1,0.25,0.8")
    out = replay(data, ProtocolSettings(batch=10), repeats=2, seed=0, mu=mu)
    json.dumps(out)
    s = out["summary"]
    assert s["correct"] + s["inversion"] + s["omission"] + s["insertion"] == pytest.approx(1.0)
    assert 0 < s["annotations"] <= 1
    assert "Corr." in render_table(out)


def test_long_frame_orientation_and_labels() -> None:
    frame = pd.DataFrame(
        {
            "input": [1, 2, 3, 4],
            "system_a": ["y", "x", "x", "y"],
            "system_b": ["x", "y", "y", "x"],
            "label": ["a", ">", "tie", -1],
        }
    )
    data = preference_data_from_frame(frame)
    assert data.pairs == (("x", "y"),)
    # rows with (y, x) are flipped: 'a' -> x worse (-1), -1 -> x better (+1)
    np.testing.assert_array_equal(data.labels[0], [-1, 1, 0, 1])
    with pytest.raises(ValueError):
        preference_data_from_frame(frame.assign(label=["?", 1, 1, 1]))


def test_mqm_loader_keeps_segments_rated_for_all_systems(tmp_path) -> None:
    tsv = tmp_path / "mqm.tsv"
    tsv.write_text(
        "system mqm_avg_score seg_id\n"
        "A\t-1.0 1\nA\t0.0 2\nA\t-2.0 3\n"
        "B\t-3.0 1\nB\tNone 2\nB\t-2.0 3\n"
        "C\t0.0 1\nC\t0.0 2\nC\tNone 3\n"
    )
    wide = load_mqm(tsv, ["A", "B"])
    assert list(wide.index) == [1, 3]
    data = preference_data_from_scores(wide)
    np.testing.assert_array_equal(data.labels[0], [1, 0])  # -1 > -3 ; -2 == -2
    args = build_parser().parse_args(
        ["--mqm", str(tsv), "--systems", "A", "B", "--batch", "1", "--repeats", "2", "--paper"]
    )
    (res,) = run_from_args(args)
    json.dumps(res)
    assert res["protocol"] == "paper" and res["n_pairs"] == 1


def test_judgebench_loader(tmp_path) -> None:
    doc = {
        "annotations": [
            {"metric": "pref", "category": "categorical", "labels_list": ["model_a", "model_b"]}
        ],
        "instances": [
            {
                "id": "i1",
                "annotations": {"pref": {"individual_human_scores": ["model_a", "model_b"]}},
            },
            {"id": "i2", "annotations": {"pref": {"majority_human": "model_b"}}},
        ],
    }
    path = tmp_path / "jb.json"
    path.write_text(json.dumps(doc))
    frame = frame_from_judgebench(path)
    assert len(frame) == 3
    data = preference_data_from_frame(frame)
    np.testing.assert_array_equal(data.labels[0], [1, -1, -1])


def test_subset_inputs_is_seeded_and_keeps_each_pairs_labels_of_the_chosen_inputs() -> None:
    data = preference_data_from_scores(synthetic_mqm(4, 300, 0.05, seed=3))
    sub = subset_inputs(data, 50, seed=7)
    assert sub.pairs == data.pairs and set(sub.pool_sizes) == {50}
    chosen = set(sub.inputs[0].tolist())
    assert all(set(x.tolist()) == chosen for x in sub.inputs)  # one draw for the whole study
    for full_lab, full_in, lab, inp in zip(
        data.labels, data.inputs, sub.labels, sub.inputs, strict=True
    ):
        by_input = dict(zip(full_in.tolist(), full_lab.tolist(), strict=True))
        assert lab.tolist() == [by_input[i] for i in inp.tolist()]
    assert set(subset_inputs(data, 50, seed=7).inputs[0].tolist()) == chosen
    assert set(subset_inputs(data, 50, seed=8).inputs[0].tolist()) != chosen
    with pytest.raises(ValueError):
        subset_inputs(data, 301, seed=0)


def test_synthetic_mqm_follows_its_generator() -> None:
    wide = synthetic_mqm(3, 20000, 0.2, seed=1)
    assert wide.shape == (20000, 3) and wide.equals(synthetic_mqm(3, 20000, 0.2, seed=1))
    clean = (wide == 0).mean().to_numpy()
    np.testing.assert_allclose(clean, [0.30, 0.50, 0.70], atol=0.015)  # p_i = 0.30 + s·i
    assert set(np.unique(-wide.to_numpy())) == {0.0, 1.0, 5.0, 10.0, 25.0}
    errors = -wide.to_numpy()[wide.to_numpy() < 0]
    assert np.mean(errors == 1) == pytest.approx(3 / 7, abs=0.015)
    # s = 0: every system alike, so all data decide (almost) no pair
    null = preference_data_from_scores(synthetic_mqm(8, 527, 0.0, seed=1))
    assert np.sum(reference_decisions(null) != 0) <= 2


def test_futility_error_flag_takes_a_rate_or_off() -> None:
    base = ["--mqm", "scores.tsv"]
    assert build_parser().parse_args([*base, "--futility-error", "off"]).futility_error == "off"
    assert build_parser().parse_args([*base, "--futility-error", "0.1"]).futility_error == 0.1
    assert build_parser().parse_args(base).futility_error is None  # the default β of the settings
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--futility-error", "1.5"])
