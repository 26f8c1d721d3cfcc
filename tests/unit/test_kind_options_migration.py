"""0026_kind_settings_in_options: the answer switches and a Likert study's criterion rows
move into ``Study.options`` and back, and the stored study asks workers the same thing."""

import pytest

import kinds

BEFORE = [("annotator", "0025_item_prefill_skip")]
AFTER = [("annotator", "0026_kind_settings_in_options")]


@pytest.mark.django_db(transaction=True)
def test_switches_and_criterion_rows_move_into_options_and_back(migrate):
    old = migrate(BEFORE)
    Study = old.get_model("annotator", "Study")
    Study.objects.create(
        name="p", kind="pairwise", allow_tie=False, allow_both_bad=True, options={"strength": True}
    )
    Study.objects.create(name="r", kind="ranking", allow_tie=True)
    likert = Study.objects.create(name="l", kind="likert", allow_tie=True)
    Study.objects.create(name="e", kind="error_spans", options={"max_spans": 3})
    Criterion = old.get_model("annotator", "Criterion")
    Criterion.objects.create(study=likert, name="safe", label="Safe?", labels=["y", "n"], order=1)
    Criterion.objects.create(
        study=likert, name="fluent", label="Fluent?", scale_min=0, scale_max=6,
        anchors={"0": "no"}, order=0,
    )  # fmt: skip

    new = migrate(AFTER)
    options = dict(new.get_model("annotator", "Study").objects.values_list("name", "options"))
    assert options["p"] == {
        "strength": True, "allow_tie": False, "allow_both_good": False, "allow_both_bad": True,
    }  # fmt: skip
    assert options["r"] == {"allow_tie": True}
    assert options["e"] == {"max_spans": 3}  # a kind without switches takes none
    assert options["l"] == {
        "criteria": [
            {"name": "fluent", "label": "Fluent?", "scale_min": 0, "scale_max": 6,
             "anchors": {"0": "no"}, "labels": []},
            {"name": "safe", "label": "Safe?", "scale_min": 1, "scale_max": 5,
             "anchors": {}, "labels": ["y", "n"]},
        ]
    }  # fmt: skip
    # what the kinds read back is what they validate: the same question to workers
    for name, kind in (("p", "pairwise"), ("r", "ranking"), ("l", "likert"), ("e", "error_spans")):
        assert (
            kinds.get(kind).validate_options(options[name], None).items()
            >= {k: v for k, v in options[name].items() if k != "strength"}.items()
        )

    back = migrate(BEFORE)
    Study = back.get_model("annotator", "Study")
    p, r = Study.objects.get(name="p"), Study.objects.get(name="r")
    assert (p.allow_tie, p.allow_both_good, p.allow_both_bad, p.options) == (
        False, False, True, {"strength": True},
    )  # fmt: skip
    assert (r.allow_tie, r.options) == (True, {})
    rows = back.get_model("annotator", "Criterion").objects.filter(study__name="l")
    assert [(c.name, c.scale_min, c.scale_max, c.labels) for c in rows.order_by("order")] == [
        ("fluent", 0, 6, []),
        ("safe", 1, 5, ["y", "n"]),
    ]
