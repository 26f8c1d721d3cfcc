"""A ranking study of conversations through the stack: import (conversation inputs and
outputs, ``per_item``, gold rankings), the worker's answer in system order, the export (JSON
and CSV) and the report, which reads each ranking as its pairs; the demo's ranking study
answered by ``simulate_crowd``."""

from __future__ import annotations

import csv
import io
import json
import random
from itertools import combinations

import pytest
from django.core.management import call_command

from analysis import selectors as report_selectors
from annotator import selectors, services
from annotator.errors import ImportRejected
from annotator.models import Annotation, Item, Output, Study
from annotator.renderers import csv_text
from tests.conftest import ROOT, boss_client, bundle
from tests.leasing import next_lease

SYSTEMS = ("alpha", "beta", "gamma", "delta")
CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Name a **prime** number."},
]


def _records(n: int = 4, gold: object = None) -> list[dict]:
    records = [
        {
            "id": f"c{i}",
            "input": CHAT,
            "outputs": {s: [{"role": "assistant", "content": f"{s} says {i}"}] for s in SYSTEMS},
        }
        for i in range(n)
    ]
    if gold is not None:
        records.append(
            {
                "id": "g",
                "input": "Rank these.",
                "outputs": {s: f"gold {s}" for s in reversed(SYSTEMS)},
                "gold": gold,
            }
        )
    return records


def _study(make_study, records=None, **study):
    options = {"name": "rank", "kind": "ranking", "per_item": 3, "allow_tie": True, **study}
    return make_study(bundle(records or _records(), options), redundancy=2)


def test_a_conversation_ranking_study_imports_with_m_of_k_outputs_per_item(make_study):
    study = _study(make_study)
    items = list(Item.objects.filter(study=study).order_by("pk"))
    assert len(items) == 4
    for item in items:
        outs = item.output_list()
        assert len(outs) == 3  # per_item 3 of 4 systems, in system order
        names = [o.system.name for o in outs]
        assert names == sorted(names, key=SYSTEMS.index)
        assert outs[0].messages == [
            {"role": "assistant", "content": f"{names[0]} says {item.input.external_id[1:]}"}
        ]
        assert outs[0].text == f"assistant: {names[0]} says {item.input.external_id[1:]}"
        assert item.input.metadata["conversation"] == CHAT
        assert item.input.text.startswith("system: Be brief.\n\nuser: Name")
    assert study.kind_options()["per_item"] == 3


def test_a_gold_ranking_shows_every_output_in_the_files_order(make_study):
    gold = [["delta"], ["beta", "gamma"], "alpha"]  # the file lists delta, gamma, beta, alpha
    study = _study(make_study, _records(2, gold=gold))
    item = Item.objects.get(study=study, is_gold=True)
    assert [o.system.name for o in item.output_list()] == ["delta", "gamma", "beta", "alpha"]
    assert item.expected == {"ranking": [[0], [1, 2], [3]]}
    kind, opts = study.kind_impl, study.kind_options()
    assert kind.gold_correct(opts, item.expected, {"ranking": [[0], [1, 2], [3]]})
    assert not kind.gold_correct(opts, item.expected, {"ranking": [[0], [1], [2], [3]]})


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ("omega", "'gold' names 'omega', which is not one of this item's systems"),
        (["alpha", "beta"], "'gold' must rank every system of the item exactly once"),
        ({"best": "alpha"}, "'gold' is a system name (the best output) or a list of tiers"),
    ],
)
def test_a_bad_gold_ranking_is_refused_by_line(make_study, gold, message):
    with pytest.raises(ImportRejected) as caught:
        _study(make_study, _records(1, gold=gold))
    assert any(f"line 3 (input 'g'): 'gold': {message}" in e for e in caught.value.errors), (
        caught.value.errors
    )
    assert not Study.objects.exists()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ([{"role": "user", "content": "x"}], "needs at least one 'assistant' message"),
        ([{"role": "assistant", "content": " "}], "message 1 has no text 'content'"),
        ([], "a conversation output is a non-empty list"),
    ],
)
def test_a_bad_conversation_output_is_named_and_nothing_is_stored(make_study, output, message):
    records = _records(1)
    records[0]["outputs"]["beta"] = output
    with pytest.raises(ImportRejected) as caught:
        _study(make_study, records)
    assert any(
        e.startswith("line 2 (input 'c0'): output of system 'beta'") and message in e
        for e in caught.value.errors
    ), caught.value.errors
    assert not Output.objects.exists()


def _rank(study, worker: str, best_first_systems: list[str]):
    """``worker`` ranks their next item: the shown outputs ordered as ``best_first_systems``
    orders their systems (a system not shown is skipped), submitted in display order."""
    part = services.participation_enter(study=study, platform="link", external_id=worker)
    lease = next_lease(participation=part)
    names = [o.system.name for o in lease.item.output_list()]
    shown = [names[p] for p in lease.display_order]
    tiers = [[shown.index(s)] for s in best_first_systems if s in shown]
    data = {"ranking": json.dumps(tiers)}
    first = services.annotation_submit(annotator=part.annotator, token=lease.token, data=data)
    again = services.annotation_submit(annotator=part.annotator, token=lease.token, data=data)
    return lease, shown, first, again


def test_a_ranking_is_stored_once_in_system_order_and_exported_by_name(make_study):
    study = _study(make_study)
    lease, shown, (annotation, created), (same, created_again) = _rank(
        study, "w1", ["gamma", "alpha", "delta", "beta"]
    )
    assert created and not created_again and same.pk == annotation.pk
    assert Annotation.objects.filter(study=study).count() == 1
    best_first = [s for s in ["gamma", "alpha", "delta", "beta"] if s in shown]
    names = [o.system.name for o in lease.item.output_list()]
    assert annotation.answer["ranking"] == [[names.index(s)] for s in best_first]
    row = selectors.label_row(selectors.annotations_for_export(study).get())
    assert row["ranking"] == [[s] for s in best_first]
    assert row["display_order"] == shown  # the order the worker saw, by system name
    text = "".join(csv_text([row], extra=["ranking", "display_order"]))
    cells = next(csv.DictReader(io.StringIO(text)))
    assert json.loads(cells["ranking"]) == [[s] for s in best_first]
    assert json.loads(cells["display_order"]) == shown


def test_a_refused_ranking_stores_nothing(make_study):
    from annotator.errors import InvalidAnswer

    records = _records()
    study = make_study(bundle(records, {"name": "no ties by default", "kind": "ranking"}))
    assert study.options["allow_tie"] is False and study.kind_options()["allow_tie"] is False
    part = services.participation_enter(study=study, platform="link", external_id="w")
    lease = next_lease(participation=part)
    for bad, message in (([[0, 1], [2]], "does not allow ties"), ([[0], [1]], "exactly once")):
        with pytest.raises(InvalidAnswer, match=message):
            services.annotation_submit(
                annotator=part.annotator, token=lease.token, data={"ranking": json.dumps(bad)}
            )
    assert not Annotation.objects.exists()


def test_the_report_reads_each_ranking_as_its_pairs(make_study):
    study = _study(make_study, redundancy=3)
    truth = ["alpha", "beta", "gamma", "delta"]
    for n in range(12):
        rng = random.Random(n)
        order = truth if rng.random() < 0.8 else list(reversed(truth))
        if _rank_or_none(study, f"w{n}", order) is None:
            break
    dataset = report_selectors.study_dataset(study)
    assert [(p.name, p.scale) for p in dataset.properties] == [("preference", "pairwise")]
    labelled = Annotation.objects.filter(study=study).count()
    assert labelled >= 8
    assert len(dataset.annotations) == 3 * labelled  # m(m-1)/2 = 3 pairs per ranking of 3
    assert len(dataset.items) == 3 * Item.objects.filter(study=study).count()
    for _, row in dataset.items.iterrows():  # every pair item names two of the item's systems
        assert row["system_a"] != row["system_b"]
        assert SYSTEMS.index(row["system_a"]) < SYSTEMS.index(row["system_b"])
    report = report_selectors.study_report(study, n_boot=50)
    text = json.dumps(report, default=str)
    assert "alpha" in text and "delta" in text
    page = _report_page(study)
    assert "alpha" in page


def _rank_or_none(study, worker, order):
    part = services.participation_enter(study=study, platform="link", external_id=worker)
    lease = next_lease(participation=part)
    if lease is None:
        return None
    names = [o.system.name for o in lease.item.output_list()]
    shown = [names[p] for p in lease.display_order]
    tiers = [[shown.index(s)] for s in order if s in shown]
    return services.annotation_submit(
        annotator=part.annotator, token=lease.token, data={"ranking": json.dumps(tiers)}
    )


def _report_page(study) -> str:

    client = boss_client()
    response = client.get(f"/studies/{study.pk}/report/")
    assert response.status_code == 200
    return response.content.decode()


def test_pair_labels_match_the_kinds_pair_preferences(make_study):
    study = _study(make_study, redundancy=1)
    _rank_or_none(study, "w", ["delta", "gamma", "beta", "alpha"])
    rows = [r for r in selectors.report_rows(study)]
    annotation = Annotation.objects.get()
    item = annotation.item_id
    names = [o.system.name for o in annotation.item.output_list()]
    expected = {
        (f"{item}:{i}-{j}", "B")  # later systems were ranked higher: the second output wins
        for i, j in combinations(range(len(names)), 2)
    }
    assert {(r[1], r[4]) for r in rows} == expected


@pytest.mark.django_db(transaction=True)
def test_simulate_crowd_ranks_the_demo_ranking_study(capsys):
    call_command("demo")
    study = Study.objects.get(kind="ranking")
    assert study.name.startswith("Demo: rank replies in a conversation")
    capsys.readouterr()
    call_command("simulate_crowd", str(study.pk), "--workers", "6", "--seed", "1")
    labels = Annotation.objects.filter(study=study, source="platform")
    assert labels.count() > 0
    truth = json.loads((ROOT / "demo" / "ranking_demo.jsonl").read_text().splitlines()[1])
    assert truth["metadata"]["truth"]["expert-preferred"] == 3
    for annotation in labels:
        assert len([p for tier in annotation.answer["ranking"] for p in tier]) == 3
    report = report_selectors.study_report(study, n_boot=50)
    assert "expert-preferred" in json.dumps(report, default=str)
