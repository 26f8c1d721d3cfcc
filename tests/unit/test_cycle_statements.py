"""The worker's answer cycle (POST an answer, answered with the next task) runs the same
few SQL statements for every task kind: the item and its outputs in one statement, the
outputs read with the answered item only for a kind whose answer reads them
(``Kind.answer_reads_outputs``), no statement per output. Counted, not timed, so a
regression fails here before it shows in ``bench/cycle_cost.py``."""

import random
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotator import services
from annotator.models import Assignment
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle

TOKEN = re.compile(r'name="token" value="([0-9a-f-]+)"')
KINDS = {
    "pairwise": {},
    "likert": {"kind": "likert"},
    "ranking": {"kind": "ranking", "per_item": 3, "allow_tie": False},
    "error_spans": {"kind": "error_spans", "categories": ["Accuracy"]},
}
#: Statements of one pairwise answer cycle on SQLite (the unit tests' database): the worker's
#: participation; BEGIN, its lock, the assignment with its item and the worker's count of done
#: items, the annotation, the assignment closed, the item counted; the item taken, its input
#: and outputs, the lease, COMMIT; the round's completion check after the commit.
MOST_STATEMENTS = 12
#: On PostgreSQL, the annotation, the assignment closed and the item counted are one
#: statement, and so are the item taken and its input and outputs.
MOST_STATEMENTS_POSTGRESQL = 9


def form(study, token: str, rng: random.Random) -> dict[str, str]:
    """The task form a worker posts, drawn by the kind's own simulated worker."""
    lease = Assignment.objects.get(token=token)
    kind = study.kind_impl
    data, _ = kind.simulate_answer(
        study.kind_options(),
        lease.display_order,
        [None] * len(lease.display_order),
        None,
        {},
        rng,
        0.8,
    )
    fields = {"token": token, "time_ms": "1200"}
    for key, value in data.items():
        if key == "scores":
            fields |= {f"score-{name}": str(v) for name, v in value.items()}
        else:
            fields[key] = str(value)
    return fields


def answer_cycle(kind: str) -> list[str]:
    """The statements of a worker's third answer in a fresh study of ``kind``."""
    study = services.study_import(
        adaptive_bundle(n_inputs=60, batch_size=20, **KINDS[kind]), filename=f"{kind}.jsonl"
    )
    client, rng = Client(), random.Random(1)
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    token = TOKEN.search(client.get(f"/w/{study.public_id}/task/").content.decode()).group(1)
    for _ in range(3):
        posted = form(study, token, rng)
        with CaptureQueriesContext(connection) as captured:
            page = client.post(f"/w/{study.public_id}/task/", posted)
        assert page.status_code == 200, page.content[:500]
        token = TOKEN.search(page.content.decode()).group(1)
    return [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("kind", list(KINDS))
def test_one_answer_cycle_runs_the_same_few_statements_for_every_kind(kind, transactional_db):
    statements = answer_cycle(kind)
    pairwise = statements if kind == "pairwise" else answer_cycle("pairwise")
    most = MOST_STATEMENTS_POSTGRESQL if connection.vendor == "postgresql" else MOST_STATEMENTS
    assert len(statements) == len(pairwise), "\n".join(statements)
    assert len(pairwise) <= most, "\n".join(pairwise)
    links = [s for s in statements if "annotator_itemoutput" in s]
    # the next task's item comes with its outputs; the answered item's only for error spans
    assert len(links) == (2 if kind == "error_spans" else 1), "\n".join(links)


def test_a_worker_who_finds_no_item_frees_no_slot_before_a_lease_can_expire_or_idle(make_study):
    """The expired-lease release and the idle-lease reclaim run for a worker who found no
    item only once some lease can have expired or turned idle: before that, looking again
    costs neither (the moment is read once, with one ``MIN`` over the live leases)."""
    study = make_study(redundancy=1)  # three items
    for name in ("h1", "h2", "h3"):  # each holds one: none is free
        holder = services.participation_enter(study=study, platform="link", external_id=name)
        assert next_lease(participation=holder) is not None
    waiter = services.participation_enter(study=study, platform="link", external_id="w2")
    for look in range(3):
        with CaptureQueriesContext(connection) as captured:
            assert next_lease(participation=waiter) is None
        sql = " ".join(q["sql"] for q in captured.captured_queries)
        assert "MIN(" in sql if look == 0 else "MIN(" not in sql
        assert '."seen_at" <=' not in sql  # no idle-lease reclaim
        assert '."expires_at" <=' not in sql  # no release of expired leases
