"""Span agreement, MQM weights and system order for error-span annotations, on examples worked
out by hand in the comments."""

import math

import numpy as np
import pandas as pd
import pytest

from analysis.spans import (
    char_f1,
    item_char_f1,
    mean_char_f1,
    mqm_by_system,
    mqm_errors,
    systems_by_score,
)


def s(start, end, severity="minor"):
    return {"start": start, "end": end, "severity": severity}


def test_char_f1_partial_overlap():
    # A marks 2-6 = {2,3,4,5}, B marks 4-8 = {4,5,6,7}: |A ∩ B| = 2, F1 = 2*2 / (4+4) = 0.5.
    a, b = [s(2, 6, "minor")], [s(4, 8, "major")]
    assert char_f1(a, b) == 0.5
    assert char_f1(b, a) == 0.5
    # Severity-aware: the shared characters are minor for A, major for B -> nothing agrees.
    assert char_f1(a, b, severity=True) == 0.0


def test_char_f1_two_spans_each():
    # A: 0-4 minor {0,1,2,3}, 10-12 major {10,11}; B: 2-4 minor {2,3}, 10-14 major
    # {10,11,12,13}. |A| = 6, |B| = 6, |A ∩ B| = {2,3,10,11} = 4, F1 = 8/12 = 2/3, with or
    # without severity (every shared character has the same severity on both sides).
    a = [s(0, 4), s(10, 12, "major")]
    b = [s(2, 4), s(10, 14, "major")]
    assert char_f1(a, b) == pytest.approx(2 / 3)
    assert char_f1(a, b, severity=True) == pytest.approx(2 / 3)
    # Make B's 10-14 minor: only {2,3} agree in severity, F1 = 2*2/12 = 1/3.
    b_minor = [s(2, 4), s(10, 14, "minor")]
    assert char_f1(a, b_minor, severity=True) == pytest.approx(1 / 3)


def test_char_f1_empty_sides():
    assert char_f1([], [s(0, 3)]) == 0.0
    assert char_f1([], []) == 1.0
    assert math.isnan(char_f1([], [], empty=float("nan")))
    assert char_f1([s(5, 9)], [s(5, 9)]) == 1.0


def test_item_char_f1_averages_every_pair():
    # Item 1: a = 0-4, b = 2-6, c = nothing. ab: |∩| = 2, F1 = 4/8 = 0.5; ac: 0; bc: 0.
    # Mean over the 3 pairs = 1/6. Item 2: one annotator, no pair. Item 3: x and y mark
    # nothing: F1 1 (default) or undefined (empty=nan).
    frame = pd.DataFrame(
        [
            {"item": 1, "annotator": "a", "spans": [s(0, 4)]},
            {"item": 1, "annotator": "b", "spans": [s(2, 6, "major")]},
            {"item": 1, "annotator": "c", "spans": []},
            {"item": 2, "annotator": "a", "spans": [s(0, 1)]},
            {"item": 3, "annotator": "x", "spans": []},
            {"item": 3, "annotator": "y", "spans": []},
            {"item": 3, "annotator": "z", "spans": None},  # not recorded: left out
        ]
    )
    got = item_char_f1(frame)
    assert list(got["item"]) == [1, 2, 3]
    assert list(got["n_annotators"]) == [3, 1, 2]
    assert list(got["n_pairs"]) == [3, 0, 1]
    assert got["f1"][0] == pytest.approx(1 / 6)
    assert math.isnan(got["f1"][1])
    assert got["f1"][2] == 1.0
    assert math.isnan(item_char_f1(frame, empty=float("nan"))["f1"][2])
    # Mean over items 1 and 3: (1/6 + 1) / 2 = 7/12; with empty=nan only item 1 counts.
    est = mean_char_f1(frame, n_boot=200)
    assert est.value == pytest.approx(7 / 12) and est.n == 2
    assert 1 / 6 <= est.low <= est.value <= est.high <= 1.0
    assert mean_char_f1(frame, empty=float("nan"), n_boot=0).value == pytest.approx(1 / 6)
    solo = frame[frame["item"] == 2]
    assert mean_char_f1(solo).value is None


def test_mqm_weights():
    # 2 minor + 1 major = 2*1 + 5 = 7.
    assert mqm_errors([s(0, 1), s(1, 2), s(3, 4, "major")]) == 7.0
    assert mqm_errors([]) == 0.0
    assert mqm_errors([s(0, 1, "major")], {"minor": 1, "major": 10}) == 10.0


def test_mqm_by_system():
    # X: one annotation with a minor and a major (1 + 5 = 6), one with none: 6 over 2 = 3.0.
    # Y: one annotation with two minors: 2 over 1 = 2.0 -> Y first (fewer errors).
    frame = pd.DataFrame(
        [
            {"system": "X", "spans": [s(0, 2), s(3, 5, "major")]},
            {"system": "X", "spans": []},
            {"system": "Y", "spans": [s(0, 1), s(2, 3)]},
            {"system": "Y", "spans": None},  # an imported score: spans not recorded
        ]
    )
    got = mqm_by_system(frame)
    assert got.to_dict("records") == [
        {"system": "Y", "annotations": 1, "minor": 2, "major": 0, "mqm": 2.0,
         "mqm_per_annotation": 2.0},
        {"system": "X", "annotations": 2, "minor": 1, "major": 1, "mqm": 6.0,
         "mqm_per_annotation": 3.0},
    ]  # fmt: skip


def test_systems_by_score_means_and_order():
    # X: 80 and 60 on input i1, 90 on i2 -> (80+60+90)/3 = 76.67. Y: 50 on i1, 70 on i2 -> 60.
    frame = pd.DataFrame(
        [
            {"system": "X", "input": "i1", "score": 80},
            {"system": "X", "input": "i1", "score": 60},
            {"system": "X", "input": "i2", "score": 90},
            {"system": "Y", "input": "i1", "score": 50},
            {"system": "Y", "input": "i2", "score": 70},
        ]
    )
    got = systems_by_score(frame, n_boot=0)
    assert list(got["system"]) == ["X", "Y"]
    assert list(got["n"]) == [3, 2]
    assert got["mean"].tolist() == pytest.approx([230 / 3, 60.0])
    assert got["low"].isna().all() and list(got["rank"]) == [1, 2]
    # Bootstrap over the two inputs: a resample is {i1,i1}, {i1,i2} or {i2,i2}, so X's mean is
    # 70 (i1 only), 76.67 or 90 (i2 only), Y's 50, 60 or 70: the intervals lie in these ranges
    # and overlap, so both systems share rank 1.
    boot = systems_by_score(frame, n_boot=500, seed=1)
    x, y = boot.iloc[0], boot.iloc[1]
    assert 70 <= x["low"] <= x["mean"] <= x["high"] <= 90
    assert 50 <= y["low"] <= y["mean"] <= y["high"] <= 70
    assert list(boot["rank"]) == [1, 1]


def test_systems_by_score_separated_intervals_rank():
    rng = np.random.default_rng(0)
    rows = [
        {"system": sys, "input": i, "score": int(base + rng.integers(-5, 6))}
        for i in range(30)
        for sys, base in (("good", 85), ("mid", 84), ("bad", 20))
    ]
    got = systems_by_score(pd.DataFrame(rows), n_boot=300, seed=0)
    assert got["system"].tolist()[2] == "bad"
    # good and mid overlap (rank 1 each); bad's interval lies below both -> rank 3.
    assert got["rank"].tolist() == [1, 1, 3]
    assert (got["low"] <= got["mean"]).all() and (got["mean"] <= got["high"]).all()
