"""A study run on MTurk like one on Prolific (crowd.platforms), with botocore's Stubber (the
exact calls and parameters) and, for an adaptive study end to end on SQLite, a stand-in
MTurk that checks every call against botocore's own model of MTurk's API: the HIT created
once (a lost answer found again), assignments added as rounds open within the money budget,
the HIT expired when the study is done, assignments reviewed from the evidence (no return
on MTurk), bonuses paid once across a failing-then-retried call, and the panel and the
command refusing what MTurk lacks."""

import io
import json
import random
from datetime import timedelta
from decimal import Decimal

import pytest
from botocore.stub import ANY, Stubber
from django.core.management import CommandError, call_command
from django.db.models import F
from django.test import Client
from django.utils import timezone

from annotator import services as annotator_services
from annotator.models import Item, Participation
from crowd import mturk, platforms, services
from crowd.client import CrowdError
from crowd.models import CrowdStudy, LedgerEntry, Submission
from protocol.models import ProtocolConfig, Round
from tests.leasing import next_lease
from tests.mturk_standin import HIT, StandIn, boto_client
from tests.protocol_sim import adaptive_bundle, answer, crowd_visit


@pytest.fixture
def stub(monkeypatch):
    client = boto_client()
    monkeypatch.setattr(platforms, "mturk_client_factory", lambda crowd: client)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def static_study(n_inputs: int = 12, **options):
    study = annotator_services.study_import(
        adaptive_bundle(
            n_inputs=n_inputs,
            systems=("s1", "s2"),
            collection="all",
            items_per_worker=3,
            completion_code="DONE1",
            **options,
        ),
        filename="s.jsonl",
    )
    study.platform_fee_percent = Decimal("20")
    study.save()
    return study


def crowd_of(study, **fields) -> CrowdStudy:
    return CrowdStudy.objects.create(
        study=study,
        platform="mturk",
        reward_cents=fields.pop("reward_cents", 150),
        estimated_minutes=fields.pop("estimated_minutes", 5),
        money_budget_cents=fields.pop("money_budget_cents", 10_000),
        **fields,
    )


def hit_params(study, *, reward: str, assignments: int, seconds: int, excluded=()) -> dict:
    url = f"https://eval.example.org/w/{study.public_id}/mturk/"
    return {
        "Title": study.name,
        "Description": study.description or study.name,
        "Reward": reward,
        "MaxAssignments": assignments,
        "AssignmentDurationInSeconds": seconds,
        "LifetimeInSeconds": 7 * 86400,
        "Question": mturk.EXTERNAL_QUESTION.format(url=url),
        "QualificationRequirements": [
            {"QualificationTypeId": q, "Comparator": "DoesNotExist"} for q in excluded
        ],
        "RequesterAnnotation": f"humeval {study.public_id}",
        "UniqueRequestToken": mturk.token("hit", study.public_id),
    }


def more(total: int, extra: int) -> dict:
    return {
        "HITId": HIT,
        "NumberOfAdditionalAssignments": extra,
        "UniqueRequestToken": mturk.token("assignments", HIT, total),
    }


LIST = {
    "HITId": HIT,
    "MaxResults": 100,
    "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
}


@pytest.mark.django_db
def test_the_hit_is_made_once_from_the_estimate_and_a_lost_answer_is_found_again(stub):
    """3 items × 45 s → 3 minutes; at 12.00 an hour, 60 cents; + 20 % = 72 a place. The
    budget (216) pays 3 of the 4 assignments the released work needs."""
    study = static_study()
    study.expected_seconds_per_item, study.pay_per_hour = 45, Decimal("12.00")
    study.save()
    crowd = crowd_of(
        study,
        reward_cents=None,
        estimated_minutes=None,
        money_budget_cents=216,
        exclude_groups=["Q-wave1"],
    )
    params = hit_params(study, reward="0.60", assignments=3, seconds=360, excluded=["Q-wave1"])
    stub.add_client_error(  # MTurk made it, the answer was lost
        "create_hit",
        service_error_code="ServiceUnavailable",
        service_message="Service unavailable",
        http_status_code=503,
        expected_params=params,
    )
    platform = platforms.of(crowd)
    with pytest.raises(CrowdError, match="unavailable"):
        platform.publish(crowd, "https://eval.example.org/")
    assert crowd.remote_id == "" and LedgerEntry.objects.get(action="create").state == "failed"
    stub.add_client_error(  # the retry carries the same token: MTurk names the HIT made
        "create_hit",
        service_error_code="AWS.MechanicalTurk.HitAlreadyExists",
        service_message=f"There is already a HIT which exists with the same token: {HIT}",
        expected_params=params,
    )
    stub.add_response(  # as the earlier try made it
        "get_hit", {"HIT": {"HITId": HIT, "MaxAssignments": 3}}, {"HITId": HIT}
    )
    platform.publish(crowd, "https://eval.example.org/")
    crowd.refresh_from_db()
    assert (crowd.remote_id, crowd.remote_status, crowd.places) == (HIT, "ACTIVE", 3)
    entry = LedgerEntry.objects.get(action="create")
    assert entry.state == "done" and entry.detail["assignments"] == 3
    assert services.spend(crowd)["committed"] == 216 <= crowd.money_budget_cents


@pytest.mark.django_db
def test_assignments_follow_two_rounds_within_the_budget_and_the_hit_expires_when_done(stub):
    """30 items ÷ 3 a worker = 10 assignments; the released work doubles (20), then
    triples (30), but the budget (4,000 ÷ 180 a place) pays 22; then the study is done."""
    study = static_study(n_inputs=30)
    crowd = crowd_of(study, money_budget_cents=4000)
    stub.add_response(
        "create_hit",
        {"HIT": {"HITId": HIT, "MaxAssignments": 10}},
        hit_params(study, reward="1.50", assignments=10, seconds=600),
    )
    platform = platforms.of(crowd)
    platform.publish(crowd, "https://eval.example.org/")
    assert crowd.places == 10

    Item.objects.filter(study=study).update(redundancy=2)  # a round released more work
    stub.add_response("create_additional_assignments_for_hit", {}, more(20, 10))
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd) == {"places": 20, "grown": True, "stopped": False}

    Item.objects.filter(study=study).update(redundancy=3)  # another: the budget stops it
    stub.add_response("create_additional_assignments_for_hit", {}, more(22, 2))
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd)["places"] == 22 == services.max_places(crowd)
    with pytest.raises(services.BudgetExceeded):
        platform.add_places(crowd, 1)  # refused before any call
    assert services.spend(crowd)["committed"] == 22 * 180 <= 4000

    Item.objects.filter(study=study).update(n_taken=F("redundancy"), n_done=F("redundancy"))
    stub.add_response("update_expiration_for_hit", {}, {"HITId": HIT, "ExpireAt": ANY})
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd)["stopped"] is True
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd)["stopped"] is False  # expired once: only read now
    assert crowd.remote_status == "COMPLETED"
    grown = LedgerEntry.objects.filter(action="places").values_list("detail__to", flat=True)
    assert list(grown) == [20, 22]
    assert LedgerEntry.objects.filter(action="stop", state="done").count() == 1


@pytest.mark.django_db
def test_an_add_whose_answer_was_lost_is_checked_on_the_hit_before_the_next(stub):
    study = static_study(n_inputs=30)
    crowd = live(study)
    crowd.places = 10
    crowd.save()
    Item.objects.filter(study=study).update(redundancy=2)  # 20 wanted
    stub.add_client_error(  # MTurk added them; the answer was lost
        "create_additional_assignments_for_hit",
        service_error_code="ServiceUnavailable",
        service_message="Service unavailable",
        http_status_code=503,
        expected_params=more(20, 10),
    )
    platform = platforms.of(crowd)
    with pytest.raises(CrowdError):
        platform.sync(crowd)
    assert crowd.places == 10
    Item.objects.filter(study=study).update(redundancy=3)  # a round later: 30 wanted
    stub.add_response("get_hit", {"HIT": {"HITId": HIT, "MaxAssignments": 20}}, {"HITId": HIT})
    stub.add_response("create_additional_assignments_for_hit", {}, more(30, 10))  # not 20
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd)["places"] == 30
    states = dict(LedgerEntry.objects.filter(action="places").values_list("detail__to", "state"))
    assert states == {20: "done", 30: "done"}


@pytest.mark.django_db
def test_a_hit_made_with_fewer_than_ten_assignments_stays_under_ten(stub):
    """MTurk cannot extend a HIT made with fewer than 10 assignments to 10 or more: the
    protocol's growth stops at 9 (said in the ledger); a researcher's own add is refused."""
    study = static_study()
    crowd = crowd_of(study)
    stub.add_response(
        "create_hit",
        {"HIT": {"HITId": HIT}},
        hit_params(study, reward="1.50", assignments=4, seconds=600),
    )
    platform = platforms.of(crowd)
    platform.publish(crowd, "https://eval.example.org/")
    Item.objects.filter(study=study).update(redundancy=3)  # 36 ÷ 3 = 12 wanted
    stub.add_response("create_additional_assignments_for_hit", {}, more(9, 5))
    stub.add_response("list_assignments_for_hit", {"Assignments": []}, LIST)
    assert platform.sync(crowd)["places"] == 9
    assert "fewer than 10" in LedgerEntry.objects.get(action="limit").detail["note"]
    with pytest.raises(CrowdError, match="fewer than 10"):
        platform.add_places(crowd, 1)
    assert crowd.places == 9


def work(study, worker: str, items: int, ms: int, finish: bool = True) -> Participation:
    return crowd_visit(study, "mturk", worker, f"A-{worker}", items, ms, finish)


def submitted(*workers: str, status: str = "Submitted") -> dict:
    return {
        "Assignments": [
            {"AssignmentId": f"A-{w}", "WorkerId": w, "HITId": HIT, "AssignmentStatus": status}
            for w in workers
        ]
    }


def live(study, **fields) -> CrowdStudy:
    crowd = crowd_of(study, **fields)
    crowd.remote_id, crowd.remote_status, crowd.places = HIT, "ACTIVE", 4
    crowd.save()
    return crowd


def boss(study):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("boss", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_crowdstudy"))
    study.researchers.add(user)
    web = Client()
    web.force_login(user)
    return web


@pytest.mark.django_db
def test_assignments_are_reviewed_from_the_evidence_and_return_is_refused(stub):
    study = static_study()
    crowd = live(study, worker_group="Q-wave2")
    work(study, "good", 3, ms=20_000)
    work(study, "fast", 3, ms=400)
    work(study, "quit", 1, ms=20_000, finish=False)
    web, url = boss(study), f"/crowd/panel/{crowd.pk}/"

    page = web.get(url).content.decode()  # what MTurk lacks is greyed out, with the reason
    assert 'value="pause" type="submit" disabled title="MTurk has no pause' in page
    assert "MTurk has no return" in page
    stub.add_response("list_assignments_for_hit", submitted("good", "fast", "quit"), LIST)
    assert web.post(url, {"action": "review"}).status_code == 302
    proposals = {s.participant_id: (s.proposal, s.category) for s in crowd.submissions.all()}
    assert proposals == {
        "good": ("approve", ""),
        "fast": ("reject", "TOO_QUICKLY"),
        "quit": ("return", ""),
    }
    page = web.post(  # MTurk has no return: refused, nothing sent
        url,
        {"action": "confirm", "submission": list(crowd.submissions.values_list("pk", flat=True))},
    )
    assert page.status_code == 400 and "MTurk has no return" in page.content.decode()
    assert not crowd.submissions.exclude(status=services.AWAITING).exists()
    for action in ("pause", "resume"):  # nor pause: said, 400, nothing sent
        page = web.post(url, {"action": action})
        assert page.status_code == 400 and "MTurk has no" in page.content.decode()
    with pytest.raises(CommandError, match="MTurk has no pause"):
        call_command("crowd", str(study.pk), "pause", stdout=io.StringIO())

    # the command twin carries out what MTurk can and says what it cannot
    stub.add_response("list_assignments_for_hit", submitted("good", "fast", "quit"), LIST)
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A-good"})
    stub.add_response(
        "reject_assignment",
        {},
        {
            "AssignmentId": "A-fast",
            "RequesterFeedback": services.REJECT_MESSAGE.format(
                why="median 0.4 s per item (under 3 s)"
            ),
        },
    )
    stub.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": "Q-wave2",
            "WorkerId": "good",
            "IntegerValue": 1,
            "SendNotification": False,
        },
    )
    out = io.StringIO()
    call_command("crowd", str(study.public_id), "review", "--confirm", stdout=out)
    result = json.loads(out.getvalue())
    assert result["done"] == {"approve": 1, "reject": 1}
    assert "MTurk has no return" in result["not_sent"]
    statuses = dict(crowd.submissions.values_list("participant_id", "status"))
    assert statuses == {"good": "APPROVED", "fast": "REJECTED", "quit": services.AWAITING}
    reviews = dict(
        Participation.objects.filter(study=study).values_list("annotator__external_id", "review")
    )
    assert reviews == {"good": "approved", "fast": "rejected", "quit": "pending"}
    # decided ones are not decided twice; read again, MTurk's own statuses are kept
    decided = list(crowd.submissions.exclude(status=services.AWAITING))
    assert platforms.of(crowd).decide(crowd, decided) == {"approve": 0, "reject": 0}
    stub.add_response("list_assignments_for_hit", submitted("good", status="Approved"), LIST)
    platforms.of(crowd).poll(crowd)
    assert LedgerEntry.objects.filter(action="approve").count() == 1


@pytest.mark.django_db
def test_auto_approve_approves_on_mturk_what_passes_as_it_is_read(stub):
    study = static_study()
    crowd = live(study, auto_approve=True)
    work(study, "good", 3, ms=20_000)
    work(study, "fast", 3, ms=300)
    stub.add_response("list_assignments_for_hit", submitted("good", "fast"), LIST)
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A-good"})
    platforms.of(crowd).poll(crowd)
    statuses = dict(crowd.submissions.values_list("participant_id", "status"))
    assert statuses == {"good": "APPROVED", "fast": services.AWAITING}  # the speeder waits


@pytest.mark.django_db
def test_a_bonus_is_paid_once_across_a_call_that_failed_mid_way_and_was_retried(stub):
    study = static_study()
    crowd = live(study, bonus_per_item_cents=10)
    work(study, "good", 3, ms=20_000)
    Submission.objects.create(
        crowd=crowd, remote_id="A-good", participant_id="good", status="APPROVED", bonus_cents=30
    )
    bonus = {
        "WorkerId": "good",
        "AssignmentId": "A-good",
        "BonusAmount": "0.30",
        "Reason": f"A bonus for your work in {study.name}, as the study's rules set out.",
        "UniqueRequestToken": mturk.token("bonus", "A-good"),
    }
    assert services.bonus_preview(crowd) == {"amounts": {"good": 30}, "total": 30, "with_fee": 36}
    stub.add_client_error(  # paid at MTurk, but the answer never came back
        "send_bonus",
        service_error_code="ServiceUnavailable",
        service_message="Service unavailable",
        http_status_code=503,
        expected_params=bonus,
    )
    with pytest.raises(CrowdError):
        platforms.of(crowd).bonus_pay(crowd)
    assert LedgerEntry.objects.get(action="bonus").state == "failed"
    stub.add_client_error(  # the retry: same token, MTurk says it was done
        "send_bonus",
        service_error_code="RequestError",
        service_message="The UniqueRequestToken has already been used: the bonus was sent",
        expected_params=bonus,
    )
    entry = platforms.of(crowd).bonus_pay(crowd)
    assert entry.state == "done" and entry.detail["answer"]["already"]
    assert platforms.of(crowd).bonus_pay(crowd) is None  # nothing due: nothing sent
    assert services.spend(crowd)["bonuses"] == 36  # 30 + 20 %
    assert LedgerEntry.objects.filter(action="bonus").count() == 1


@pytest.mark.django_db
def test_a_call_older_than_mturks_token_is_not_sent_again_by_itself(stub):
    study = static_study()
    crowd = live(study)
    Submission.objects.create(
        crowd=crowd, remote_id="A-w", participant_id="w", status="APPROVED", bonus_cents=30
    )
    row = LedgerEntry.objects.create(
        crowd=crowd,
        action="bonus",
        key=f"bonus:{crowd.pk}:A-w",
        state="failed",
        cents=36,
        detail={"amounts": {"w": "0.30"}, "assignment": "A-w"},
    )
    LedgerEntry.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(hours=25))
    # failed rows do not count as paid, so the worker is due again; the token has expired
    entry = platforms.of(crowd).bonus_pay(crowd)
    assert entry.state == "uncertain" and "24 h" in entry.note  # no call was made
    assert platforms.of(crowd).bonus_pay(crowd) is None


@pytest.mark.django_db
def test_bonuses_over_the_budget_are_refused_and_nothing_is_sent(stub):
    study = static_study()
    crowd = live(study, money_budget_cents=4 * 180 + 35)  # 4 places leave 35 cents
    Submission.objects.create(
        crowd=crowd, remote_id="A-w", participant_id="w", status="APPROVED", bonus_cents=30
    )
    with pytest.raises(services.BudgetExceeded):
        platforms.of(crowd).bonus_pay(crowd)  # 30 + 20 % = 36 > 35
    assert not LedgerEntry.objects.exists()


# --- an adaptive study end to end, on SQLite, through the protocol's signal ------------------
def work_open_items(study, prefix: str, turk: StandIn) -> None:
    """New MTurk workers do the items open now, four each, until one finds nothing; each
    who did any submits their assignment."""
    rng = random.Random(prefix)
    for w in range(100):
        worker = f"W{prefix}x{w}"
        part = annotator_services.participation_enter(
            study=study, platform="mturk", external_id=worker, session=f"A{worker}"
        )
        done = 0
        for done in range(4):  # noqa: B007 - counted
            a = next_lease(participation=part)
            if a is None:
                break
            annotator_services.annotation_submit(
                annotator=part.annotator,
                token=a.token,
                data={"answer": answer(a, rng)},
                time_spent_ms=20_000,
                now=a.issued_at + timedelta(seconds=20),
            )
        else:
            done = 4
        if done == 0:
            return
        annotator_services.participation_finish(part)
        turk.assignments.append(
            {"AssignmentId": f"A{worker}", "WorkerId": worker, "AssignmentStatus": "Submitted"}
        )


@pytest.mark.django_db(transaction=True)
def test_an_adaptive_study_runs_on_mturk_through_the_protocols_signal(monkeypatch):
    turk = StandIn()
    monkeypatch.setattr(platforms, "mturk_client_factory", lambda crowd: turk)
    study = annotator_services.study_import(
        adaptive_bundle(
            n_inputs=40, systems=("s1", "s2"), batch_size=6, budget=24, items_per_worker=4
        ),
        filename="a.jsonl",
    )
    study.platform_fee_percent = 20
    study.save()
    crowd = crowd_of(study, bonus_per_item_cents=5, money_budget_cents=100_000)
    platforms.of(crowd).publish(crowd, "https://eval.example.org/")
    first = ProtocolConfig.objects.get(study=study).committed
    assert turk.hits[HIT]["MaxAssignments"] == -(-first // 4)

    for seed in range(12):  # rounds open by themselves: the signal adds assignments
        work_open_items(study, str(seed), turk)
        crowd.refresh_from_db()
        if services.study_done(crowd):
            break
    crowd.refresh_from_db()
    final = ProtocolConfig.objects.get(study=study).committed
    assert Round.objects.filter(study=study).count() >= 2
    grown = list(
        LedgerEntry.objects.filter(crowd=crowd, action="places", state="done").values_list(
            "detail__to", flat=True
        )
    )
    assert len(grown) >= 2 and grown == sorted(grown)  # assignments grew with the rounds
    assert turk.hits[HIT]["MaxAssignments"] == grown[-1] == -(-final // 4) <= 24 // 4
    assert crowd.remote_status == "COMPLETED" and turk.hits[HIT]["HITStatus"] == "Reviewable"
    assert turk.calls.count("update_expiration_for_hit") == 1

    # the assignments read (by the syncs, and once more after the last one came in),
    # approved as proposed, bonuses paid once
    platform = platforms.of(crowd)
    assert crowd.submissions.count() >= 1
    platform.poll(crowd)
    assert crowd.submissions.filter(status=services.AWAITING).count() == len(turk.assignments)
    assert set(crowd.submissions.values_list("proposal", flat=True)) == {"approve"}
    platform.decide(crowd, list(crowd.submissions.all()))
    assert {a["AssignmentStatus"] for a in turk.assignments} == {"Approved"}
    platform.bonus_pay(crowd)
    platform.bonus_pay(crowd)
    assert len(turk.bonuses) == len(turk.assignments) == len({w for w, _ in turk.bonuses})
    spent = services.spend(crowd)
    assert spent["committed"] <= crowd.money_budget_cents


@pytest.mark.django_db
def test_mturk_has_no_hooks_and_prolifics_hook_url_knows_no_mturk_study(stub):
    study = static_study()
    crowd = live(study)
    with pytest.raises(CrowdError, match="MTurk sends no hooks"):
        services.hooks_subscribe(crowd, "https://eval.example.org/", "ws1")
    url = f"/crowd/hooks/prolific/{study.public_id}/"
    assert Client().post(url, b"{}", content_type="application/json").status_code == 404
    assert "AWS_ACCESS_KEY_ID" in platforms.of(crowd).credentials


@pytest.mark.django_db
def test_a_lost_create_is_found_by_its_annotation_when_mturk_names_no_hit(stub):
    study = static_study()
    crowd = crowd_of(study)
    params = hit_params(study, reward="1.50", assignments=4, seconds=600)
    stub.add_client_error(
        "create_hit",
        service_error_code="AWS.MechanicalTurk.HitAlreadyExists",
        service_message="A HIT already exists for this token",
        expected_params=params,
    )
    other = {"HITId": "3OTHERAAAAAAAAAAAAAAAAAAAAAAAA", "RequesterAnnotation": "humeval x"}
    ours = {"HITId": HIT, "RequesterAnnotation": f"humeval {study.public_id}"}
    stub.add_response("list_hits", {"HITs": [other], "NextToken": "p2"}, {"MaxResults": 100})
    stub.add_response("list_hits", {"HITs": [ours]}, {"MaxResults": 100, "NextToken": "p2"})
    # made by an earlier try when less work was out: its own count is kept, not ours
    stub.add_response("get_hit", {"HIT": {"HITId": HIT, "MaxAssignments": 2}}, {"HITId": HIT})
    platforms.of(crowd).publish(crowd, "https://eval.example.org/")
    assert (crowd.remote_id, crowd.places) == (HIT, 2)
    assert LedgerEntry.objects.get(action="create").detail["assignments"] == 2
