"""Dawid-Skene and MACE (crowd-kit) on synthetic crowds with a known spammer."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from analysis import aggregation


def crowd(seed: int = 0, n_items: int = 60, accuracy: float = 0.9) -> tuple[pd.DataFrame, dict]:
    """Three careful workers right with probability ``accuracy``; w3 answers at random."""
    rng = np.random.default_rng(seed)
    truth = {i: ["A", "B"][int(rng.integers(0, 2))] for i in range(n_items)}
    rows = []
    for i, t in truth.items():
        for w in range(4):
            careful = w < 3 and rng.random() < accuracy
            label = t if careful else ["A", "B"][int(rng.integers(0, 2))]
            rows.append((i, f"w{w}", label))
    return pd.DataFrame(rows, columns=["item", "annotator", "label"]), truth


@pytest.mark.parametrize("fit", [aggregation.dawid_skene, aggregation.mace])
def test_spammer_gets_the_lowest_reliability_and_truth_is_recovered(fit):
    frame, truth = crowd()
    model = fit(frame)
    rel = model.workers.set_index("worker")["reliability"]
    assert rel.idxmin() == "w3"
    assert rel["w3"] < 0.65 and min(rel[["w0", "w1", "w2"]]) > 0.8
    assert (model.workers["n_labels"] == 60).all()
    got = model.labels.set_index("item")["label"]
    assert (got == pd.Series(truth)).mean() >= 0.95


def test_dawid_skene_reliability_is_the_prior_weighted_confusion_diagonal():
    from crowdkit.aggregation import DawidSkene

    frame, _ = crowd(1)
    model = aggregation.dawid_skene(frame)
    ds = DawidSkene(n_iter=100).fit(frame.rename(columns={"item": "task", "annotator": "worker"}))
    for worker, rel in model.workers.set_index("worker")["reliability"].items():
        conf = ds.errors_.loc[worker]
        expected = sum(ds.priors_[c] * conf.loc[c, c] for c in ("A", "B"))
        assert rel == pytest.approx(expected, abs=1e-12)
    # the unanimous crowd: every label is right, every worker fully reliable
    unanimous = frame.assign(label=frame["item"].map(lambda i: "A" if i % 2 else "B"))
    same = aggregation.dawid_skene(unanimous)
    assert (same.workers["reliability"] > 0.99).all()
    assert (same.labels["label"] == same.labels["item"].map(lambda i: "A" if i % 2 else "B")).all()


def test_mace_is_deterministic_for_a_seed():
    frame, _ = crowd(2, accuracy=0.7)
    a, b = aggregation.mace(frame, seed=3), aggregation.mace(frame, seed=3)
    pd.testing.assert_frame_equal(a.workers, b.workers)
    pd.testing.assert_frame_equal(a.labels, b.labels)


def test_missing_crowd_kit_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    with pytest.raises(ImportError, match=r"humeval\[crowd\]"):
        aggregation.mace(crowd()[0])


def awkward_crowd(n_labels: int, n_items: int = 40) -> pd.DataFrame:
    """Workers and labels first seen out of sorted order, one worker who always gives the
    same label (so never the others), one who skips items."""
    rng = np.random.default_rng(n_labels)
    labels = list(range(n_labels, 0, -1)) if n_labels > 2 else ["B", "A"]
    rows = []
    for i in range(n_items):
        truth = labels[int(rng.integers(0, n_labels))]
        for w in ("zed", "amy", "kim", "bob"):
            if w == "bob":
                label = labels[0]
            elif w == "kim" and i % 3 == 0:
                continue
            elif rng.random() < 0.75:
                label = truth
            else:
                label = labels[int(rng.integers(0, n_labels))]
            rows.append((f"t{i}", w, label))
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


@pytest.mark.parametrize(("n_labels", "n_iter"), [(2, 1), (5, 4), (2, 100)])
def test_dawid_skene_equals_crowd_kits_own_dawid_skene(n_labels, n_iter):
    """The NumPy EM gives crowd-kit's posteriors, priors, confusion matrices and labels, after
    one round, a few, and where its stopping rule ends it."""
    from crowdkit.aggregation import DawidSkene

    frame = awkward_crowd(n_labels)
    data = frame.rename(columns={"item": "task", "annotator": "worker"})
    with warnings.catch_warnings():  # crowd-kit's pandas deprecations, not ours
        warnings.simplefilter("ignore")
        theirs = DawidSkene(n_iter=n_iter).fit(data)
    tasks, task_names = pd.factorize(data["task"])
    workers, worker_names = pd.factorize(data["worker"])
    labels, label_names = pd.factorize(data["label"], sort=True)
    shape = (len(task_names), len(worker_names), len(label_names))
    probas, priors, errors = aggregation.dawid_skene_em(
        tasks, workers, labels, shape, n_iter=n_iter
    )
    expected = theirs.probas_.reindex(index=task_names, columns=label_names).to_numpy()
    np.testing.assert_allclose(probas, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(priors, theirs.priors_.reindex(label_names), rtol=0, atol=1e-9)
    for w, worker in enumerate(worker_names):
        matrix = theirs.errors_.loc[worker].reindex(index=label_names, columns=label_names)
        np.testing.assert_allclose(errors[w], matrix.fillna(0.0), rtol=0, atol=1e-9)
    model = aggregation.dawid_skene(frame, n_iter=n_iter)
    got = model.labels.set_index("item")["label"].sort_index()
    assert got.tolist() == theirs.labels_.sort_index().tolist()
    if n_iter == 100:
        assert len(theirs.loss_history_) < 30  # it stopped by the tolerance, as ours did


@pytest.mark.parametrize("n_labels", [2, 5])
def test_mace_equals_crowd_kits_own_mace(n_labels):
    """The NumPy E-step (issue 25, item 20: MACE took most of the 12 s of worker-weighted
    labels) gives crowd-kit's labels, probabilities and competences: workers and labels
    first seen out of sorted order, one worker who never uses some labels."""
    from crowdkit.aggregation import MACE

    rng = np.random.default_rng(n_labels)
    labels = list(range(n_labels, 0, -1)) if n_labels > 2 else ["B", "A"]
    rows = []
    for i in range(40):
        truth = labels[int(rng.integers(0, n_labels))]
        for w in ("zed", "amy", "kim", "bob"):
            if w == "bob":
                label = labels[0]  # a worker who always gives the same label
            elif rng.random() < 0.75:
                label = truth
            else:
                label = labels[int(rng.integers(0, n_labels))]
            rows.append((f"t{i}", w, label))
    frame = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    # three restarts of ten iterations (the defaults are ten of fifty): each runs the same
    # E-steps, and crowd-kit's pandas E-step costs seconds per restart
    ours = aggregation.mace(frame, seed=5, n_restarts=3, n_iter=10)
    data = frame.rename(columns={"item": "task", "annotator": "worker"})
    with warnings.catch_warnings():  # crowd-kit's pandas deprecations, not ours
        warnings.simplefilter("ignore")
        theirs = MACE(n_restarts=3, n_iter=10, random_state=5).fit(data)
    competence = pd.Series(theirs.spamming_[:, 1], index=pd.factorize(data["worker"])[1])
    got = ours.workers.set_index("worker")["reliability"]
    np.testing.assert_allclose(got.to_numpy(), competence.reindex(got.index), rtol=0, atol=1e-9)
    expected = theirs.labels_.sort_index()
    assert ours.labels.set_index("item")["label"].sort_index().tolist() == expected.tolist()
