"""Skipping the items the judge found error-free (issue 28, ESA^AI): the options, the control
draw (share, reproducible across processes), the worker cycle (a skipped item is never
leased, a control, an unparseable or missing proposal and a proposal with errors are served;
a proposal that arrives after the item was given is ignored) and the report block (JSON,
text, page context)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analysis.prefill_report import skip_block
from analysis.render import render_html, render_text
from analysis.render_prefill import prefill_context, prefill_text
from annotator import prefill_skip, services, span_prefill
from annotator.models import Assignment, Item, Output
from kinds import get as get_kind
from kinds.base import OptionError
from kinds.error_spans import KIND
from tests.conftest import bundle
from tests.leasing import next_lease

ON = {"prefill_spans": "on", "prefill_skip_clean": True}


def test_skip_options_are_checked():
    got = KIND.validate_options(ON, 1)
    assert (got["prefill_skip_clean"], got["prefill_skip_control_share"]) == (True, 0.1)
    got = KIND.validate_options(ON | {"prefill_skip_control_share": 0.3}, 1)
    assert got["prefill_skip_control_share"] == 0.3
    assert "prefill_skip_clean" not in KIND.validate_options({"prefill_spans": "on"}, 1)
    for bad, msg in [
        ({"prefill_skip_clean": True}, "need prefill_spans: on"),
        ({"prefill_spans": "on", "prefill_skip_clean": "yes"}, "must be true or false"),
        (ON | {"prefill_skip_control_share": 1.5}, "from 0 to 1"),
        (ON | {"prefill_skip_control_share": True}, "from 0 to 1"),
        ({"prefill_spans": "on", "prefill_skip_control_share": 0.2}, "needs prefill_skip_clean"),
    ]:
        with pytest.raises(OptionError, match=msg):
            KIND.validate_options(bad, 1)


@pytest.mark.parametrize("kind", ["pairwise", "likert", "ranking"])
def test_other_kinds_refuse_the_skip_options(make_study, kind):
    """The importer refuses a kind option the kind does not take (it used to drop it)."""
    from annotator.errors import ImportRejected

    systems = ("a", "b", "c")
    records = [{"id": "q", "input": "x", "outputs": {s: f"o {s}" for s in systems}}]
    study = {"kind": kind, **ON}
    with pytest.raises(ImportRejected) as exc:
        make_study(bundle(records, study))
    assert "studies take no 'prefill_skip_clean' option" in str(exc.value)
    assert "studies take no 'prefill_spans' option" in str(exc.value)
    assert "prefill_skip_clean" not in get_kind(kind).extra_options


def test_the_control_draw_has_its_share_and_is_reproducible():
    draws = [prefill_skip.in_control(7, pk, 0.1) for pk in range(4000)]
    assert 0.085 < sum(draws) / len(draws) < 0.115
    assert draws == [prefill_skip.in_control(7, pk, 0.1) for pk in range(4000)]
    assert draws != [prefill_skip.in_control(8, pk, 0.1) for pk in range(4000)]  # per study
    assert not any(prefill_skip.in_control(7, pk, 0) for pk in range(100))
    assert all(prefill_skip.in_control(7, pk, 1) for pk in range(100))
    # another process (another hash seed) draws the same
    code = (
        "from kinds.span_prefill import skip_control;"
        "print(sum(skip_control(7, pk, 0.1) << pk for pk in range(200)))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": "", "DJANGO_SETTINGS_MODULE": ""},
        cwd=".",
    )
    assert int(other.stdout) == sum(draws[pk] << pk for pk in range(200))


def worker(study, name):
    return services.participation_enter(study=study, platform="link", external_id=name)


def judge(study, input_id, system_id, spans=None, *, parse_ok=True):
    if parse_ok:
        proposal = {"spans": spans or [], "located": len(spans or [])}
        label = "errors" if spans else "error_free"
    else:
        proposal, label = {"error": "not one JSON value"}, ""
    services.judge_rating_record(
        study,
        judge="j",
        input_id=input_id,
        system_id=system_id,
        raw_answer="?",
        label=label,
        parse_ok=parse_ok,
        proposal=proposal,
    )


def work_all(study, name, errors_in=()):
    """One worker labels every item they are given (keeping the suggestions; a span of
    their own on the items in ``errors_in``); the items' input ids in order."""
    w = worker(study, name)
    got = []
    while (a := next_lease(participation=w)) is not None:
        item = a.item
        # the lease carries the item as decided (a control is marked on it too)
        assert item.prefill_skip == Item.objects.get(pk=item.pk).prefill_skip
        shown = span_prefill.shown(study, item, study.kind_options())["spans"]
        spans = [
            s | {"origin": "judge", "action": "accepted", "suggestion": k}
            for k, s in enumerate(shown)
        ]
        if item.input.external_id in errors_in:
            text = item.output_list()[0].text
            spans.append({"start": 0, "end": 4, "severity": "minor", "text": text[:4]})
        services.annotation_submit(
            annotator=w.annotator,
            token=str(a.token),
            data={"spans": json.dumps(spans), "score": "70"},
        )
        got.append(item.input.external_id)
    return got


@pytest.fixture
def skip_study(make_study):
    """40 one-output items: 30 the judge found error-free, 4 with an error, 3 unparseable,
    3 without a rating; control share 0.25."""
    records = [
        {"id": f"d{i:02d}", "input": f"doc {i}", "outputs": {"sys": f"Text number {i}."}}
        for i in range(40)
    ]
    study = make_study(
        bundle(
            records,
            {"kind": "error_spans", "redundancy": 1, **ON, "prefill_skip_control_share": 0.25},
        )
    )
    for o in Output.objects.filter(input__study=study).select_related("input"):
        n = int(o.input.external_id[1:])
        if n < 30:
            judge(study, o.input_id, o.system_id, [])
        elif n < 34:
            judge(
                study,
                o.input_id,
                o.system_id,
                [{"start": 0, "end": 4, "severity": "minor", "text": "Text"}],
            )
        elif n < 37:
            judge(study, o.input_id, o.system_id, parse_ok=False)
    return study


def test_a_worker_never_gets_a_skipped_item_but_gets_the_controls(skip_study):
    study = skip_study
    items = {
        i.input.external_id: i for i in Item.objects.filter(study=study).select_related("input")
    }
    controls = {
        k
        for k, i in items.items()
        if int(k[1:]) < 30 and prefill_skip.in_control(study.pk, i.pk, 0.25)
    }
    assert 0 < len(controls) < 30
    served = work_all(study, "w1", errors_in={sorted(controls)[0]})
    expected = {k for k in items if int(k[1:]) >= 30} | controls
    assert set(served) == expected and len(served) == len(expected)
    skipped = set(items) - expected
    for k, item in items.items():
        item.refresh_from_db()
        if k in skipped:
            assert (item.prefill_skip, item.is_active, item.n_taken) == ("skipped", False, 0)
        else:
            assert item.prefill_skip == ("control" if k in controls else "")
            assert (item.is_active, item.n_done) == (True, 1)
    assert not Assignment.objects.filter(item__prefill_skip="skipped").exists()
    assert work_all(study, "w2") == []  # redundancy 1: nothing left, nothing skipped served
    counts = prefill_skip.skip_counts(study)
    assert counts["skipped"] == len(skipped) == counts["saved"]
    assert counts["planned"] == 40 and sorted(counts["controls"]) == sorted(
        items[k].pk for k in controls
    )

    from analysis.selectors import study_report

    report = study_report(study, n_boot=50)
    section = report["sections"][0]
    skip = section["prefill"]["skip"]
    assert skip["skipped"] == len(skipped) and skip["controls"] == len(controls)
    assert skip["budget_saved"] == pytest.approx(len(skipped) / 40)
    assert skip["control_errors"]["n_control"] == len(controls)
    assert skip["control_errors"]["with_errors"] == 1
    assert any(f"{len(skipped)} item(s) the judge found error-free" in n for n in section["notes"])
    text = render_text(report)
    assert "Items skipped as error-free by the judge" in text
    assert f"{len(skipped)} items skipped: {len(skipped)} of 40 planned annotations" in text
    assert f"humans found errors in 1 of the {len(controls)} controls" in text
    html = render_html(report)  # the standalone page: the same template
    assert '<section class="prefill">' in html and "Items skipped as error-free" in html


def test_a_rating_that_arrives_after_the_item_was_given_changes_nothing(make_study):
    study = make_study(
        bundle(
            [{"id": "d0", "input": "doc", "outputs": {"sys": "Some text."}}],
            {"kind": "error_spans", "redundancy": 2, **ON, "prefill_skip_control_share": 0},
        )
    )
    w1 = worker(study, "w1")
    first = next_lease(participation=w1)
    assert first is not None  # no rating yet: served as usual
    output = Output.objects.get(input__study=study)
    judge(study, output.input_id, output.system_id, [])  # error-free, but too late
    w2 = worker(study, "w2")
    second = next_lease(participation=w2)
    assert second is not None and second.item_id == first.item_id
    assert Item.objects.get().prefill_skip == ""
    assert prefill_skip.skip_counts(study) is None


def test_without_the_option_clean_items_are_served(make_study):
    study = make_study(
        bundle(
            [{"id": "d0", "input": "doc", "outputs": {"sys": "Some text."}}],
            {"kind": "error_spans", "redundancy": 1, "prefill_spans": "on"},
        )
    )
    output = Output.objects.get(input__study=study)
    judge(study, output.input_id, output.system_id, [])
    assert work_all(study, "w") == ["d0"]


def test_the_skip_block_worked_example():
    """3 control items: item 1 labelled twice (one label with a span: counts as with
    errors), item 2 once without spans, item 3 not labelled; 8 skipped items of redundancy 2
    saved 16 of 40 planned annotations."""
    answers = [
        {"spans": [{"start": 0, "end": 1}], "score": 50},
        {"spans": [], "score": 90},
        {"spans": [], "score": 95},
        {"spans": [{"start": 0, "end": 1}], "score": 40},  # not a control
    ]
    counts = {"skipped": 8, "saved": 16, "planned": 40, "controls": [1, 2, 3], "control_share": 0.1}
    block = skip_block([1, 1, 2, 9], answers, counts)
    assert block["skipped"] == 8 and block["controls"] == 3
    assert block["budget_saved"] == pytest.approx(0.4)
    c = block["control_errors"]
    assert (c["n_control"], c["with_errors"], c["share"]) == (2, 1, 0.5)
    # Wilson 95 % for 1 of 2: centre (0.5 + z²/4)/(1 + z²/2) = 0.5, half-width
    z = 1.959963984540054
    half = z * (0.25 / 2 + z * z / 16) ** 0.5 / (1 + z * z / 2)
    assert (c["low"], c["high"]) == pytest.approx((0.5 - half, 0.5 + half))
    context = prefill_context({"prefill": {"skip": block}})
    assert (
        context["skip"]["lines"][0]
        == "8 items skipped: 16 of 40 planned annotations saved (40.0% of the budget)"
    )
    assert (
        "humans found errors in 1 of the 2 controls they labelled: 50.0%"
        in context["skip"]["lines"][1]
    )


def test_the_prefill_block_as_text_and_page_context():
    """test_span_prefill's worked example of the report block, rendered: a row per action,
    both effect rows, F1 0.75; a control character never reaches the text."""
    block = {
        "labels": {"shown": 2, "control": 2, "none": 0},
        "rates": {
            "n_suggestions": 3,
            "added_by_humans": 2,
            **{
                a: {"value": 1 / 3, "low": 0.06, "high": 0.79, "n": 1}
                for a in ("accepted", "edited", "deleted")
            },
            "resized": {"value": 0.0, "low": 0.0, "high": 0.56, "n": 0},
            "regraded": {"value": 1 / 3, "low": 0.06, "high": 0.79, "n": 1},
        },
        "judge_final_f1": 0.75,
        "effect": [
            {"figure": "n_spans", "with": 1.5, "without": 0.5, "n_with": 2, "n_without": 2}
            | {"difference": 1.0, "low": -5.35, "high": 7.35, "reason": ""},
            {"figure": "score", "with": None, "without": None, "n_with": 1, "n_without": 0}
            | {"difference": None, "low": None, "high": None, "reason": "needs two\x1b[31m"},
        ],
    }
    section = {"name": "error_spans", "title": "Error spans", "prefill": block}
    text = "\n".join(prefill_text(section))
    assert "Judge-prefilled spans" in text
    assert "2 labels with suggestions, 2 in the control share" in text
    assert "3 suggestions; 2 span(s) added by the workers" in text
    assert "Judge-vs-final span F1 (character level, labels with suggestions): 0.750" in text
    rows = [r[0].text for r in prefill_context(section)["rates"].rows]
    assert rows == [
        "accepted as they were",
        "edited",
        "edited: boundaries moved",
        "edited: severity only",
        "deleted",
    ]
    assert all(what in text for what in rows)
    moved = next(line for line in text.splitlines() if "boundaries moved" in line)
    assert moved.split() == ["edited:", "boundaries", "moved", "0", "0.0%", "[0.000,", "0.560]"]
    assert "[-5.350, 7.350]" in text and "undefined: needs two?[31m" in text
    assert "\x1b" not in text and "Items skipped" not in text
    context = prefill_context(section)
    assert [r[0].text for r in context["rates"].rows][0] == "accepted as they were"
    assert [r[0].text for r in context["effect"].rows] == [
        "error spans per label",
        "score (0-100)",
    ]
    assert "skip" not in context
    assert prefill_text({"name": "x"}) == [] and prefill_context({"name": "x"}) is None


@pytest.mark.django_db(transaction=True)
def test_an_adaptive_round_closes_when_its_last_open_item_is_skipped():
    """The last item of round 1 (by id, so taken last) is judge-clean: the worker's submit
    before it cannot close the round; skipping it must (and the next round opens)."""
    from protocol.models import ProtocolConfig, Round
    from tests.protocol_sim import adaptive_bundle
    from tests.unit.test_protocol_error_spans import esa_answer

    data = adaptive_bundle(
        40, kind="error_spans", categories=["Accuracy"], **ON, prefill_skip_control_share=0
    )
    study = services.study_import(data, filename="esa.jsonl")
    last = Item.objects.filter(study=study, round_number=1).order_by("-id").first()
    out = last.output_list()[0]
    judge(study, out.input_id, out.system_id, [])
    part = worker(study, "w")
    rng = __import__("random").Random(0)
    for _ in range(19):
        a = next_lease(participation=part)
        assert a is not None and a.item_id != last.pk
        services.annotation_submit(annotator=part.annotator, token=a.token, data=esa_answer(a, rng))
    assert Round.objects.get(study=study, number=1).state == Round.State.OPEN
    nxt = next_lease(participation=part)  # skips the last item
    last.refresh_from_db()
    assert (last.prefill_skip, last.is_active) == ("skipped", False)
    assert Round.objects.get(study=study, number=1).state != Round.State.OPEN
    assert Round.objects.filter(study=study, number=2).exists()
    assert nxt is None or nxt.item.round_number == 2
    assert ProtocolConfig.objects.get(study=study).committed >= 20
