"""Twenty workers at once on PostgreSQL: redundancy holds, no item twice, nothing lost."""

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from annotator import services
from annotator.models import Annotation, Assignment, Item
from tests.conftest import pairwise_bundle
from tests.leasing import next_lease

WORKERS = 20


def run_in_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def wrapped(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


@pytest.mark.django_db(transaction=True)
def test_twenty_workers_never_exceed_redundancy_nor_repeat_nor_lose(make_study):
    assert connection.vendor == "postgresql"
    study = make_study(pairwise_bundle(n_inputs=15, systems=("s1", "s2", "s3")), redundancy=3)
    n_items = Item.objects.filter(study=study).count()  # 45 items, 135 slots
    stored: list[int] = []
    created_flags: list[bool] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        part = services.participation_enter(study=study, platform="link", external_id=f"w{i}")
        worker = part.annotator
        while (a := next_lease(participation=part)) is not None:
            # every submit is sent twice at once, as a double click or a retry would
            results: list = []
            answer = "left" if i % 2 else "right"

            def submit(token=a.token, results=results, answer=answer) -> None:
                results.append(
                    services.annotation_submit(
                        annotator=worker, token=token, data={"answer": answer}
                    )
                )
                connections.close_all()

            pair = [threading.Thread(target=submit) for _ in range(2)]
            for t in pair:
                t.start()
            for t in pair:
                t.join(60)
            assert len(results) == 2
            assert results[0][0].pk == results[1][0].pk
            with lock:
                stored.append(results[0][0].pk)
                created_flags.extend(created for _, created in results)

    errors = run_in_threads(work, WORKERS)
    assert errors == []
    annotations = Annotation.objects.filter(study=study)
    assert annotations.count() == n_items * 3 == len(set(stored))
    assert created_flags.count(True) == n_items * 3  # one of each double submit stored
    per_item = Counter(annotations.values_list("item_id", flat=True))
    assert set(per_item.values()) == {3}
    pairs = Counter(annotations.values_list("item_id", "annotator_id"))
    assert max(pairs.values()) == 1
    assert set(Item.objects.filter(study=study).values_list("n_done", "n_taken")) == {(3, 3)}
    assert not Assignment.objects.filter(study=study, state="issued").exists()


@pytest.mark.django_db(transaction=True)
def test_idle_leases_handed_on_while_their_holders_answer_count_once(make_study, settings):
    """Ten idle leases (the last items of a study): their holders answer at the moment ten
    other workers, who have no item, look for one. Each item ends with exactly one of the
    two: the holder's answer stored, or the holder refused and the item leased to a taker;
    never both, never an item above its redundancy."""
    from datetime import timedelta

    from django.utils import timezone

    from annotator.errors import AssignmentExpired

    assert connection.vendor == "postgresql"
    study = make_study(pairwise_bundle(n_inputs=10), redundancy=1)
    enter = services.participation_enter
    holders = [enter(study=study, platform="link", external_id=f"h{i}") for i in range(10)]
    takers = [enter(study=study, platform="link", external_id=f"t{i}") for i in range(10)]
    leases = [next_lease(participation=h) for h in holders]
    assert len({a.item_id for a in leases}) == 10
    later = timezone.now() + timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS + 1)
    stored, refused, taken = [], [], []

    def act(i: int) -> None:
        if i % 2 == 0:
            h, a = holders[i // 2], leases[i // 2]
            try:
                services.annotation_submit(
                    annotator=h.annotator, token=a.token, data={"answer": "left"}, now=later
                )
                stored.append(a.item_id)
            except AssignmentExpired:
                refused.append(a.item_id)
        else:
            task = services.task_next(participation=takers[i // 2], now=later)
            if task is not None:
                taken.append(task.assignment.item_id)

    assert run_in_threads(act, 20) == []
    assert len(stored) + len(refused) == 10
    assert sorted(taken) == sorted(refused)  # a refused holder's item went to a taker
    assert not set(stored) & set(taken)
    for item in Item.objects.filter(study=study):
        live = Assignment.objects.filter(item=item, state__in=["issued", "submitted"]).count()
        assert item.n_taken == live <= 1 and item.n_done == item.annotations.count() <= 1
    assert Annotation.objects.count() == len(stored)
