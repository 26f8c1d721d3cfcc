"""The report's judge-assisted block: JSON fields, text and HTML, for a pairwise and a
Likert property, and no block when the judge rated no item beyond the human ones."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import special

from analysis.render import render_html, render_text
from analysis.report import Property, build_report

PREF = Property("preference", "pairwise", ("A", "B", "tie"))
LIKERT = Property("quality", "ordinal", (1, 2, 3, 4, 5))
HOSTILE = "<script>alert(1)</script>"
SYSTEMS = ("s1", "s2", HOSTILE)


def pairwise_frames(n_items=900, n_human=150, seed=5, agree=0.85):
    rng = np.random.default_rng(seed)
    theta = {"s1": 0.6, "s2": 0.0, HOSTILE: -0.6}
    pairs = [("s1", "s2"), ("s1", HOSTILE), (HOSTILE, "s2")]
    items, ann, jud = [], [], []
    for i in range(n_items):
        a, b = pairs[i % 3]
        items.append({"item": i, "input_id": f"in{i}", "system_a": a, "system_b": b})
        p = special.expit(theta[a] - theta[b])
        truth = "A" if rng.random() < p else "B"
        other = "B" if truth == "A" else "A"
        if i < n_human:
            for w in range(2):
                lab = truth if rng.random() < 0.9 else other
                ann.append({"item": i, "annotator": f"w{(i + w) % 7}", "label": lab})
        jud.append({"item": i, "judge": "llm", "label": truth if rng.random() < agree else other})
    return pd.DataFrame(ann), pd.DataFrame(items), pd.DataFrame(jud)


def likert_frames(n_items=600, n_human=120, seed=6):
    rng = np.random.default_rng(seed)
    quality = {"s1": 4.0, "s2": 3.0, HOSTILE: 2.0}
    items, ann, jud = [], [], []
    for i in range(n_items):
        s = SYSTEMS[i % 3]
        items.append({"item": i, "input_id": f"in{i // 3}", "system_a": s, "system_b": None})
        q = quality[s] + rng.normal(0, 0.8)
        if i < n_human:
            ann.append(
                {"item": i, "annotator": f"w{i % 5}", "label": int(np.clip(np.rint(q), 1, 5))}
            )
        judged = np.clip(np.rint(q + 0.5 + rng.normal(0, 0.4)), 1, 5)  # biased upwards
        jud.append({"item": i, "judge": "llm", "label": int(judged)})
    return pd.DataFrame(ann), pd.DataFrame(items), pd.DataFrame(jud)


def test_pairwise_assisted_block_fields_and_pages():
    ann, items, jud = pairwise_frames()
    report = build_report(ann, [PREF], judges=jud, items=items, n_boot=50)
    json.dumps(report, allow_nan=False)
    a = report["properties"][0]["assisted"]
    assert a["judge"] == "llm" and a["n_human_items"] == 150 and a["n_judge_only_items"] == 750
    assert len(a["win_rates"]) == 3
    for r in a["win_rates"]:
        assert {"system_a", "system_b", "estimate", "low", "high"} <= set(r)
        assert r["low"] < r["estimate"] < r["high"]
        # the judge narrows the interval: assisted narrower than human-only on the same items
        assert r["high"] - r["low"] < r["human_high"] - r["human_low"]
        assert r["system_a"] < r["system_b"]
    ranking = a["ranking"]
    assert [r["system"] for r in ranking] == ["s1", "s2", HOSTILE]
    for r in ranking:
        assert {"system", "score", "low", "high", "rank_low", "rank_high"} <= set(r)
        assert 1 <= r["rank_low"] <= r["rank_high"] <= 3
    assert a["effective_sample_gain"] > 0.2
    text = render_text(report)
    assert "Judge-assisted estimates (PPI++)" in text and "rank-set" in text
    html = render_html(report)
    assert "Judge-assisted estimates (PPI++)" in html
    assert HOSTILE not in html and "&lt;script&gt;" in html


def test_likert_assisted_means_correct_a_biased_judge():
    ann, items, jud = likert_frames()
    report = build_report(ann, [LIKERT], judges=jud, items=items, n_boot=50)
    json.dumps(report, allow_nan=False)
    a = report["properties"][0]["assisted"]
    assert a["win_rates"] == []
    rows = {r["system"]: r for r in a["ranking"]}
    assert set(rows) == set(SYSTEMS)
    # the judge rates half a point high; the assisted mean is corrected by the human labels
    for s, true in (("s1", 4.0), ("s2", 3.0)):
        assert rows[s]["low"] <= true + 0.15 and rows[s]["high"] >= true - 0.15
        assert rows[s]["score"] == pytest.approx(rows[s]["human_score"], abs=0.25)
    assert rows["s1"]["rank_low"] == 1
    assert "Mean scores with rank-sets" in render_text(report)


def test_no_block_when_the_judge_rated_only_human_items():
    ann, items, jud = pairwise_frames(n_items=90, n_human=90)
    report = build_report(ann, [PREF], judges=jud, items=items, n_boot=0)
    assert "assisted" not in report["properties"][0]
    assert "Judge-assisted" not in render_text(report)


def test_block_without_system_names_says_why():
    ann, _, jud = pairwise_frames(n_items=120, n_human=60)
    report = build_report(ann, [PREF], judges=jud, n_boot=0)
    a = report["properties"][0]["assisted"]
    assert a["ranking"] == [] and "system names" in a["reason"]
    assert "undefined -- no system names" in render_text(report)


def test_fine_score_of_error_spans_gets_assisted_means():
    """An error-span study's 0-100 score (a fine ordinal scale) per output, like Likert."""
    ann, items, jud = likert_frames(seed=8)
    ann["label"] = ann["label"] * 20
    jud["label"] = jud["label"] * 20
    prop = Property("score", "ordinal", tuple(range(0, 101)))
    report = build_report(ann, [prop], judges=jud, items=items, n_boot=0)
    json.dumps(report, allow_nan=False)
    rows = {r["system"]: r for r in report["properties"][0]["assisted"]["ranking"]}
    assert rows["s1"]["rank_low"] == 1 and rows["s1"]["score"] > rows["s2"]["score"]
    assert "Mean scores with rank-sets" in render_text(report)


def test_cli_on_a_judgebench_file_with_unlabelled_instances(tmp_path, capsys):
    """``python -m analysis report``: a Judge-Bench file lists every instance, labelled or
    not, so a judge file rating all of them gives the assisted block."""
    from analysis.__main__ import main as cli_main

    ann, items, jud = pairwise_frames(n_items=300, n_human=90)
    labels = ann.groupby("item")["label"].apply(list)
    to_jb = {"A": "model_a", "B": "model_b"}
    instances = []
    for r in items.itertuples():
        inst = {
            "id": f"i{r.item}",
            "instance": {
                "input": f"question {r.item}",
                "output_a": "a",
                "output_b": "b",
                "system_a": r.system_a,
                "system_b": r.system_b,
            },
        }
        if r.item in labels.index:
            scores = [to_jb[x] for x in labels[r.item]]
            inst["annotations"] = {"pref": {"individual_human_scores": scores}}
        instances.append(inst)
    doc = {
        "dataset": "assisted",
        "annotations": [
            {"metric": "pref", "category": "categorical", "labels_list": ["model_a", "model_b"]}
        ],
        "instances": instances,
    }
    data, judge = tmp_path / "jb.json", tmp_path / "judge.jsonl"
    data.write_text(json.dumps(doc))
    judge.write_text(
        "\n".join(
            json.dumps({"judge": "llm", "item": f"i{r.item}", "label": to_jb[r.label]})
            for r in jud.itertuples()
        )
    )
    assert cli_main(["report", str(data), "--judge", str(judge), "--json", "--n-boot", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    a = report["properties"][0]["assisted"]
    assert a["n_human_items"] == 90 and a["n_judge_only_items"] == 210
    assert len(a["ranking"]) == 3 and a["effective_sample_gain"] is not None
    assert cli_main(["report", str(data), "--judge", str(judge), "--n-boot", "0"]) == 0
    assert "Judge-assisted estimates (PPI++)" in capsys.readouterr().out
