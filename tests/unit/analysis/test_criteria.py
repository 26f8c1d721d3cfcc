"""Pairwise criteria in the report: each criterion is its own pairwise property with its own
ranking, each strength an ordinal property per system pair, and the position-bias test reads
five-point answers; a study without criteria reports under ``preference`` as before. Labels go
the whole way: a worker's display-order form → kinds.criteria.parse_answer → report_labels
(as annotator.selectors.report_rows calls the kind) → analysis.report.build_report; and an
export's criteria columns read back (analysis/criteria.py) into the same properties."""

from __future__ import annotations

import itertools
import random

import pandas as pd
import pytest

from analysis import criteria as ac
from analysis.pairwise import position_bias
from analysis.report import Property, build_report
from kinds import criteria as kc

SYSTEMS = ("x", "y", "z")
#: Planted quality per criterion: x best on helpfulness, z best on correctness.
QUALITY = {"helpful": {"x": 2, "y": 1, "z": 0}, "correct": {"x": 0, "y": 1, "z": 2}}
RAW_FOR_LEFT = {2: "left>>", 1: "left>", 0: "=", -1: "right>", -2: "right>>"}


def study_opts(**kw):
    crit = [
        {"name": "helpful", "label": "More helpful?"},
        {"name": "correct", "label": "More correct?"},
    ]
    return kc.validate_options({"criteria": crit, **kw}) | {"allow_tie": True}


def labels(opts, n_inputs=8, annotators=("w1", "w2", "w3"), seed=1):
    """The report's annotation rows, the items frame and the answers (annotation → (item,
    answer)), from simulated form posts; ``raw`` per criterion (``report_labels_with_raw``)."""
    rng = random.Random(seed)
    items, rows, pk, answers = [], [], 0, {}
    for i in range(n_inputs):
        for a, b in itertools.combinations(SYSTEMS, 2):
            item = len(items)
            items.append({"item": item, "input_id": f"in{i}", "system_a": a, "system_b": b})
            for who in annotators:
                order = rng.choice([[0, 1], [1, 0]])
                form = {}
                for name, q in QUALITY.items():
                    s = max(-2, min(2, q[a] - q[b]))  # system order: + favours A
                    shown = s if order == [0, 1] else -s  # the worker sees the left output
                    form[f"answer-{name}"] = (
                        RAW_FOR_LEFT[shown]
                        if opts["strength"]
                        else ("left" if shown > 0 else "right" if shown < 0 else "tie")
                    )
                if opts["rationale"] != "none":
                    form["rationale"] = f"reason {pk}"
                answer = kc.parse_answer(opts, order, form)
                pk += 1
                answers[pk] = (item, answer)
                for prop, label, raw in kc.report_labels_with_raw(opts, answer):
                    rows.append(
                        {"annotation": pk, "item": item, "annotator": who, "property": prop}
                        | {"label": label, "raw": raw, "source": "platform"}
                    )
    ann = pd.DataFrame(rows)
    ann["label"] = ann["label"].astype(object)
    return ann, pd.DataFrame(items).set_index("item", drop=False), answers


def properties(opts, ann, question=""):
    observed = ann.groupby("property")["label"].agg(set).to_dict()
    return [Property(*p) for p in kc.report_properties(opts, question, observed)]


def test_each_criterion_is_its_own_property_with_its_own_ranking():
    opts = study_opts(strength=True)
    ann, items, _ = labels(opts)
    props = properties(opts, ann)
    assert [(p.name, p.scale) for p in props] == [
        ("helpful", "pairwise"),
        ("helpful_strength", "ordinal"),
        ("correct", "pairwise"),
        ("correct_strength", "ordinal"),
    ]
    assert props[0].labels == ("A", "B", "tie") and props[1].labels == (-2, -1, 0, 1, 2)
    # 24 items × 3 workers × 2 criteria, once as a preference and once as a strength
    assert len(ann) == 24 * 3 * 2 * 2

    report = build_report(ann, props, items=items.reset_index(drop=True), n_boot=0)
    sections = {s["name"]: s for s in report["properties"]}
    assert list(sections) == ["helpful", "helpful_strength", "correct", "correct_strength"]
    # soft-voted outcomes per criterion: x wins every helpfulness pair, z every correctness one
    wins = {
        n: {r["system"]: r["wins"] for r in sections[n]["ranking"]} for n in ("helpful", "correct")
    }
    assert wins == {"helpful": {"x": 16, "y": 8, "z": 0}, "correct": {"x": 0, "y": 8, "z": 16}}
    assert "pairwise" in sections["helpful"] and "likert" not in sections["helpful"]
    # every worker agrees: full agreement on the preferences, ordinal alpha 1 on the strengths
    for name in sections:
        rel = {r["metric"]: r for r in sections[name]["reliability"]}
        assert rel["percentage_agreement"]["value"] == pytest.approx(1.0)
        if name.endswith("_strength"):
            assert rel["krippendorff_alpha"]["level"] == "ordinal"
            assert rel["krippendorff_alpha"]["value"] == pytest.approx(1.0)
    # strength per system pair, in system order (+: the pair's first system better)
    means = {
        r["system"]: r["mean_rating"] for r in sections["correct_strength"]["likert"]["systems"]
    }
    assert means == {"all": pytest.approx(-4 / 3), "x vs y": -1, "x vs z": -2, "y vs z": -1}
    # the position-bias test counts every five-point answer's side
    assert sections["helpful"]["position_bias"]["overall"]["n"] == 24 * 3


def test_position_bias_reads_graded_answers_as_their_side():
    frame = pd.DataFrame(
        {"annotator": ["w"] * 6, "raw": ["left>>", "left>", "=", "right>", "right>>", "LEFT"]}
    )
    overall = position_bias(frame).iloc[0]
    assert (overall["n"], overall["n_left"], overall["n_excluded"]) == (5, 3, 1)


def test_without_strength_only_the_preferences_are_reported():
    opts = study_opts()
    ann, _, _ = labels(opts, n_inputs=3)
    assert [p.name for p in properties(opts, ann)] == ["helpful", "correct"]
    assert set(ann["property"]) == {"helpful", "correct"}
    assert len(ann) == 9 * 3 * 2
    assert set(ann["raw"]) == {"left", "right"}


def test_the_implicit_criterion_reports_under_preference_as_before():
    opts = kc.validate_options({}) | {"allow_tie": False, "allow_both_bad": True}
    assert kc.report_properties(opts, "Which is better?", {}) == [
        ("preference", "pairwise", ("A", "B", "both_bad"), "Which is better?")
    ]
    assert kc.report_properties(opts, "", {"preference": {"tie"}})[0][2] == (
        "A",
        "B",
        "tie",
        "both_bad",
    )
    # a platform label and an imported one (no display order)
    answer = kc.parse_answer(opts, [1, 0], {"answer": "left"})
    assert answer == {"raw": "left", "value": "B"}
    assert kc.report_labels_with_raw(opts, answer) == [("preference", "B", "left")]
    assert kc.report_labels(opts, {"value": "A"}) == [("preference", "A")]
    strong = kc.validate_options({"strength": True}) | {"allow_tie": True}
    assert [p[0] for p in kc.report_properties(strong, "", {})] == [
        "preference",
        "preference_strength",
    ]
    answer = kc.parse_answer(strong, [0, 1], {"answer": "right>"})
    assert kc.report_labels(strong, answer) == [("preference", "B"), ("preference_strength", -1)]


def test_an_export_reads_back_into_the_same_properties_and_labels():
    from formats.labels import LABEL_FIELDS

    opts = study_opts(strength=True, rationale="optional")
    ann, _, answers = labels(opts, n_inputs=2)
    # the export: one line per annotation, the criteria columns after the usual ones
    export = [
        {"annotation_id": pk, "item_id": item, "label": a["value"], "raw_answer": a["raw"]}
        | kc.export_row(opts, a)
        for pk, (item, a) in answers.items()
    ]
    frame = pd.DataFrame(export).astype({"helpful_strength": object})
    assert list(frame.columns[4:]) == kc.export_fields(opts)
    assert frame.loc[0, "rationale"] == "reason 0"
    frame.loc[0, "helpful_strength"] = "-3"  # a bad cell is reported, not read
    props, found, problems = ac.export_criteria(frame, LABEL_FIELDS)
    assert [(p.name, p.scale) for p in props] == [
        ("helpful", "pairwise"),
        ("helpful_strength", "ordinal"),
        ("correct", "pairwise"),
        ("correct_strength", "ordinal"),
    ]
    assert problems == [(0, "helpful_strength must be an integer from -2 to 2, got '-3'")]
    bad = (ann["annotation"] == frame.loc[0, "annotation_id"]) & (
        ann["property"] == "helpful_strength"
    )
    for name, (pos, values) in found.items():
        got = sorted(
            zip(frame["annotation_id"].to_numpy()[pos].tolist(), values.tolist(), strict=True)
        )
        want = ann.loc[(ann["property"] == name) & ~bad, ["annotation", "label"]]
        assert got == sorted(map(tuple, want.to_numpy().tolist())), name


def test_an_export_without_criteria_has_no_criteria_columns():
    frame = pd.DataFrame([{"item_id": 1, "label": "A", "raw_answer": "left", "note": "free text"}])
    assert ac.export_criteria(frame, ["item_id", "label", "raw_answer"]) == ([], {}, [])
    implicit = pd.DataFrame([{"item_id": 1, "label": "B", "preference_strength": -1}])
    props, found, _ = ac.export_criteria(implicit, ["item_id", "label"])
    assert [p.name for p in props] == ["preference_strength"]
    assert found["preference_strength"][1].tolist() == [-1]


def test_load_dataset_reads_a_csv_export_s_criteria_columns(tmp_path):
    """analysis.loaders: a CSV label export of a study with criteria and strength reports
    the criteria and their strength (not the summary ``label`` as ``preference``); a bad
    strength cell names its row."""
    from analysis.loaders import load_dataset

    opts = study_opts(strength=True, rationale="optional")
    _, _, answers = labels(opts, n_inputs=2)
    export = pd.DataFrame(
        [
            {"annotation_id": pk, "item_id": item, "annotator": f"w{pk % 3}", "label": a["value"]}
            | {"raw_answer": a["raw"]}
            | kc.export_row(opts, a)
            for pk, (item, a) in answers.items()
        ]
    )
    path = tmp_path / "labels.csv"
    export.to_csv(path, index=False)
    dataset = load_dataset(path)
    assert [(p.name, p.scale) for p in dataset.properties] == [
        ("helpful", "pairwise"),
        ("helpful_strength", "ordinal"),
        ("correct", "pairwise"),
        ("correct_strength", "ordinal"),
    ]
    got = dataset.annotations
    for name in ("helpful", "correct_strength"):
        rows = got[got["property"] == name]
        assert sorted(rows["label"].tolist()) == sorted(export[name].tolist())
    export.loc[0, "correct_strength"] = 7
    export.to_csv(path, index=False)
    with pytest.raises(ValueError, match="correct_strength must be an integer from -2 to 2"):
        load_dataset(path)
