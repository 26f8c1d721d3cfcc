"""Strict parsing of a judge's error-span answer, and the prefill statistics (pure)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import prefill
from annotator.judge_spans import parse_judge_spans

TEXT = "The cat sat on the mat. The cat sat."


def test_offsets_checked_against_the_text():
    answer = json.dumps([{"start": 4, "end": 7, "severity": "Major", "text": "cat"}])
    p = parse_judge_spans(answer, TEXT)
    assert p.spans == [{"start": 4, "end": 7, "severity": "major", "text": "cat"}]
    bad = parse_judge_spans(
        json.dumps([{"start": 4, "end": 7, "severity": "minor", "text": "dog"}]), TEXT
    )
    assert bad.spans is None and "does not match" in bad.error and bad.raw


def test_quotes_are_located_in_order_and_fenced_json_is_read():
    answer = (
        'Here:\n```json\n{"errors": [{"quote": "cat sat", "severity": "minor"},'
        ' {"quote": "cat sat", "severity": "major"}]}\n```'
    )
    p = parse_judge_spans(answer, TEXT)
    assert [(s["start"], s["severity"]) for s in p.spans] == [(4, "minor"), (28, "major")]
    assert p.located == 2


def test_empty_list_is_error_free():
    p = parse_judge_spans("[]", TEXT)
    assert p.spans == [] and p.error_free


@pytest.mark.parametrize(
    "answer, why",
    [
        ("no errors found", "not one JSON value"),
        ('[{"start": 0, "end": 99, "severity": "minor"}]', "outside the text"),
        ('[{"quote": "dog", "severity": "minor"}]', "not in the text"),
        ('[{"quote": "cat", "severity": "critical"}]', "severity"),
        (
            '[{"start": 0, "end": 7, "severity": "minor"}, {"start": 4, "end": 9, '
            '"severity": "minor"}]',
            "overlap",
        ),
        ('{"spans": [], "errors": []}', "exactly one"),
        ('[{"start": "4", "end": 7, "severity": "minor"}]', "integers"),
        ("", "empty"),
    ],
)
def test_unparseable_answers_are_kept_raw_with_the_reason(answer, why):
    p = parse_judge_spans(answer, TEXT)
    assert p.spans is None and why in p.error and p.raw == answer


def test_suggestion_rates_and_f1():
    spans = pd.DataFrame(
        {
            "annotation": [1, 1, 2, 2, 3],
            "origin": ["judge", "judge", "judge", "human", "judge"],
            "action": ["accepted", "deleted", "edited", "added", "accepted"],
        }
    )
    r = prefill.suggestion_rates(spans)
    assert r["n_suggestions"] == 4 and r["accepted"]["value"] == 0.5
    assert r["accepted"]["low"] < 0.5 < r["accepted"]["high"] and r["added_by_humans"] == 1
    # no resized column (labels from before boundary edits): every edit a re-grade
    assert (r["edited"]["n"], r["regraded"]["n"], r["resized"]["n"]) == (1, 1, 0)
    moved = prefill.suggestion_rates(spans.assign(resized=[False, False, True, None, None]))
    assert (moved["edited"]["n"], moved["regraded"]["n"], moved["resized"]["n"]) == (1, 0, 1)
    assert moved["resized"]["value"] == 0.25
    s = {1: [{"start": 0, "end": 4, "severity": "minor"}]}
    f = {1: [{"start": 2, "end": 4, "severity": "minor"}]}
    assert prefill.suggestion_f1(s, f) == pytest.approx(2 * 2 / (4 + 2))


def test_prefill_effect_matches_scipy_welch():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "prefilled": [True] * 30 + [False] * 20,
            "n_spans": np.r_[rng.poisson(3, 30), rng.poisson(2, 20)],
            "score": np.r_[rng.normal(70, 10, 30), rng.normal(75, 12, 20)],
        }
    )
    rows = {r["figure"]: r for r in prefill.prefill_effect(frame)}
    a, b = frame["score"][:30], frame["score"][30:]
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert rows["score"]["low"] == pytest.approx(ci.low)
    assert rows["score"]["high"] == pytest.approx(ci.high)
    assert rows["n_spans"]["n_with"] == 30


def test_skipped_control_share():
    from statsmodels.stats.proportion import proportion_confint

    r = prefill.skipped_control(40, 6)
    assert r["share"] == 0.15
    assert (r["low"], r["high"]) == pytest.approx(proportion_confint(6, 40, method="wilson"))
    assert prefill.skipped_control(0, 0)["reason"]
