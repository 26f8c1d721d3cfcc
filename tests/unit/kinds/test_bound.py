"""``Kind.bind``: a kind bound to a study's options answers as the kind does with them."""

import doctest
import random

import pytest

import kinds
from kinds import base

OPTIONS = {
    "pairwise": {"criteria": [{"name": "helpful"}, {"name": "safe"}], "strength": True},
    "likert": {"criteria": [{"name": "fluency", "scale": [1, 5]}]},
    "ranking": {"per_item": 3, "allow_tie": True},
    "error_spans": {"categories": ["accuracy"], "max_spans": 4},
}
SYSTEMS = {"pairwise": 2, "likert": 3, "ranking": 4, "error_spans": 3}


@pytest.mark.parametrize("name", list(OPTIONS))
def test_a_bound_kind_answers_as_the_kind_with_its_options(name):
    kind = kinds.get(name)
    opts = {**kind.validate_options(OPTIONS[name], SYSTEMS[name]), "collection": "all"}
    bound = kind.bind(opts)
    assert bound.kind is kind and bound.opts is opts
    n = SYSTEMS[name]
    assert bound.outputs_per_item(n) == kind.outputs_per_item(opts, n)
    assert bound.item_shape(n) == kind.item_shape(opts, n)
    assert bound.item_groups(n, random.Random(3)) == kind.item_groups(opts, n, random.Random(3))
    assert bound.context() == kind.context(opts)
    assert bound.export_fields() == kind.export_fields(opts)
    assert bound.export_types() == kind.export_types(opts)
    assert bound.score_columns() == kind.score_columns(opts)
    assert bound.card_settings() == kind.card_settings(opts)
    assert bound.score_scales() == kind.score_scales(opts)
    assert bound.overall_criterion() == kind.overall_criterion(opts)
    assert bound.report_properties("Which?", {}) == kind.report_properties(opts, "Which?", {})
    assert bound.judgebench_properties("Which?") == kind.judgebench_properties(opts, "Which?")
    assert bound.gold_groups(n) == kind.gold_groups(opts, n)
    summary = {"score": 70} if name == "error_spans" else {}
    assert bound.answer_from_summary("", summary) == kind.answer_from_summary(opts, "", summary)
    m = kind.outputs_per_item(opts, n)
    shown = list(range(m))[::-1] if name != "error_spans" else [0]
    outputs = ["The cat sat on the mat."] * m
    data, _ = bound.simulate_answer(
        shown, [0.9, 0.1, 0.5][:m] + [0.2] * (m - 3), (0.1, 0.9), {}, random.Random(1), 0.8
    )
    answer = bound.parse_answer(shown, data, outputs=outputs[:1] if name == "error_spans" else ())
    assert answer == kind.parse_answer(
        opts, shown, data, outputs=outputs[:1] if name == "error_spans" else ()
    )
    assert bound.summary(answer) == kind.summary(opts, answer)
    assert bound.pair_preferences(answer) == kind.pair_preferences(opts, answer)
    assert bound.scores(answer) == kind.scores(opts, answer)
    assert bound.report_labels(answer) == kind.report_labels(opts, answer)
    names = kinds.position_names(m)
    assert bound.export_row(answer, names, shown) == kind.export_row(opts, answer, names, shown)


def test_the_module_examples_hold():
    assert doctest.testmod(base).failed == 0
