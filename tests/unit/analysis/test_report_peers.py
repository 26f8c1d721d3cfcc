"""The report carries the peers' statistics and worker-weighted labels, in JSON, text and HTML."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import agreement as ag
from analysis.render import render_html, render_text
from analysis.report import Property, build_report


def study(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(30):
        for w in range(3 + (i % 2)):  # 3 or 4 labels per item: classic Fleiss is undefined
            rows.append((i, f"w{w}", int(np.clip(3 + rng.integers(-1, 2), 1, 5))))
    ann = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    jud = pd.DataFrame(
        [(i, "llm", int(rng.integers(2, 5))) for i in range(30) for _ in range(2)],
        columns=["item", "judge", "label"],
    )
    return ann, jud


def test_report_sections_match_the_analysis_functions():
    ann, jud = study()
    prop = Property("q", "ordinal", (1, 2, 3, 4, 5))
    rep = build_report(ann, [prop], judges=jud, n_boot=20, worker_models=True)
    sec = rep["properties"][0]
    fleiss = next(r for r in sec["reliability"] if r["metric"] == "fleiss_kappa")
    assert fleiss["value"] == pytest.approx(
        ag.fleiss_kappa(ann, labels=[1, 2, 3, 4, 5], n_boot=0).value
    )
    corr = sec["judges"][0]["correlations"]
    assert {r["aggregate"] for r in corr} == {"median", "mean"}
    assert all(r["p_value"] is not None and 0 <= r["p_value"] <= 1 for r in corr)
    extra = sec["judges_extra"]
    assert {(r["distribution"], r["metric"]) for r in extra["random_labeller"]} == {
        ("human", "accuracy"),
        ("human", "loo_outer"),
        ("uniform", "accuracy"),
        ("uniform", "loo_outer"),
    }
    samples = {r["metric"]: r for r in extra["samples"]}
    assert samples["percentage_agreement"]["n_samples"] == 2
    assert samples["percentage_agreement"]["value"] == pytest.approx(
        ag.percentage_agreement(jud.rename(columns={"judge": "annotator"}), n_boot=0).value
    )
    workers = sec["workers"]
    assert [m["method"] for m in workers["methods"]] == ["dawid_skene", "mace"]
    assert {w["worker"] for w in workers["workers"]} == {"w0", "w1", "w2", "w3"}
    assert sum(d["count"] for d in workers["methods"][0]["distribution"]) == 30
    text = render_text(rep)
    assert "spearman with human mean; p = " in text
    assert "Random-labeller baseline" in text and "Dawid-Skene" in text
    html = render_html(rep)
    assert "Worker-weighted labels" in html and "Agreement among a judge" in html
    assert "MACE competence" in html


def test_one_sample_per_judge_and_missing_crowd_kit_are_explained(monkeypatch):
    import sys

    ann, jud = study(1)
    jud = jud.drop_duplicates(["item"])
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setattr("analysis.report_judges.crowd_kit_available", lambda: False)
    rep = build_report(
        ann, [Property("q", "ordinal", (1, 2, 3, 4, 5))], judges=jud, n_boot=0, worker_models=True
    )
    sec = rep["properties"][0]
    assert all("two or more samples" in r["reason"] for r in sec["judges_extra"]["samples"])
    assert "humeval[crowd]" in sec["workers"]["reason"]
    html = render_html(rep)
    assert "humeval[crowd]" in html


def test_worker_models_are_computed_on_request_only():
    """MACE's restarts take seconds to minutes: the report runs them only when asked, and
    says how to ask; with one label per item there is no reliability to tell."""
    ann, jud = study(1)
    sec = build_report(ann, [Property("q", "ordinal", (1, 2, 3, 4, 5))], n_boot=0)["properties"][0]
    assert "worker_models=true" in sec["workers"]["reason"] and "methods" not in sec["workers"]
    single = ann.drop_duplicates(["item"])
    rep = build_report(
        single, [Property("q", "ordinal", (1, 2, 3, 4, 5))], n_boot=0, worker_models=True
    )
    assert "two or more labels" in rep["properties"][0]["workers"]["reason"]


def test_records_are_plain_python_with_none_for_every_missing_value():
    from analysis.report_base import frame_records

    frame = pd.DataFrame(
        {
            "metric": ["a", "b", None],
            "value": pd.array([0.5, None, 1.0], dtype="Float64"),
            "low": [np.nan, 0.25, np.inf],
            "n": np.array([3, 0, 2], dtype=np.int64),
            "ok": np.array([True, False, True]),
        }
    )
    got = frame_records(frame)
    assert got == [
        {"metric": "a", "value": 0.5, "low": None, "n": 3, "ok": True},
        {"metric": "b", "value": None, "low": 0.25, "n": 0, "ok": False},
        {"metric": None, "value": 1.0, "low": None, "n": 2, "ok": True},
    ]
    assert [type(v) for v in got[0].values()] == [str, float, type(None), int, bool]
    assert frame_records(frame.iloc[:0]) == []
