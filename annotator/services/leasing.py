"""The lease engine of the worker cycle: lock, lease, release, reclaim, renew.

The raw SQL of the worker cycle lives here (see ``sqlrows``)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Exists,
    F,
    OuterRef,
    Q,
)
from django.utils import timezone

from .. import prefill_skip
from ..choices import AssignmentState
from ..errors import (
    AssignmentExpired,
    AssignmentNotFound,
    WorkerBlocked,
)
from ..models import (
    Annotator,
    Assignment,
    Input,
    Item,
    ItemOutput,
    Output,
    Participation,
    Study,
)
from ..selectors import submitted_count
from ..sqlrows import Columns, insert


def assignment_release_expired(*, study: Study | None = None, now: datetime | None = None) -> int:
    """Give expired leases back to the pool; returns how many were released."""
    now = now or timezone.now()
    with transaction.atomic():
        leases = Assignment.objects.select_for_update(skip_locked=True).filter(
            state=AssignmentState.ISSUED, expires_at__lte=now
        )
        if study is not None:
            leases = leases.filter(study=study)
        expired = list(leases.select_related("item").order_by("item_id"))
        for lease in expired:  # item-id order: concurrent releases lock alike
            _release(lease, now, AssignmentState.EXPIRED)
    return len(expired)


def assignment_reclaim_idle(*, participation: Participation, now: datetime | None = None) -> int:
    """Give back one **idle** lease of the study that the participation's worker could take
    in its place: the last items of a round go to a worker who has none once the page that
    held them has shown no sign of life for ``HUMEVAL_LEASE_IDLE_SECONDS`` (a heartbeat
    renews a lease while its task page is open, :func:`assignment_renew`). The lease is
    closed as expired, so its holder's later answer is refused as any answer after expiry
    (nothing is stored twice) and the slot is taken once. Returns how many were given back
    (0 or 1). Gold leases hold no slot and are never reclaimed."""
    now = now or timezone.now()
    study, worker_id = participation.study, participation.annotator_id
    cap = study.items_per_worker
    if not study.is_active or (cap is not None and submitted_count(study.pk, worker_id) >= cap):
        return 0  # they could not take it: nothing is reclaimed for them
    idle_since = now - timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS)
    seen = Assignment.objects.filter(item=OuterRef("item_id"), annotator=worker_id)
    with transaction.atomic():
        lease = (
            Assignment.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                study_id=study.pk,
                state=AssignmentState.ISSUED,
                expires_at__gt=now,
                item__is_gold=False,
            )
            .filter(Q(seen_at__lte=idle_since) | Q(seen_at__isnull=True, issued_at__lte=idle_since))
            .exclude(Exists(seen))
            .select_related("item")
            .order_by("item_id")
            .first()
        )
        if lease is not None:
            _release(lease, now, AssignmentState.EXPIRED)
    return int(lease is not None)


def assignment_renew(
    *, participation: Participation, token: str | uuid.UUID, now: datetime | None = None
) -> Assignment:
    """The heartbeat of an open task page: mark the worker's own live lease as seen now, so
    it is not reclaimed as idle. Never extends ``expires_at`` (the study's ``lease_seconds``
    stays the longest a lease lasts). Someone else's or an unknown token raises
    :class:`AssignmentNotFound`; a lease already answered, returned or expired raises
    :class:`AssignmentExpired`; either changes nothing."""
    now = now or timezone.now()
    token = _token(token)
    mine = Assignment.objects.filter(
        token=token, study_id=participation.study_id, annotator_id=participation.annotator_id
    )
    with transaction.atomic():
        if mine.filter(state=AssignmentState.ISSUED, expires_at__gt=now).update(seen_at=now):
            return mine.get()
        if not mine.exists():
            raise AssignmentNotFound("This task does not exist or is not yours.")
    raise AssignmentExpired("This task is no longer yours: it was answered or its time ran out.")


#: Per study (``public_id``), in this process: a moment before which none of the study's
#: leases can expire or turn idle, so a worker who finds no item has no slot to free
#: (:func:`_free_slots`). The earliest expiry and idle time of the live leases when it was
#: read; a lease issued later expires and turns idle later still, a heartbeat only delays
#: it, so the moment is never late. (A lease time lowered meanwhile is caught up by the
#: periodic sweep.)
_NOTHING_FREES_BEFORE: dict[uuid.UUID, datetime] = {}


def _free_slots(participation: Participation, now: datetime) -> int:
    """For a worker who found no item: give expired leases back, and else one idle lease
    they could take; how many slots came free. Runs only once a lease can have expired or
    turned idle (one ``MIN`` over the study's live leases, remembered until that moment),
    not on every look of every waiting worker."""
    study = participation.study
    before = _NOTHING_FREES_BEFORE.get(study.public_id)
    if before is None or now >= before:
        before = _NOTHING_FREES_BEFORE[study.public_id] = _first_free_moment(study, now)
    if now < before:
        return 0
    _NOTHING_FREES_BEFORE.pop(study.public_id, None)  # whatever happens, look again
    return assignment_release_expired(study=study, now=now) or assignment_reclaim_idle(
        participation=participation, now=now
    )


def _first_free_moment(study: Study, now: datetime) -> datetime:
    """The earliest moment a live lease of ``study`` can expire or turn idle: of the leases
    there are, or of one issued ``now``."""
    idle = timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS)
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(expires_at), MIN(COALESCE(seen_at, issued_at)) FROM {table}"  # noqa: S608
            " WHERE study_id = %s AND state = %s",
            [study.pk, AssignmentState.ISSUED.value],
        )
        expires, seen = (_moment(v) for v in cursor.fetchone())
    moments = [now + min(idle, timedelta(seconds=study.lease_seconds))]
    if expires is not None:
        moments.append(expires)
    if seen is not None:
        moments.append(seen + idle)
    return min(moments)


def _moment(value) -> datetime | None:
    """A datetime column read by an aggregate (SQLite returns its UTC text)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Task:
    """A worker's current assignment and how many items they have done in the study."""

    assignment: Assignment
    done: int
    #: The answer just posted was to a task already answered (a stale page: Back, a
    #: second tab); nothing was stored and this is the worker's current task.
    answered_before: bool = False


def task_next(
    *, participation: Participation, now: datetime | None = None, rng: random.Random | None = None
) -> Task | None:
    """The worker's current task, or a newly leased one, or ``None`` when nothing is left;
    with the item's input and outputs loaded and the worker's count of done items.

    Atomic: the participation row is locked so one worker's parallel requests queue, and
    the item is taken with ``SELECT … FOR UPDATE SKIP LOCKED`` so parallel workers never
    take the last slot of an item twice (on SQLite the transaction itself is exclusive).
    An item is never leased twice to one worker (also a database constraint), nor above
    its redundancy (a check constraint on ``n_taken``). Gold checks are interleaved at
    random with the study's falling rate, never two in a row. Expired leases are given
    back by the periodic sweep and, when no item is free, here before a second look.
    """
    now = now or timezone.now()
    rng = rng or _RNG

    def lease() -> Task | None:
        with transaction.atomic():
            part = _lock_participation(participation.pk)
            check_may_work(part)
            return _lease_locked(part, now, rng, holds_none=False)

    task = lease()
    if task is None and _free_slots(participation, now):
        task = lease()
    return task


# The statements of the worker cycle are written out (see ``sqlrows``): they run on every
# request, and building them through the QuerySet API costs more than running them.
_PART, _STUDY, _WORKER = Columns(Participation, "p"), Columns(Study, "s"), Columns(Annotator, "w")
_ASSIGNMENT, _ITEM = Columns(Assignment, "asg"), Columns(Item, "i")
_INPUT, _OUTPUT = Columns(Input, "inp"), Columns(Output, "o")
_LINK = connection.ops.quote_name(ItemOutput._meta.db_table)
_ITEM_ID, _OUTPUT_ID = _ITEM.attnames.index("id"), _OUTPUT.attnames.index("id")


def _for_update(*tables: str) -> str:
    """`` FOR UPDATE OF …`` where the database has row locks (on SQLite the transaction,
    begun IMMEDIATE, is exclusive already)."""
    if not connection.features.has_select_for_update:
        return ""
    return " " + connection.ops.for_update_sql(
        of=tables if connection.features.has_select_for_update_of else ()
    )


def _lock_participation(pk: int, loaded: Participation | None = None) -> Participation:
    """Lock the participation row and read it afresh; with its study and worker read along,
    or taken from ``loaded``, the same participation read earlier in this request."""
    if loaded is not None:
        sql = f"SELECT {_PART.sql} FROM {_PART.table} WHERE p.id = %s"  # noqa: S608
    else:
        sql = (
            f"SELECT {_PART.sql}, {_STUDY.sql}, {_WORKER.sql} FROM {_PART.table}"  # noqa: S608
            f" JOIN {_STUDY.table} ON s.id = p.study_id"
            f" JOIN {_WORKER.table} ON w.id = p.annotator_id WHERE p.id = %s"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql + _for_update("p"), [pk])
        row = cursor.fetchone()
    if row is None:
        raise Participation.DoesNotExist(pk)
    part = _PART.load(row)
    if loaded is not None:
        part.study, part.annotator = loaded.study, loaded.annotator
    else:
        part.study = _STUDY.load(row, len(_PART))
        part.annotator = _WORKER.load(row, len(_PART) + len(_STUDY))
    return part


def _shown_items(
    where: str,
    params: list,
    *,
    order: str = "",
    assignment: bool = False,
    changed: tuple[str, list] | None = None,
) -> list:
    """Items with what a worker is shown (the input and the outputs, in system order) in
    one statement (a row per output); with ``assignment``, the worker's assignments of
    them (``where`` on ``asg``); ``order``: the items' order (``ORDER BY`` terms);
    ``changed``: a statement changing items (``RETURNING *``, with its parameters) whose
    rows are read as they are after it, in the same statement (PostgreSQL's ``WITH``)."""
    select = [_ITEM.sql, _INPUT.sql, _OUTPUT.sql]
    joins = (
        f" JOIN {_INPUT.table} ON inp.id = i.input_id"
        f" LEFT JOIN {_LINK} l ON l.item_id = i.id LEFT JOIN {_OUTPUT.table} ON o.id = l.output_id"
    )
    order = f" ORDER BY {order + ', ' if order else ''}i.id, l.position"
    if assignment:
        select.insert(0, _ASSIGNMENT.sql)
        sql = f"SELECT {', '.join(select)} FROM {_ASSIGNMENT.table} JOIN {_ITEM.table}"  # noqa: S608
        sql += f" ON i.id = asg.item_id{joins} WHERE {where}{order}"
    elif changed is not None:
        sql = f"WITH t AS ({changed[0]}) SELECT {', '.join(select)} FROM t i{joins}"  # noqa: S608
        sql += f" WHERE {where}{order}"
        params = changed[1] + params
    else:
        sql = f"SELECT {', '.join(select)} FROM {_ITEM.table}{joins} WHERE {where}{order}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: list = []
    item = None
    for row in rows:
        at = len(_ASSIGNMENT) if assignment else 0
        if item is None or item.pk != row[at + _ITEM_ID]:  # the first row of the next item
            item = _ITEM.load(row, at)
            item.input = _INPUT.load(row, at + len(_ITEM))
            item.shown_outputs = []
            if assignment:
                lease = _ASSIGNMENT.load(row)
                lease.item = item
                found.append(lease)
            else:
                found.append(item)
        at += len(_ITEM) + len(_INPUT)
        if row[at + _OUTPUT_ID] is not None:  # (an item without outputs: none)
            item.shown_outputs.append(_OUTPUT.load(row, at))
    return found


def _shown_item(pk: int) -> Item:
    return _shown_items("i.id = %s", [pk])[0]


def _lease_locked(
    part: Participation,
    now: datetime,
    rng: random.Random,
    *,
    holds_none: bool,
    done: int | None = None,
) -> Task | None:
    """The lease step of :func:`task_next`, with ``part`` locked by the caller;
    ``holds_none``: the caller knows the worker holds no open lease; ``done``: their count
    of submitted items, when the caller read it under this lock."""
    study, worker = part.study, part.annotator
    if done is None:
        done = submitted_count(study.pk, worker.pk)
    if not holds_none:
        current = _shown_items(
            "asg.study_id = %s AND asg.annotator_id = %s AND asg.state = %s"
            " AND asg.expires_at > %s",
            [study.pk, worker.pk, AssignmentState.ISSUED.value, _when(now)],
            order="asg.id",
            assignment=True,
        )
        if current:
            return Task(current[0], done)
    if not study.is_active or (
        study.items_per_worker is not None and done >= study.items_per_worker
    ):
        return None
    item = None
    if not part.last_was_gold and rng.random() < study.gold_rate(done):
        seen = Assignment.objects.filter(item=OuterRef("pk"), annotator=worker)
        golds = list(
            Item.objects.filter(study=study, is_gold=True, is_active=True)
            .exclude(Exists(seen))
            .values_list("pk", flat=True)
        )
        if golds:
            item = _shown_item(rng.choice(golds))
    if item is None:
        item = _take_item(study.pk, worker.pk)
        while item is not None and prefill_skip.skipped(study, item):  # judge-clean items
            item = _take_item(study.pk, worker.pk)
        if item is None:
            return None
    if part.last_was_gold != item.is_gold:
        Participation.objects.filter(pk=part.pk).update(last_was_gold=item.is_gold)
        part.last_was_gold = item.is_gold
    assignment = insert(
        Assignment(
            study=study,
            item=item,
            annotator=worker,
            display_order=study.kind_impl.display_order(len(item.output_list()), _RNG),
            issued_at=now,
            expires_at=now + timedelta(seconds=study.lease_seconds),
            seen_at=now,
        )
    )
    return Task(assignment, done)


def _when(moment: datetime):
    return connection.ops.adapt_datetimefield_value(moment)


#: Every draw of the services (display orders, question orders, item groups). Injectable:
#: the tests replace it with a ``random.Random`` seeded per test (tests/conftest.py).
_RNG = random.SystemRandom()


def _may_not_work(participation: Participation) -> str:
    """Why the worker may not work in the study now, or ``""``."""
    if participation.annotator.is_blocked or participation.status == Participation.Status.BLOCKED:
        return "Your access to this study has been withdrawn."
    if participation.status == Participation.Status.FAILED:
        return "You did not pass the qualification test for this study."
    if participation.status == Participation.Status.QUALIFYING:
        return "Take the qualification test first."
    if participation.status == Participation.Status.STOPPED:
        return "You stopped this study."
    return ""


def check_may_work(participation: Participation) -> None:
    """Raise :class:`~annotator.errors.WorkerBlocked` when the worker may not work now."""
    if reason := _may_not_work(participation):
        raise WorkerBlocked(reason)


def _token(token: str | uuid.UUID) -> uuid.UUID:
    try:
        return uuid.UUID(str(token))
    except ValueError:
        raise AssignmentNotFound("This task does not exist or is not yours.") from None


def _take_item(study_id: int, worker_id: int) -> Item | None:
    """Take a slot of the fullest open item the worker has not seen (fill-first, then by
    id); the item as shown (:func:`_shown_items`), or ``None``. The item is chosen with
    ``FOR UPDATE SKIP LOCKED`` (where the database has it) and its ``n_taken`` raised in one
    ``UPDATE``, so parallel workers never take the last slot twice; the check constraint
    backs this up. On PostgreSQL the item is read in the same statement. (Written out: the
    ORM cannot update through a locking subquery, and this is the hottest query.)"""
    item, assignment = (connection.ops.quote_name(m._meta.db_table) for m in (Item, Assignment))
    lock = ""
    if connection.features.has_select_for_update_skip_locked:
        lock = " " + connection.ops.for_update_sql(skip_locked=True)
    take = (
        f"UPDATE {item} SET n_taken = n_taken + 1 WHERE id = ("  # noqa: S608
        f"SELECT i.id FROM {item} i WHERE i.study_id = %s AND i.is_active AND NOT i.is_gold"
        " AND i.n_taken < i.redundancy AND NOT EXISTS ("
        f"SELECT 1 FROM {assignment} a WHERE a.item_id = i.id AND a.annotator_id = %s)"
        f" ORDER BY i.n_taken DESC, i.id LIMIT 1{lock})"
    )
    if connection.vendor == "postgresql":
        found = _shown_items("TRUE", [], changed=(take + " RETURNING *", [study_id, worker_id]))
        return found[0] if found else None
    with connection.cursor() as cursor:
        cursor.execute(take + " RETURNING id", [study_id, worker_id])
        row = cursor.fetchone()
    return _shown_item(row[0]) if row else None


def _release(lease: Assignment, now: datetime, state: str) -> None:
    Assignment.objects.filter(pk=lease.pk).update(state=state, closed_at=now)
    if not lease.item.is_gold:
        Item.objects.filter(pk=lease.item_id).update(n_taken=F("n_taken") - 1)
