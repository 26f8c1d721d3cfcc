"""Adaptive collection of a Likert study, run live through the services (SQLite, eager
tasks): one item per output shared by every pair with its system, one preference per input
from the two outputs' mean ratings (Definition 5), the budget ledger in annotations."""

from collections import Counter, defaultdict

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.test import Client

from annotator import services
from annotator.errors import ImportRejected
from annotator.models import Annotation, Assignment, Input, Item, Participation
from protocol import selectors
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from protocol.services import round_open
from tests.conftest import PASSWORD, bundle, make_superuser
from tests.leasing import next_lease
from tests.protocol_sim import lease_to_new_workers, likert_bundle, run_workers


def make(**options):
    study = services.study_import(likert_bundle(**options), filename="likert.jsonl")
    return study, ProtocolConfig.objects.get(study=study)


def pair(study, a, b):
    return SystemPair.objects.get(study=study, system_a__name=a, system_b__name=b)


def outputs_itemised(study, **filters) -> dict[str, set[str]]:
    """Per system name, the external ids of the inputs whose output has an item."""
    out = defaultdict(set)
    for system, input_id in Item.objects.filter(study=study, **filters).values_list(
        "item_outputs__output__system__name", "input__external_id"
    ):
        out[system].add(input_id)
    return dict(out)


def assert_items_unique(study) -> None:
    """Every item shows one output, and no output has two items."""
    rows = list(
        Item.objects.filter(study=study).values_list("input_id", "item_outputs__output__system_id")
    )
    assert not Item.objects.filter(study=study, item_outputs__position=1).exists()
    assert len(rows) == len(set(rows)), Counter(rows).most_common(3)


# --- import -----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_adaptive_likert_import_starts_round_one_with_shared_items():
    study, config = make(redundancy=2)
    assert study.kind == "likert" and study.collection == "adaptive"
    assert SystemPair.objects.filter(study=study).count() == 6
    # batch 5 for each of the 6 pairs costs only 5 inputs × 4 outputs: the pairs share them
    assert list(Round.objects.values_list("number", "state", "items")) == [(1, "open", 20)]
    assert_items_unique(study)
    per_system = outputs_itemised(study)
    assert len({frozenset(inputs) for inputs in per_system.values()}) == 1
    assert all(len(inputs) == 5 for inputs in per_system.values())
    assert config.committed == 20 * 2  # items × redundancy
    likert = selectors.scored_ratings(study)
    assert all(len(likert.both(p)) == 5 for p in SystemPair.objects.filter(study=study))


def likert_file(records, **study):
    return bundle(records, {"kind": "likert", "collection": "adaptive", "redundancy": 1, **study})


TWO = {"a": "one", "b": "two"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (  # labels in an adaptive import, as for pairwise studies
            b'{"annotations": [{"metric": "q", "category": "graded", "worst": 1, "best": 5}],'
            b' "instances": [{"id": 1, "instance": "text",'
            b' "annotations": {"q": {"individual_human_scores": [4, 5]}}}]}',
            "jb.json",
            "study: an adaptive study starts without labels",
        ),
        (
            likert_file(
                [{"id": "x", "outputs": TWO}],
                criteria=[{"name": "ok", "label": "OK?", "labels": ["yes", "no"]}],
            ),
            "c.jsonl",
            "study: adaptive collection of a Likert study needs a criterion rated on a scale",
        ),
        (
            likert_file([{"id": "x", "outputs": TWO, "gold": "a"}]),
            "g.jsonl",
            "study: gold checks are pairwise; an adaptive Likert study takes no 'gold' inputs",
        ),
        (
            likert_file([{"id": "x", "outputs": {"a": "one"}}]),
            "s.jsonl",
            "study: adaptive collection compares systems: give at least two",
        ),
    ],
)
def test_adaptive_likert_imports_that_cannot_work_are_rejected(data, filename, message):
    overrides = {"collection": "adaptive"} if filename.endswith(".json") else None
    with pytest.raises(ImportRejected) as exc:
        services.study_import(data, filename=filename, overrides=overrides)
    assert any(message in error for error in exc.value.errors), exc.value.errors
    assert not ProtocolConfig.objects.exists() and not Item.objects.exists()


# --- rounds -----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_simulated_raters_retire_every_pair_and_the_better_system_wins():
    study, config = make()
    run_workers(study)
    assert not SystemPair.objects.filter(study=study, state="open").exists()
    assert set(Round.objects.values_list("state", flat=True)) == {"decided"}
    for rnd in Round.objects.all():
        decided = list(rnd.decisions.values_list("pair", flat=True))
        assert len(decided) == len(set(decided))
    s1_s3 = pair(study, "s1", "s3")
    assert (s1_s3.state, s1_s3.winner.name) == ("decided", "s1")
    assert s1_s3.evidence["used"] < s1_s3.evidence["pool"] == 40  # in inputs
    assert sum(s1_s3.evidence["human"]) == s1_s3.evidence["used"]  # one label per input
    truth = {"s1": 4.5, "s2": 3.5, "s3": 2.0, "s4": 2.0}
    for decided in SystemPair.objects.filter(state="decided"):
        loser = decided.system_b if decided.winner_id == decided.system_a_id else decided.system_a
        assert truth[decided.winner.name] > truth[loser.name]
    assert pair(study, "s3", "s4").state != "decided"  # equal systems
    assert_items_unique(study)
    config.refresh_from_db()
    assert Annotation.objects.filter(study=study).count() == config.committed
    assert config.committed == Item.objects.filter(study=study).count()  # redundancy 1


@pytest.mark.django_db(transaction=True)
def test_items_are_made_only_for_systems_of_open_pairs_that_need_them():
    study, _ = make(redundancy=1)
    run_workers(study)
    assert Round.objects.count() >= 3
    final = selectors.scored_ratings(study)
    system_of = dict(study.systems.values_list("pk", "name"))
    for rnd in Round.objects.all():
        open_pairs = [d.pair for d in rnd.decisions.select_related("pair")]
        items = Item.objects.filter(study=study, round_number=rnd.number)
        for input_id, system in items.values_list("input_id", "item_outputs__output__system_id"):
            # the item completes this input for an open pair with its system
            assert any(
                system in (p.system_a_id, p.system_b_id) and input_id in final.both(p)
                for p in open_pairs
            ), (rnd.number, system_of[system], input_id)


def three_systems(n_inputs=8, **options):
    study = services.study_import(
        likert_bundle(n_inputs, systems=("s1", "s2", "s3"), batch_size=2, **options),
        filename="three.jsonl",
    )
    return study


def open_round_two(study, *, decided=(("s1", "s2"), ("s1", "s3"))):
    """Round 1 decided by hand: the given pairs retire, the rest stay open; round 2 opens."""
    SystemPair.objects.filter(study=study).filter(
        pk__in=[pair(study, a, b).pk for a, b in decided]
    ).update(state="decided")
    Round.objects.filter(study=study, number=1).update(state="decided")
    with transaction.atomic():
        return round_open(study, 2)


@pytest.mark.django_db(transaction=True)
def test_pairs_share_items_and_a_retired_system_gets_no_more():
    study = three_systems()
    first = outputs_itemised(study)
    # three pairs with two inputs each: two inputs × three outputs, not 3 × 2 × 2 items
    assert Item.objects.filter(study=study).count() == 6
    assert first["s1"] == first["s2"] == first["s3"] and len(first["s1"]) == 2
    rnd = open_round_two(study)
    second = outputs_itemised(study, round_number=2)
    assert set(second) == {"s2", "s3"}  # s1's pairs are retired: nothing for s1
    assert second["s2"] == second["s3"] and len(second["s2"]) == 2
    assert not second["s2"] & first["s2"]  # inputs the pair has already are not given again
    assert rnd.items == 4 and rnd.committed == 4
    assert_items_unique(study)


def one_output_missing():
    """Three systems after round 1, but the first input's s3 output has no item: for the
    pair (s2, s3) that input costs one new item, any fresh input two. Returns the study and
    round 1's inputs (the first is the one)."""
    study = three_systems()
    first = sorted(outputs_itemised(study)["s3"])
    Item.objects.filter(
        input__external_id=first[0], item_outputs__output__system__name="s3"
    ).delete()
    return study, first


@pytest.mark.django_db(transaction=True)
def test_an_input_whose_other_output_is_rated_is_preferred_at_equal_priority():
    study, first = one_output_missing()
    before = Item.objects.filter(study=study).count()
    open_round_two(study)
    second = outputs_itemised(study, round_number=2)
    # (s2, s3) takes the input with s2 rated already (one new item) before a fresh one (two)
    assert second["s3"] - second["s2"] == {first[0]}
    assert len(second["s2"]) == 1 and not second["s2"] & set(first)
    assert Item.objects.filter(study=study).count() == before + 3
    assert_items_unique(study)


@pytest.mark.django_db(transaction=True)
def test_priority_comes_before_cheapness():
    study, first = one_output_missing()
    fresh = sorted(set(Input.objects.values_list("external_id", flat=True)) - set(first))
    Input.objects.filter(external_id=fresh[0]).update(priority=10)
    Input.objects.filter(external_id=fresh[1]).update(priority=5)
    open_round_two(study)
    second = outputs_itemised(study, round_number=2)
    assert second == {"s2": {fresh[0], fresh[1]}, "s3": {fresh[0], fresh[1]}}


# --- budget -----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("redundancy", "budget", "committed"),
    [
        (1, 3, 2),  # batch 2, but the second input's two items do not fit in the one left
        (2, 9, 8),  # two inputs × two outputs × r = 8; a ninth annotation buys no item
        (1, 4, 4),  # exactly spent
    ],
)
def test_an_input_costs_two_items_and_the_budget_is_never_overspent(redundancy, budget, committed):
    study = services.study_import(
        likert_bundle(10, systems=("s1", "s2"), batch_size=2, redundancy=redundancy, budget=budget),
        filename="two.jsonl",
    )
    config = ProtocolConfig.objects.get(study=study)
    assert config.committed == committed == Round.objects.get().committed
    run_workers(study)
    config.refresh_from_db()
    assert Annotation.objects.filter(study=study).count() == config.committed == committed
    only = SystemPair.objects.get(study=study)
    assert only.state in ("exhausted", "decided") and Round.objects.count() == 1
    if only.state == "exhausted":  # its last look was made: nothing more could be bought
        assert only.evidence["outcome"] == "budget"
        assert Decision.objects.get(pair=only).outcome == "exhausted"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("redundancy", "budget"), [(1, 47), (2, 71)])
def test_budget_binds_and_ends_spent_but_for_what_buys_no_input(redundancy, budget):
    study, config = make(budget=budget, redundancy=redundancy)
    run_workers(study)
    config.refresh_from_db()
    collected = Annotation.objects.filter(study=study).count()
    assert collected == config.committed <= budget
    assert not SystemPair.objects.filter(study=study, state="open").exists()
    by_budget = [p.evidence.get("outcome") == "budget" for p in SystemPair.objects.all()]
    assert any(by_budget)  # the budget binds here
    # what is left cannot pay for the cheapest input still wanted (one item, or two)
    assert budget - collected < 2 * redundancy
    assert_items_unique(study)


# --- evidence ---------------------------------------------------------------------------------
CRITERIA = [
    {"name": "fluency", "label": "Fluent?", "scale": [1, 5]},
    {"name": "coverage", "label": "Complete?", "scale": [1, 9]},  # 1 + (v − 1) / 2 on 1–5
    {"name": "safe", "label": "Safe?", "labels": ["yes", "no"]},  # no order: never counts
]
#: (input, system) → the two workers' (fluency, coverage); blank criterion = their mean
#: with coverage on the 1–5 scale.
RATINGS = {
    ("in0", "s1"): [(5, 9), (4, 7)],  # 5, 4 → 4.5
    ("in0", "s2"): [(4, 7), (4, 7)],  # 4 → +0.5 (fluency alone: 4.5 − 4 = +0.5)
    ("in1", "s1"): [(3, 5), (3, 5)],  # 3
    ("in1", "s2"): [(2, 5), (4, 5)],  # 2.5, 3.5 → 3: a draw (fluency: 3 − 3, a draw)
    ("in2", "s1"): [(1, 1), (2, 3)],  # 1, 2 → 1.5
    ("in2", "s2"): [(4, 7), (4, 7)],  # 4 → −2.5 (fluency: 1.5 − 4 = −2.5)
    ("in3", "s1"): [(5, 1), (5, 1)],  # 3
    ("in3", "s2"): [(3, 9), (3, 9)],  # 4 → −1 (fluency: 5 − 3 = +2)
}


@pytest.fixture
def rated_study(transactional_db):
    """Two systems, four inputs, two raters who rate every output as in RATINGS."""
    study = services.study_import(
        likert_bundle(4, systems=("s1", "s2"), batch_size=4, redundancy=2, criteria=CRITERIA),
        filename="rated.jsonl",
    )
    for worker in range(2):
        part = services.participation_enter(study=study, platform="link", external_id=f"w{worker}")
        while (a := next_lease(participation=part)) is not None:
            item = a.item
            key = (item.input.external_id, item.output_list()[0].system.name)
            fluency, coverage = RATINGS[key][worker]
            services.annotation_submit(
                annotator=part.annotator,
                token=a.token,
                data={"scores": {"fluency": fluency, "coverage": coverage, "safe": "yes"}},
            )
    assert Annotation.objects.filter(study=study).count() == 16
    return study


def labels_by_input(study) -> dict[str, str]:
    only = SystemPair.objects.get(study=study)
    names = dict(Input.objects.values_list("pk", "external_id"))
    labels = selectors.scored_labels(only, selectors.scored_ratings(study))
    assert all(len(v) == 1 for v in labels.values())  # one derived label per input
    return {names[i]: ">=<"[v[0]] for i, v in labels.items()}


def test_derived_label_is_the_sign_of_the_mean_difference_with_a_dead_zone(rated_study):
    study = rated_study
    assert labels_by_input(study) == {"in0": ">", "in1": "=", "in2": "<", "in3": "<"}
    # the decision that closed the pair counted the same labels, one per input
    only = SystemPair.objects.get(study=study)
    assert Decision.objects.get(pair=only).human_counts == [1, 1, 2]
    assert only.evidence["used"] == only.evidence["pool"] == 4
    assert selectors.pair_evidence(study, only)["human"].tolist() == [1, 1, 2]
    config = ProtocolConfig.objects.get(study=study)
    config.scored_dead_zone = 0.5  # a difference of exactly the dead zone is a draw
    config.save()
    assert labels_by_input(study) == {"in0": "=", "in1": "=", "in2": "<", "in3": "<"}
    config.scored_dead_zone = 0.4
    config.save()
    assert labels_by_input(study)["in0"] == ">"
    config.scored_dead_zone, config.scored_criterion = 0.0, "fluency"
    config.save()
    assert labels_by_input(study) == {"in0": ">", "in1": "=", "in2": "<", "in3": ">"}


def test_flagged_labels_and_gold_items_never_count(rated_study):
    study = rated_study
    w1 = Participation.objects.get(annotator__external_id="w1")
    services.participation_set_blocked(w1, True)  # their labels are flagged
    # worker 0 alone: in0 5 − 4, in1 3 − 2.5, in2 1 − 4, in3 3 − 4
    assert labels_by_input(study) == {"in0": ">", "in1": ">", "in2": "<", "in3": "<"}
    Item.objects.filter(input__external_id="in2", item_outputs__output__system__name="s2").update(
        is_gold=True
    )
    assert set(labels_by_input(study)) == {"in0", "in1", "in3"}
    w0 = Participation.objects.get(annotator__external_id="w0")
    services.participation_set_blocked(w0, True)
    assert labels_by_input(study) == {}  # an output with no label that counts has no score


def test_incomplete_items_give_no_label(rated_study):
    study = rated_study
    Item.objects.filter(input__external_id="in1", item_outputs__output__system__name="s1").update(
        redundancy=3
    )
    assert set(labels_by_input(study)) == {"in0", "in2", "in3"}


def test_likert_criterion_must_be_rated_on_a_scale(rated_study):
    config = ProtocolConfig.objects.get(study=rated_study)
    for name in ("safe", "nonsense"):
        config.scored_criterion = name
        with pytest.raises(ValidationError):
            config.full_clean()
        with pytest.raises(ValueError, match="not a criterion rated on a scale"):
            selectors.scored_ratings(rated_study, config)
    config.scored_criterion = "coverage"
    config.full_clean()


@pytest.mark.django_db(transaction=True)
def test_metric_scores_enter_as_for_pairwise_studies():
    import json

    study, config = make()
    lines = [
        {"judge": "m", "input_id": f"in{i}", "system": s, "score": mean + (i % 3) / 10}
        for i in range(40)
        for s, mean in {"s1": 4.5, "s2": 3.5, "s3": 2.0, "s4": 2.0}.items()
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    services.judge_ratings_import(study, data, filename="m.jsonl")
    config.metric_judge = "m"
    config.save()
    run_workers(study, n_workers=1, per_worker=20)  # round 1: 20 items, then decided
    assert Round.objects.get(number=1).state == "decided"
    for decision in Decision.objects.filter(round__number=1).select_related("pair"):
        # 5 inputs rated by humans for every pair, the metric alone on the other 35
        assert sum(decision.human_counts) == 5 and sum(decision.metric_counts) == 35
        evidence = selectors.pair_evidence(study, decision.pair, "m")
        assert evidence["confusion"].sum() == evidence["human"].sum() == 5
        # inputs given in round 2 (not rated yet) count neither as human nor as metric-only
        given = len(selectors.pair_used_inputs(study, decision.pair))
        assert evidence["metric"].sum() == 40 - given
    s1_s2 = Decision.objects.get(round__number=1, pair=pair(study, "s1", "s2"))
    assert s1_s2.metric_counts == [35, 0, 0]  # s1 always scores higher


# --- worker pages and dashboard ---------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_likert_worker_waits_between_rounds_and_sees_one_output():
    study, _ = make()
    leased = lease_to_new_workers(study, 20)
    assert (
        all(lease for _, lease in leased) and Round.objects.get().state == "open"
    )  # all 20 items of round 1
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=late")
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert "More tasks are coming" in page
    for part, lease in leased:
        services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"scores": {"overall": 3}}
        )
    assert Round.objects.filter(number=2, state="open").exists()
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert 'name="token"' in page and 'name="score-overall"' in page
    token = Assignment.objects.get(annotator__external_id="late").token
    client.post(f"/w/{study.public_id}/task/", {"token": token, "score-overall": "4"})
    stored = Annotation.objects.get(annotator__external_id="late")
    assert stored.scores == {"overall": 4} and len(stored.item.output_list()) == 1


@pytest.mark.django_db(transaction=True)
def test_dashboard_and_api_of_a_likert_study():
    from rest_framework.test import APIClient

    study, _ = make()
    run_workers(study)
    make_superuser()
    api = APIClient()
    api.login(username="boss", password=PASSWORD)
    data = api.get(f"/api/studies/{study.pk}/protocol/").json()
    assert (data["kind"], data["human_counts_unit"], data["scored_criterion"]) == (
        "likert",
        "inputs",
        "mean",
    )
    assert data["spent"] == data["committed"] == ProtocolConfig.objects.get().committed
    s1s3 = next(p for p in data["pairs"] if (p["system_a"], p["system_b"]) == ("s1", "s3"))
    assert s1s3["winner"] == "s1" and sum(s1s3["human_counts"]) <= 40
    assert {"winner": "s1", "loser": "s3"} in data["partial_order"]["edges"]
    client = Client()
    client.login(username="boss", password="x" * 12)
    page = client.get(f"/studies/{study.pk}/protocol/").content.decode()
    assert "Likert study: a pair's n counts inputs" in page and "mean over the criteria" in page
    assert page.count("<svg") == 3  # the partial order, the ranking, the budget


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_scored_settings_under_their_new_names(migrate):
    """0007_scored_settings: ``likert_criterion``/``likert_dead_zone`` serve every scored
    kind and are renamed ``scored_criterion``/``scored_dead_zone``, their values kept."""
    study = services.study_import(likert_bundle(4), filename="s.jsonl")
    before = [("protocol", "0006_protocolconfig_calibrated_levels")]
    after = [("protocol", "0007_scored_settings")]
    old = migrate(before)
    old.get_model("protocol", "ProtocolConfig").objects.filter(study_id=study.pk).update(
        likert_criterion="overall", likert_dead_zone=0.25
    )
    migrate(after)
    config = ProtocolConfig.objects.get(study=study)
    assert (config.scored_criterion, config.scored_dead_zone) == ("overall", 0.25)
