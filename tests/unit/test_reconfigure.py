"""Edits that take effect or say why not: redundancy, items per worker and the budget
reach the open items and the adaptive ledger, or are refused with the reason."""

import json

import pytest
from django.db.models import Sum

from annotator import selectors, services
from annotator.errors import ConfigRefused
from annotator.models import Item, Study
from protocol import services as protocol_services
from protocol.models import ProtocolConfig, Round
from tests.conftest import pairwise_bundle
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle


def enter(study, name):
    return services.participation_enter(study=study, platform="link", external_id=name)


def work(study, name, limit=100) -> int:
    """A worker answers everything they are given; how many items they got."""
    part = enter(study, name)
    done = 0
    while done < limit and (a := next_lease(participation=part)) is not None:
        services.annotation_submit(annotator=part.annotator, token=a.token, data={"answer": "left"})
        done += 1
    return done


def configure(study, **values) -> list[str]:
    for name, value in values.items():
        setattr(study, name, value)
    return services.study_configure(study, list(values))


def redundancies(study) -> list[int]:
    return sorted(set(Item.objects.filter(study=study).values_list("redundancy", flat=True)))


# --- static studies ---------------------------------------------------------------------
def test_raising_redundancy_gives_new_workers_work(make_study):
    study = make_study()  # 3 items, redundancy 2
    assert (work(study, "w1"), work(study, "w2"), work(study, "w3")) == (3, 3, 0)
    notes = configure(study, redundancy=4)
    assert redundancies(study) == [4]
    assert "3 open items now take 4 annotations each (+6 annotations to collect)" in notes[0]
    assert study.config_version == 2
    assert work(study, "w3") == 3 and work(study, "w4") == 3 and work(study, "w5") == 0
    assert selectors.study_progress(study)["target_annotations"] == 12


def test_lowering_redundancy_never_goes_below_what_workers_took(make_study):
    study = make_study(pairwise_bundle(redundancy=3))
    work(study, "w1", limit=2)  # items 1 and 2 answered once
    held = next_lease(participation=enter(study, "w2"))  # one more on item 1
    assert held.item_id == Item.objects.order_by("pk").first().pk
    notes = configure(study, redundancy=1)
    taken = dict(Item.objects.filter(study=study).values_list("n_taken", "redundancy"))
    assert taken == {2: 2, 1: 1, 0: 1}  # the held lease and every label are kept
    assert "1 items keep more than 1" in notes[1]
    # the lease can still be answered, and then the item is complete
    services.annotation_submit(annotator=held.annotator, token=held.token, data={"answer": "right"})
    assert work(study, "w3") == 1  # only the third item was still open


def test_gold_and_retired_items_keep_their_redundancy(make_study):
    from tests.unit.test_crowd import gold_bundle

    study = make_study(gold_bundle(4, 2, redundancy=2))
    Item.objects.filter(study=study, is_gold=False).filter(
        pk=Item.objects.filter(study=study, is_gold=False).first().pk
    ).update(is_active=False)
    configure(study, redundancy=5)
    rows = set(Item.objects.filter(study=study).values_list("is_gold", "is_active", "redundancy"))
    assert rows == {(True, True, 2), (False, False, 2), (False, True, 5)}


def test_items_per_worker_applies_from_the_next_item(make_study):
    study = make_study(items_per_worker=1)
    assert work(study, "w1") == 1
    notes = configure(study, items_per_worker=2)
    assert notes == ["Each worker may now annotate up to 2 items, from their next item on."]
    assert work(study, "w1") == 1  # one more, now two in all
    notes = configure(study, items_per_worker=1)
    assert "1 workers have done that many already and get no more" in notes[0]
    assert work(study, "w1") == 0
    assert configure(study, items_per_worker=None) == [
        "Workers may now annotate any number of items."
    ]
    assert work(study, "w1") == 1


def test_check_only_writes_nothing(make_study):
    study = make_study()
    notes = services.study_configure_check(study, {"redundancy": 5, "researchers": []})
    assert "+9 annotations to collect" in notes[0]
    assert redundancies(study) == [2]
    study.refresh_from_db()
    assert (study.redundancy, study.config_version) == (2, 1)


# --- adaptive studies -------------------------------------------------------------------
def adaptive(budget=None, **options):
    data = adaptive_bundle(**options, **({"budget": budget} if budget else {}))
    study = services.study_import(data, filename="a.jsonl")
    return study, ProtocolConfig.objects.get(study=study)


def ledger_is_exact(study) -> int:
    committed = ProtocolConfig.objects.get(study=study).committed
    released = Item.objects.filter(study=study, round_number__isnull=False).aggregate(
        n=Sum("redundancy")
    )["n"]
    assert committed == released == sum(Round.objects.values_list("committed", flat=True))
    return committed


@pytest.mark.django_db(transaction=True)
def test_adaptive_raise_within_budget_is_charged_to_the_ledger():
    study, config = adaptive(budget=100)  # round 1: 30 items × redundancy 1
    assert ledger_is_exact(study) == 30
    notes = configure(study, redundancy=3)
    assert ledger_is_exact(study) == 90
    assert redundancies(study) == [3]
    assert notes[0].startswith("Redundancy 1 → 3 for the 30 open items of round 1")
    assert "+60 annotations charged" in notes[0]
    assert notes[-1] == "Ledger: 90 annotations released, 10 of 100 left."


@pytest.mark.django_db(transaction=True)
def test_adaptive_raise_beyond_budget_is_refused_and_changes_nothing():
    study, config = adaptive(budget=80)
    study.redundancy = 3
    with pytest.raises(ConfigRefused, match=r"Budget would be exceeded: needs 60, remaining 50"):
        services.study_configure(study, ["redundancy"])
    stored = Study.objects.get(pk=study.pk)
    assert (stored.redundancy, stored.config_version) == (1, 1)
    assert redundancies(study) == [1] and ledger_is_exact(study) == 30
    # a budget below what was already released is refused too
    study.redundancy, study.budget = 1, 20
    with pytest.raises(ConfigRefused, match="budget 20 is below the 30 annotations"):
        services.study_configure(study, ["budget"])
    assert Study.objects.get(pk=study.pk).budget == 80


@pytest.mark.django_db(transaction=True)
def test_adaptive_lowering_refunds_and_closes_a_round_it_completes():
    study, config = adaptive(redundancy=2)
    assert ledger_is_exact(study) == 60
    assert work(study, "w1", limit=30) == 30  # every item of round 1 answered once
    assert Round.objects.get(number=1).state == "open"
    notes = configure(study, redundancy=1)
    assert "-30 annotations charged to the ledger" in notes[0]
    state = Round.objects.get(number=1).state  # complete now: closed, its decision queued
    assert state in ("closed", "decided")  # (decided at once where tasks run eagerly)
    if state == "closed":  # a broker is configured but no worker runs here
        assert protocol_services.round_decide(study.pk, 1)
    assert Round.objects.filter(number=2).exists()
    assert set(Item.objects.filter(round_number=2).values_list("redundancy", flat=True)) == {1}
    ledger_is_exact(study)


# --- the admin --------------------------------------------------------------------------
def change_form(study: Study, **values) -> dict:
    form = {
        "name": study.name,
        "kind": study.kind,
        "question": study.question,
        "instructions": study.instructions,
        "allow_tie": "on" if study.kind_settings.get("allow_tie") else "",
        "options": json.dumps(
            {k: v for k, v in study.options.items() if not k.startswith("allow_")}
        ),
        "render_markdown": "on",
        "redundancy": study.redundancy,
        "items_per_worker": study.items_per_worker or "",
        "lease_seconds": study.lease_seconds,
        "batch_size": study.batch_size,
        "budget": study.budget or "",
        "gamma": study.gamma,
        "collection": study.collection,
        "open_links": "on" if study.open_links else "",
        "gold_rate_start": study.gold_rate_start,
        "gold_rate_end": study.gold_rate_end,
        "gold_rate_halflife": study.gold_rate_halflife,
        "max_strikes": study.max_strikes,
        "is_active": "on",
        "description": "",
        "language": study.language,
        "languages": "[]",
        "instructions_by_language": "{}",
    }
    return {**form, **values}


@pytest.mark.django_db(transaction=True)
def test_admin_refuses_an_edit_beyond_the_budget_and_says_why(admin_client):
    study, _ = adaptive(budget=80)
    url = f"/admin/annotator/study/{study.pk}/change/"
    response = admin_client.post(url, change_form(study, redundancy=3, description="x"))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Budget would be exceeded: needs 60, remaining 50" in page
    stored = Study.objects.get(pk=study.pk)
    assert (stored.redundancy, stored.description, stored.config_version) == (1, "", 1)
    assert redundancies(study) == [1] and ledger_is_exact(study) == 30
    # within the budget the same form saves and says what took effect
    response = admin_client.post(url, change_form(study, redundancy=2), follow=True)
    assert "Ledger: 60 annotations released, 20 of 80 left." in response.content.decode()
    assert redundancies(study) == [2] and ledger_is_exact(study) == 60


def test_admin_raise_reaches_the_items_and_refuses_zero_items_per_worker(admin_client, make_study):
    study = make_study()
    url = f"/admin/annotator/study/{study.pk}/change/"
    page = admin_client.post(url, change_form(study, items_per_worker=0)).content.decode()
    assert "Ensure this value is greater than or equal to 1." in page
    response = admin_client.post(url, change_form(study, redundancy=10), follow=True)
    assert "3 open items now take 10 annotations each" in response.content.decode()
    assert redundancies(study) == [10]
