"""Crowd workflow: platform entry, qualification tests, gold checks and strikes, codes."""

import html
import random
import re
from collections import Counter
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client

from annotator import services
from annotator.errors import WorkerBlocked
from annotator.invites import invite_token
from annotator.models import Annotation, Assignment, Item, Participation, QualificationAttempt
from annotator.views import COOKIE_SALT
from protocol.models import Round
from tests.conftest import LLMBAR, boss_client, bundle, pairwise_bundle
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle
from tests.unit.test_cycle_statements import form


@pytest.fixture(autouse=True)
def fresh_throttle():
    """These tests enter many times within a minute: start each with no entries counted."""
    cache.clear()


def returned(response) -> str:
    """Where a Prolific worker's end page takes them: the link shown with the code, which
    the page also follows by itself (``<meta http-equiv="refresh">``)."""
    page = response.content.decode()
    link = html.unescape(re.search(r'id="prolific-return" href="([^"]+)"', page).group(1))
    refresh = html.unescape(
        re.search(r'http-equiv="refresh" content="\d+; url=([^"]+)"', page).group(1)
    )
    assert link == refresh
    return link


def gold_bundle(n_inputs: int, n_gold: int, **options) -> bytes:
    records = [
        {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {"alpha": f"alpha {i}", "beta": f"beta {i}"},
        }
        for i in range(n_inputs)
    ]
    records += [
        {
            "id": f"gold{i}",
            "input": f"check {i}",
            "gold": "alpha",
            "outputs": {"alpha": f"right {i}", "beta": f"wrong {i}"},
        }
        for i in range(n_gold)
    ]
    return bundle(records, {"kind": "pairwise", "allow_tie": False, **options})


def answer_for(assignment, correct: bool) -> str:
    """The raw answer that picks output A (the right one for our gold items) or not."""
    picks_a = "left" if assignment.display_order == [0, 1] else "right"
    return picks_a if correct else ("right" if picks_a == "left" else "left")


# --- entry ----------------------------------------------------------------------------
def token_on(page: str) -> str:
    return re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)


def do_items(client: Client, study, n: int) -> None:
    """Answer ``n`` tasks in this browser."""
    for _ in range(n):
        page = client.get(f"/w/{study.public_id}/task/").content.decode()
        client.post(f"/w/{study.public_id}/task/", {"token": token_on(page), "answer": "left"})


def test_prolific_entry_resume_and_completion_redirect(make_study):
    study = make_study(items_per_worker=2, completion_code="C0MPLETE", open_links=False)
    client = Client()
    url = f"/w/{study.public_id}/prolific/?PROLIFIC_PID=pp1&STUDY_ID=s&SESSION_ID=sess9"
    assert client.get(url).url == f"/w/{study.public_id}/instructions/"
    part = Participation.objects.get()
    assert (part.annotator.platform, part.annotator.external_id) == ("prolific", "pp1")
    assert part.platform_session == "sess9"
    token = token_on(client.get(f"/w/{study.public_id}/task/").content.decode())
    # the same browser opening the link again resumes the same item
    assert client.get(url).url == f"/w/{study.public_id}/task/"
    assert token in client.get(f"/w/{study.public_id}/task/").content.decode()
    do_items(client, study, 2)
    done = client.get(f"/w/{study.public_id}/task/")
    assert done.url == f"/w/{study.public_id}/end/"
    final = client.get(done.url)
    assert final.status_code == 200  # the code shown, and the way back taken by itself
    assert returned(final) == "https://app.prolific.com/submissions/complete?cc=C0MPLETE"
    assert final["Content-Type"].startswith("text/html") and "C0MPLETE" in final.content.decode()
    part = Participation.objects.get()
    assert (part.status, part.code_given) == ("finished", "C0MPLETE")


# --- a participation belongs to the browser that started it ---------------------------
ENTRIES = {
    "prolific": "/w/{s}/prolific/?PROLIFIC_PID=victim&SESSION_ID=other",
    "mturk": "/w/{s}/mturk/?workerId=victim&assignmentId=A9&hitId=h"
    "&turkSubmitTo=https://www.mturk.com",
    "link": "/w/{s}/?worker=victim",
}


@pytest.mark.parametrize("platform", [*ENTRIES, "invite"])
def test_second_browser_never_gets_the_live_assignment(make_study, platform):
    study = make_study(open_links=True, gold_rate_start=0.0, gold_rate_end=0.0)
    entry = (
        f"/w/{study.public_id}/i/{invite_token(study, 'victim')}/"
        if platform == "invite"
        else ENTRIES[platform].format(s=study.public_id)
    )
    victim, thief = Client(), Client()
    assert victim.get(entry).status_code == 302
    token = token_on(victim.get(f"/w/{study.public_id}/task/").content.decode())
    refused = thief.get(entry)
    page = refused.content.decode()
    assert refused.status_code == 409
    assert "This study is open in another browser" in page and "in 30 minutes" in page
    assert token not in page and not refused.cookies.get(f"humeval-{study.public_id.hex}")
    for path in ("task", "instructions", "end"):
        assert thief.get(f"/w/{study.public_id}/{path}/").status_code == 403
    thief.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    assert Annotation.objects.count() == 0
    # the victim goes on undisturbed
    victim.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "right"})
    assert Annotation.objects.get().raw_answer == "right"


def idle(minutes: int) -> None:
    """Move every moment of the worker's participation ``minutes`` into the past."""
    ago = timedelta(minutes=minutes)
    for part in Participation.objects.all():
        Participation.objects.filter(pk=part.pk).update(browser_since=part.browser_since - ago)
    for lease in Assignment.objects.all():
        Assignment.objects.filter(pk=lease.pk).update(
            issued_at=lease.issued_at - ago,
            expires_at=lease.expires_at - ago,
            closed_at=lease.closed_at and lease.closed_at - ago,
        )


def test_takeover_only_after_the_lease_expired_and_the_holder_was_idle(make_study):
    study = make_study(lease_seconds=600, gold_rate_start=0.0, gold_rate_end=0.0)
    entry = f"/w/{study.public_id}/prolific/?PROLIFIC_PID=mover"
    first, second = Client(), Client()
    first.get(entry)
    do_items(first, study, 1)
    old_token = token_on(first.get(f"/w/{study.public_id}/task/").content.decode())
    idle(9)  # the second lease has a minute left
    response = second.get(entry)
    assert response.status_code == 409 and "in 1 minute" in response.content.decode()
    idle(2)  # expired, and nothing happened for 11 minutes
    assert second.get(entry).url == f"/w/{study.public_id}/instructions/"
    # the first browser has lost it: a clear page, and its answer is not stored
    moved = first.get(f"/w/{study.public_id}/task/")
    assert moved.status_code == 409
    assert "This study continued in another browser" in moved.content.decode()
    first.post(f"/w/{study.public_id}/task/", {"token": old_token, "answer": "left"})
    assert Annotation.objects.count() == 1
    # the second browser works on, with the first item counted
    do_items(second, study, 1)
    assert Annotation.objects.count() == 2
    assert set(Annotation.objects.values_list("annotator__external_id", flat=True)) == {"mover"}
    # and the first browser cannot take it back while the second one is working
    assert first.get(entry).status_code == 409


def test_recent_answer_keeps_the_participation_though_no_lease_is_live(make_study):
    study = make_study(lease_seconds=600, items_per_worker=1)
    entry = f"/w/{study.public_id}/prolific/?PROLIFIC_PID=quick"
    first = Client()
    first.get(entry)
    do_items(first, study, 1)  # no lease left: the quota is reached
    assert not Assignment.objects.filter(state="issued").exists()
    assert Client().get(entry).status_code == 409
    idle(11)
    assert Client().get(entry).status_code == 302


def test_failure_and_block_stay_with_the_platform_id(qualified_study, make_study):
    study, _ = qualified_study
    entry = f"/w/{study.public_id}/prolific/?PROLIFIC_PID=failer"
    first = Client()
    first.get(entry)
    for _ in range(2):  # both attempts failed
        take_test(study, Participation.objects.get(), 2)
    idle(31)
    second = Client()
    assert second.get(entry).status_code == 302
    assert returned(second.get(f"/w/{study.public_id}/end/")).endswith("cc=FAIL")
    assert Participation.objects.get().status == "failed"
    blocked_study = make_study(fail_code="BLK")
    part = services.participation_enter(study=blocked_study, platform="link", external_id="b")
    services.participation_claim(part)
    services.participation_set_blocked(part, True)
    idle(31)
    fresh = Client()
    fresh.get(f"/w/{blocked_study.public_id}/?worker=b")
    assert "BLK" in fresh.get(f"/w/{blocked_study.public_id}/end/").content.decode()
    assert Participation.objects.get(pk=part.pk).status == "blocked"


def test_forged_or_old_cookie_holds_nothing(make_study):
    study = make_study()
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=own")
    name = f"humeval-{study.public_id.hex}"
    part = Participation.objects.get()
    thief = Client()
    for value in (str(part.pk), f"{part.pk}:guess"):  # the old format; a guessed secret
        thief.cookies[name] = signing.get_cookie_signer(salt=name + COOKIE_SALT).sign(value)
        assert thief.get(f"/w/{study.public_id}/task/").status_code in (403, 409)
    assert len(part.browser_key) == 64 and name not in part.browser_key
    assert Client().get(f"/w/{study.public_id}/task/").status_code == 403


# --- the code comes when the work is done ----------------------------------------------
def test_code_only_after_items_per_worker_and_early_end_page(make_study):
    study = make_study(items_per_worker=3, completion_code="DONE3", redundancy=1)
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=early")
    do_items(client, study, 1)
    early = client.get(f"/w/{study.public_id}/end/")
    page = early.content.decode()
    assert early.status_code == 200 and "DONE3" not in page
    assert "You have done 1 of 3 items" in page and "2 items left" in page
    assert f'href="/w/{study.public_id}/task/"' in page and 'id="stop-early"' in page
    part = Participation.objects.get()
    assert (part.status, part.code_given) == ("active", "")
    do_items(client, study, 1)
    assert "1 item left" in client.get(f"/w/{study.public_id}/end/").content.decode()
    do_items(client, study, 1)
    assert returned(client.get(f"/w/{study.public_id}/end/")).endswith("cc=DONE3")
    assert Participation.objects.get().code_given == "DONE3"


@pytest.mark.parametrize("kind", ["pairwise", "likert", "ranking", "error_spans"])
def test_in_an_adaptive_study_the_last_of_a_workers_items_leads_to_the_code(make_study, kind):
    """A worker who did the study's ``items_per_worker`` items while rounds go on is sent
    to the end page with the code, not told that more tasks are coming (nor is a look of
    their waiting page while a round is being decided); a worker short of them waits."""
    options = {"likert": {"kind": "likert"}, "error_spans": {"kind": "error_spans",
               "categories": ["Accuracy"]}, "ranking": {"kind": "ranking", "per_item": 3,
               "allow_tie": False}}.get(kind, {})  # fmt: skip
    study = make_study(
        adaptive_bundle(n_inputs=60, batch_size=20, **options),
        items_per_worker=2, completion_code="DONE2", redundancy=1,
    )  # fmt: skip
    client, rng = Client(), random.Random(0)
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=quota")
    token = token_on(client.get(f"/w/{study.public_id}/task/").content.decode())
    first = client.post(f"/w/{study.public_id}/task/", form(study, token, rng))
    assert first.status_code == 200 and token_on(first.content.decode()) != token
    last = client.post(
        f"/w/{study.public_id}/task/", form(study, token_on(first.content.decode()), rng)
    )
    assert last.status_code == 302 and last.url == f"/w/{study.public_id}/end/"
    assert returned(client.get(last.url)).endswith("cc=DONE2")
    Round.objects.filter(study=study).update(state="closed")  # a round being decided
    look = client.get(f"/w/{study.public_id}/task/", {"look": 1})
    assert look.status_code == 302 and look.url == f"/w/{study.public_id}/end/"
    # a worker with items to go, finding none while the round is decided, waits
    other = Client()
    other.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=short")
    assert 'id="waiting"' in other.get(f"/w/{study.public_id}/task/", {"look": 1}).content.decode()


def test_stopping_early_gives_no_code_and_returns_the_lease(make_study):
    study = make_study(items_per_worker=3, completion_code="DONE3", redundancy=1)
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=stopper")
    do_items(client, study, 1)
    client.get(f"/w/{study.public_id}/task/")  # holds a second item
    held = Assignment.objects.get(state="issued")
    stopped = client.post(f"/w/{study.public_id}/end/", follow=True).content.decode()
    assert "without a code" in stopped and "return your submission on Prolific" in stopped
    assert "DONE3" not in stopped
    held.refresh_from_db()
    assert held.state == "returned" and Item.objects.get(pk=held.item_id).n_taken == 0
    part = Participation.objects.get()
    assert (part.status, part.code_given) == ("stopped", "")
    # a stopped worker gets no more work
    assert client.get(f"/w/{study.public_id}/task/").url.endswith("/end/")
    assert Assignment.objects.filter(state="issued").count() == 0


def test_without_items_per_worker_any_work_earns_the_code(make_study):
    study = make_study(completion_code="ANY")
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=free")
    client.get(f"/w/{study.public_id}/task/")
    first = client.get(f"/w/{study.public_id}/end/").content.decode()
    assert "You have not done any items yet" in first and "ANY" not in first
    do_items(client, study, 1)
    assert returned(client.get(f"/w/{study.public_id}/end/")).endswith("cc=ANY")
    # the code released the item they held
    assert not Assignment.objects.filter(state="issued").exists()


def test_all_that_was_left_earns_the_code(make_study):
    study = make_study(items_per_worker=50, completion_code="ALL", no_work_code="NONE")
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=all")
    n = Item.objects.filter(study=study).count()
    do_items(client, study, n)
    assert returned(client.get(f"/w/{study.public_id}/end/")).endswith("cc=ALL")


def test_items_per_worker_must_be_positive(make_study):
    study = make_study()
    study.items_per_worker = 0
    with pytest.raises(ValidationError, match="items_per_worker"):
        study.full_clean()


def test_prolific_link_without_pid_is_refused(make_study):
    study = make_study()
    response = Client().get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=<script>")
    assert response.status_code == 400
    assert Participation.objects.count() == 0


def test_no_work_code(make_study):
    study = make_study(no_work_code="NOWORK", redundancy=1)
    for item in Item.objects.all():
        Item.objects.filter(pk=item.pk).update(is_active=False)
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=late")
    assert client.get(f"/w/{study.public_id}/task/").url.endswith("/end/")
    assert returned(client.get(f"/w/{study.public_id}/end/")).endswith("cc=NOWORK")


def test_mturk_preview_accepts_nothing_and_accepted_hit_submits_back(make_study):
    study = make_study(items_per_worker=1)
    client = Client()
    preview = client.get(
        f"/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h"
    )
    assert preview.status_code == 200 and b"This is a preview" in preview.content
    assert b"disabled" in preview.content and b'name="token"' not in preview.content
    assert Participation.objects.count() == 0
    bad = client.get(
        f"/w/{study.public_id}/mturk/?workerId=W1&assignmentId=A1&hitId=h"
        "&turkSubmitTo=https://evil.example"
    )
    assert bad.status_code == 400
    client.get(
        f"/w/{study.public_id}/mturk/?workerId=W1&assignmentId=A1&hitId=h"
        "&turkSubmitTo=https://workersandbox.mturk.com"
    )
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    token = re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)
    client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    end = client.get(f"/w/{study.public_id}/end/").content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in end
    assert 'name="assignmentId" value="A1"' in end


def test_signed_invites_and_closed_open_links(make_study):
    study = make_study(open_links=False)
    other = make_study(open_links=False)
    client = Client()
    assert client.get(f"/w/{study.public_id}/?worker=me").status_code == 403
    good = f"/w/{study.public_id}/i/{invite_token(study, 'lab-7')}/"
    assert client.get(good).status_code == 302
    assert Participation.objects.get().annotator.external_id == "lab-7"
    forged = invite_token(study, "lab-7")[:-2] + "xx"
    assert client.get(f"/w/{study.public_id}/i/{forged}/").status_code == 403
    cross = f"/w/{other.public_id}/i/{invite_token(study, 'lab-8')}/"
    assert client.get(cross).status_code == 403


# --- qualification --------------------------------------------------------------------------
@pytest.fixture
def qualified_study(db):
    study = services.study_import(
        LLMBAR.read_bytes(),
        filename=LLMBAR.name,
        overrides={
            "fail_code": "FAIL",
            "completion_code": "DONE",
            "gold_rate_start": 0.0,
            "gold_rate_end": 0.0,
        },
    )
    test = services.study_prepare_checks(study, n_gold=5, n_qualification=10, seed=1)
    return study, test


def take_test(study, participation, n_right: int) -> None:
    """Answer the test, the first ``n_right`` questions correctly."""
    for k in range(10):
        step = services.qualification_next(participation)
        left_is_a = step["display_order"] == [0, 1]
        right = "left" if (step["question"].expected["value"] == "A") == left_is_a else "right"
        wrong = "right" if right == "left" else "left"
        services.qualification_answer(
            participation,
            question_id=step["question"].pk,
            data={"answer": right if k < n_right else wrong},
        )
        participation.refresh_from_db()


def test_prepare_checks_moves_items_out_of_the_pool(qualified_study):
    study, test = qualified_study
    assert (test.questions.count(), test.pass_threshold) == (10, 9)
    assert Item.objects.filter(study=study, is_gold=True).count() == 5
    assert Item.objects.filter(study=study, is_active=False).count() == 10
    prompts = set(test.questions.values_list("prompt", flat=True))
    served = set(
        Item.objects.filter(study=study, is_active=True).values_list("input__text", flat=True)
    )
    assert not prompts & served


@pytest.mark.parametrize(("n_right", "status"), [(9, "active"), (10, "active"), (8, "qualifying")])
def test_qualification_threshold(qualified_study, n_right, status):
    study, test = qualified_study
    part = services.participation_enter(study=study, platform="prolific", external_id="q")
    assert part.status == "qualifying"
    with pytest.raises(WorkerBlocked, match="qualification test first"):
        next_lease(participation=part)
    take_test(study, part, n_right)
    attempt = QualificationAttempt.objects.get()
    assert (attempt.n_correct, attempt.passed, attempt.number) == (n_right, n_right >= 9, 1)
    assert part.status == status  # a first failure leaves a second attempt
    # the display order of questions was drawn per question and recorded
    assert {tuple(a["display_order"]) for a in attempt.answers} == {(0, 1), (1, 0)}


def test_question_and_display_orders_come_from_the_injectable_rng(qualified_study, monkeypatch):
    """The draws of an attempt come from ``services.qualification._RNG``: seeded alike, two
    workers get the same question order and display orders (the test above is then
    deterministic)."""
    study, test = qualified_study
    orders = []
    for worker in ("s1", "s2"):
        monkeypatch.setattr(services.qualification, "_RNG", random.Random(7))
        part = services.participation_enter(study=study, platform="prolific", external_id=worker)
        services.qualification_next(part)
        orders.append(QualificationAttempt.objects.get(annotator=part.annotator).order)
    assert orders[0] == orders[1] and len(orders[0]) == 10


def test_a_failed_first_attempt_gets_a_second_in_a_fresh_order(qualified_study):
    study, test = qualified_study
    assert test.max_attempts == 2
    part = services.participation_enter(study=study, platform="prolific", external_id="r")
    first = services.qualification_next(part)
    assert (first["attempt"], first["max_attempts"], first["previous"]) == (1, 2, None)
    take_test(study, part, 7)
    retry = services.qualification_next(part)
    assert (retry["attempt"], retry["position"]) == (2, 1)
    assert retry["previous"] == {"n_correct": 7, "total": 10, "needed": 9}
    one, two = QualificationAttempt.objects.order_by("number")
    assert sorted(q["question"] for q in one.order) == sorted(q["question"] for q in two.order)
    assert [q["question"] for q in one.order] != [q["question"] for q in two.order]
    assert two.order[0]["question"] != one.order[-1]["question"]
    # a repeated post of the first attempt's last answer does not count in the second
    services.qualification_answer(
        part, question_id=one.order[-1]["question"], data={"answer": "left"}
    )
    two.refresh_from_db()
    assert two.answers == []
    take_test(study, part, 9)
    assert part.status == "active"
    assert list(QualificationAttempt.objects.values_list("number", "passed")) == [
        (1, False),
        (2, True),
    ]
    assert next_lease(participation=part) is not None


def test_two_failures_fail_the_worker_in_this_study_only(qualified_study):
    study, test = qualified_study
    failed = services.participation_enter(study=study, platform="prolific", external_id="f")
    take_test(study, failed, 3)
    assert failed.status == "qualifying"
    take_test(study, failed, 8)
    assert failed.status == "failed"
    again = services.participation_enter(study=study, platform="prolific", external_id="f")
    assert again.status == "failed"
    assert services.qualification_next(again) is None
    with pytest.raises(WorkerBlocked, match="did not pass"):
        next_lease(participation=again)
    # a new browser with the same platform id cannot reset the attempts
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=f")
    assert client.get(f"/w/{study.public_id}/task/").url.endswith("/end/")
    assert returned(client.get(f"/w/{study.public_id}/end/")).endswith("cc=FAIL")
    # nor can a participation made afresh: the attempts stay with the study and the worker
    Participation.objects.filter(pk=again.pk).delete()
    remade = services.participation_enter(study=study, platform="prolific", external_id="f")
    assert services.qualification_next(remade) is None
    remade.refresh_from_db()
    assert remade.status == "failed"
    # a second study sharing the test: the result is per study, so the worker takes it there
    second = services.study_import(pairwise_bundle(), filename="b.jsonl")
    second.qualification = test
    second.save()
    there = services.participation_enter(study=second, platform="prolific", external_id="f")
    assert there.status == "qualifying"
    take_test(second, there, 10)
    assert there.status == "active"
    assert QualificationAttempt.objects.filter(study=second).count() == 1
    # a pass does not carry over either
    passer = services.participation_enter(study=study, platform="prolific", external_id="p")
    take_test(study, passer, 10)
    assert passer.status == "active"
    assert (
        services.participation_enter(study=second, platform="prolific", external_id="p").status
        == "qualifying"
    )


def test_one_attempt_when_the_test_allows_one(qualified_study):
    study, test = qualified_study
    test.max_attempts = 1
    test.save()
    part = services.participation_enter(study=study, platform="prolific", external_id="o")
    take_test(study, part, 8)
    assert part.status == "failed"


def test_the_test_comes_before_any_item(qualified_study):
    study, test = qualified_study
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=early")
    for _ in range(2):  # asking for work repeatedly leases nothing and leads to the test
        assert client.get(f"/w/{study.public_id}/task/").url.endswith("/qualify/")
    assert not Assignment.objects.exists()


# --- gold checks ----------------------------------------------------------------------------
def test_gold_misses_block_release_and_flag(make_study):
    study = make_study(
        gold_bundle(20, 10, redundancy=2, max_strikes=2), gold_rate_start=1.0, gold_rate_end=1.0
    )
    part = services.participation_enter(study=study, platform="link", external_id="g")
    rng = random.Random(3)
    kinds = []
    while True:
        try:
            a = next_lease(participation=part, rng=rng)
        except WorkerBlocked:
            break
        kinds.append(a.item.is_gold)
        services.annotation_submit(
            annotator=part.annotator,
            token=a.token,
            data={"answer": answer_for(a, correct=not a.item.is_gold)},  # every gold check missed
        )
    part.refresh_from_db()
    assert (part.status, part.strikes, part.gold_seen, part.gold_correct) == ("blocked", 2, 2, 0)
    assert kinds == [True, False, True]  # rate 1, but never two gold checks in a row
    assert Annotation.objects.filter(is_flagged=False).count() == 0
    assert Annotation.objects.count() == 3
    # gold items count no quota; the real item's label stays, flagged
    assert sum(Item.objects.filter(is_gold=False).values_list("n_done", flat=True)) == 1
    client = Client()
    client.get(f"/w/{study.public_id}/?worker={part.annotator.external_id}")
    response = client.get(f"/w/{study.public_id}/end/")
    assert "your access to this study has been withdrawn" in response.content.decode()


def test_correct_gold_answers_count_no_strike(make_study):
    study = make_study(gold_bundle(5, 5), gold_rate_start=1.0, gold_rate_end=1.0)
    part = services.participation_enter(study=study, platform="link", external_id="g")
    rng = random.Random(0)
    while (a := next_lease(participation=part, rng=rng)) is not None:
        services.annotation_submit(
            annotator=part.annotator, token=a.token, data={"answer": answer_for(a, correct=True)}
        )
    part.refresh_from_db()
    assert part.strikes == 0 and part.gold_seen == part.gold_correct == 5
    assert part.status == "active"


def test_gold_positions_are_spread_not_fixed(make_study):
    """Over many workers gold checks land at many different positions, never two in a row,
    each worker with their own pattern, and at a rate that falls with experience."""
    n_workers, n_items = 36, 24
    study = make_study(
        gold_bundle(n_items, 20, redundancy=n_workers),
        gold_rate_start=0.4,
        gold_rate_end=0.05,
        gold_rate_halflife=6,
    )
    rng = random.Random(12345)
    patterns = []
    for w in range(n_workers):
        part = services.participation_enter(study=study, platform="link", external_id=f"w{w}")
        seq = []
        while len(seq) < n_items and (a := next_lease(participation=part, rng=rng)):
            seq.append(a.item.is_gold)
            services.annotation_submit(
                annotator=part.annotator,
                token=a.token,
                data={"answer": answer_for(a, correct=True)},
            )
        patterns.append(tuple(seq))
    positions = Counter(i for p in patterns for i, g in enumerate(p) if g)
    assert len(positions) >= 15  # many distinct slots carry gold
    assert max(positions.values()) < 0.6 * n_workers  # no slot is gold for most workers
    assert len(set(patterns)) >= 0.9 * n_workers  # patterns differ between workers
    assert not any(a and b for p in patterns for a, b in zip(p, p[1:], strict=False))
    early = sum(positions[i] for i in range(6)) / (6 * n_workers)
    late = sum(positions[i] for i in range(n_items - 6, n_items)) / (6 * n_workers)
    assert early > 2 * late


# --- pages ---------------------------------------------------------------------------
def test_qualification_pages_then_work(qualified_study):
    study, test = qualified_study
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=webq")
    intro = client.get(f"/w/{study.public_id}/instructions/").content.decode()
    assert "short test of 10 questions" in intro and "You need 9 correct" in intro
    assert client.get(f"/w/{study.public_id}/task/").url.endswith("/qualify/")
    page = client.get(f"/w/{study.public_id}/qualify/").content.decode()
    assert "Test question 1 of 10" in page and "retry-notice" not in page
    assert re.findall(r'name="answer" value="(\w+)"', page) == ["left", "right"]
    assert "2 attempts in all" in intro
    take_test(study, Participation.objects.get(annotator__external_id="webq"), 5)
    page = client.get(f"/w/{study.public_id}/qualify/").content.decode()
    assert "You did not pass the test: 5 of 10 correct, 9 needed." in page
    assert "You may take it once more (attempt 2 of 2); the questions come in a new order." in page
    assert "Test question 1 of 10" in page


def test_multi_turn_input_is_shown_as_a_conversation(make_study):
    study = make_study(
        bundle(
            [
                {
                    "id": "c",
                    "input": [
                        {"role": "user", "content": "Hi <b>there</b>"},
                        {"role": "assistant", "content": "Hello"},
                        {"role": "user", "content": "Tell a joke"},
                    ],
                    "outputs": {"m1": "A joke", "m2": "Another"},
                }
            ],
            {"kind": "pairwise"},
        )
    )
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=x")
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert page.count('class="turn turn-user"') == 2 and "turn-assistant" in page
    assert "Hi &lt;b&gt;there&lt;/b&gt;" in page


def test_admin_participation_view_and_actions(make_study):
    study = make_study(completion_code="OK1")
    part = services.participation_enter(study=study, platform="prolific", external_id="adm")
    for _ in range(2):
        a = next_lease(participation=part)
        services.annotation_submit(
            annotator=part.annotator,
            token=a.token,
            data={"answer": "left"},
            time_spent_ms=3000,
            now=a.issued_at + timedelta(seconds=10),
        )
    services.participation_finish(part)  # the end page records the code given
    client = boss_client()
    page = client.get("/admin/annotator/participation/").content.decode()
    assert "adm" in page and "100%" in page and "3.0" in page and "OK1" in page
    client.post(
        "/admin/annotator/participation/", {"action": "block", "_selected_action": [part.pk]}
    )
    assert Participation.objects.get().status == "blocked"
    assert set(Annotation.objects.values_list("is_flagged", flat=True)) == {True}
    client.post(
        "/admin/annotator/participation/", {"action": "approve", "_selected_action": [part.pk]}
    )
    assert Participation.objects.get().review == "approved"


def test_admin_worker_list_costs_as_many_queries_for_12_workers_as_for_2(
    make_study, django_assert_max_num_queries
):
    """The list of workers reads every row's statistics in one query (was: three per row)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    study = make_study(pairwise_bundle(n_inputs=12))
    client, url = boss_client(), "/admin/annotator/participation/"

    def workers(names) -> None:
        for name in names:
            part = services.participation_enter(study=study, platform="prolific", external_id=name)
            a = next_lease(participation=part)
            services.annotation_submit(
                annotator=part.annotator,
                token=a.token,
                data={"answer": "left"},
                time_spent_ms=2000,
                now=a.issued_at + timedelta(seconds=10),
            )

    workers(["w0", "w1"])
    with CaptureQueriesContext(connection) as two:
        assert client.get(url).status_code == 200
    workers([f"w{n}" for n in range(2, 12)])
    with django_assert_max_num_queries(len(two.captured_queries)):
        page = client.get(url).content.decode()
    assert page.count('name="_selected_action"') == 12
    assert page.count('<td class="field-median_time">2.0</td>') == 12
    assert page.count('<td class="field-left_rate">100%</td>') == 12


def test_prolific_redirect_keeps_code_encoded(make_study):
    study = make_study(completion_code="A&B C", items_per_worker=1)
    client = Client()
    client.get(f"/w/{study.public_id}/prolific/?PROLIFIC_PID=enc")
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    token = re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)
    client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    url = returned(client.get(f"/w/{study.public_id}/end/"))
    assert parse_qs(urlsplit(url).query) == {"cc": ["A&B C"]}


@pytest.mark.parametrize(
    "entry",
    [
        "/w/{s}/prolific/?PROLIFIC_PID=victim&SESSION_ID={session}",
        "/w/{s}/mturk/?workerId=victim&assignmentId={session}&hitId=h"
        "&turkSubmitTo=https://www.mturk.com",
    ],
)
def test_the_real_worker_takes_over_a_participation_with_no_label_from_whoever_came_first(
    make_study, entry
):
    """Issue 31 item 9: someone who learnt a worker's id entered first and keeps polling.
    The real worker arrives with the platform's own session id (Prolific's SESSION_ID,
    MTurk's assignmentId), which they cannot know: it takes the participation over at once,
    live lease included, while no label is stored; after the real worker's first label the
    participation is theirs, whatever session the other browser presents."""
    study = make_study(gold_rate_start=0.0, gold_rate_end=0.0)
    squatter, real = Client(), Client()
    url = entry.replace("{s}", str(study.public_id))
    assert squatter.get(url.format(session="guessed1")).status_code == 302
    token = token_on(squatter.get(f"/w/{study.public_id}/task/").content.decode())
    # the real worker enters from the platform: taken over at once, the same item in hand
    assert real.get(url.format(session="real-session")).status_code == 302
    assert token_on(real.get(f"/w/{study.public_id}/task/").content.decode()) == token
    assert squatter.get(f"/w/{study.public_id}/task/").status_code == 409
    squatter.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    assert Annotation.objects.count() == 0  # the squatter's answer is refused
    # the squatter polls again with another made-up session before the real worker answers
    assert squatter.get(url.format(session="guessed2")).status_code == 302
    # the real worker comes back from the platform and takes it again
    assert real.get(url.format(session="real-session")).status_code == 302
    token = token_on(real.get(f"/w/{study.public_id}/task/").content.decode())
    real.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "right"})
    assert Annotation.objects.get().raw_answer == "right"
    # one label stored: no session takes it any more (the usual idle rule applies)
    assert squatter.get(url.format(session="guessed3")).status_code == 409
    assert real.get(f"/w/{study.public_id}/task/").status_code == 200
