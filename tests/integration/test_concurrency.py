"""Twenty workers at once on PostgreSQL: redundancy holds, no item twice, nothing lost."""

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from annotator import services
from annotator.models import Annotation, Assignment, Item
from tests.conftest import pairwise_bundle

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
        while (a := services.assignment_next(participation=part)) is not None:
            # every submit is sent twice at once, as a double click or a retry would
            results: list = []
            answer = "left" if i % 2 else "right"

            def submit(token=a.token, results=results, answer=answer) -> None:
                results.append(
                    services.annotation_submit(annotator=worker, token=token, answer=answer)
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
