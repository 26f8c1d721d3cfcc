"""Tests of analysis.agreement against worked examples and brute-force reference code."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from analysis import agreement as ag
from analysis import correlation, judges
from analysis.counts import LabelCounts, as_label_counts, find_patterns


def long_frame(items: dict, rater: str = "annotator") -> pd.DataFrame:
    rows = [(i, f"r{j}", lab) for i, labs in items.items() for j, lab in enumerate(labs)]
    return pd.DataFrame(rows, columns=["item", rater, "label"])


def judge_frame(items: dict, name: str = "llm") -> pd.DataFrame:
    rows = [(i, name, lab) for i, labs in items.items() for lab in labs]
    return pd.DataFrame(rows, columns=["item", "judge", "label"])


def random_study(seed: int, n_items: int, sizes: tuple[int, ...], k: int = 5, samples: int = 1):
    """Labels 1..k scattered around a per-item centre, so ties and agreement both occur."""
    rng = np.random.default_rng(seed)
    human, machine = {}, {}
    for i in range(n_items):
        centre = int(rng.integers(1, k + 1))
        m = int(rng.choice(sizes))
        human[i] = [int(v) for v in np.clip(centre + rng.integers(-1, 2, size=m), 1, k)]
        machine[i] = [int(v) for v in np.clip(centre + rng.integers(-1, 2, size=samples), 1, k)]
    return human, machine


# ---------------------------------------------------------------- leave-one-out (HREF Alg. 1)


def loo_reference(labels: list, prediction=None) -> float:
    """Algorithm 1 of HREF with the random pick among tied modes replaced by its expectation."""
    total = Fraction(0)
    for i in range(len(labels)):
        others = Counter(labels[:i] + labels[i + 1 :])
        top = max(others.values())
        modes = [lab for lab, c in others.items() if c == top]
        target = labels[i] if prediction is None else prediction
        total += Fraction(int(target in modes), len(modes))
    return float(total / len(labels))


def test_loo_worked_examples_from_the_definition():
    # [1,1,2,2]: leaving out a 1 leaves {1,2,2} whose mode 2 != 1; leaving out a 2 leaves
    # {1,1,2} whose mode 1 != 2 -> inner 0. Judge 1 matches the mode only when a 2 is left
    # out (2 of 4 cases) -> outer 1/2.
    # [1,1,2]: leaving out a 1 leaves {1,2}, a tie, so the 1 matches with probability 1/2
    # (twice); leaving out the 2 leaves {1,1} != 2 -> inner (1/2+1/2+0)/3 = 1/3. Judge 1:
    # 1/2 + 1/2 + 1 over 3 -> 2/3.
    ann = long_frame({"x": [1, 1, 2, 2], "y": [1, 1, 2]})
    jud = judge_frame({"x": [1], "y": [1]})
    per_item = ag.loo_agreement_per_item(ann, jud).set_index("item")
    assert per_item.loc["x", "inner"] == 0.0
    assert per_item.loc["x", "outer_llm"] == pytest.approx(0.5, abs=1e-15)
    assert per_item.loc["y", "inner"] == pytest.approx(1 / 3, abs=1e-15)
    assert per_item.loc["y", "outer_llm"] == pytest.approx(2 / 3, abs=1e-15)
    assert loo_reference([1, 1, 2, 2]) == 0 and loo_reference([1, 1, 2, 2], 1) == 0.5
    inner = ag.loo_agreement_inner(ann)
    outer = ag.loo_agreement_outer(ann, jud)
    assert inner.value == pytest.approx((0 + 1 / 3) / 2, abs=1e-15)
    assert outer.value == pytest.approx((1 / 2 + 2 / 3) / 2, abs=1e-15)
    assert inner.n == outer.n == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loo_matches_brute_force_on_random_data(seed):
    human, machine = random_study(seed, 300, sizes=(1, 2, 3, 4, 5), samples=2)
    ann, jud = long_frame(human), judge_frame(machine)
    per_item = ag.loo_agreement_per_item(ann, jud, labels=[1, 2, 3, 4, 5]).set_index("item")
    inner_ref, outer_ref = [], []
    for i, labs in human.items():
        if len(labs) < 2:
            assert np.isnan(per_item.loc[i, "inner"])
            continue
        inner_ref.append(loo_reference(labs))
        # a judge with several samples: each sample scored, weighted equally
        outer_ref.append(np.mean([loo_reference(labs, p) for p in machine[i]]))
        assert per_item.loc[i, "inner"] == pytest.approx(inner_ref[-1], abs=1e-12)
        assert per_item.loc[i, "outer_llm"] == pytest.approx(outer_ref[-1], abs=1e-12)
    assert ag.loo_agreement_inner(ann).value == pytest.approx(np.mean(inner_ref), abs=1e-12)
    assert ag.loo_agreement_outer(ann, jud).value == pytest.approx(np.mean(outer_ref), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(1, 4), min_size=2, max_size=7), st.integers(1, 4)),
        min_size=1,
        max_size=8,
    )
)
def test_loo_property_against_reference(study):
    human = {i: labs for i, (labs, _) in enumerate(study)}
    machine = {i: [p] for i, (_, p) in enumerate(study)}
    per_item = ag.loo_agreement_per_item(
        long_frame(human), judge_frame(machine), labels=[1, 2, 3, 4]
    ).set_index("item")
    for i, labs in human.items():
        assert per_item.loc[i, "inner"] == pytest.approx(loo_reference(labs), abs=1e-12)
        assert per_item.loc[i, "outer_llm"] == pytest.approx(
            loo_reference(labs, machine[i][0]), abs=1e-12
        )


def test_loo_random_tie_break_is_unbiased_and_exact_without_ties():
    no_ties = long_frame({i: [1, 1, 1, 2] if i % 2 else [3, 3, 3] for i in range(50)})
    # leaving any one label out of these never produces a tied mode
    for seed in range(3):
        assert ag.loo_agreement_inner(no_ties, tie_break="random", seed=seed).value == (
            ag.loo_agreement_inner(no_ties).value
        )
    ties = long_frame({i: [1, 1, 2] for i in range(2000)})
    est = ag.loo_agreement_inner(ties, tie_break="random", seed=5, n_boot=0)
    # per item hits ~ Binomial(2, 1/2) / 3: sd of the mean = sqrt(1/18 / 2000) ~ 0.0053
    assert est.value == pytest.approx(1 / 3, abs=0.03)
    assert est.value != pytest.approx(1 / 3, abs=1e-9)  # really random, not the expectation
    again = ag.loo_agreement_inner(ties, tie_break="random", seed=5, n_boot=0)
    assert again.value == est.value


def test_loo_undefined_with_single_labels():
    est = ag.loo_agreement_inner(long_frame({"a": [1], "b": [2]}))
    assert est.value is None and "two or more labels" in est.reason


# ---------------------------------------------------------------- percentage agreement (A.4)


def test_percentage_agreement_eq3_by_hand():
    data = long_frame({"a": [1, 1, 2], "b": [1, 2, 3], "c": [2, 2, 2, 2], "d": [1, 2], "e": [3, 3]})
    per_item = ag.percentage_agreement_per_item(data).set_index("item")["percentage_agreement"]
    # a: most frequent label 1 has 2 > 1 votes -> 2/3; b, d: top count 1 -> 0; c, e: 1
    assert per_item.to_dict() == pytest.approx({"a": 2 / 3, "b": 0, "c": 1, "d": 0, "e": 1})
    assert ag.percentage_agreement(data).value == pytest.approx(8 / 15, abs=1e-15)


def test_percentage_agreement_median_reference():
    data = long_frame({"a": [1, 1, 2], "b": [1, 2, 3], "c": [1, 2], "d": [1, 1, 3, 3], "e": [4]})
    per_item = ag.percentage_agreement_per_item(data, reference="median").set_index("item")
    # a: median 1 -> 2/3; b: median 2 -> 1/3; c: median 1.5 lies between labels 1 and 2 ->
    # the larger of their shares, 1/2; d: median 2 is a label nobody chose -> 0;
    # e: one label -> missing
    pa = per_item["percentage_agreement"]
    assert pa[["a", "b", "c", "d"]].tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 2, 0])
    assert np.isnan(pa["e"]) and per_item.loc["b", "n_unique"] == 3


# ---------------------------------------------------------------- Krippendorff's alpha


def krippendorff_2011() -> pd.DataFrame:
    nan = np.nan
    coders = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        "C": [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    }
    rows = [
        (unit, coder, int(v))
        for coder, vals in coders.items()
        for unit, v in enumerate(vals, start=1)
        if not np.isnan(v)
    ]
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


@pytest.mark.parametrize(
    ("level", "expected"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_alpha_krippendorff_2011_example(level, expected):
    est = ag.krippendorff_alpha(krippendorff_2011(), level=level, labels=[1, 2, 3, 4, 5])
    assert round(est.value, 3) == expected
    assert est.n == 11  # unit 12 has a single value and is not pairable
    assert est.low <= est.value <= est.high


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("seed", [3, 4])
def test_alpha_bootstrap_reducer_equals_package(level, seed):
    human, _ = random_study(seed, 200, sizes=(1, 2, 3, 4))
    lc = LabelCounts.from_frames(long_frame(human), labels=[1, 2, 3, 4, 5])
    vals = np.array([1.0, 2, 3, 4, 5])
    pkg = krippendorff.alpha(value_counts=lc.human, value_domain=vals, level_of_measurement=level)
    sums = ag.alpha_terms(lc.human).sum(axis=0)[None, :]
    mine = ag.alpha_reducer(level, vals, 5)(sums)[0]
    assert mine == pytest.approx(pkg, abs=1e-12)
    # and the estimate's value is the package's
    assert ag.krippendorff_alpha(lc, level=level).value == pytest.approx(pkg, abs=1e-12)


def test_alpha_two_soft_raters_equal_package_on_hard_labels():
    rng = np.random.default_rng(9)
    x, y = rng.integers(0, 4, 60), rng.integers(0, 4, 60)
    eye = np.eye(4)
    sums = ag.alpha_terms_two(eye[x], eye[y]).sum(axis=0)[None, :]
    for level in ("nominal", "ordinal", "interval"):
        pkg = krippendorff.alpha(
            reliability_data=np.vstack([x, y]).astype(float),
            level_of_measurement=level,
            value_domain=[0, 1, 2, 3],
        )
        mine = ag.alpha_reducer(level, np.arange(4.0), 4)(sums)[0]
        assert mine == pytest.approx(pkg, abs=1e-12)


def test_alpha_undefined_cases_are_explained():
    same = ag.krippendorff_alpha(long_frame({"a": [2, 2], "b": [2, 2, 2]}), labels=[1, 2, 3])
    assert same.value is None and "only one label value" in same.reason
    single = ag.krippendorff_alpha(long_frame({"a": [1], "b": [2]}))
    assert single.value is None and "two or more labels" in single.reason


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_point_equals_the_krippendorff_package(level):
    """The point value, from the study's coincidence sums over its label patterns, is the
    ``krippendorff`` package's (worked example of Krippendorff 2011 and a random study with
    unpairable and empty units)."""
    domain = np.array([1.0, 2, 3, 4, 5])
    human, _ = random_study(5, 300, sizes=(0, 1, 2, 3, 4))
    for frame in (krippendorff_2011(), long_frame(human)):
        counts = LabelCounts.from_frames(frame, labels=[1, 2, 3, 4, 5]).human
        pkg = krippendorff.alpha(
            value_counts=counts, value_domain=domain, level_of_measurement=level
        )
        ours = ag.krippendorff_alpha(frame, level=level, labels=[1, 2, 3, 4, 5], n_boot=0)
        assert ours.value == pytest.approx(float(pkg), abs=1e-12)


# ---------------------------------------------------------------- Fleiss and Randolph


FLEISS_1971 = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def table_frame(table: np.ndarray) -> pd.DataFrame:
    return long_frame(
        {
            i: [c + 1 for c in range(table.shape[1]) for _ in range(table[i, c])]
            for i in range(len(table))
        }
    )


def test_fleiss_and_randolph_on_fleiss_1971():
    data = table_frame(FLEISS_1971)
    fleiss = ag.fleiss_kappa(data, labels=[1, 2, 3, 4, 5])
    randolph = ag.randolph_kappa(data, labels=[1, 2, 3, 4, 5])
    assert round(fleiss.value, 4) == 0.2099
    assert round(randolph.value, 4) == 0.2225
    # by hand: mean P_i = 0.378022, chance 0.212755 (Fleiss) and 1/5 (Randolph)
    p_i = ((FLEISS_1971**2).sum(axis=1) - 14) / (14 * 13)
    p_cat = FLEISS_1971.sum(axis=0) / FLEISS_1971.sum()
    assert fleiss.value == pytest.approx(
        (p_i.mean() - (p_cat**2).sum()) / (1 - (p_cat**2).sum()), abs=1e-12
    )
    assert randolph.value == pytest.approx((p_i.mean() - 0.2) / 0.8, abs=1e-12)
    assert fleiss.low < fleiss.value < fleiss.high


def test_randolph_counts_declared_labels_not_observed():
    data = long_frame({"a": [1, 1], "b": [1, 2]})
    # mean P_i = (1 + 0) / 2; Randolph with k = 5 declared: (0.5 - 0.2) / 0.8 = 0.375
    assert ag.randolph_kappa(data, labels=[1, 2, 3, 4, 5]).value == pytest.approx(0.375)
    # with k = 2 observed it would be 0; Fleiss: p = (3/4, 1/4), Pe = 10/16 -> -1/3
    assert ag.randolph_kappa(data).value == pytest.approx(0.0)
    assert ag.fleiss_kappa(data, labels=[1, 2, 3, 4, 5]).value == pytest.approx(-1 / 3)


def gwet_reference(items: dict, k_labels: list, method: str = "fleiss") -> Fraction:
    """Gwet (2014) Eq. 2.8-2.9 in exact fractions: p_a over items with >= 2 labels, pi_k over
    all labelled items."""
    rated = [labs for labs in items.values() if len(labs) >= 2]
    p_a = sum(
        (Fraction(sum(c * (c - 1) for c in Counter(labs).values()), len(labs) * (len(labs) - 1)))
        for labs in rated
    ) / len(rated)
    seen = [labs for labs in items.values() if labs]
    if method == "fleiss":
        pi = [
            sum(Fraction(labs.count(c), len(labs)) for labs in seen) / len(seen) for c in k_labels
        ]
        p_e = sum(p * p for p in pi)
    else:
        p_e = Fraction(1, len(k_labels))
    return (p_a - p_e) / (1 - p_e)


def test_generalised_fleiss_worked_example():
    # {1,1,2}, {1,2}: p_a = (1/3 + 0) / 2 = 1/6; pi = (7/12, 5/12); p_e = 74/144; kappa = -5/7
    data = {"a": [1, 1, 2], "b": [1, 2]}
    est = ag.fleiss_kappa(long_frame(data))
    assert est.value == pytest.approx(-5 / 7, abs=1e-12)
    assert gwet_reference(data, [1, 2]) == Fraction(-5, 7)
    assert ag.randolph_kappa(long_frame(data)).value == pytest.approx(-2 / 3, abs=1e-12)


# Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed.: 12 units, 4 raters, 5 categories
# with missing ratings (irrCAC's ``datasets.raw_4raters``). irrCAC 0.4.4 ``CAC(d).fleiss()``
# reports kappa 0.76117 (pa 0.81818, pe 0.23872) and ``bp()`` 0.77273 with categories 1..5.
GWET_4RATERS = {
    1: [1, 1, 1],
    2: [2, 2, 3, 2],
    3: [3, 3, 3, 3],
    4: [3, 3, 3, 3],
    5: [2, 2, 2, 2],
    6: [1, 2, 3, 4],
    7: [4, 4, 4, 4],
    8: [1, 1, 2, 1],
    9: [2, 2, 2, 2],
    10: [5, 5, 5],
    11: [1, 1],
    12: [3],
}


def test_generalised_fleiss_matches_irrcac_on_gwets_handbook_data():
    frame = long_frame(GWET_4RATERS)
    fleiss = ag.fleiss_kappa(frame, labels=[1, 2, 3, 4, 5])
    bp = ag.randolph_kappa(frame, labels=[1, 2, 3, 4, 5])
    assert round(fleiss.value, 5) == 0.76117
    assert round(bp.value, 5) == 0.77273
    assert fleiss.value == pytest.approx(float(gwet_reference(GWET_4RATERS, [1, 2, 3, 4, 5])))
    assert bp.value == pytest.approx(
        float(gwet_reference(GWET_4RATERS, [1, 2, 3, 4, 5], "randolph"))
    )
    assert fleiss.n == 11  # unit 12 has one label: in pi, not in p_a
    assert fleiss.low < fleiss.value <= fleiss.high


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generalised_fleiss_on_random_unequal_items(seed):
    human, _ = random_study(seed, 40, (1, 2, 3, 5))
    est = ag.fleiss_kappa(long_frame(human), labels=[1, 2, 3, 4, 5])
    assert est.value == pytest.approx(float(gwet_reference(human, [1, 2, 3, 4, 5])), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_generalised_fleiss_equals_classic_with_equal_rater_counts(seed):
    human, _ = random_study(seed, 30, (4,))
    table = LabelCounts.from_frames(long_frame(human), labels=[1, 2, 3, 4, 5]).human
    assert float(gwet_reference(human, [1, 2, 3, 4, 5])) == pytest.approx(
        sm_fleiss_kappa(table), abs=1e-12
    )
    reduce = ag._gwet_reducer("fleiss", 5)
    mine = reduce(ag._gwet_terms(table).sum(axis=0)[None, :])[0]
    assert mine == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_fleiss_reducer_matches_statsmodels_on_random_tables(seed):
    rng = np.random.default_rng(seed)
    table = rng.multinomial(6, [0.5, 0.3, 0.2], size=40)
    for method in ("fleiss", "randolph"):
        sums = ag.fleiss_terms(table, 6.0).sum(axis=0)[None, :]
        mine = ag.kappa_reducer(method, 6.0, 3)(sums)[0]
        assert mine == pytest.approx(sm_fleiss_kappa(table, method=method), abs=1e-12)


# ---------------------------------------------------------------- Cohen's kappa


def pairs_from_table(table: list[list[int]], labels: list) -> tuple[list, list]:
    a, b = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [labels[i]] * count
            b += [labels[j]] * count
    return a, b


def test_cohen_kappa_unweighted_textbook_example():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15. p_o = 0.7;
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5 -> kappa = 0.2 / 0.5 = 0.4
    a, b = pairs_from_table([[20, 5], [10, 15]], ["yes", "no"])
    est = ag.cohens_kappa(a, b)
    assert est.value == pytest.approx(0.4, abs=1e-12)
    assert est.n == 50 and est.low < 0.4 < est.high


def test_cohen_kappa_weighted_by_hand():
    # O = [[2,1,0],[0,2,1],[1,0,3]], N = 10, margins (3,3,4) both ways, E_ij = r_i c_j / 10.
    # linear: sum w*O = 1+1+2 = 4, sum w*E = 9.0 -> 1 - 4/9 = 5/9
    # quadratic: sum w*O = 1+1+4 = 6, sum w*E = 13.8 -> 1 - 6/13.8 = 13/23
    # unweighted: p_o = 0.7, p_e = 0.34 -> 0.36/0.66 = 6/11
    table = [[2, 1, 0], [0, 2, 1], [1, 0, 3]]
    a, b = pairs_from_table(table, [1, 2, 3])
    assert ag.cohens_kappa(a, b, weights="linear").value == pytest.approx(5 / 9, abs=1e-12)
    assert ag.cohens_kappa(a, b, weights="quadratic").value == pytest.approx(13 / 23, abs=1e-12)
    assert ag.cohens_kappa(a, b).value == pytest.approx(6 / 11, abs=1e-12)
    for wt in ("linear", "quadratic"):
        ref = sm_cohens_kappa(np.array(table), wt=wt).kappa
        assert ag.cohens_kappa(a, b, weights=wt).value == pytest.approx(ref, abs=1e-12)


def test_cohen_kappa_drops_missing_and_explains_constant():
    est = ag.cohens_kappa([1, 1, None, 2], [1, 1, 2, np.nan])
    assert est.n == 2 and est.value is None and "chance disagreement is zero" in est.reason


# ---------------------------------------------------------------- correlations


@pytest.mark.parametrize("method", ["spearman", "kendall", "pearson"])
def test_table_correlation_equals_scipy_with_ties(method):
    rng = np.random.default_rng(11)
    xl, yl = np.array([1.0, 1.5, 2, 3, 4.5]), np.array([1.0, 2, 3])
    tables = rng.integers(0, 6, size=(5, 5, 3)).astype(float)
    got = correlation._table_correlation(tables, xl, yl, method)
    fn = {"spearman": stats.spearmanr, "kendall": stats.kendalltau, "pearson": stats.pearsonr}
    for t, value in zip(tables, got, strict=True):
        x = np.repeat(np.repeat(xl, 3), t.ravel().astype(int))
        y = np.repeat(np.tile(yl, 5), t.ravel().astype(int))
        assert value == pytest.approx(fn[method](x, y).statistic, abs=1e-12)


def test_correlation_point_and_interval():
    rng = np.random.default_rng(2)
    x = rng.integers(1, 6, 400).astype(float)
    y = np.clip(x + rng.integers(-1, 2, 400), 1, 5)
    est = correlation.correlation(x, y, method="kendall", seed=1)
    assert est.value == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert est.low < est.value < est.high and est.n_boot == 1000
    assert correlation.correlation(x, y, method="kendall", seed=1) == est
    const = correlation.correlation(x, np.ones(400))
    assert const.value is None and "constant" in const.reason


def test_judge_correlations_use_human_median():
    human, machine = random_study(5, 150, sizes=(3,))
    ann, jud = long_frame(human), judge_frame(machine)
    res = judges.judge_correlations(ann, jud, n_boot=50).set_index("metric")
    med = ann.groupby("item")["label"].median()
    jl = jud.groupby("item")["label"].first().loc[med.index]
    assert res.loc["spearman", "value"] == pytest.approx(stats.spearmanr(med, jl).statistic)
    assert res.loc["pearson", "value"] == pytest.approx(stats.pearsonr(med, jl).statistic)


# ---------------------------------------------------------------- judge vs majority


def test_judge_vs_majority_with_a_tied_majority_by_hand():
    ann = long_frame({"a": [1, 1, 2], "b": [2, 2, 1], "c": [1, 2]})
    jud = judge_frame({"a": [1], "b": [1], "c": [2]})
    res = judges.judge_vs_majority(ann, jud).set_index("metric")
    # a agrees, b not, c's majority is tied 1/2 -> agreement 1/2: accuracy (1 + 0 + 1/2) / 3
    assert res.loc["accuracy", "value"] == pytest.approx(0.5)
    # expected confusion O = [[1, .5], [1, .5]] / 3: p_o = 1.5/3, p_e = (1.5*2 + 1.5*1)/9
    assert res.loc["cohen_kappa", "value"] == pytest.approx(0.0, abs=1e-12)


def test_judge_vs_majority_kappa_equals_cohen_without_ties():
    human, machine = random_study(8, 200, sizes=(3,))
    ann, jud = long_frame(human), judge_frame(machine)
    maj = {i: Counter(v).most_common(1)[0] for i, v in human.items()}
    keep = [i for i, (_, c) in maj.items() if c >= 2]  # 3 labels: unique mode iff count >= 2
    ann = ann[ann["item"].isin(keep)]
    jud = jud[jud["item"].isin(keep)]
    res = judges.judge_vs_majority(ann, jud, labels=[1, 2, 3, 4, 5]).set_index("metric")
    ref = ag.cohens_kappa([maj[i][0] for i in keep], [machine[i][0] for i in keep])
    assert res.loc["cohen_kappa", "value"] == pytest.approx(ref.value, abs=1e-12)


# ---------------------------------------------------------------- stratification


def strat_example():
    ann = long_frame(
        {
            1: ["x", "x", "x"],
            2: ["y", "y", "y"],
            3: ["x", "x", "y"],
            4: ["y", "y", "x"],
            5: ["x", "x", "y"],
        }
    )
    jud = judge_frame({1: ["x"], 2: ["x"], 3: ["x"], 4: ["y"], 5: ["y"]})
    return ann, jud


def test_stratified_agreement_by_hand():
    ann, jud = strat_example()
    res = judges.stratified_agreement(ann, jud, n_boot=200)
    assert list(res["stratum"].unique()) == [
        "all",
        "PA = 1",
        "0.8 <= PA < 1",
        "0.6 <= PA < 0.8",
        "PA < 0.6",
    ]
    r = res.set_index(["stratum", "metric"])
    # PA = 1 holds items 1, 2 (majorities x, y; judge x, x)
    perfect = r.loc[("PA = 1", "percentage_agreement")]
    assert perfect["n_items"] == 2 and perfect["share"] == pytest.approx(2 / 5)
    assert perfect["hh"] == 1.0 and perfect["hm"] == 0.5 and perfect["h1m"] == 0.5
    assert perfect["delta"] == 0.5
    # the middle stratum holds items 3-5: human PA 2/3 each; majorities x, y, x vs judge
    # x, y, y -> 2/3; one random human agrees with the judge with prob. 2/3, 2/3, 1/3 -> 5/9
    mid = r.loc[("0.6 <= PA < 0.8", "percentage_agreement")]
    assert (mid["hh"], mid["hm"], mid["h1m"]) == pytest.approx((2 / 3, 2 / 3, 5 / 9))
    # alpha: hh from the package on the stratum's items, hm on the two "raters" H^w and M^w
    vc = np.array([[2, 1], [1, 2], [2, 1]])
    alpha_mid = r.loc[("0.6 <= PA < 0.8", "alpha")]
    assert alpha_mid["hh"] == pytest.approx(
        krippendorff.alpha(value_counts=vc, level_of_measurement="nominal")
    )
    hm = krippendorff.alpha(reliability_data=[[0, 1, 0], [0, 1, 1]], level_of_measurement="nominal")
    assert alpha_mid["hm"] == pytest.approx(hm)
    assert alpha_mid["delta"] == pytest.approx(alpha_mid["hh"] - alpha_mid["hm"])
    # Fleiss on the stratum table vs statsmodels
    assert r.loc[("0.6 <= PA < 0.8", "fleiss"), "hh"] == pytest.approx(sm_fleiss_kappa(vc))
    assert r.loc[("PA = 1", "fleiss"), "hh"] == pytest.approx(1.0)
    # an empty stratum is explained
    empty = r.loc[("0.8 <= PA < 1", "alpha")]
    assert empty["n_items"] == 0 and pd.isna(empty["hh"])
    assert "no items in this stratum" in empty["reason"]
    # JS_b has no human-human value, said so
    assert pd.isna(r.loc[("all", "jsd_b"), "hh"])
    assert "no human-human value" in r.loc[("all", "jsd_b"), "reason"]


def test_stratified_delta_interval_and_unique_strata():
    human, machine = random_study(6, 400, sizes=(3,))
    ann, jud = long_frame(human), judge_frame(machine)
    res = judges.stratified_agreement(
        ann, jud, labels=[1, 2, 3, 4, 5], level="ordinal", by="n_unique"
    )
    assert set(res["stratum"]) == {"all", "unique = 1", "unique = 2", "unique = 3"}
    row = res.set_index(["stratum", "metric"]).loc[("all", "alpha")]
    assert row["hh_low"] <= row["hh"] <= row["hh_high"]
    assert row["delta_low"] <= row["delta"] <= row["delta_high"]
    alpha = ag.krippendorff_alpha(ann, level="ordinal", labels=[1, 2, 3, 4, 5])
    assert row["hh"] == pytest.approx(alpha.value, abs=1e-12)
    n = res.set_index(["stratum", "metric"]).xs("alpha", level="metric")["n_items"]
    assert n.drop("all").sum() == n["all"] == 400


def test_stratified_intervals_are_the_same_whether_the_resamples_are_kept_or_drawn(monkeypatch):
    # a table too large to keep draws each stratum's sums in chunks: the same resamples of all
    # items for every stratum, as when they are kept, with an integer seed or a generator
    from analysis import estimates

    human, machine = random_study(7, 300, sizes=(3, 4))
    ann, jud = long_frame(human), judge_frame(machine)
    kw = {"labels": [1, 2, 3, 4, 5], "level": "ordinal", "n_boot": 250}
    kept = judges.stratified_agreement(ann, jud, seed=3, **kw)
    estimates.clear_bootstrap_cache()
    monkeypatch.setattr(judges, "BOOTSTRAP_CACHE_CELLS", 10)
    monkeypatch.setattr(estimates, "BOOTSTRAP_CACHE_CELLS", 10)
    drawn = judges.stratified_agreement(ann, jud, seed=3, **kw)
    pd.testing.assert_frame_equal(drawn, kept)
    again = judges.stratified_agreement(ann, jud, seed=np.random.default_rng(8), **kw)
    monkeypatch.undo()
    estimates.clear_bootstrap_cache()
    pd.testing.assert_frame_equal(
        again, judges.stratified_agreement(ann, jud, seed=np.random.default_rng(8), **kw)
    )


# ---------------------------------------------------- peers' statistics: p-values, baselines


def test_judge_correlations_with_the_human_mean_carry_scipys_p_values():
    human, machine = random_study(3, 60, (3, 4))
    lc = LabelCounts.from_frames(long_frame(human), judge_frame(machine), labels=[1, 2, 3, 4, 5])
    got = judges.judge_correlations(lc, aggregate="mean", n_boot=0).set_index("metric")
    x = [np.mean(human[i]) for i in sorted(human)]
    y = [np.mean(machine[i]) for i in sorted(human)]
    for method, fn in (
        ("pearson", stats.pearsonr),
        ("spearman", stats.spearmanr),
        ("kendall", stats.kendalltau),
    ):
        ref = fn(x, y)
        assert got.loc[method, "value"] == pytest.approx(ref.statistic, abs=1e-12)
        assert got.loc[method, "p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert correlation.correlation_p_value([1, 2, 3], [2, 2, 2]) is None


def test_judge_correlations_call_scipy_once_per_method_and_aggregate_patterns(monkeypatch):
    human, machine = random_study(4, 80, (3, 4))
    lc = LabelCounts.from_frames(long_frame(human), judge_frame(machine), labels=[1, 2, 3, 4, 5])
    want = judges.judge_correlations(lc, n_boot=40)
    calls, rows = Counter(), []
    for name in ("spearmanr", "kendalltau", "pearsonr"):
        real = getattr(stats, name)

        def counted(*a, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(stats, name, counted)
    real_aggregate = judges._aggregate

    def counted_aggregate(counts, *a):
        rows.append(len(counts))
        return real_aggregate(counts, *a)

    monkeypatch.setattr(judges, "_aggregate", counted_aggregate)
    got = judges.judge_correlations(lc, n_boot=40)
    # the p-value comes from the point's scipy call, not a second one
    assert calls == {"spearmanr": 1, "kendalltau": 1, "pearsonr": 1}
    # medians of the distinct count patterns, not of every item
    assert rows == [len(lc.patterns("llm").freq)] * 2 and rows[0] < lc.n_items
    pd.testing.assert_frame_equal(got, want)
    for method in ("spearman", "kendall", "pearson"):
        x = got.set_index("metric").loc[method, "p_value"]
        med = [np.median(human[i]) for i in sorted(human)]
        jl = [machine[i][0] for i in sorted(human)]
        assert x == correlation.correlation_p_value(med, jl, method=method)


def test_judge_correlations_from_patterns_equal_the_item_level_path():
    """The resampled tables built from the count patterns are those of the items: the pair
    table equals find_patterns on the items' value codes, and every row (value, interval,
    p-value) equals correlation() on the per-item medians or means, to the bit."""
    human, machine = random_study(6, 120, (1, 2, 3, 4))
    machine[5], machine[9] = [], [2, 3]  # an item without a judge label, one with two
    lc = LabelCounts.from_frames(long_frame(human), judge_frame(machine), labels=[1, 2, 3, 4, 5])
    pat = lc.patterns("llm")
    for how in ("median", "mean"):
        x = judges._aggregate(pat.rows[:, :5], lc.ordinal_values(), how)
        y = judges._aggregate(pat.rows[:, 5:], lc.ordinal_values(), how)
        keep = np.isfinite(x) & np.isfinite(y)
        xa, ya = x[pat.inverse][keep[pat.inverse]], y[pat.inverse][keep[pat.inverse]]
        xl, yl, pairs = correlation.pair_table(x[keep], y[keep], pat.freq[keep])
        codes = np.column_stack(
            [np.unique(xa, return_inverse=True)[1], np.unique(ya, return_inverse=True)[1]]
        )
        ref = find_patterns(codes)
        assert np.array_equal(pairs.rows, ref.rows) and np.array_equal(pairs.freq, ref.freq)
        assert np.array_equal(xl, np.unique(xa)) and np.array_equal(yl, np.unique(ya))
        got = judges.judge_correlations(lc, aggregate=how, n_boot=60, seed=2).set_index("metric")
        for method in ("spearman", "kendall", "pearson"):
            one = correlation.correlation(xa, ya, method=method, n_boot=60, seed=2)
            row = got.loc[method]
            assert (row["value"], row["low"], row["high"]) == (one.value, one.low, one.high)
            assert row["p_value"] == correlation.correlation_p_value(xa, ya, method=method)


def test_random_labeller_worked_example_and_simulation():
    frame = long_frame({"a": ["A", "A"], "b": ["A", "B"]})
    got = judges.random_labeller(frame, labels=["A", "B"], n_boot=0).set_index("metric")
    # pi = (3/4, 1/4). accuracy: a -> 3/4, b (tie) -> 1/2. LOO: a -> 3/4, b -> (1/4 + 3/4) / 2.
    assert got.loc["accuracy", "value"] == pytest.approx(0.625)
    assert got.loc["loo_outer", "value"] == pytest.approx(0.625)
    uni = judges.random_labeller(frame, labels=["A", "B"], distribution="uniform", n_boot=0)
    assert uni.set_index("metric").loc["accuracy", "value"] == pytest.approx(0.5)
    # the closed form is the mean of judge_vs_majority over many seeded random labellers
    human, _ = random_study(5, 50, (2, 3, 4))
    lc = LabelCounts.from_frames(long_frame(human), labels=[1, 2, 3, 4, 5])
    pi = lc.human.sum(axis=0) / lc.human.sum()
    rng = np.random.default_rng(0)
    draws = []  # 400 random labellers, each a judge of its own name, counted in one pass
    for j in range(400):
        draw = {i: [int(rng.choice([1, 2, 3, 4, 5], p=pi))] for i in human}
        draws.append(judge_frame(draw, name=f"random{j}"))
    crowd = as_label_counts(long_frame(human), pd.concat(draws), labels=[1, 2, 3, 4, 5])
    sims = []
    for j in range(400):
        vs = judges.judge_vs_majority(crowd, judge=f"random{j}", n_boot=0)
        sims.append(vs.set_index("metric").loc["accuracy", "value"])
    closed = judges.random_labeller(lc, n_boot=0).set_index("metric").loc["accuracy", "value"]
    assert np.mean(sims) == pytest.approx(closed, abs=3 * np.std(sims) / 20)


def test_judge_sample_agreement_treats_samples_as_raters():
    rows = [
        ("llm", "i1", 0, "A"),
        ("llm", "i1", 1, "A"),
        ("llm", "i1", 2, "B"),
        ("llm", "i2", 0, "B"),
        ("llm", "i2", 1, "B"),
        ("llm", "i2", 2, "B"),
        ("one", "i1", 0, "A"),
        ("one", "i2", 0, "B"),
    ]
    frame = pd.DataFrame(rows, columns=["judge", "input", "sample", "label"])
    got = judges.judge_sample_agreement(frame, key=("input",), labels=["A", "B"], n_boot=0)
    llm = got[got["judge"] == "llm"].set_index("metric")
    assert llm.loc["percentage_agreement", "value"] == pytest.approx((2 / 3 + 1) / 2)
    wide = np.array([["A", "A", "B"], ["B", "B", "B"]], dtype=object)
    ref = krippendorff.alpha(
        reliability_data=np.vectorize({"A": 0, "B": 1}.get)(wide).T.astype(float),
        level_of_measurement="nominal",
    )
    assert llm.loc["krippendorff_alpha", "value"] == pytest.approx(ref, abs=1e-12)
    assert (llm["n_samples"] == 3).all()
    one = got[got["judge"] == "one"]
    assert one["value"].isna().all() and one["reason"].str.contains("two or more samples").all()
    with pytest.raises(ValueError, match="more than once"):
        judges.judge_sample_agreement(pd.concat([frame, frame]), key=("input",))
    single = frame[frame["judge"] == "one"]  # one sample per item: checked, not counted
    with pytest.raises(ValueError, match="outside the declared label set"):
        judges.judge_sample_agreement(single, key=("input",), labels=["A"])
