"""Tests of analysis.perception: binned JSD (Beyond Correlation Eq. 1-2, A.7) and charts."""

from __future__ import annotations

import math
import statistics
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from analysis import perception as pe


def long_frame(items: dict) -> pd.DataFrame:
    rows = [(i, f"r{j}", lab) for i, labs in items.items() for j, lab in enumerate(labs)]
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


def judge_frame(items: dict, name: str = "llm") -> pd.DataFrame:
    rows = [(i, name, lab) for i, labs in items.items() for lab in labs]
    return pd.DataFrame(rows, columns=["item", "judge", "label"])


HUMAN = {"A": [2, 2, 3], "B": [1, 2, 2], "C": [2, 3, 3]}
MACHINE = {"A": [3, 2], "B": [1, 1], "C": [2, 2]}


def kl(p, q, log):
    return sum(a * log(a / b) for a, b in zip(p, q, strict=True) if a > 0)


def js(p, q, measure):
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    if measure == "distance":  # natural log, square root (scipy's jensenshannon)
        return math.sqrt(kl(p, m, math.log) / 2 + kl(q, m, math.log) / 2)
    return kl(p, m, math.log2) / 2 + kl(q, m, math.log2) / 2  # Eq. 2 as printed


def test_binned_jsd_appendix_a7_worked_example():
    res = pe.binned_jsd(long_frame(HUMAN), judge_frame(MACHINE), labels=[1, 2, 3], n_boot=200)
    bins = res.bins.set_index("bin")
    # bin 2 pools A and B: humans [2,2,3,1,2,2] -> (1/6, 4/6, 1/6); machine [3,2,1,1] ->
    # (2/4, 1/4, 1/4). bin 3 is C: humans (0, 1/3, 2/3), machine (0, 1, 0).
    assert bins.loc[2, "p_human"] == pytest.approx((1 / 6, 4 / 6, 1 / 6))
    assert bins.loc[2, "p_machine"] == pytest.approx((2 / 4, 1 / 4, 1 / 4))
    assert bins.loc[3, "p_human"] == pytest.approx((0, 1 / 3, 2 / 3))
    assert bins.loc[3, "p_machine"] == pytest.approx((0, 1, 0))
    assert bins.loc[2, "n_items"] == 2 and bins.loc[3, "weight"] == pytest.approx(1 / 3)
    assert round(bins.loc[2, "js"], 4) == 0.3113
    assert round(bins.loc[3, "js"], 4) == 0.5641
    assert round(res.estimate.value, 4) == 0.3956
    # the same from the formula written out here
    d2 = js((1 / 6, 4 / 6, 1 / 6), (2 / 4, 1 / 4, 1 / 4), "distance")
    d3 = js((0, 1 / 3, 2 / 3), (0, 1, 0), "distance")
    assert res.estimate.value == pytest.approx(2 / 3 * d2 + 1 / 3 * d3, abs=1e-12)
    # bin 1 is empty and explained
    assert bins.loc[1, "n_items"] == 0 and bins.loc[1, "reason"] == "no items in this bin"
    assert res.estimate.n == 3
    assert res.estimate.low <= res.estimate.value <= res.estimate.high


def test_binned_jsd_printed_divergence_option():
    res = pe.binned_jsd(
        long_frame(HUMAN), judge_frame(MACHINE), labels=[1, 2, 3], measure="divergence", n_boot=0
    )
    d2 = js((1 / 6, 4 / 6, 1 / 6), (2 / 4, 1 / 4, 1 / 4), "divergence")
    d3 = js((0, 1 / 3, 2 / 3), (0, 1, 0), "divergence")
    assert res.estimate.value == pytest.approx(2 / 3 * d2 + 1 / 3 * d3, abs=1e-12)
    assert "n_boot=0" in res.estimate.reason


def reference_binned_jsd(human: dict, machine: dict, labels: list, bin_func, measure="distance"):
    """Loop implementation of Eq. 1-2 in the manner of the A.7 reference code: an item whose
    bin value is not a label (half-way median) joins no bin but still counts in n."""
    items = [i for i in human if machine.get(i)]
    n = len(items)
    total = 0.0
    for r in labels:
        members = [i for i in items if bin_func(human[i]) == r]
        if not members:
            continue
        hc = Counter(lab for i in members for lab in human[i])
        mc = Counter(lab for i in members for lab in machine[i])
        p = [hc[c] / sum(hc.values()) for c in labels]
        q = [mc[c] / sum(mc.values()) for c in labels]
        total += len(members) / n * js(p, q, measure)
    return total


def random_study(seed, n_items, sizes, samples=2, k=5):
    rng = np.random.default_rng(seed)
    human, machine = {}, {}
    for i in range(n_items):
        centre = int(rng.integers(1, k + 1))
        human[i] = [
            int(v) for v in np.clip(centre + rng.integers(-1, 2, int(rng.choice(sizes))), 1, k)
        ]
        machine[i] = [int(v) for v in np.clip(centre + rng.integers(-2, 2, samples), 1, k)]
    machine[0] = []  # an item without machine labels is left out of n
    return human, machine


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("measure", ["distance", "divergence"])
def test_binned_jsd_matches_loop_reference_median_bins(seed, measure):
    human, machine = random_study(seed, 250, sizes=(2, 3, 4, 5))
    labels = [1, 2, 3, 4, 5]
    ann, jud = long_frame(human), judge_frame({i: v for i, v in machine.items() if v})
    ref = reference_binned_jsd(human, machine, labels, statistics.median, measure)
    got = pe.binned_jsd(ann, jud, labels=labels, ties="drop", measure=measure, n_boot=0)
    assert got.estimate.value == pytest.approx(ref, abs=1e-12)
    assert got.estimate.n == 249


def test_binned_jsd_split_equals_weighted_loop_reference():
    human, machine = random_study(4, 200, sizes=(2, 4))
    labels = [1, 2, 3, 4, 5]
    items = [i for i in human if machine[i]]
    total = 0.0
    for r in labels:  # a median between two labels (e.g. 2.5) counts 1/2 in both their bins
        weight = {}
        for i in items:
            med = statistics.median(human[i])
            weight[i] = float(med == r) if med in labels else float(abs(med - r) == 0.5) / 2
        size = sum(weight.values())
        if size == 0:
            continue
        p = [sum(weight[i] * human[i].count(c) for i in items) for c in labels]
        q = [sum(weight[i] * machine[i].count(c) for i in items) for c in labels]
        p = [x / sum(p) for x in p]
        q = [x / sum(q) for x in q]
        total += size / len(items) * js(p, q, "distance")
    ann, jud = long_frame(human), judge_frame({i: v for i, v in machine.items() if v})
    got = pe.binned_jsd(ann, jud, labels=labels, n_boot=0)
    assert got.estimate.value == pytest.approx(total, abs=1e-12)
    assert got.bins["n_items"].sum() == pytest.approx(len(items))


def test_binned_jsd_mode_bins_match_reference_without_ties():
    human = {i: v for i, v in random_study(3, 300, sizes=(3,))[0].items()}
    machine = random_study(3, 300, sizes=(3,))[1]
    keep = [i for i, v in human.items() if Counter(v).most_common(1)[0][1] >= 2 and machine[i]]
    human = {i: human[i] for i in keep}
    machine = {i: machine[i] for i in keep}
    ref = reference_binned_jsd(human, machine, [1, 2, 3, 4, 5], statistics.mode)
    got = pe.binned_jsd(
        long_frame(human), judge_frame(machine), labels=[1, 2, 3, 4, 5], binning="mode", n_boot=0
    )
    assert got.estimate.value == pytest.approx(ref, abs=1e-12)


def test_own_bin_for_half_way_medians():
    human = {"a": [2, 3], "b": [2, 3], "c": [1, 1]}
    machine = {"a": [2], "b": [3], "c": [1]}
    res = pe.binned_jsd(long_frame(human), judge_frame(machine), labels=[1, 2, 3], ties="own_bin")
    bins = res.bins.set_index("bin")
    assert list(bins.index) == [1, 2, 2.5, 3]
    assert bins.loc[2.5, "n_items"] == 2
    # bin 2.5: humans (0, 1/2, 1/2), machine (0, 1/2, 1/2) -> 0; bin 1 identical -> 0
    assert res.estimate.value == pytest.approx(0.0, abs=1e-12)


def test_binned_jsd_bootstrap_is_seeded():
    human, machine = random_study(5, 100, sizes=(3,))
    ann, jud = long_frame(human), judge_frame({i: v for i, v in machine.items() if v})
    a = pe.binned_jsd(ann, jud, labels=[1, 2, 3, 4, 5], seed=3, n_boot=300).estimate
    b = pe.binned_jsd(ann, jud, labels=[1, 2, 3, 4, 5], seed=3, n_boot=300).estimate
    c = pe.binned_jsd(ann, jud, labels=[1, 2, 3, 4, 5], seed=4, n_boot=300).estimate
    assert a == b and (a.low, a.high) != (c.low, c.high)
    assert a.low < a.value < a.high


def test_jensen_shannon_vectorised_equals_scipy():
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(0)
    p, q = rng.random((20, 5)), rng.random((20, 5))
    p[:, 0] = 0
    got = pe.jensen_shannon(p, q)
    assert got == pytest.approx([jensenshannon(a, b) for a, b in zip(p, q, strict=True)], abs=1e-12)


def test_ordinal_perception_chart_worked_example():
    chart = pe.ordinal_perception_chart(long_frame(HUMAN), judge_frame(MACHINE), labels=[1, 2, 3])
    b2 = chart[(chart["bin"] == 2)].set_index(["source", "label"])
    assert b2.loc[("human", 1), "bin_share"] == pytest.approx(2 / 3)
    assert b2.xs("human")["proportion"].tolist() == pytest.approx([1 / 6, 4 / 6, 1 / 6])
    assert b2.xs("llm")["proportion"].tolist() == pytest.approx([2 / 4, 1 / 4, 1 / 4])
    assert b2.xs("llm")["count"].tolist() == pytest.approx([2, 1, 1])
    shares = chart.drop_duplicates("bin").set_index("bin")["bin_share"]
    assert shares.sum() == pytest.approx(1.0) and shares[1] == 0
    sums = chart[chart["bin_items"] > 0].groupby(["bin", "source"])["proportion"].sum()
    assert np.allclose(sums, 1.0)


def test_pairwise_perception_chart_bins():
    human = {
        "p": ["A", "A", "B"],  # majority A
        "q": ["B", "both_good", "B"],  # majority B
        "r": ["A", "B"],  # equal votes -> tie bin
        "s": ["tie", "both_bad", "A"],  # two tie-like votes -> tie bin
    }
    machine = {"p": ["A"], "q": ["A"], "r": ["tie"], "s": ["both_good"]}
    chart = pe.pairwise_perception_chart(long_frame(human), judge_frame(machine))
    c = chart.set_index(["bin", "source", "label"])
    assert c.loc[("A", "human", "A"), "bin_items"] == 1
    assert c.loc[("tie", "human", "A"), "bin_items"] == 2
    assert c.loc[("tie", "human", "A"), "bin_share"] == pytest.approx(0.5)
    # tie bin pools humans [A, B, tie, tie, A] and machine [tie, tie]
    assert c.loc[("tie", "human", "tie"), "proportion"] == pytest.approx(2 / 5)
    assert c.loc[("tie", "llm", "tie"), "proportion"] == pytest.approx(1.0)
    assert c.loc[("B", "llm", "A"), "proportion"] == pytest.approx(1.0)
