"""Bradley-Terry ranking (``ranking.bradley_terry``): worked examples solved by hand, the
implementation (choix) against evalica to the digit, the bootstrap over inputs and its batched
refit, the rank rule and undefined cases."""

import math

import evalica
import numpy as np
import pandas as pd
import pytest

from protocol.replay.simulation import PAPER_SYSTEMS, load_mqm
from ranking import ELO_BASE, ELO_SCALE, bradley_terry, fit_log_strengths
from ranking.bradley_terry import PRIOR, refit_batch, win_matrix
from tests.conftest import MQM

MQM_FILE = MQM


def _frame(rows: list[tuple[str, str, str, int]], with_input: bool = False) -> pd.DataFrame:
    """(system_a, system_b, outcome, times) -> one comparison per row."""
    out = [(a, b, o) for a, b, o, times in rows for _ in range(times)]
    frame = pd.DataFrame(out, columns=["system_a", "system_b", "outcome"])
    if with_input:
        frame["input"] = np.arange(len(frame))
    return frame


def test_worked_example_three_systems_with_strengths_4_2_1():
    """Observed win shares equal p_i / (p_i + p_j) for p = (4, 2, 1): X beats Y 2 of 3, Y
    beats Z 2 of 3, X beats Z 4 of 5. Then every likelihood equation
    wins_i = sum_j n_ij p_i / (p_i + p_j) holds, so the MLE is theta = log p centred:
    (log 2, 0, -log 2); on the Elo-like scale 1000 +- 400 log10(2) = 1000 +- 120.412."""
    frame = _frame(
        [
            ("X", "Y", "A", 2),
            ("X", "Y", "B", 1),
            ("Y", "Z", "A", 2),
            ("Y", "Z", "B", 1),
            ("Z", "X", "B", 4),  # written the other way round: X (as B) wins
            ("Z", "X", "A", 1),
        ]
    )
    log = bradley_terry(frame, n_boot=0, scale="log")
    assert list(log["system"]) == ["X", "Y", "Z"]
    np.testing.assert_allclose(log["score"], [math.log(2), 0.0, -math.log(2)], atol=1e-9)
    elo = bradley_terry(frame, n_boot=0)
    np.testing.assert_allclose(elo["score"], [1120.411998, 1000.0, 879.588002], atol=1e-6)
    assert ELO_SCALE * math.log(2) == pytest.approx(400 * math.log10(2))
    assert list(elo["rank"]) == [1, 2, 3]  # no intervals: the plain rank by score
    assert list(elo["wins"]) == [6, 3, 2]
    assert list(elo["losses"]) == [2, 3, 6]
    assert list(elo["n"]) == [8, 6, 8]
    assert elo["low"].isna().all() and elo.attrs["reason"] == ""


def test_a_tie_is_half_a_win_to_each_side():
    """A beats B 3 times, loses once and ties twice: wins 3 + 1 = 4 against 1 + 1 = 2, so
    theta_A - theta_B = log(4 / 2) = log 2."""
    frame = _frame([("A", "B", "A", 3), ("A", "B", "B", 1), ("A", "B", "tie", 2)])
    out = bradley_terry(frame, n_boot=0, scale="log").set_index("system")
    assert out.loc["A", "score"] - out.loc["B", "score"] == pytest.approx(math.log(2), abs=1e-9)
    assert out.loc["A", "score"] + out.loc["B", "score"] == pytest.approx(0, abs=1e-12)
    assert out.loc["A", "ties"] == 2 and out.loc["A", "wins"] == 3 and out.loc["A", "n"] == 6
    only_ties = bradley_terry(_frame([("A", "B", "tie", 3)]), n_boot=0, scale="log")
    np.testing.assert_allclose(only_ties["score"], [0.0, 0.0], atol=1e-12)


def _random_comparisons(seed: int, k: int = 7, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = [f"s{i}" for i in range(k)]
    strength = rng.normal(size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1 / (1 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(n)
    outcome = np.where(u < 0.2, "tie", np.where(rng.random(n) < p, "A", "B"))
    return pd.DataFrame(
        {
            "input": rng.integers(0, n // 4, n),
            "system_a": np.array(names)[a],
            "system_b": np.array(names)[b],
            "outcome": outcome,
        }
    )


def _evalica_log(frame: pd.DataFrame, weights=None) -> pd.Series:
    winner = {"A": evalica.Winner.X, "B": evalica.Winner.Y, "tie": evalica.Winner.Draw}
    result = evalica.bradley_terry(
        frame["system_a"].tolist(),
        frame["system_b"].tolist(),
        [winner[o] for o in frame["outcome"]],
        weights=weights,
        tie_weight=0.5,
        tolerance=1e-13,
        limit=100_000,
    )
    log = np.log(result.scores)
    return log - log.mean()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_choix_agrees_with_evalica_to_the_digit(seed):
    frame = _random_comparisons(seed)
    ours = bradley_terry(frame, n_boot=0, scale="log").set_index("system")["score"]
    theirs = _evalica_log(frame).reindex(ours.index)
    np.testing.assert_allclose(ours.to_numpy(), theirs.to_numpy(), atol=1e-8, rtol=0)


def _mqm_comparisons() -> pd.DataFrame:
    """WMT21 en-de, the paper's eleven systems: per segment and pair, the higher MQM score
    (the smaller penalty) wins, equal scores tie."""
    wide = load_mqm(MQM_FILE, list(PAPER_SYSTEMS))
    frames = []
    for i, x in enumerate(wide.columns):
        for y in wide.columns[i + 1 :]:
            sx, sy = wide[x].to_numpy(), wide[y].to_numpy()
            frames.append(
                pd.DataFrame(
                    {
                        "input": wide.index,
                        "system_a": x,
                        "system_b": y,
                        "outcome": np.where(sx > sy, "A", np.where(sx < sy, "B", "tie")),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def test_wmt21_ranking_matches_evalica_and_its_intervals_hold_the_scores():
    frame = _mqm_comparisons()
    assert frame["input"].nunique() == 527 and len(frame) == 527 * 55
    ours = bradley_terry(frame, n_boot=0, scale="log").set_index("system")["score"]
    theirs = _evalica_log(frame).reindex(ours.index)
    np.testing.assert_allclose(ours.to_numpy(), theirs.to_numpy(), atol=1e-8, rtol=0)
    ranked = bradley_terry(frame, n_boot=200, seed=0)
    assert ranked.attrs["n_inputs"] == 527 and ranked.attrs["n_boot_failed"] == 0
    assert ranked["system"].iloc[0] == "ref-C" and ranked["system"].iloc[-1] == "eTranslation"
    assert ((ranked["low"] < ranked["score"]) & (ranked["score"] < ranked["high"])).all()
    assert ranked["rank"].iloc[0] == 1 and ranked["rank"].iloc[-1] > 5
    assert ranked["score"].mean() == pytest.approx(ELO_BASE)


def test_the_bootstrap_resamples_inputs_and_matches_a_by_hand_refit():
    """Two resamples of the inputs, redrawn with the same generator and refitted by evalica
    with each comparison weighted by its input's multiplicity, give the interval's ends."""
    frame = _random_comparisons(3)
    n_inputs = frame["input"].nunique()
    codes, _ = pd.factorize(frame["input"])
    systems = sorted(set(frame["system_a"]) | set(frame["system_b"]))
    rng = np.random.default_rng(7)
    refits = []
    for _ in range(2):
        counts = np.bincount(rng.integers(0, n_inputs, n_inputs), minlength=n_inputs)
        weights = counts[codes].astype(float)
        keep = weights > 0
        by_hand = _evalica_log(frame[keep], weights=weights[keep].tolist()).reindex(systems)
        idx = {s: i for i, s in enumerate(systems)}
        wins = win_matrix(
            frame["system_a"].map(idx).to_numpy(),
            frame["system_b"].map(idx).to_numpy(),
            frame["outcome"].to_numpy(),
            len(systems),
            weights,
        )
        np.testing.assert_allclose(fit_log_strengths(wins), by_hand.to_numpy(), atol=1e-8)
        refits.append(by_hand.to_numpy())
    low, high = np.percentile(np.array(refits), [2.5, 97.5], axis=0)
    two = bradley_terry(frame, n_boot=2, seed=np.random.default_rng(7), scale="log")
    two = two.set_index("system").reindex(systems)
    np.testing.assert_allclose(two["low"].to_numpy(), low, atol=1e-8)
    np.testing.assert_allclose(two["high"].to_numpy(), high, atol=1e-8)


def test_intervals_are_seeded_and_ranks_count_systems_entirely_above():
    frame = _random_comparisons(4, k=5, n=600)
    first = bradley_terry(frame, n_boot=100, seed=11)
    again = bradley_terry(frame, n_boot=100, seed=11)
    pd.testing.assert_frame_equal(first, again)
    other = bradley_terry(frame, n_boot=100, seed=12)
    assert not np.allclose(first["low"], other["low"])
    low, high = first["low"].to_numpy(), first["high"].to_numpy()
    for i, rank in enumerate(first["rank"]):
        assert rank == 1 + sum(low[j] > high[i] for j in range(len(first)))
    # the same data without inputs: every row its own input, a different resampling
    no_input = bradley_terry(frame.drop(columns="input"), n_boot=100, seed=11)
    assert no_input.attrs["n_inputs"] == len(frame)
    pd.testing.assert_series_equal(first["score"], no_input["score"])


def test_overlapping_intervals_share_a_rank():
    """Two systems that beat each other equally often and both beat a third: the first two
    overlap (rank 1 each), the third lies entirely below both (rank 3)."""
    rows = [("P", "Q", "A", 10), ("P", "Q", "B", 10), ("P", "R", "A", 18), ("P", "R", "B", 2)]
    rows += [("Q", "R", "A", 18), ("Q", "R", "B", 2)]
    out = bradley_terry(_frame(rows, with_input=True), n_boot=200, seed=0).set_index("system")
    assert out.loc["P", "rank"] == 1 and out.loc["Q", "rank"] == 1
    assert out.loc["R", "rank"] == 3


def test_no_finite_estimate_is_undefined_with_the_reason_without_a_prior():
    never_lost = _frame([("X", "Y", "A", 3), ("Y", "Z", "A", 2), ("Y", "Z", "B", 1)])
    out = bradley_terry(never_lost, n_boot=50, prior=0)
    assert out["score"].isna().all() and out["rank"].isna().all()
    assert "X never lost a comparison" in out.attrs["reason"] and out.attrs["prior"] == 0
    never_won = bradley_terry(_frame([("X", "Y", "B", 2), ("Y", "Z", "tie", 1)]), n_boot=0, prior=0)
    assert "X never won a comparison" in never_won.attrs["reason"]
    one = bradley_terry(pd.DataFrame(columns=["system_a", "system_b", "outcome"]), n_boot=0)
    assert one.empty and "at least two systems" in one.attrs["reason"]
    with pytest.raises(ValueError, match="prior"):
        bradley_terry(never_lost, n_boot=0, prior=-1)


def test_a_system_that_never_lost_gets_a_score_from_the_prior_worked_example():
    """X beats Y three times and never loses. With ½ virtual win each way (one virtual tie),
    the likelihood equation of two systems gives p_X / p_Y = (3 + ½) / ½ = 7: theta_X -
    theta_Y = log 7, on the Elo-like scale 400 log10(7) = 338.04 points apart."""
    out = bradley_terry(_frame([("X", "Y", "A", 3)]), n_boot=0, scale="log").set_index("system")
    assert out.loc["X", "score"] - out.loc["Y", "score"] == pytest.approx(math.log(7), abs=1e-9)
    assert out.attrs["prior"] == PRIOR == 0.5
    assert "X never lost a comparison" in out.attrs["reason"]
    assert "regularising prior" in out.attrs["reason"]
    elo = bradley_terry(_frame([("X", "Y", "A", 3)]), n_boot=0).set_index("system")
    assert elo.loc["X", "score"] == pytest.approx(1000 + 200 * math.log10(7), abs=1e-6)
    assert list(elo["rank"]) == [1, 2] and elo.loc["X", "wins"] == 3  # counts stay real


def test_the_prior_agrees_with_choix_and_evalica_to_the_digit():
    """The regularised fit equals choix's maximum-likelihood fit of the win matrix with ½
    added to every off-diagonal cell, and evalica's fit of the comparisons plus one virtual
    tie per pair of systems (tie weight ½), to 1e-8; its bootstrap uses the same prior on
    every resample, so no resample fails."""
    import choix

    rows = [("X", "Y", "A", 3), ("X", "Z", "A", 2), ("Y", "Z", "A", 2), ("Y", "Z", "B", 1)]
    rows += [("Y", "W", "tie", 1), ("W", "Z", "B", 2), ("X", "W", "A", 1)]
    frame = _frame(rows, with_input=True)
    ours = bradley_terry(frame, n_boot=0, scale="log").set_index("system")["score"]
    assert "X never lost" in bradley_terry(frame, n_boot=0).attrs["reason"]
    systems = sorted(ours.index)
    idx = {s: i for i, s in enumerate(systems)}
    wins = win_matrix(
        frame["system_a"].map(idx).to_numpy(),
        frame["system_b"].map(idx).to_numpy(),
        frame["outcome"].to_numpy(),
        len(systems),
    )
    theirs = choix.ilsr_pairwise_dense(
        wins + 0.5 * (1 - np.eye(len(systems))), alpha=0.0, max_iter=10_000, tol=1e-12
    )
    np.testing.assert_allclose(
        ours.reindex(systems).to_numpy(), theirs - theirs.mean(), atol=1e-8, rtol=0
    )
    virtual = pd.DataFrame(
        [(a, b, "tie") for i, a in enumerate(systems) for b in systems[i + 1 :]],
        columns=["system_a", "system_b", "outcome"],
    )
    with_virtual = pd.concat([frame.drop(columns="input"), virtual], ignore_index=True)
    ev = _evalica_log(with_virtual).reindex(systems)
    np.testing.assert_allclose(ours.reindex(systems).to_numpy(), ev.to_numpy(), atol=1e-8)
    boot = bradley_terry(frame, n_boot=200, seed=0)
    assert boot.attrs["n_boot_failed"] == 0 and boot["low"].notna().all()
    assert ((boot["low"] <= boot["score"]) & (boot["score"] <= boot["high"])).all()


def test_the_prior_is_not_used_when_the_maximum_likelihood_estimate_exists():
    frame = _random_comparisons(5)
    out = bradley_terry(frame, n_boot=0, scale="log")
    assert out.attrs["prior"] == 0 and out.attrs["reason"] == ""
    pd.testing.assert_frame_equal(out, bradley_terry(frame, n_boot=0, scale="log", prior=0))


def test_resamples_without_an_estimate_are_counted_and_left_out():
    """With one comparison each way on a single input per pair, many resamples lose every
    loss of some system; they are left out and counted in the reason."""
    frame = _frame([("X", "Y", "A", 1), ("X", "Y", "B", 1), ("Y", "Z", "A", 1)], True)
    frame = pd.concat([frame, _frame([("Y", "Z", "B", 1)], True).assign(input=3)])
    out = bradley_terry(frame, n_boot=100, seed=0)
    assert out.attrs["n_boot_failed"] > 0
    assert f"{out.attrs['n_boot_failed']} of 100 resamples" in out.attrs["reason"]


def test_the_batched_refit_is_choixs_estimate_from_any_start():
    """Newton's method over a stack of win matrices gives choix's estimate to 1e-8, from a
    start far from it as well as near, with pairs never compared or won only one way; a
    matrix without an estimate (a system never lost) has no row."""
    rng = np.random.default_rng(3)
    for k in (2, 3, 7, 11):
        wins = rng.integers(1, 30, (40, k, k)) * np.exp(rng.normal(scale=2, size=(40, k, 1)))
        wins[:, np.arange(k), np.arange(k)] = 0
        wins[0, :, 0] = 0  # system 0 never lost
        if k > 2:
            wins[1:20, 0, 1] = 0  # system 0 never beat system 1
            wins[20:, 1, 2] = wins[20:, 2, 1] = 0  # systems 1 and 2 never met
        for start in (np.zeros(k), 5 * rng.normal(size=k)):
            got = refit_batch(wins, start)
            assert np.isnan(got[0]).all() and not np.isnan(got[1:]).any()
            want = np.array([fit_log_strengths(w) for w in wins[1:]])
            np.testing.assert_allclose(got[1:], want, atol=1e-8, rtol=0)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"system_a": ["a"], "system_b": ["b"]}), "'outcome' column"),
        (pd.DataFrame({"system_a": ["a"], "system_b": ["b"], "outcome": ["x"]}), "outcomes"),
        (pd.DataFrame({"system_a": ["a"], "system_b": ["a"], "outcome": ["A"]}), "different"),
    ],
)
def test_bad_comparisons_are_refused(frame, message):
    with pytest.raises(ValueError, match=message):
        bradley_terry(frame, n_boot=0)
