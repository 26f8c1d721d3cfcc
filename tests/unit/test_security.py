"""Who may reach what: an authorisation matrix over every URL, CSRF on every form,
throttling, production settings, and no system identity on worker pages."""

import os
import re
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from annotator import services
from annotator.models import Annotation, Assignment, Participation
from tests.conftest import ROOT, bundle, pairwise_bundle

ROLES = ("anonymous", "worker", "blocked", "other_researcher", "researcher", "staff")


@pytest.fixture
def world(db):
    """Study A with a working and a blocked worker; a researcher of A, one of study B only,
    and staff."""
    records = [
        {"id": f"q{i}", "input": f"question {i}",
         "outputs": {"SysNorth": f"first answer {i}", "SysSouth": f"second answer {i}"}}
        for i in range(4)
    ]  # fmt: skip
    study = services.study_import(
        bundle(records, {"kind": "pairwise"}),
        filename="a.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    other = services.study_import(pairwise_bundle(), filename="b.jsonl")
    researcher = User.objects.create_user("res", password="x" * 12)
    study.researchers.add(researcher)
    outsider = User.objects.create_user("out", password="x" * 12)
    other.researchers.add(outsider)
    staff = User.objects.create_user("staff", password="x" * 12, is_staff=True, is_superuser=True)
    clients = {"anonymous": Client()}
    for role, name in (("worker", "good"), ("blocked", "bad")):
        client = Client()
        client.get(f"/w/{study.public_id}/?worker={name}")
        client.get(f"/w/{study.public_id}/task/")
        clients[role] = client
    services.participation_set_blocked(
        Participation.objects.get(annotator__external_id="bad"), True
    )
    for role, user in (
        ("other_researcher", outsider),
        ("researcher", researcher),
        ("staff", staff),
    ):
        client = Client()
        client.force_login(user)
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
        clients[role] = client
    return study, clients


def status_matrix(study, clients, urls):
    return {
        url: tuple(clients[role].get(url.format(s=study)).status_code for role in ROLES)
        for url in urls
    }


def test_authorisation_matrix(world):
    study, clients = world
    ok, login, gone, deny = 200, 302, 404, 403
    expected = {
        # worker pages: only the study's own workers; a blocked one is sent to the end page
        "/w/{s.public_id}/task/": (deny, ok, login, deny, deny, deny),
        "/w/{s.public_id}/instructions/": (deny, ok, ok, deny, deny, deny),
        "/w/{s.public_id}/qualify/": (deny, login, login, deny, deny, deny),
        "/w/{s.public_id}/end/": (deny, ok, ok, deny, deny, deny),
        # researchers' pages: login, then per-study permission
        "/studies/{s.pk}/protocol/": (login, login, login, gone, ok, ok),
        "/studies/{s.pk}/report/": (login, login, login, gone, ok, ok),
        "/admin/annotator/study/": (login, login, login, login, login, ok),
        "/admin/annotator/annotation/": (login, login, login, login, login, ok),
        # API: token required; other studies do not exist for you
        "/api/studies/{s.pk}/": (401, 401, 401, gone, ok, ok),
        "/api/studies/{s.pk}/annotations/": (401, 401, 401, gone, ok, ok),
        "/api/studies/{s.pk}/protocol/": (401, 401, 401, gone, ok, ok),
        "/api/studies/{s.pk}/report/": (401, 401, 401, gone, ok, ok),
    }
    got = status_matrix(study, clients, expected)
    assert got == expected


def test_api_lists_only_visible_studies(world):
    study, clients = world
    assert [s["id"] for s in clients["researcher"].get("/api/studies/").json()["results"]] == [
        study.pk
    ]
    assert study.pk not in [
        s["id"] for s in clients["other_researcher"].get("/api/studies/").json()["results"]
    ]
    assert clients["worker"].get("/api/studies/").status_code == 401


def test_blocked_worker_changes_nothing(world):
    study, clients = world
    token = str(Assignment.objects.get(annotator__external_id="bad").token)
    before = Annotation.objects.count()
    response = clients["blocked"].post(
        f"/w/{study.public_id}/task/", {"token": token, "answer": "left"}
    )
    assert response.status_code == 302 and response.url.endswith("/end/")
    assert Annotation.objects.count() == before
    page = clients["blocked"].get(f"/w/{study.public_id}/end/").content.decode()
    assert "withdrawn" in page


def test_worker_cannot_submit_for_another_worker(world):
    study, clients = world
    theirs = str(Assignment.objects.get(annotator__external_id="good").token)
    intruder = Client()
    intruder.get(f"/w/{study.public_id}/?worker=intruder")
    intruder.post(f"/w/{study.public_id}/task/", {"token": theirs, "answer": "left"})
    assert not Annotation.objects.exists()


def test_csrf_is_enforced_on_every_form(world):
    study, clients = world
    strict = Client(enforce_csrf_checks=True)
    strict.get(f"/w/{study.public_id}/?worker=csrf")
    strict.get(f"/w/{study.public_id}/task/")
    token = str(Assignment.objects.get(annotator__external_id="csrf").token)
    assert (
        strict.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"}).status_code
        == 403
    )
    assert strict.post(f"/w/{study.public_id}/qualify/", {"question": 1}).status_code == 403
    staff = Client(enforce_csrf_checks=True)
    staff.force_login(User.objects.get(username="staff"))
    assert staff.post("/admin/annotator/study/import/", {}).status_code == 403
    assert staff.post("/api/studies/import/", {}).status_code == 403  # session auth
    assert not Annotation.objects.exists()


def test_worker_pages_carry_no_system_identity(world):
    study, clients = world
    worker = clients["worker"]
    pages = [
        worker.get(f"/w/{study.public_id}/{p}/").content.decode() for p in ("task", "instructions")
    ]
    pages.append(
        Client()
        .get(f"/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
        .content.decode()
    )
    system_ids = [str(pk) for pk in study.systems.values_list("pk", flat=True)]
    for page in pages:
        assert "SysNorth" not in page and "SysSouth" not in page
        assert not re.search(r"system", page, re.IGNORECASE)
        assert not re.search(r'name="(item|system|output)[^"]*"', page)
    assert system_ids  # nothing above may mention them by name or id


def test_worker_pages_send_a_strict_csp(world):
    study, clients = world
    csp = clients["worker"].get(f"/w/{study.public_id}/task/")["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp


@override_settings(HUMEVAL_THROTTLE_ENTRY="3/min", HUMEVAL_THROTTLE_SUBMIT="2/min")
def test_entry_and_submit_are_throttled(world):
    from django.core.cache import cache

    cache.clear()
    study, _ = world
    client = Client()
    codes = [client.get(f"/w/{study.public_id}/?worker=t{i}").status_code for i in range(4)]
    assert codes == [302, 302, 302, 429]
    cache.clear()
    worker = Client()
    worker.get(f"/w/{study.public_id}/?worker=fast")
    worker.get(f"/w/{study.public_id}/task/")
    token = str(Assignment.objects.get(annotator__external_id="fast").token)
    results = [
        worker.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"}).status_code
        for _ in range(3)
    ]
    assert results == [200, 200, 429]  # each answered with the next task page
    assert Annotation.objects.filter(annotator__external_id="fast").count() == 1
    cache.clear()


def production_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_DEBUG")}
    env.update(
        DJANGO_SECRET_KEY="s" * 20 + "-production-secret-from-the-environment-0123456789",
        DJANGO_ALLOWED_HOSTS="eval.example.org",
        HUMEVAL_HTTPS="1",
        **extra,
    )
    return env


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(HUMEVAL_VAR_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_secrets_and_hosts_come_from_the_environment(tmp_path):
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
        "'config.settings'); django.setup(); from django.conf import settings as s; "
        "print(s.SECRET_KEY[:20], s.ALLOWED_HOSTS, s.DEBUG, s.SESSION_COOKIE_SECURE)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=production_env(HUMEVAL_VAR_DIR=str(tmp_path)),
        check=True,
    ).stdout
    assert out.split() == ["s" * 20, "['eval.example.org']", "False", "True"]
