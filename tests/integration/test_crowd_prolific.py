"""A study run on Prolific end to end, against the stand-in Prolific server (a real HTTP
process on loopback, tests/prolific_server.py) answering 429 and 5xx along the way: the
draft study created and published, its places following the protocol's rounds within the
money budget and the study stopped at the end; submissions reviewed as proposed; bonuses
paid once when the pay call fails mid-request and is retried; a returned participant's
lease freed by the hook; a forged hook refused."""

import json
import math
import time

import httpx
import pytest
from django.db import connection

from annotator import services as annotator_services
from annotator.models import Assignment, Participation
from crowd import hooks
from crowd import services as crowd
from crowd.client import ProlificClient
from crowd.models import CrowdStudy, HookDelivery, LedgerEntry, Submission
from protocol.models import ProtocolConfig, Round
from tests.leasing import next_lease
from tests.prolific_server import StandIn
from tests.protocol_sim import adaptive_bundle, answer, crowd_visit
from tests.services import CeleryWorker, wait_for

TOKEN = "test-token-1234"
HOOK_SECRET = "hook-secret-5678"


@pytest.fixture
def prolific(monkeypatch):
    server = StandIn(TOKEN, HOOK_SECRET)
    monkeypatch.setenv("HUMEVAL_PROLIFIC_API_URL", server.url)
    monkeypatch.setenv("HUMEVAL_PROLIFIC_TOKEN", TOKEN)
    yield server
    server.stop()


def annotate_open_work(study, prefix: str) -> None:
    """New workers (ids ``prefix-n``) do the items open now, four each, until one finds
    nothing."""
    import random

    rng = random.Random(prefix)
    for w in range(100):
        part = annotator_services.participation_enter(
            study=study, platform="link", external_id=f"{prefix}-{w}"
        )
        for done in range(4):
            a = next_lease(participation=part)
            if a is None:
                if done == 0:
                    return
                break
            annotator_services.annotation_submit(
                annotator=part.annotator, token=a.token, data={"answer": answer(a, rng)}
            )


def remote(server: StandIn, crowd_study: CrowdStudy) -> dict:
    return server.state()["studies"][crowd_study.remote_id]


def crowd_study(study, **fields) -> CrowdStudy:
    return CrowdStudy.objects.create(
        study=study,
        reward_cents=fields.pop("reward_cents", 150),
        estimated_minutes=5,
        money_budget_cents=fields.pop("money_budget_cents", 100_000),
        **fields,
    )


@pytest.mark.django_db(transaction=True)
def test_an_adaptive_study_grows_its_places_with_the_rounds_and_stops_at_the_end(
    prolific, live_server, tmp_path
):
    study = annotator_services.study_import(
        adaptive_bundle(
            n_inputs=40,
            systems=("s1", "s2"),
            batch_size=6,
            budget=24,
            items_per_worker=4,
            completion_code="DONE123",
        ),
        filename="a.jsonl",
    )
    study.platform_fee_percent = 33
    study.save()
    cs = crowd_study(study)
    prolific.fail("/api/v1/studies/", "429", count=2, method="PATCH")  # throttled twice
    # the create fails mid-request (made, answer lost): found by its internal name, not
    # made again; then a transition answered 503 is retried
    prolific.fail("/api/v1/studies/", "midway", count=1, method="POST")
    prolific.fail("/api/v1/studies/s", "503", count=1, method="POST")
    crowd.publish(cs, live_server.url)
    first = ProtocolConfig.objects.get(study=study).committed
    state = remote(prolific, cs)
    assert state["status"] == "ACTIVE"
    assert state["total_available_places"] == math.ceil(first / 4)
    assert state["reward"] == 150 and state["estimated_completion_time"] == 5
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in state["external_study_url"]
    assert state["external_study_url"].startswith(live_server.url + f"/w/{study.public_id}/")
    assert state["completion_codes"][0]["code"] == "DONE123"
    assert len(prolific.state()["studies"]) == 1

    env = {"HUMEVAL_PROLIFIC_API_URL": prolific.url, "HUMEVAL_PROLIFIC_TOKEN": TOKEN}
    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "celery.log", env=env)
    worker.start()
    try:
        places_seen = [state["total_available_places"]]
        for seed in range(12):
            annotate_open_work(study, prefix=f"r{seed}")
            wait_for(  # the round complete is decided by the worker (and the next opened)
                lambda: not Round.objects.filter(study=study, state__in=["closed"]).exists(),
                timeout=60,
            )
            places_seen.append(remote(prolific, cs)["total_available_places"])
            if crowd.study_done(cs):
                break
        wait_for(lambda: remote(prolific, cs)["status"] == "COMPLETED", timeout=30)
    finally:
        worker.stop()
    final = ProtocolConfig.objects.get(study=study).committed
    assert Round.objects.filter(study=study).count() >= 2
    wait_for(lambda: remote(prolific, cs)["total_available_places"] == math.ceil(final / 4))
    grown = list(
        LedgerEntry.objects.filter(crowd=cs, action="places", state="done").values_list(
            "detail__to", flat=True
        )
    )
    assert len(grown) >= 2 and grown == sorted(grown)  # places grew with the rounds
    assert grown[-1] == math.ceil(final / 4) <= 24 / 4  # never beyond the budget
    assert LedgerEntry.objects.filter(crowd=cs, action="stop", state="done").count() == 1


@pytest.mark.django_db(transaction=True)
def test_places_never_exceed_the_money_budget(prolific, live_server):
    study = annotator_services.study_import(
        adaptive_bundle(
            n_inputs=40,
            systems=("s1", "s2"),
            batch_size=20,
            items_per_worker=1,
            completion_code="C1",
        ),
        filename="a.jsonl",
    )
    study.platform_fee_percent = 50
    study.save()
    cs = crowd_study(study, reward_cents=100, money_budget_cents=1000)  # 150 a place
    crowd.publish(cs, live_server.url)
    assert remote(prolific, cs)["total_available_places"] == 6  # 1000 // 150, not 20
    assert crowd.spend(cs)["committed"] == 900
    with pytest.raises(crowd.BudgetExceeded):
        crowd.set_places(cs, 7)
    assert remote(prolific, cs)["total_available_places"] == 6


def static_study(**options):
    bundle = adaptive_bundle(
        n_inputs=12,
        systems=("s1", "s2"),
        collection="all",
        items_per_worker=3,
        completion_code="DONE123",
        **options,
    )
    return annotator_services.study_import(bundle, filename="s.jsonl")


def work(study, pid: str, session: str, items: int, ms: int, finish: bool = True):
    return crowd_visit(study, "prolific", pid, session, items, ms, finish)


@pytest.mark.django_db(transaction=True)
def test_submissions_are_reviewed_as_proposed_and_bonuses_paid_once(prolific, live_server):
    study = static_study()
    study.platform_fee_percent = 33
    study.save()
    cs = crowd_study(study, bonus_per_item_cents=10)
    crowd.publish(cs, live_server.url)
    sid = cs.remote_id
    work(study, "good", "sub-good", 3, ms=20_000)
    work(study, "fast", "sub-fast", 3, ms=400)
    work(study, "quit", "sub-quit", 1, ms=20_000, finish=False)
    for pid in ("good", "fast", "quit"):
        prolific.submission(sid, f"sub-{pid}", pid, "AWAITING REVIEW")
    prolific.fail("/api/v1/submissions/", "503", count=1, method="GET")  # a retried list
    crowd.poll(cs)
    proposals = {s.participant_id: (s.proposal, s.category) for s in cs.submissions.all()}
    assert proposals == {
        "good": ("approve", ""),
        "fast": ("reject", "TOO_QUICKLY"),
        "quit": ("return", ""),
    }
    prolific.fail("/api/v1/submissions/sub-good/transition/", "429", count=1)
    crowd.decide(cs, list(cs.submissions.all()))
    subs = prolific.state()["submissions"]
    assert subs["sub-good"]["status"] == "APPROVED"
    assert subs["sub-fast"]["status"] == "REJECTED"
    assert subs["sub-fast"]["rejection_category"] == "TOO_QUICKLY"
    assert subs["sub-quit"]["return_requested"]
    reviews = dict(
        Participation.objects.filter(study=study).values_list("annotator__external_id", "review")
    )
    assert reviews == {"good": "approved", "fast": "rejected", "quit": "pending"}

    preview = crowd.bonus_preview(cs)
    assert preview == {"amounts": {"good": 30}, "total": 30, "with_fee": 40}  # 30 + 33 %
    prolific.fail("/api/v1/bulk-bonus-payments/", "midway", count=1)  # paid, answer lost
    entry = crowd.bonus_pay(cs)
    assert entry.state == "uncertain"
    assert crowd.bonus_pay(cs) is None  # the retry: nothing due, nothing sent
    paid = prolific.state()["paid"]
    assert paid == [{"bulk": entry.detail["bulk_id"], "participant_id": "good", "amount": 0.3}]
    assert crowd.spend(cs)["bonuses"] == 40  # an uncertain payment counts as spent
    assert crowd.bonus_preview(cs)["amounts"] == {}


@pytest.mark.django_db(transaction=True)
def test_bonus_runs_that_failed_or_crashed_are_reconciled_and_never_pay_twice(
    prolific, live_server, monkeypatch
):
    study = static_study()
    cs = crowd_study(study, bonus_per_item_cents=5)
    crowd.publish(cs, live_server.url)
    work(study, "good", "sub-good", 3, ms=20_000)
    prolific.submission(cs.remote_id, "sub-good", "good", "AWAITING REVIEW")
    crowd.poll(cs)
    crowd.decide(cs, list(cs.submissions.all()))
    prolific.fail("/api/v1/submissions/bonus-payments/", "503", count=5)  # every attempt
    with pytest.raises(crowd.CrowdError):
        crowd.bonus_pay(cs)  # refused: nothing happened, the row failed
    assert prolific.state()["paid"] == []

    def crash(self, bulk_id):  # the process dies as the pay call goes out
        raise SystemExit("killed")

    with monkeypatch.context() as patch:
        patch.setattr(ProlificClient, "bonus_pay", crash)
        with pytest.raises(SystemExit):
            crowd.bonus_pay(cs)
    entry = LedgerEntry.objects.get(crowd=cs, action="bonus")
    assert entry.state == "pending" and entry.detail["pay_sent"]
    assert crowd.bonus_pay(cs).state == "uncertain"  # the next run: never sent again
    assert crowd.bonus_pay(cs) is None  # nothing due: the uncertain payment counts
    assert prolific.state()["paid"] == []
    crowd.settle(entry, paid=False)  # the researcher checked on Prolific: it was not paid
    assert crowd.bonus_pay(cs).state == "done"
    crowd.bonus_pay(cs)
    assert [p["participant_id"] for p in prolific.state()["paid"]] == ["good"]


def signed(body: bytes, secret: str = HOOK_SECRET, stamp: str | None = None) -> dict:
    stamp = stamp or str(int(time.time()))
    return {
        "Content-Type": "application/json",
        "X-Prolific-Request-Timestamp": stamp,
        "X-Prolific-Request-Signature": hooks.sign(secret, stamp, body),
    }


@pytest.mark.django_db(transaction=True)
def test_a_returned_participant_frees_their_lease_within_seconds_of_the_hook(prolific, live_server):
    study = static_study()
    cs = crowd_study(study)
    crowd.publish(cs, live_server.url)
    url = crowd.hooks_subscribe(cs, live_server.url, workspace_id="ws1")
    part = annotator_services.participation_enter(
        study=study, platform="prolific", external_id="leaver", session="sub-leaver"
    )
    lease = next_lease(participation=part)
    assert lease.state == "issued"
    prolific.submission(cs.remote_id, "sub-leaver", "leaver", "ACTIVE")
    started = time.monotonic()
    prolific.submission(cs.remote_id, "sub-leaver", "leaver", "RETURNED")  # sends the hook
    wait_for(lambda: Assignment.objects.get(pk=lease.pk).state == "returned", timeout=5)
    assert time.monotonic() - started < 5
    assert Participation.objects.get(pk=part.pk).status == "stopped"
    assert Submission.objects.get(crowd=cs, remote_id="sub-leaver").status == "RETURNED"
    assert prolific.state()["hook_log"][-1] == {"url": url, "status": 200}
    # the same hook again (a redelivery) changes nothing
    body = json.dumps(
        {
            "event_type": "submission.status.change",
            "resource_id": "sub-leaver",
            "participant_id": "leaver",
            "status": "RETURNED",
        }
    ).encode()
    headers = signed(body)
    assert httpx.post(url, content=body, headers=headers).json() == {"ok": "applied"}
    assert httpx.post(url, content=body, headers=headers).json() == {"ok": "duplicate"}


@pytest.mark.django_db(transaction=True)
def test_a_forged_hook_is_refused_and_changes_nothing(prolific, live_server):
    study = static_study()
    cs = crowd_study(study)
    crowd.publish(cs, live_server.url)
    url = crowd.hooks_subscribe(cs, live_server.url, workspace_id="ws1")
    part = annotator_services.participation_enter(
        study=study, platform="prolific", external_id="victim", session="sub-victim"
    )
    lease = next_lease(participation=part)
    body = json.dumps(
        {
            "event_type": "submission.status.change",
            "resource_id": "sub-victim",
            "participant_id": "victim",
            "status": "RETURNED",
        }
    ).encode()
    forged = [
        signed(body, secret="guessed"),
        {**signed(body), "X-Prolific-Request-Signature": ""},
        signed(body, stamp=str(int(time.time()) - 3600)),  # a replayed capture
        {"Content-Type": "application/json"},
    ]
    for headers in forged:
        assert httpx.post(url, content=body, headers=headers).status_code == 403
    tampered = body.replace(b"RETURNED", b"TIMED-OUT")
    assert httpx.post(url, content=tampered, headers=signed(body)).status_code == 403
    assert Assignment.objects.get(pk=lease.pk).state == "issued"
    assert not HookDelivery.objects.exists() and not Submission.objects.exists()
