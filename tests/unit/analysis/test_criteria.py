"""Pairwise criteria in the report (analysis/criteria.py): each criterion is its own pairwise
property with its own ranking, each strength an ordinal property per system pair; a study
without criteria reports under ``preference`` as before. Labels go the whole way: a worker's
display-order form → kinds.criteria.parse_answer → criterion_labels → build_report."""

from __future__ import annotations

import itertools
import random

import pandas as pd
import pytest

from analysis import criteria as ac
from analysis.report import build_report
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
    """One row per (annotation, criterion) and the items frame, from simulated form posts."""
    rng = random.Random(seed)
    items, rows, pk = [], [], 0
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
                answer = kc.parse_answer(opts, order, form)
                pk += 1
                for row in kc.criterion_labels(opts, answer):
                    rows.append(
                        row
                        | {"annotation": pk, "item": item, "annotator": who, "source": "platform"}
                    )
    return pd.DataFrame(rows), pd.DataFrame(items)


def test_each_criterion_is_its_own_property_with_its_own_ranking():
    opts = study_opts(strength=True)
    rows, items = labels(opts)
    props = ac.criteria_properties(opts, observed=set(rows["label"]))
    assert [(p.name, p.kind) for p in props] == [
        ("helpful", "pairwise"),
        ("helpful_strength", "ordinal"),
        ("correct", "pairwise"),
        ("correct_strength", "ordinal"),
    ]
    assert props[0].labels == ("A", "B", "tie") and props[1].labels == (-2, -1, 0, 1, 2)
    ann = ac.criteria_annotations(rows, opts)
    # 24 items × 3 workers × 2 criteria, once as a preference and once as a strength
    assert len(ann) == 24 * 3 * 2 * 2
    assert set(ann.loc[ann["property"] == "helpful", "raw"]) == {"left", "right"}

    report = build_report(ann, props, items=items, n_boot=0)
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
    # the position-bias test reads the side of every five-point answer
    bias = sections["helpful"]["position_bias"]
    assert bias["overall"]["n"] == 24 * 3


def test_without_strength_only_the_preferences_are_reported():
    opts = study_opts()
    rows, items = labels(opts, n_inputs=3)
    assert rows["strength"].isna().all()
    props = ac.criteria_properties(opts)
    assert [p.name for p in props] == ["helpful", "correct"]
    ann = ac.criteria_annotations(rows, opts)
    assert set(ann["property"]) == {"helpful", "correct"}
    assert len(ann) == 9 * 3 * 2


def test_the_implicit_criterion_reports_under_preference_as_before():
    opts = kc.validate_options({}) | {"allow_tie": False, "allow_both_bad": True}
    props = ac.criteria_properties(opts, question="Which is better?")
    assert [(p.name, p.kind, p.labels, p.title) for p in props] == [
        ("preference", "pairwise", ("A", "B", "both_bad"), "Which is better?")
    ]
    # an imported label (no display order) and a platform label
    answers = [{"value": "B"}, kc.parse_answer(opts, [1, 0], {"answer": "left"})]
    rows = pd.DataFrame(
        [
            r | {"item": 1, "annotator": f"w{k}"}
            for k, a in enumerate(answers)
            for r in kc.criterion_labels(opts, a)
        ]
    )
    ann = ac.criteria_annotations(rows, opts)
    assert ann[["property", "label", "raw"]].to_dict("records") == [
        {"property": "preference", "label": "B", "raw": None},
        {"property": "preference", "label": "B", "raw": "left"},
    ]
    strong = kc.validate_options({"strength": True})
    assert [p.name for p in ac.criteria_properties(strong)] == ["preference", "overall_strength"]


def test_rows_for_a_criterion_the_study_lacks_are_refused():
    rows = pd.DataFrame([{"criterion": "style", "label": "A", "item": 1, "annotator": "w"}])
    with pytest.raises(ValueError, match="style"):
        ac.criteria_annotations(rows, study_opts())


def test_an_export_reads_back_into_the_same_properties_and_labels():
    from annotator.selectors import LABEL_FIELDS

    opts = study_opts(strength=True, rationale="optional")
    rows, _ = labels(opts, n_inputs=2)
    direct = ac.criteria_annotations(rows, opts)
    # the export: one line per annotation, the criteria columns after the usual ones
    export = []
    for pk, group in rows.groupby("annotation"):
        answer = {
            "criteria": {
                r.criterion: {"value": r.label, "strength": int(r.strength)}
                for r in group.itertuples()
            },
            "rationale": "because" if pk % 2 else "",
        }
        base = {
            "annotation_id": pk,
            "item_id": group["item"].iloc[0],
            "label": "A",
            "raw_answer": "left",
        }
        export.append(base | kc.export_row(opts, answer))
    frame = pd.DataFrame(export).astype({"helpful_strength": object})
    frame.loc[0, "helpful_strength"] = "-3"  # a bad cell is reported, not read
    props, found, problems = ac.export_criteria(frame, LABEL_FIELDS)
    assert [(p.name, p.kind) for p in props] == [
        ("helpful", "pairwise"),
        ("helpful_strength", "ordinal"),
        ("correct", "pairwise"),
        ("correct_strength", "ordinal"),
    ]
    assert problems == [(0, "helpful_strength must be an integer from -2 to 2, got '-3'")]
    for name, (pos, values) in found.items():
        got = sorted(
            zip(frame["annotation_id"].to_numpy()[pos].tolist(), values.tolist(), strict=True)
        )
        want = direct.loc[direct["property"] == name, ["annotation", "label"]]
        want = want.loc[
            ~((want["annotation"] == frame.loc[0, "annotation_id"]) & (name == "helpful_strength"))
        ]
        assert got == sorted(map(tuple, want.to_numpy().tolist())), name


def test_an_export_without_criteria_has_no_criteria_columns():
    frame = pd.DataFrame([{"item_id": 1, "label": "A", "raw_answer": "left", "note": "free text"}])
    assert ac.export_criteria(frame, ["item_id", "label", "raw_answer"]) == ([], {}, [])
    implicit = pd.DataFrame([{"item_id": 1, "label": "B", "overall_strength": -1}])
    props, found, _ = ac.export_criteria(implicit, ["item_id", "label"])
    assert [p.name for p in props] == ["overall_strength"]
    assert found["overall_strength"][1].tolist() == [-1]
