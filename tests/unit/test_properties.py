"""Property tests of the assignment and budget services (Hypothesis, stateful).

Two state machines drive the real services with any sequence Hypothesis can find of
workers entering, asking for work, answering (validly or not, on time or late, twice, with
someone else's token, through ``annotation_submit`` or the one-request ``task_answer``),
the clock moving past leases, the expiry sweep, workers being blocked and unblocked, and
the researcher changing redundancy and items per worker mid-study:

* :class:`AssignmentMachine`, a static study (every item at once, with gold checks), run
  inside one ``hypothesis.extra.django.TestCase`` with each example rolled back to a
  savepoint, so every example starts from the same empty database;
* :class:`BudgetMachine`, an adaptive study with a budget, run inside a
  ``TransactionTestCase`` (flushed before each example) because rounds close and are
  decided by ``on_commit`` hooks (the eager Celery task), as in production.

Both draw the study's kind among all four. After every step the invariants below are
checked against the database. Workers answer in system order (``A``/``B``/tie, turned into
left/right, a ranking's tiers or scores through the drawn display order), so an example
replays identically although the display order is drawn at random.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from datetime import timedelta

from django.core.management import call_command
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase, TransactionTestCase
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from annotator import services
from annotator.choices import AssignmentState
from annotator.errors import (
    AssignmentExpired,
    AssignmentNotFound,
    ConfigRefused,
    InvalidAnswer,
    WorkerBlocked,
)
from annotator.models import Annotation, Assignment, Item, Participation, Study
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from tests.conftest import bundle
from tests.leasing import next_lease

LEASE = 60  # seconds; the clock moves by up to two leases per step
WORKERS = 4
ISSUED, SUBMITTED = AssignmentState.ISSUED, AssignmentState.SUBMITTED
BLOCKED = Participation.Status.BLOCKED

workers = st.integers(0, WORKERS - 1)
#: What a worker means: prefer A, prefer B, a tie, or something the study does not accept.
prefers = st.sampled_from(["A", "B", "tie", "bogus"])
picks = st.integers(0, 10**6)
KINDS = ["pairwise", "likert", "ranking", "error_spans"]


def study_file(*, n_inputs: int, systems: list[str], kind: str, gold: int = 0, **options) -> bytes:
    records = []
    for i in range(n_inputs):
        record = {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {s: f"{s} answers {i}" for s in systems},
        }
        if i < gold:
            record["gold"] = systems[i % 2] if i % 3 < 2 else "tie"
        records.append(record)
    return bundle(records, {"kind": kind, "lease_seconds": LEASE, "open_links": True, **options})


def snapshot(study: Study) -> tuple:
    """Everything a refused request must leave as it was."""
    return (
        list(
            Item.objects.filter(study=study).order_by("id").values_list("id", "n_taken", "n_done")
        ),
        list(
            Assignment.objects.filter(study=study)
            .order_by("id")
            .values_list("id", "state", "expires_at", "closed_at")
        ),
        list(
            Annotation.objects.filter(study=study)
            .order_by("id")
            .values_list("id", "value", "raw_answer", "scores", "answer", "is_flagged")
        ),
        list(
            Participation.objects.filter(study=study)
            .order_by("id")
            .values_list("id", "status", "strikes", "gold_seen", "last_was_gold")
        ),
        list(ProtocolConfig.objects.filter(study=study).values_list("committed", flat=True)),
        list(Round.objects.filter(study=study).order_by("id").values_list("id", "state", "items")),
    )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class CrowdMachine(RuleBasedStateMachine):
    """Workers of one study, driven through the services; the invariants of assignment.
    ``kind``: the study's kind (:func:`of_kind` makes a machine of each)."""

    study: Study
    kind = "pairwise"

    def __init__(self) -> None:
        super().__init__()
        self.parts: dict[int, Participation] = {}
        self.tokens: dict[int, list] = {w: [] for w in range(WORKERS)}
        #: token → (annotation id, value, raw answer, scores, answer): every label, as stored
        self.stored: dict = {}
        self.now = timezone.now()
        self.rng = random.Random(0)
        #: per worker, items done when items_per_worker was last edited
        self.done_before_cap: dict[int, int] = {}
        # what follows a submit (closing and deciding a round) must not fail either
        self.failures = _Collect()
        logging.getLogger("annotator.services").addHandler(self.failures)

    def teardown(self) -> None:
        logging.getLogger("annotator.services").removeHandler(self.failures)

    # --- helpers ------------------------------------------------------------------------------
    def _answer(self, assignment: Assignment, prefer: str) -> dict:
        """The request a worker who means ``prefer`` sends for ``assignment``: the better
        output first (``A``: in system order, ``B``: the other way round), both alike, or an
        answer the kind refuses."""
        kind, shown = self.study.kind, assignment.display_order
        if kind == "likert":
            scores = {c["name"]: c["scale_min"] for c in self.study.options["criteria"]}
            if prefer == "bogus":
                scores = {name: 99 for name in scores}
            return {"scores": scores}
        if kind == "error_spans":
            score = {"A": "80", "B": "20", "tie": "50", "bogus": "101"}[prefer]
            return {"spans": "[]", "score": score}
        if kind == "ranking":
            where = {p: d for d, p in enumerate(shown)}
            best_first = sorted(where, reverse=prefer == "B")
            tiers = [[where[p]] for p in best_first]
            if prefer == "tie":
                tiers = [tiers[0] + tiers[1], *tiers[2:]]
            return {"ranking": json.dumps([[0], [0], [1]] if prefer == "bogus" else tiers)}
        if prefer == "bogus":
            return {"answer": "sideways"}
        if prefer == "tie":
            return {"answer": "tie"}
        left_is_a = shown == [0, 1]
        return {"answer": "left" if (prefer == "A") == left_is_a else "right"}

    def _valid(self, prefer: str) -> bool:
        """Whether the kind takes ``prefer``'s answer: a tie only where the study allows one
        (scores may always be equal)."""
        if prefer == "bogus":
            return False
        return prefer != "tie" or self.study.kind_settings.get("allow_tie", True)

    def _expected(self, worker: int, assignment: Assignment, prefer: str) -> str:
        """What a submit of ``assignment`` by ``worker`` must do, from the state before it."""
        part = self.parts[worker]
        if assignment.annotator_id != part.annotator_id:
            return "not found"
        if assignment.state == SUBMITTED:
            return "stored already"
        part.refresh_from_db()
        if part.status == BLOCKED:
            return "blocked"
        if assignment.state != ISSUED or assignment.expires_at <= self.now:
            return "expired"
        return "created" if self._valid(prefer) else "invalid"

    def _submit(self, worker: int, assignment: Assignment, prefer: str) -> None:
        """Submit and check the outcome against :meth:`_expected`."""
        assignment.refresh_from_db()
        expected = self._expected(worker, assignment, prefer)
        before = snapshot(self.study)
        refused = {
            "not found": AssignmentNotFound,
            "blocked": WorkerBlocked,
            "expired": AssignmentExpired,
            "invalid": InvalidAnswer,
        }
        try:
            annotation, created = services.annotation_submit(
                annotator=self.parts[worker].annotator,
                token=assignment.token,
                now=self.now,
                data=self._answer(assignment, prefer),
            )
        except tuple(refused.values()) as exc:
            assert isinstance(exc, refused.get(expected, ())), (expected, exc)
            assert snapshot(self.study) == before, f"a refused submit ({expected}) changed state"
            return
        assert expected in ("created", "stored already"), (expected, "was accepted")
        assert created == (expected == "created")
        if created:
            self.stored[assignment.token] = (
                annotation.pk,
                annotation.value,
                annotation.raw_answer,
                annotation.scores,
                annotation.answer,
            )
        else:
            assert annotation.pk == self.stored[assignment.token][0]
            assert snapshot(self.study) == before, "a repeated submit changed state"

    def _issued_to(self, worker: int) -> list:
        return self.tokens[worker]

    # --- rules --------------------------------------------------------------------------------
    @precondition(lambda self: self.parts)
    @rule(cycles=st.integers(1, 12), prefer=st.sampled_from(["A", "B", "tie"]))
    def workers_work(self, cycles: int, prefer: str) -> None:
        """Workers in turn take an item and answer it (in an adaptive study a round
        completes this way, is decided after commit and the next one opens)."""
        order = sorted(self.parts)
        for n in range(cycles):
            worker = order[n % len(order)]
            assignment = self._next(worker)
            if assignment is not None:
                self._submit(worker, assignment, prefer)

    @precondition(lambda self: len(self.parts) < WORKERS)
    @rule(worker=workers)
    def enter(self, worker: int) -> None:
        """A worker arrives (or one who is here already comes back through the link)."""
        part = services.participation_enter(
            study=self.study, platform="link", external_id=f"worker-{worker}"
        )
        if worker in self.parts:
            assert part.pk == self.parts[worker].pk, "re-entering resumes the same participation"
        self.parts[worker] = part

    @precondition(lambda self: self.parts)
    @rule(pick=picks)
    def next_item(self, pick: int) -> None:
        worker = sorted(self.parts)[pick % len(self.parts)]
        self._next(worker)

    def _next(self, worker: int) -> Assignment | None:
        part = self.parts[worker]
        part.refresh_from_db()
        live = set(
            Assignment.objects.filter(
                study=self.study, annotator=part.annotator, state=ISSUED, expires_at__gt=self.now
            ).values_list("token", flat=True)
        )
        if part.status == BLOCKED:
            before = snapshot(self.study)
            try:
                next_lease(participation=part, now=self.now, rng=self.rng)
            except WorkerBlocked:
                assert snapshot(self.study) == before
                return None
            raise AssertionError("a blocked worker was given work")
        assignment = next_lease(participation=part, now=self.now, rng=self.rng)
        if assignment is None:
            self._check_nothing_left(part)
            return None
        assert assignment.annotator_id == part.annotator_id
        assert assignment.study_id == self.study.pk
        assert assignment.state == ISSUED and assignment.expires_at > self.now
        if live:
            assert live == {assignment.token}, "a worker with a live lease gets that lease back"
        if assignment.token not in self.tokens[worker]:
            self.tokens[worker].append(assignment.token)
        return assignment

    def _check_nothing_left(self, part: Participation) -> None:
        """``None`` means nothing is left for this worker, not that work was missed."""
        study = self.study
        done = Assignment.objects.filter(
            study=study, annotator=part.annotator, state=SUBMITTED
        ).count()
        if not study.is_active or (
            study.items_per_worker is not None and done >= study.items_per_worker
        ):
            return
        # (expired leases were given back by the call before it gave up)
        free = Item.objects.filter(
            study=study, is_gold=False, is_active=True, n_taken__lt=F("redundancy")
        ).exclude(assignments__annotator=part.annotator)
        assert not free.exists(), "a worker was told nothing is left while an item was free"

    @precondition(lambda self: hasattr(self, "study"))
    @rule(redundancy=st.integers(1, 4), cap=st.none() | st.integers(1, 4))
    def researcher_edits(self, redundancy: int, cap: int | None) -> None:
        """The researcher changes redundancy and items per worker mid-study: the edit takes
        effect (the open items follow, never below what workers took) or is refused (the
        adaptive budget) and changes nothing."""
        before = snapshot(self.study)
        edited = Study.objects.get(pk=self.study.pk)
        done = Counter(
            Assignment.objects.filter(study=edited, state=SUBMITTED).values_list(
                "annotator_id", flat=True
            )
        )
        edited.redundancy, edited.items_per_worker = redundancy, cap
        try:
            services.study_configure(edited, ["redundancy", "items_per_worker"])
        except ConfigRefused:
            assert snapshot(self.study) == before
            stored = Study.objects.get(pk=self.study.pk)
            assert (stored.redundancy, stored.items_per_worker) == (
                self.study.redundancy,
                self.study.items_per_worker,
            )
            return
        self.study.refresh_from_db()
        for worker, n in done.items():  # who was past a lowered cap keeps what they did
            self.done_before_cap[worker] = max(self.done_before_cap.get(worker, 0), n)

    @precondition(lambda self: any(self.tokens.values()))
    @rule(pick=picks, prefer=prefers)
    def submit(self, pick: int, prefer: str) -> None:
        """Answer one of the worker's assignments: current, old, submitted or expired."""
        worker, token = self._pick_token(pick)
        self._submit(worker, Assignment.objects.get(token=token), prefer)

    @precondition(lambda self: any(self.tokens.values()))
    @rule(pick=picks, first=prefers, second=prefers)
    def double_submit(self, pick: int, first: str, second: str) -> None:
        """A double click or a retried request, possibly with a different answer: the first
        stored label stays, the second submit stores nothing."""
        worker, token = self._pick_token(pick)
        assignment = Assignment.objects.get(token=token)
        self._submit(worker, assignment, first)
        stored = self.stored.get(token)
        self._submit(worker, assignment, second)
        if stored is not None:  # the first was stored: the second changed nothing
            assert self.stored.get(token) == stored
        assert Annotation.objects.filter(assignment__token=token).count() <= 1

    @precondition(lambda self: len(self.parts) > 1 and any(self.tokens.values()))
    @rule(pick=picks, other=picks, prefer=prefers)
    def submit_someone_elses(self, pick: int, other: int, prefer: str) -> None:
        owner, token = self._pick_token(pick)
        thief = [w for w in sorted(self.parts) if w != owner][other % (len(self.parts) - 1)]
        self._submit(thief, Assignment.objects.get(token=token), prefer)

    @precondition(lambda self: self.parts)
    @rule(pick=picks, prefer=prefers)
    def answer_and_next(self, pick: int, prefer: str) -> None:
        """``task_answer``: the worker's current lease answered and the next one leased in
        one request."""
        worker = sorted(self.parts)[pick % len(self.parts)]
        part = self.parts[worker]
        current = Assignment.objects.filter(
            study=self.study, annotator=part.annotator, state=ISSUED, expires_at__gt=self.now
        ).first()
        if current is None:
            return
        expected = self._expected(worker, current, prefer)
        before = snapshot(self.study)
        task = None
        try:
            task = services.task_answer(
                participation=part,
                token=current.token,
                now=self.now,
                rng=self.rng,
                data=self._answer(current, prefer),
            )
        except WorkerBlocked:
            if expected != "created":
                assert expected == "blocked", expected
                assert snapshot(self.study) == before
                return
            # this answer (a gold miss) got the worker blocked: it is stored all the same
            assert Participation.objects.get(pk=part.pk).status == "blocked"
        except InvalidAnswer:
            assert expected == "invalid", expected
            assert snapshot(self.study) == before
            return
        assert expected == "created", expected
        annotation = Annotation.objects.get(assignment=current)
        self.stored[current.token] = (
            annotation.pk,
            annotation.value,
            annotation.raw_answer,
            annotation.scores,
            annotation.answer,
        )
        if task is not None:
            nxt = task.assignment
            assert nxt.annotator_id == part.annotator_id and nxt.state == ISSUED
            assert nxt.item_id != current.item_id and nxt.expires_at > self.now
            if nxt.token not in self.tokens[worker]:
                self.tokens[worker].append(nxt.token)

    @precondition(lambda self: self.parts)
    @rule(pick=picks, late=st.integers(0, LEASE), prefer=prefers)
    def answer_too_late(self, pick: int, late: int, prefer: str) -> None:
        """The worker answers their current lease after it ran out (before or after the
        sweep gave it back): refused, and nothing changes."""
        worker = sorted(self.parts)[pick % len(self.parts)]
        current = Assignment.objects.filter(
            study=self.study,
            annotator=self.parts[worker].annotator,
            state=ISSUED,
            expires_at__gt=self.now,
        ).first()
        if current is None:
            return
        self.now = current.expires_at + timedelta(seconds=late)
        if late % 2:
            self.sweep_expired()
        self._submit(worker, current, prefer)
        assert Assignment.objects.get(pk=current.pk).state != SUBMITTED

    @rule(seconds=st.integers(1, 2 * LEASE))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def sweep_expired(self) -> None:
        due = Assignment.objects.filter(
            study=self.study, state=ISSUED, expires_at__lte=self.now
        ).count()
        released = services.assignment_release_expired(study=self.study, now=self.now)
        assert released == due
        assert not Assignment.objects.filter(
            study=self.study, state=ISSUED, expires_at__lte=self.now
        ).exists()

    @precondition(lambda self: self.parts)
    @rule(pick=picks, blocked=st.booleans())
    def block(self, pick: int, blocked: bool) -> None:
        worker = sorted(self.parts)[pick % len(self.parts)]
        was = Participation.objects.get(pk=self.parts[worker].pk).status
        part = services.participation_set_blocked(self.parts[worker], blocked)
        labels = Annotation.objects.filter(study=self.study, annotator_id=part.annotator_id)
        if blocked:
            assert part.status == BLOCKED
            assert not labels.filter(is_flagged=False).exists()
        elif was == BLOCKED:
            assert part.status == Participation.Status.ACTIVE
            assert not labels.filter(is_flagged=True).exists()
        self.parts[worker] = part

    def _pick_token(self, pick: int):
        owned = [(w, t) for w in sorted(self.tokens) for t in self.tokens[w]]
        return owned[pick % len(owned)]

    # --- invariants -----------------------------------------------------------------------------
    # One read of the study's rows per step (the invariants run after every step), then:
    @invariant()
    def assignment_invariants(self) -> None:
        if not hasattr(self, "study"):
            return
        assert not self.failures.messages, f"follow-up work failed: {self.failures.messages}"
        study = self.study
        items = list(
            Item.objects.filter(study=study).values_list(
                "id", "is_gold", "redundancy", "n_taken", "n_done"
            )
        )
        leases = list(
            Assignment.objects.filter(study=study).values_list(
                "id", "item_id", "annotator_id", "state", "expires_at", "token"
            )
        )
        labels = list(
            Annotation.objects.filter(study=study).values_list(
                "id", "item_id", "annotator_id", "assignment_id", "source", "value", "raw_answer",
                "scores", "answer",
            )
        )  # fmt: skip
        status = dict(
            Participation.objects.filter(study=study).values_list("annotator_id", "status")
        )
        held = Counter(item for _, item, _, state, _, _ in leases if state in (ISSUED, SUBMITTED))
        submitted = Counter(item for _, item, _, state, _, _ in leases if state == SUBMITTED)
        platform = [label for label in labels if label[4] == "platform"]
        per_item = Counter(label[1] for label in platform)

        # an item never above its redundancy; its counters are exact
        for pk, is_gold, redundancy, n_taken, n_done in items:
            if is_gold:  # gold checks go to every worker and fill no quota
                assert (n_taken, n_done) == (0, 0), pk
                assert per_item[pk] == submitted[pk], pk
                continue
            assert 0 <= n_done <= n_taken <= redundancy, (pk, n_done, n_taken, redundancy)
            assert n_done == per_item[pk] == submitted[pk], (pk, n_done, per_item[pk])
            assert n_taken == held[pk], (pk, n_taken, held[pk])

        # no item twice to one worker, neither as a lease nor as a label
        pairs = Counter((item, worker) for _, item, worker, *_ in leases)
        assert max(pairs.values(), default=0) <= 1, "an item was leased twice to one worker"
        pairs = Counter((item, worker) for _, item, worker, *_ in platform)
        assert max(pairs.values(), default=0) <= 1, "an item was labelled twice by one worker"

        # every accepted submit is stored exactly once, as it was stored
        by_assignment = {label[3]: label for label in platform}
        token_of = {pk: token for pk, _, _, _, _, token in leases}
        state_of = {pk: state for pk, _, _, state, _, _ in leases}
        assert len(by_assignment) == len(platform) == len(self.stored)
        assert sum(1 for state in state_of.values() if state == SUBMITTED) == len(platform)
        stored = {
            token_of[assignment]: (pk, value, raw, scores, answer)
            for pk, _, _, assignment, _, value, raw, scores, answer in platform
        }
        assert stored == self.stored, "a label was lost, duplicated or edited"
        assert all(state_of[a] == SUBMITTED for a in by_assignment)

        # leases are held only by workers who may work, one live lease at a time
        live = Counter(
            worker for _, _, worker, state, expires, _ in leases
            if state == ISSUED and expires > self.now
        )  # fmt: skip
        assert max(live.values(), default=0) <= 1, "a worker holds two live leases"
        for _, _, worker, state, _, _ in leases:
            if state == ISSUED:
                assert status[worker] != BLOCKED, "a blocked worker still holds a lease"
        if study.items_per_worker is not None:
            done = Counter(worker for _, _, worker, state, _, _ in leases if state == SUBMITTED)
            for worker, n in done.items():
                assert n <= max(study.items_per_worker, self.done_before_cap.get(worker, 0))


# --- static studies ---------------------------------------------------------------------------
class AssignmentMachine(CrowdMachine):
    """A static study of any kind (pairwise with 2–3 systems and gold checks, Likert, a
    ranking of 3–4 systems, error spans), redundancy 1–3."""

    def __init__(self) -> None:
        super().__init__()
        self.savepoint = transaction.savepoint()

    def teardown(self) -> None:
        super().teardown()
        transaction.savepoint_rollback(self.savepoint)

    @initialize(
        n_inputs=st.integers(1, 4),
        n_systems=st.integers(2, 3),
        redundancy=st.integers(1, 3),
        gold=st.integers(0, 2),
        gold_rate=st.sampled_from([0.0, 0.5, 1.0]),
        max_strikes=st.integers(1, 2),
        items_per_worker=st.none() | st.integers(1, 3),
        allow_tie=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def create_study(
        self,
        n_inputs: int,
        n_systems: int,
        redundancy: int,
        gold: int,
        gold_rate: float,
        max_strikes: int,
        items_per_worker: int | None,
        allow_tie: bool,
        seed: int,
    ) -> None:
        kind = self.kind
        many = {"pairwise": n_systems if not gold else 2, "ranking": n_systems + 1}
        systems = [f"s{i}" for i in range(many.get(kind, 2))]
        options = {
            "redundancy": redundancy,
            "gold_rate_start": gold_rate,
            "gold_rate_end": gold_rate,
            "max_strikes": max_strikes,
            "allow_tie": allow_tie,
        }
        if items_per_worker is not None:
            options["items_per_worker"] = items_per_worker
        gold = gold if kind == "pairwise" else 0
        self.study = services.study_import(
            study_file(n_inputs=n_inputs + gold, systems=systems, kind=kind, gold=gold, **options),
            filename="props.jsonl",
        )
        self.rng = random.Random(seed)

    @precondition(lambda self: any(self.tokens.values()))
    @rule(pick=picks, correct=st.booleans())
    def answer_gold(self, pick: int, correct: bool) -> None:
        """Answer a gold check right or wrong (a miss is a strike; enough block the worker
        and give their open leases back)."""
        worker, token = self._pick_token(pick)
        assignment = Assignment.objects.select_related("item").get(token=token)
        if not assignment.item.is_gold:
            return
        expected = assignment.item.expected["value"]
        prefer = expected if correct else {"A": "B", "B": "A", "tie": "A"}[expected]
        self._submit(worker, assignment, prefer)


def of_kind(machine: type[CrowdMachine], kind: str) -> type[CrowdMachine]:
    """``machine`` for studies of ``kind``."""
    return type(f"{machine.__name__}_{kind}", (machine,), {"kind": kind})


def run_every_kind(test, machine: type[CrowdMachine], examples: int, steps: int) -> None:
    """``machine`` run on a study of each kind, each kind ``examples`` examples."""
    for kind in KINDS:
        with test.subTest(kind=kind):
            run_state_machine_as_test(
                of_kind(machine, kind),
                settings=settings(
                    max_examples=examples,
                    stateful_step_count=steps,
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                ),
            )


class TestAssignmentProperties(TestCase):
    def test_assignment_invariants_hold_for_any_sequence_of_requests(self) -> None:
        run_every_kind(self, AssignmentMachine, examples=8, steps=25)


# --- adaptive studies with a budget -------------------------------------------------------------
SYSTEMS3 = ["s1", "s2", "s3"]


class BudgetMachine(CrowdMachine):
    """An adaptive study (3 systems, 3 pairs) of any kind (pairwise; a ranking, an item of the
    three outputs labelling its three pairs; Likert or error spans, one item per output
    shared by the pairs) whose rounds close and are decided as workers complete them, with
    or without a budget."""

    def __init__(self) -> None:
        super().__init__()
        # a fresh database (and fresh ids, so seeded choices replay) for every example
        call_command(
            "flush", verbosity=0, interactive=False, reset_sequences=True, inhibit_post_migrate=True
        )

    @initialize(
        n_inputs=st.integers(3, 5),
        batch=st.integers(1, 2),
        redundancy=st.integers(1, 2),
        budget=st.none() | st.integers(0, 30),
        paper=st.booleans(),
    )
    def create_study(
        self,
        n_inputs: int,
        batch: int,
        redundancy: int,
        budget: int | None,
        paper: bool,
    ) -> None:
        options = {
            "collection": "adaptive",
            "redundancy": redundancy,
            "batch_size": batch,
            "gold_rate_start": 0.0,
            "gold_rate_end": 0.0,
        }
        if budget is not None:
            options["budget"] = budget
        self.study = services.study_import(
            study_file(n_inputs=n_inputs, systems=SYSTEMS3, kind=self.kind, **options),
            filename="budget.jsonl",
        )
        ProtocolConfig.objects.filter(study=self.study).update(paper=paper)
        self.budget = budget

    @invariant()
    def budget_and_round_invariants(self) -> None:
        if not hasattr(self, "study"):
            return
        study = self.study
        committed = ProtocolConfig.objects.get(study=study).committed
        items = list(
            Item.objects.filter(study=study, round_number__isnull=False).values_list(
                "round_number", "redundancy", "n_done", "is_active"
            )
        )
        rounds = list(
            Round.objects.filter(study=study)
            .order_by("number")
            .values_list("number", "state", "items", "committed")
        )
        decided = list(Decision.objects.filter(round__study=study).values_list("round", "pair"))
        labels = Annotation.objects.filter(study=study).count()

        # the ledger is what was released, never more than the budget, and holds every label
        released = sum(redundancy for _, redundancy, _, _ in items)
        assert committed == released == sum(r[3] for r in rounds), (committed, released)
        assert labels <= committed, (labels, committed)
        if self.budget is not None:
            assert committed <= self.budget and labels <= self.budget, (committed, labels)

        if study.kind_impl.scored:  # an output's item is made once, whichever pair needs it
            outputs = list(
                Item.objects.filter(study=study).values_list("input_id", "item_outputs__output_id")
            )
            assert not Item.objects.filter(study=study, item_outputs__position=1).exists()
            assert len(set(outputs)) == len(outputs), "an output itemised twice"

        # rounds are numbered 1…n, all decided but the last, each decided once per pair
        assert [r[0] for r in rounds] == list(range(1, len(rounds) + 1))
        assert all(state == Round.State.DECIDED for _, state, _, _ in rounds[:-1])
        per_round = Counter(number for number, *_ in items)
        assert all(n_items == per_round[number] for number, _, n_items, _ in rounds)
        assert max(Counter(decided).values(), default=0) <= 1, "a pair decided twice in a round"
        # (eager tasks: a complete round is closed and decided within the submit's request)
        assert all(state != Round.State.CLOSED for _, state, _, _ in rounds), "undecided round"
        if rounds and rounds[-1][1] == Round.State.OPEN:
            last = rounds[-1][0]
            assert any(
                number == last and active and n_done < redundancy
                for number, redundancy, n_done, active in items
            ), "a complete round stayed open"
            assert not Decision.objects.filter(round__study=study, round__number=last).exists()
        else:  # no round collecting: no pair may still wait for one
            assert not SystemPair.objects.filter(
                study=study, state=SystemPair.State.OPEN
            ).exists(), "open pairs but no open round"


class TestBudgetProperties(TransactionTestCase):
    def test_budget_and_rounds_hold_for_any_sequence_of_requests(self) -> None:
        run_every_kind(self, BudgetMachine, examples=5, steps=20)
