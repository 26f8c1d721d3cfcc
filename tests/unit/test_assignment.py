"""The assignment and submission services: redundancy, once per worker, idempotence, leases."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotator import services
from annotator.errors import AssignmentExpired, AssignmentNotFound, InvalidAnswer, WorkerBlocked
from annotator.models import Annotation, Assignment, Item
from kinds.pairwise import normalise
from tests.conftest import bundle
from tests.leasing import next_lease


def worker(study, name: str):
    return services.participation_enter(study=study, platform="link", external_id=name)


@pytest.mark.parametrize(
    ("raw", "left_is_a", "expected"),
    [
        ("left", True, "A"),
        ("left", False, "B"),
        ("right", True, "B"),
        ("right", False, "A"),
        ("tie", False, "tie"),
        ("both_good", True, "both_good"),
        ("both_bad", False, "both_bad"),
    ],
)
def test_normalise_maps_display_order_to_system_order(raw, left_is_a, expected):
    assert normalise(raw, [0, 1] if left_is_a else [1, 0]) == expected


def test_each_item_gets_its_redundancy_and_never_twice_per_worker(make_study):
    study = make_study()  # 3 inputs × 1 pair, redundancy 2
    seen: dict[str, list[int]] = {}
    for name in ("w1", "w2", "w3"):
        w = worker(study, name)
        while (a := next_lease(participation=w)) is not None:
            seen.setdefault(name, []).append(a.item_id)
            services.annotation_submit(
                annotator=w.annotator, token=str(a.token), data={"answer": "left"}
            )
    assert sorted(len(v) for v in seen.values()) == [3, 3]  # two workers fill everything
    for items in seen.values():
        assert len(items) == len(set(items))
    assert list(Item.objects.values_list("n_done", flat=True)) == [2, 2, 2]
    assert Annotation.objects.count() == 6


def test_next_returns_the_open_assignment_until_it_is_submitted(make_study):
    study = make_study()
    w = worker(study, "w")
    first = next_lease(participation=w)
    again = next_lease(participation=w)
    assert first.pk == again.pk
    assert Assignment.objects.count() == 1


def test_left_right_order_is_drawn_per_assignment(make_study):
    study = make_study(data=None, redundancy=60)
    sides = []
    for i in range(60):
        w = worker(study, f"w{i}")
        a = next_lease(participation=w)
        assert sorted(a.display_order) == [0, 1]
        sides.append(a.display_order == [0, 1])
    # P(all 60 equal) = 2^-59: a fixed order would fail this
    assert 10 < sum(sides) < 50


def test_submit_stores_raw_and_normalised_answer(make_study):
    study = make_study()
    w = worker(study, "w")
    a = next_lease(participation=w)
    annotation, created = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"answer": "left"}, time_spent_ms=1234
    )
    assert created
    assert annotation.raw_answer == "left"
    assert annotation.value == ("A" if a.display_order == [0, 1] else "B")
    assert annotation.time_spent_ms <= 1234
    assert annotation.config_version == study.config_version


def test_double_submit_stores_one_annotation(make_study):
    study = make_study()
    w = worker(study, "w")
    a = next_lease(participation=w)
    first, created1 = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"answer": "left"}
    )
    second, created2 = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"answer": "right"}
    )
    assert (created1, created2) == (True, False)
    assert first.pk == second.pk and second.raw_answer == "left"
    assert Annotation.objects.count() == 1
    assert Item.objects.get(pk=a.item_id).n_done == 1


def test_annotations_are_immutable(make_study):
    study = make_study()
    w = worker(study, "w")
    a = next_lease(participation=w)
    annotation, _ = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"answer": "left"}
    )
    annotation.value = "B"
    with pytest.raises(ValueError, match="immutable"):
        annotation.save()
    assert Annotation.objects.get(pk=annotation.pk).raw_answer == "left"


def test_expired_assignment_submit_is_refused_and_changes_nothing(make_study):
    study = make_study()
    w = worker(study, "w")
    a = next_lease(participation=w)
    later = timezone.now() + timedelta(seconds=study.lease_seconds + 1)
    with pytest.raises(AssignmentExpired, match="ran out"):
        services.annotation_submit(
            annotator=w.annotator, token=str(a.token), data={"answer": "left"}, now=later
        )
    assert Annotation.objects.count() == 0
    assert Item.objects.get(pk=a.item_id).n_done == 0


def test_expired_lease_returns_item_to_the_pool(make_study):
    study = make_study(redundancy=1)
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    a1 = next_lease(participation=w1)
    later = timezone.now() + timedelta(seconds=study.lease_seconds + 1)
    # before expiry the slot is held; w2 gets another item
    other = next_lease(participation=w2)
    assert other.item_id != a1.item_id
    services.annotation_submit(
        annotator=w2.annotator, token=str(other.token), data={"answer": "left"}
    )
    # after expiry the lease is released and the item can go to w2
    got = []
    while (a := next_lease(participation=w2, now=later)) is not None:
        got.append(a.item_id)
        services.annotation_submit(
            annotator=w2.annotator, token=str(a.token), data={"answer": "right"}, now=later
        )
    assert a1.item_id in got
    assert Assignment.objects.get(pk=a1.pk).state == "expired"
    assert all(i.n_taken == i.n_done == 1 for i in Item.objects.all())


def test_foreign_or_unknown_token_is_refused(make_study):
    study = make_study()
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    a = next_lease(participation=w1)
    for token in (str(a.token), "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(AssignmentNotFound):
            services.annotation_submit(annotator=w2.annotator, token=token, data={"answer": "left"})
    assert Annotation.objects.count() == 0


def test_answer_must_be_allowed_by_the_study(make_study):
    study = make_study(allow_tie=False)
    w = worker(study, "w")
    a = next_lease(participation=w)
    for bad in ("tie", "A", "", None, "both_good"):
        with pytest.raises(InvalidAnswer):
            services.annotation_submit(
                annotator=w.annotator, token=str(a.token), data={"answer": bad}
            )
    assert Annotation.objects.count() == 0


def test_blocked_worker_gets_nothing_and_cannot_submit(make_study):
    study = make_study()
    w = worker(study, "w")
    a = next_lease(participation=w)
    w.annotator.is_blocked = True  # blocked on the whole platform
    w.annotator.save()
    with pytest.raises(WorkerBlocked):
        next_lease(participation=w)
    with pytest.raises(WorkerBlocked):
        services.annotation_submit(
            annotator=w.annotator, token=str(a.token), data={"answer": "left"}
        )
    assert Annotation.objects.count() == 0


def test_blocking_in_a_study_releases_work_and_flags_labels(make_study):
    study = make_study()
    w = worker(study, "w")
    first = next_lease(participation=w)
    services.annotation_submit(annotator=w.annotator, token=first.token, data={"answer": "left"})
    open_lease = next_lease(participation=w)
    services.participation_set_blocked(w, True)
    assert Annotation.objects.get().is_flagged
    assert Assignment.objects.get(pk=open_lease.pk).state == "returned"
    assert Item.objects.get(pk=open_lease.item_id).n_taken == 0
    with pytest.raises(WorkerBlocked, match="withdrawn"):
        next_lease(participation=w)
    with pytest.raises(WorkerBlocked):
        services.annotation_submit(
            annotator=w.annotator, token=open_lease.token, data={"answer": "left"}
        )
    services.participation_set_blocked(w, False)
    assert not Annotation.objects.get().is_flagged
    assert next_lease(participation=w) is not None


def test_likert_scores_validated_per_criterion(make_study):
    study = make_study(
        bundle(
            [{"id": "1", "input": "x", "outputs": {"m": "y"}}],
            {
                "kind": "likert",
                "criteria": [
                    {"name": "fluency", "scale": [1, 5]},
                    {"name": "safe", "labels": ["yes", "no"]},
                ],
            },
        )
    )
    w = worker(study, "w")
    a = next_lease(participation=w)
    for bad, message in [
        ({"fluency": 6, "safe": "yes"}, "between 1 and 5"),
        ({"fluency": 3}, "Rate 'safe'"),
        ({"fluency": "x", "safe": "yes"}, "whole number"),
        ({"fluency": 3, "safe": "maybe"}, "not one of the labels"),
        ({"fluency": 3, "safe": "no", "extra": 1}, "Unknown criteria: extra"),
    ]:
        with pytest.raises(InvalidAnswer, match=message):
            services.annotation_submit(
                annotator=w.annotator, token=str(a.token), data={"scores": bad}
            )
    annotation, _ = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"scores": {"fluency": "4", "safe": "no"}}
    )
    assert annotation.scores == {"fluency": 4, "safe": "no"}
    assert annotation.value == "" and annotation.raw_answer == ""


def test_items_per_worker_quota(make_study):
    study = make_study(items_per_worker=2)
    w = worker(study, "w")
    done = 0
    while (a := next_lease(participation=w)) is not None:
        services.annotation_submit(
            annotator=w.annotator, token=str(a.token), data={"answer": "right"}
        )
        done += 1
    assert done == 2


def test_config_change_bumps_version_and_labels_carry_it(make_study):
    study = make_study()
    assert study.config_version == 1
    study.description = "notes"
    services.study_configure(study, ["description"])
    assert study.config_version == 1
    study.options = {**study.options, "allow_tie": False}
    services.study_configure(study, ["options"])
    assert study.config_version == 2
    w = worker(study, "w")
    a = next_lease(participation=w)
    annotation, _ = services.annotation_submit(
        annotator=w.annotator, token=str(a.token), data={"answer": "left"}
    )
    assert annotation.config_version == 2


def test_release_task_runs_eagerly_in_embedded_mode(make_study):
    from annotator.tasks import release_expired_leases

    study = make_study()
    a = next_lease(participation=worker(study, "w"))
    Assignment.objects.filter(pk=a.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert release_expired_leases.delay().get() == 1
    assert Item.objects.get(pk=a.item_id).n_taken == 0
