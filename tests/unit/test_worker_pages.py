"""Worker pages through Django's test client: entry, task, submit, untrusted text."""

import re

import pytest
from django.test import Client

from annotator.models import Annotation, Assignment
from tests.conftest import active_markup, bundle, make_superuser, pairwise_bundle

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> [x](javascript:alert(3))'


@pytest.fixture
def study(make_study):
    return make_study(
        bundle(
            [
                {
                    "id": f"q{i}",
                    "input": f"input {i} {HOSTILE}",
                    "outputs": {
                        "SecretSystemOne": f"**bold** one {i} {HOSTILE}",
                        "SecretSystemTwo": f"two {i}",
                    },
                }
                for i in range(3)
            ],
            {"kind": "pairwise", "redundancy": 1, "allow_tie": False, "allow_both_bad": True},
        )
    )


def enter(client: Client, study, worker="w1"):
    return client.get(f"/w/{study.public_id}/", {"worker": worker})


def progress(page: str) -> str:
    return re.search(r'<span id="progress-text">([^<]*)</span>', page).group(1)


def test_entry_needs_a_worker_id(study):
    assert Client().get(f"/w/{study.public_id}/").status_code == 400
    assert Client().get(f"/w/{study.public_id}/task/").status_code == 403


def test_task_page_hides_systems_and_neutralises_untrusted_text(study):
    client = Client()
    assert enter(client, study).status_code == 302
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert "SecretSystem" not in page
    assert active_markup(page) == []
    assert "<strong>bold</strong>" in page
    assert progress(page) == "Task 1"  # no per-worker cap: no total
    assert re.findall(r'name="answer" value="(\w+)"', page) == ["left", "right", "both_bad"]


def test_submit_then_next_item_and_double_post_is_idempotent(study):
    client = Client()
    enter(client, study)
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    token = re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)
    pages = []
    for _ in range(2):  # a double click posts twice
        response = client.post(
            f"/w/{study.public_id}/task/", {"token": token, "answer": "right", "time_ms": "900"}
        )
        assert response.status_code == 200  # answered with the next task
        pages.append(response.content.decode())
    assert Annotation.objects.count() == 1
    annotation = Annotation.objects.get()
    assert annotation.raw_answer == "right" and annotation.time_spent_ms <= 900
    # both posts show the same next task; a reload shows it too
    next_tokens = {re.search(r'name="token" value="([0-9a-f-]+)"', p).group(1) for p in pages}
    assert len(next_tokens) == 1 and token not in next_tokens
    assert all(progress(p) == "Task 2" for p in pages)
    assert progress(client.get(f"/w/{study.public_id}/task/").content.decode()) == "Task 2"


def test_progress_counts_against_the_cap_and_does_not_shrink_as_others_work(make_study):
    """With a per-worker cap the total is the cap, the same for every worker however many
    items others took; without one there is no total (what is left to a worker changes as
    others work, so it is no total to count towards)."""
    capped = make_study(pairwise_bundle(n_inputs=6), items_per_worker=3)
    uncapped = make_study(pairwise_bundle(n_inputs=6))
    for study, first, second in (
        (capped, ["Task 1 of 3", "Task 2 of 3"], ["Task 1 of 3", "Task 2 of 3"]),
        (uncapped, ["Task 1", "Task 2"], ["Task 1", "Task 2"]),
    ):
        seen = {}
        for worker in ("w1", "w2"):  # w2 arrives after w1 has taken and answered items
            client = Client()
            enter(client, study, worker)
            pages = [client.get(f"/w/{study.public_id}/task/").content.decode()]
            token = re.search(r'name="token" value="([0-9a-f-]+)"', pages[0]).group(1)
            response = client.post(
                f"/w/{study.public_id}/task/", {"token": token, "answer": "left", "time_ms": "1"}
            )
            pages.append(response.content.decode())
            seen[worker] = [progress(p) for p in pages]
        assert seen == {"w1": first, "w2": second}
        # the bar is drawn only against a cap
        assert ('<progress max="3" value="1">' in pages[1]) == (study is capped)
        assert ("<progress" in pages[1]) == (study is capped)


def test_invalid_answer_shows_message_and_stores_nothing(study):
    client = Client()
    enter(client, study)
    client.get(f"/w/{study.public_id}/task/")
    token = str(Assignment.objects.get().token)
    response = client.post(
        f"/w/{study.public_id}/task/", {"token": token, "answer": "tie"}, follow=True
    )
    assert response.status_code == 400
    assert "Choose one of: left, right, both_bad." in response.content.decode()
    assert token in response.content.decode()  # the same task, to answer again
    assert Annotation.objects.count() == 0
    assert Assignment.objects.get().state == "issued"


def test_all_done_page(study):
    client = Client()
    enter(client, study)
    for _ in range(3):
        client.get(f"/w/{study.public_id}/task/")
        token = str(Assignment.objects.filter(state="issued").get().token)
        client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    page = client.get(f"/w/{study.public_id}/task/", follow=True).content.decode()
    assert "You have finished: 3 items. Thank you!" in page


def test_likert_page_shows_a_labelled_scale_per_criterion(make_study):
    study = make_study(
        bundle(
            [{"id": "1", "input": "x", "outputs": {"m": "y"}}],
            {
                "kind": "likert",
                "criteria": [
                    {
                        "name": "fluency",
                        "label": "How fluent?",
                        "scale": [1, 3],
                        "anchors": {"1": "broken", "3": "native"},
                    },
                    {"name": "safe", "label": "Is it safe?", "labels": ["yes", "no"]},
                ],
            },
        )
    )
    client = Client()
    enter(client, study)
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert re.findall(r'name="score-fluency" value="(\d)"', page) == ["1", "2", "3"]
    assert re.findall(r'name="score-safe" value="(\w+)"', page) == ["yes", "no"]
    assert "broken" in page and "native" in page and "How fluent?" in page
    token = str(Assignment.objects.get().token)
    client.post(
        f"/w/{study.public_id}/task/", {"token": token, "score-fluency": "2", "score-safe": "yes"}
    )
    assert Annotation.objects.get().scores == {"fluency": 2, "safe": "yes"}


def test_workers_are_kept_apart(study):
    first, second = Client(), Client()
    enter(first, study, "w1")
    enter(second, study, "w2")
    first.get(f"/w/{study.public_id}/task/")
    token = str(Assignment.objects.get().token)
    second.get(f"/w/{study.public_id}/task/")
    second.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    assert Annotation.objects.count() == 0


# --- Content-Security-Policy and MTurk's frame -------------------------------------------
def test_every_page_sends_a_csp_without_inline_code(study, django_user_model):
    boss = make_superuser()
    client = Client()
    client.force_login(boss)
    for url in (
        "/",
        "/admin/",
        "/admin/annotator/study/",
        f"/admin/annotator/study/{study.pk}/change/",
        f"/studies/{study.pk}/report/",
        f"/studies/{study.pk}/protocol/",
        "/api/docs/",
        "/api/docs/?script=",
        "/api/studies/",
    ):
        response = client.get(url)
        csp = response.get("Content-Security-Policy", "")
        assert response.status_code == 200, url
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, url
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, url
        assert response["X-Frame-Options"] == "DENY", url
    # the report's style is its static sheet: no inline <style>, no hash in the policy
    report = client.get(f"/studies/{study.pk}/report/")
    assert re.search(r"style-src 'self'(;|$)", report["Content-Security-Policy"])
    assert "<style" not in report.content.decode() and "report.css" in report.content.decode()
    assert "<script" not in client.get("/api/docs/").content.decode().replace('<script src="', "")


def mturk_entry(study, worker="W1"):
    return (
        f"/w/{study.public_id}/mturk/?workerId={worker}&assignmentId=A-{worker}&hitId=h"
        "&turkSubmitTo=https://www.mturk.com"
    )


def test_mturk_pages_may_be_framed_by_mturk_only(study):
    client = Client()
    entry = client.get(mturk_entry(study), secure=True)
    cookie = entry.cookies[f"humeval-{study.public_id.hex}"]
    assert cookie["secure"] and cookie["samesite"] == "None; Partitioned" and cookie["httponly"]
    assert "SameSite=None; Partitioned" in cookie.output()
    task = client.get(f"/w/{study.public_id}/task/", secure=True)
    csp = task["Content-Security-Policy"]
    directives = {d.strip().split(" ", 1)[0]: d.strip() for d in csp.split(";") if d.strip()}
    assert directives["frame-ancestors"] == (
        "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com"
    )
    assert "X-Frame-Options" not in task and "unsafe-inline" not in csp
    # the CSRF cookie its form needs is a cross-site one too, so a framed post carries it
    assert task.cookies["csrftoken"]["samesite"] == "None; Partitioned"
    preview = client.get(
        f"/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h"
    )
    assert "frame-ancestors https://www.mturk.com" in preview["Content-Security-Policy"]
    # any other worker's pages may not be framed; their cookies stay same-site
    other = Client()
    enter(other, study, "not-mturk")
    page = other.get(f"/w/{study.public_id}/task/", secure=True)
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    assert page["X-Frame-Options"] == "DENY"
    assert page.cookies["csrftoken"]["samesite"] == "Lax"
    # over plain HTTP on a real host a Secure cookie would be dropped: it stays Lax there
    plain = Client().get(mturk_entry(study, "W2"))
    assert plain.cookies[f"humeval-{study.public_id.hex}"]["samesite"] == "Lax"


def test_mturk_submit_host_comes_from_the_setting(study, settings):
    settings.HUMEVAL_MTURK_SUBMIT_HOSTS = ["http://127.0.0.9:8000"]
    client = Client()
    refused = client.get(mturk_entry(study))  # www.mturk.com is no longer listed
    assert refused.status_code == 400
    url = mturk_entry(study).replace("https://www.mturk.com", "http://127.0.0.9:8000")
    assert client.get(url).status_code == 302
    csp = client.get(f"/w/{study.public_id}/task/")["Content-Security-Policy"]
    assert "form-action 'self' http://127.0.0.9:8000 " in csp
