"""Tests of analysis.aggregation: data model, votes, win rates, bootstrap, position bias, ORA."""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from analysis import aggregation as agg
from analysis import counts, estimates, pairwise
from analysis.counts import LabelCounts
from analysis.estimates import Estimate


def long_frame(items: dict) -> pd.DataFrame:
    rows = [(i, f"r{j}", lab) for i, labs in items.items() for j, lab in enumerate(labs)]
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


# ---------------------------------------------------------------- data model


def test_label_counts_encoding_and_validation():
    ann = long_frame({"b": [1, 2, 2], "a": [3, None, 3]})
    jud = pd.DataFrame({"item": ["a", "zzz", "b"], "judge": ["j", "j", "j"], "label": [1, 2, 2]})
    lc = LabelCounts.from_frames(ann, jud, labels=[1, 2, 3, 4])
    assert list(lc.items) == ["a", "b"]  # sorted; the missing label is dropped
    assert lc.human.tolist() == [[0, 0, 2, 0], [1, 2, 0, 0]]
    assert lc.judges["j"].tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]  # unknown item ignored
    with pytest.raises(ValueError, match="outside the declared label set"):
        LabelCounts.from_frames(ann, labels=[1, 2])
    no_name = LabelCounts.from_frames(ann, jud.drop(columns="judge"))
    assert list(no_name.judges) == ["judge"]
    with pytest.raises(ValueError, match="several judges"):
        two = pd.concat([jud, jud.assign(judge="k")])
        LabelCounts.from_frames(ann, two).judge_counts(None)


def test_label_counts_same_for_arrow_text_as_for_objects():
    """Items held by pyarrow in several chunks (Arrow's dictionary encoding) give the counts of
    the same items as Python objects (pandas' factorize)."""
    arrow = pd.StringDtype("pyarrow", na_value=np.nan)
    items = ["é", "b", "Z", "b", "a10", "a9", "é", "b"]
    labels = [1, 2, 2, 3, 1, 1, 2, None]
    part = len(items) // 2
    frames = {
        "object": pd.DataFrame({"item": pd.Series(items, dtype=object), "label": labels}),
        "arrow": pd.DataFrame(
            {
                "item": pd.concat(
                    [pd.Series(items[:part], dtype=arrow), pd.Series(items[part:], dtype=arrow)],
                    ignore_index=True,
                ),
                "label": labels,
            }
        ),
    }
    assert frames["arrow"]["item"].array.__arrow_array__().num_chunks == 2
    jud = pd.DataFrame({"item": ["b", "é", "x"], "judge": "j", "label": [3, 3, 1]})
    got = {k: LabelCounts.from_frames(f, jud, labels=[1, 2, 3]) for k, f in frames.items()}
    assert list(got["arrow"].items) == list(got["object"].items) == ["Z", "a10", "a9", "b", "é"]
    assert got["arrow"].items.name == "item"
    assert got["arrow"].human.tolist() == got["object"].human.tolist()
    assert got["arrow"].human.tolist() == [[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 1, 1], [1, 1, 0]]
    assert got["arrow"].judges["j"].tolist() == got["object"].judges["j"].tolist()


def test_label_counts_in_chunks_of_rows_equal_one_chunk(monkeypatch):
    human = {f"i{i}": [1 + (i * j) % 4 for j in range(1 + i % 5)] for i in range(40)}
    ann = long_frame(human).sample(frac=1.0, random_state=3)
    whole = LabelCounts.from_frames(ann, labels=[1, 2, 3, 4])
    monkeypatch.setattr(counts, "CHUNK_ROWS", 7)
    chunked = LabelCounts.from_frames(ann, labels=[1, 2, 3, 4])
    assert list(chunked.items) == list(whole.items)
    assert np.array_equal(chunked.human, whole.human) and chunked.human.sum() == len(ann)
    bad = ann.copy()
    bad.iloc[30, bad.columns.get_loc("label")] = 9  # in the fifth chunk
    with pytest.raises(ValueError, match=r"outside the declared label set \[1, 2, 3, 4\]: \[.*9"):
        LabelCounts.from_frames(bad, labels=[1, 2, 3, 4])


def test_pivot_labels():
    ann = pd.DataFrame({"item": ["x", "x", "y"], "annotator": ["u", "v", "v"], "label": [1, 2, 3]})
    m = counts.pivot_labels(ann)
    assert m.loc["x", "u"] == 1 and m.loc["y", "v"] == 3 and np.isnan(m.loc["y", "u"])
    with pytest.raises(ValueError, match="more than one label"):
        counts.pivot_labels(pd.concat([ann, ann.iloc[:1]]))


def test_estimate_undefined_has_reason():
    e = Estimate.undefined("why", n=3)
    assert e.value is None and not e.defined and e.reason == "why" and e.n == 3
    assert e.as_dict("x_")["x_reason"] == "why"


# ---------------------------------------------------------------- majority, Likert


def test_majority_vote_reports_ties():
    ann = long_frame({"a": ["x", "x", "y"], "b": ["x", "y"], "c": ["z", "z", "y", "y", "x"]})
    mv = agg.majority_vote(ann).set_index("item")
    assert mv.loc["a", "label"] == "x" and not mv.loc["a", "tied"]
    assert mv.loc["a", "share"] == pytest.approx(2 / 3)
    assert pd.isna(mv.loc["b", "label"]) and mv.loc["b", "tied"] and mv.loc["b", "n_modes"] == 2
    assert pd.isna(mv.loc["c", "label"]) and mv.loc["c", "top_count"] == 2
    modes = agg.modal_labels(ann)
    assert sorted(modes[modes["item"] == "c"]["label"]) == ["y", "z"]
    assert modes[modes["item"] == "a"]["label"].tolist() == ["x"]


def test_likert_summary_against_statistics_module():
    rng = np.random.default_rng(0)
    items = {
        i: [int(v) for v in rng.integers(1, 6, size=int(rng.integers(1, 7)))] for i in range(200)
    }
    got = agg.likert_summary(long_frame(items), labels=[1, 2, 3, 4, 5]).set_index("item")
    for i, labs in items.items():
        assert got.loc[i, "mean"] == pytest.approx(statistics.mean(labs))
        assert got.loc[i, "median"] == statistics.median(labs)
        assert got.loc[i, "median_low"] == statistics.median_low(labs)
        assert got.loc[i, "median_high"] == statistics.median_high(labs)
        assert got.loc[i, "std"] == pytest.approx(statistics.pstdev(labs))


# ---------------------------------------------------------------- soft voting, win rates


def test_soft_vote_by_hand_and_threshold_boundary():
    ann = long_frame(
        {
            # p_a = (2 + 0.5) / 4 = 0.625, p_b = 0.375 -> |diff| 0.25 -> A
            "p": ["A", "A", "B", "tie"],
            # 5 A, 4 B, 1 both_good: p_a = 0.55, p_b = 0.45, diff exactly 0.1 -> tie at t = 0.1
            "q": ["A"] * 5 + ["B"] * 4 + ["both_good"],
            # only tie-like votes: (1/2, 1/2) -> tie
            "r": ["both_bad", "tie"],
            # 1 A, 3 B -> p_b = 0.75 -> B
            "s": ["A", "B", "B", "B"],
        }
    )
    sv = agg.soft_vote(ann).set_index("item")
    assert sv.loc["p", "p_a"] == pytest.approx(0.625) and sv.loc["p", "p_b"] == pytest.approx(0.375)
    assert sv["outcome"].to_dict() == {"p": "A", "q": "tie", "r": "tie", "s": "B"}
    assert sv.loc["q", "p_a"] - sv.loc["q", "p_b"] > 0.1  # floating point says just above
    assert agg.soft_vote(ann, threshold=0.05).set_index("item").loc["q", "outcome"] == "A"
    assert agg.soft_vote(ann, threshold=0.25).set_index("item").loc["p", "outcome"] == "tie"


def test_pairwise_win_rates_orients_pairs():
    outcomes = pd.DataFrame({"item": range(6), "outcome": ["A", "A", "B", "tie", "B", "A"]})
    pairs = pd.DataFrame(
        {
            "item": range(6),
            "system_a": ["m1", "m1", "m1", "m2", "m2", "m3"],
            "system_b": ["m2", "m2", "m2", "m1", "m1", "m1"],
        }
    )
    res = pairwise.pairwise_win_rates(outcomes, pairs, n_boot=200).set_index(
        ["system_1", "system_2"]
    )
    # m1 vs m2: items 0,1 m1 wins; 2 m2 wins; 3 tie; 4 (m2 shown as A, B wins) m1 wins
    row = res.loc[("m1", "m2")]
    assert (row["wins_1"], row["wins_2"], row["ties"], row["n_items"]) == (3, 1, 1, 5)
    assert row["expected_win_rate"] == pytest.approx((3 + 0.5) / 5)
    assert row["win_rate"] == pytest.approx(0.6) and row["tie_rate"] == pytest.approx(0.2)
    assert row["expected_win_rate_low"] <= 0.7 <= row["expected_win_rate_high"]
    # m3 (as A) beat m1 -> canonical (m1, m3): m1 lost
    assert res.loc[("m1", "m3"), "wins_2"] == 1 and res.loc[("m1", "m3"), "expected_win_rate"] == 0


# ---------------------------------------------------------------- bootstrap engine


def test_find_patterns_groups_rows():
    m = np.array([[1, 2], [0, 0], [1, 2], [3, 1]])
    pat = counts.find_patterns(m)
    assert pat.freq.sum() == 4 and len(pat.freq) == 3
    assert (pat.rows[pat.inverse] == m).all()


def test_bootstrap_counts_are_resamples_of_n_items():
    freq = np.array([5, 1, 30, 4])
    w = estimates.bootstrap_counts(freq, n_boot=500, seed=1)
    assert w.shape == (500, 4) and (w.sum(axis=1) == 40).all()
    assert (estimates.bootstrap_counts(freq, 500, seed=1) == w).all()
    assert not (estimates.bootstrap_counts(freq, 500, seed=2) == w).all()
    # each pattern's count is Binomial(40, freq/40): mean freq
    assert w.mean(axis=0) == pytest.approx(freq, rel=0.1)


def test_memoised_bootstrap_counts_are_seeded_blocks_shared_without_copies(monkeypatch):
    freq = np.random.default_rng(3).integers(1, 50, size=777)
    estimates.clear_bootstrap_cache()
    w = estimates.bootstrap_counts(freq, n_boot=250, seed=5)
    # blocks of 100, 100 and 50 resamples, each one multinomial call of a child of the seed
    n = freq.sum()
    children = np.random.SeedSequence(5).spawn(3)
    blocks = [np.random.default_rng(c).multinomial(n, freq / n, size=s) for c, s in
              zip(children, (100, 100, 50), strict=True)]  # fmt: skip
    assert (w == np.vstack(blocks)).all()
    # the memoised matrix itself, read-only: a statistic's resamples cost no copy
    again = estimates.bootstrap_counts(freq, n_boot=250, seed=5)
    assert np.shares_memory(w, again) and not w.flags.writeable
    # the same draws in parallel (a thread per block) and in turn
    estimates.clear_bootstrap_cache()
    monkeypatch.setattr(estimates, "PARALLEL_CELLS", 0)
    monkeypatch.setattr(estimates, "_cores", lambda: 3)
    assert (estimates.bootstrap_counts(freq, n_boot=250, seed=5) == w).all()
    # and unmemoised, a block's rows drawn a few at a time, as for matrices too large to keep
    monkeypatch.setattr(estimates, "BOOTSTRAP_CACHE_CELLS", 777 * 7)
    values = np.random.default_rng(4).normal(size=(777, 2))
    assert np.allclose(estimates.bootstrap_sums(values, freq, 250, seed=5), w @ values)
    estimates.clear_bootstrap_cache()


@pytest.mark.parametrize("seed", [0, np.random.default_rng(0)])
def test_bootstrap_of_a_mean_matches_naive_resampling(seed):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=400).astype(float)  # per-item values with repeats
    pat = counts.find_patterns(x[:, None].astype(np.int64))
    sums = estimates.bootstrap_sums(pat.rows.astype(float), pat.freq, n_boot=4000, seed=seed)
    means = sums[:, 0] / len(x)
    naive = np.array([x[rng.integers(0, len(x), len(x))].mean() for _ in range(4000)])
    # the standard error of a mean is sd / sqrt(n); both bootstraps estimate it
    se = x.std() / np.sqrt(len(x))
    assert means.std() == pytest.approx(se, rel=0.08)
    assert naive.std() == pytest.approx(se, rel=0.08)
    assert means.mean() == pytest.approx(x.mean(), abs=3 * se / np.sqrt(4000) + 1e-3)


def test_estimate_from_sums_reports_undefined_point_and_partial_resamples():
    vals = np.array([[1.0, 1.0], [0.0, 0.0]])  # ratio of column sums; second pattern has 0/0
    est = estimates.estimate_from_sums(
        vals, np.array([1, 9]), lambda s: s[:, 0] / s[:, 1], n=10, n_boot=400, seed=0
    )
    assert est.value == 1.0
    # resamples without the first pattern give 0/0: (9/10)^10 ~ 35% of them
    assert 0 < est.n_boot < 400 and "resamples in which it was defined" in est.reason
    bad = estimates.estimate_from_sums(
        vals, np.array([0, 5]), lambda s: s[:, 0] / s[:, 1], n=5, undefined="nothing to divide"
    )
    assert bad.value is None and bad.reason == "nothing to divide"


# ---------------------------------------------------------------- position bias


def test_holm_matches_statsmodels_and_the_worked_example():
    from statsmodels.stats.multitest import multipletests

    # by hand: sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04; running max 0.06
    assert pairwise.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    rng = np.random.default_rng(7)
    for p in (rng.uniform(size=9), rng.uniform(0, 0.05, size=30), [0.2, 0.2, 0.01, 0.9, 0.6]):
        reference = multipletests(p, method="holm")[1]
        assert pairwise.holm(p) == pytest.approx(reference, abs=1e-12)
    assert pairwise.holm([0.5, 0.7]).tolist() == [1.0, 1.0]  # capped at 1
    assert pairwise.holm([]).tolist() == []


def test_position_bias_counts_and_binomial_test():
    frame = pd.DataFrame(
        {
            "annotator": ["u"] * 10 + ["v"] * 4 + ["w"] * 2,
            "raw": ["left"] * 8
            + ["right"] * 2
            + ["left", "right", "tie", "both_bad"]
            + ["tie", "tie"],
        }
    )
    res = pairwise.position_bias(frame)
    overall = res[res["scope"] == "overall"].iloc[0]
    assert (overall["n"], overall["n_left"], overall["n_excluded"]) == (12, 9, 4)
    assert overall["p_value"] == pytest.approx(binomtest(9, 12, 0.5).pvalue)
    u = res[res["rater"] == "u"].iloc[0]
    assert u["share_left"] == pytest.approx(0.8)
    assert u["p_value"] == pytest.approx(binomtest(8, 10, 0.5).pvalue)
    # by hand: P(X <= 2 or X >= 8), X ~ Bin(10, 1/2) = 2 * (1 + 10 + 45) / 1024
    assert u["p_value"] == pytest.approx(112 / 1024)
    w = res[res["rater"] == "w"].iloc[0]
    assert w["n"] == 0 and pd.isna(w["p_value"]) and "nothing to test" in w["reason"]
    same = pairwise.position_bias(
        frame.assign(chose_left=frame["raw"].map({"left": True, "right": False})).drop(
            columns="raw"
        )
    )
    assert same["n_left"].tolist() == res["n_left"].tolist()


def test_position_bias_p_values_are_scipys_binomial_test_for_every_count():
    """Every number of left choices of up to 40 sided choices, one rater each."""
    rows = [
        (f"r{n}-{k}", "left" if i < k else "right")
        for n in range(1, 41)
        for k in range(n + 1)
        for i in range(n)
    ]
    got = pairwise.position_bias(pd.DataFrame(rows, columns=["annotator", "raw"]))
    got = got[got["scope"] == "rater"]
    expected = [
        binomtest(int(k), int(n), 0.5).pvalue for k, n in zip(got["n_left"], got["n"], strict=True)
    ]
    np.testing.assert_allclose(got["p_value"].to_numpy(dtype=float), expected, rtol=1e-12)


# ---------------------------------------------------------------- ORA prioritisation check


def test_prioritisation_check_perfect_and_random():
    n, ties = 200, 50
    frame = pd.DataFrame({"priority": np.arange(n, 0, -1), "is_tie": np.arange(n) >= n - ties})
    res = pairwise.prioritisation_check(frame, n_orders=2000, seed=1).set_index("k_percent")
    # ties have the lowest priority: none among the top 75%
    assert (res.loc[[10.0, 50.0, 70.0], "tie_rate"] == 0).all()
    assert res.loc[100.0, "tie_rate"] == res.loc[100.0, "random_mean"] == ties / n
    assert res.loc[100.0, "random_std"] == 0  # every order contains all items
    # top 10% of a random order: hypergeometric(50 ties of 200, draw 20): mean 1/4,
    # sd sqrt(20 * 1/4 * 3/4 * 180/199) / 20
    sd = np.sqrt(20 * 0.25 * 0.75 * (180 / 199)) / 20
    assert res.loc[10.0, "random_mean"] == pytest.approx(0.25, abs=4 * sd / np.sqrt(2000))
    assert res.loc[10.0, "random_std"] == pytest.approx(sd, rel=0.06)
    assert res.loc[10.0, "n_top"] == 20


def test_prioritisation_random_orders_match_permutations():
    rng = np.random.default_rng(5)
    is_tie = rng.random(60) < 0.3
    frame = pd.DataFrame({"priority": rng.random(60), "is_tie": is_tie})
    res = pairwise.prioritisation_check(frame, percents=[25], n_orders=4000, seed=2).iloc[0]
    perm = np.array([is_tie[rng.permutation(60)[:15]].mean() for _ in range(4000)])
    assert res["random_mean"] == pytest.approx(perm.mean(), abs=0.01)
    assert res["random_std"] == pytest.approx(perm.std(ddof=1), rel=0.08)
