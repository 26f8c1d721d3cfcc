"""Who may reach what: an authorisation matrix over every URL, CSRF on every form,
throttling, production settings, and no system identity on worker pages."""

import io
import os
import re
import subprocess
import sys

import pytest
from django.apps import apps as django_apps
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotator import revisions, services
from annotator.admin import ScopedAdmin
from annotator.models import (
    Annotation,
    Assignment,
    JudgeRating,
    Participation,
    QualificationQuestion,
    QualificationTest,
    Study,
)
from crowd.models import CrowdStudy
from protocol.models import Decision, Round, SystemPair
from tests.conftest import ROOT, bundle, make_superuser, pairwise_bundle, settings_under
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle

ROLES = (
    "anonymous",
    "worker",
    "blocked",
    "researcher",  # staff, researcher of study A (and of an adaptive study A2) only
    "other_researcher",  # staff, researcher of study B only
    "staff_none",  # staff with the same permissions, researcher of no study
    "api_researcher",  # not staff: a researcher of A through the API only
    "superuser",
)
#: What a researcher is given in the admin (docs/reliability.md): every permission of the
#: study apps, none of auth or authtoken.
RESEARCHER_APPS = ("annotator", "protocol", "crowd")


@pytest.fixture
def world(db):
    """Study A with a working and a blocked worker, judge ratings; an adaptive study A2 with
    a protocol, a decision and a qualification test (all of the researcher's); study B of
    the other researcher; a staff user on no study; a superuser ("staff")."""
    records = [
        {"id": f"q{i}", "input": f"question {i}",
         "outputs": {"SysNorth": f"first answer {i}", "SysSouth": f"second answer {i}"}}
        for i in range(4)
    ]  # fmt: skip
    perms = Permission.objects.filter(content_type__app_label__in=RESEARCHER_APPS)
    users = {}
    for role, name in (
        ("researcher", "res"),
        ("other_researcher", "out"),
        ("staff_none", "none"),
    ):
        users[role] = User.objects.create_user(name, password="x" * 12, is_staff=True)
        users[role].user_permissions.set(perms)
    users["api_researcher"] = User.objects.create_user("api", password="x" * 12)
    users["superuser"] = make_superuser("staff")
    study = services.study_import(
        bundle(records, {"kind": "pairwise"}),
        filename="a.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
        owner=users["researcher"],
    )
    study.researchers.add(users["api_researcher"])
    services.judge_ratings_import(
        study, b'{"judge": "j", "input_id": "q0", "system": "SysNorth", "score": 1}\n'
    )
    adaptive = services.study_import(
        adaptive_bundle(n_inputs=4, systems=("s1", "s2", "s3")),
        filename="a2.jsonl",
        owner=users["researcher"],
    )
    test = QualificationTest.objects.create(name="A's test", created_by=users["researcher"])
    QualificationQuestion.objects.create(
        test=test, prompt="p", outputs=["a", "b"], expected={"value": "A"}
    )
    Study.objects.filter(pk=adaptive.pk).update(qualification=test)
    pair = SystemPair.objects.filter(study=adaptive).first()
    Decision.objects.create(
        round=Round.objects.get(study=adaptive, number=1), pair=pair, theta=0.5,
        outcome="open", human_counts=[0, 0, 0],
    )  # fmt: skip
    other = services.study_import(
        pairwise_bundle(), filename="b.jsonl", owner=users["other_researcher"]
    )
    for target in (study, other):  # each with its guideline wording recorded
        revisions.revision_baseline(target.pk)
    for target in (study, other):  # each on Prolific (crowd/)
        CrowdStudy.objects.create(
            study=target, reward_cents=100, estimated_minutes=5, money_budget_cents=1000
        )
    clients = {"anonymous": Client()}
    for role, name in (("worker", "good"), ("blocked", "bad")):
        client = Client()
        client.get(f"/w/{study.public_id}/?worker={name}")
        client.get(f"/w/{study.public_id}/task/")
        clients[role] = client
    services.participation_set_blocked(
        Participation.objects.get(annotator__external_id="bad"), True
    )
    for target in (study, other):  # labels in A and B (a third worker's)
        part = services.participation_enter(study=target, platform="link", external_id="w3")
        lease = next_lease(participation=part)
        services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"answer": "tie"}
        )
    Group.objects.create(name="lab")
    for role, user in users.items():
        client = Client()
        client.force_login(user)
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
        clients[role] = client
    assert set(clients) == set(ROLES)
    assert set(Study.objects.filter(researchers=users["researcher"])) == {study, adaptive}
    assert list(Study.objects.filter(researchers=users["other_researcher"])) == [other]
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
        "/w/{s.public_id}/task/": (deny, ok, login, deny, deny, deny, deny, deny),
        "/w/{s.public_id}/instructions/": (deny, ok, ok, deny, deny, deny, deny, deny),
        "/w/{s.public_id}/qualify/": (deny, login, login, deny, deny, deny, deny, deny),
        "/w/{s.public_id}/end/": (deny, ok, ok, deny, deny, deny, deny, deny),
        # researchers' pages: login, then per-study permission (being staff grants none)
        "/studies/{s.pk}/protocol/": (login, login, login, ok, gone, gone, ok, ok),
        "/studies/{s.pk}/report/": (login, login, login, ok, gone, gone, ok, ok),
        # API: token required; other studies do not exist for you
        "/api/studies/": (401, 401, 401, ok, ok, ok, ok, ok),
        "/api/studies/{s.pk}/": (401, 401, 401, ok, gone, gone, ok, ok),
        "/api/studies/{s.pk}/annotations/": (401, 401, 401, ok, gone, gone, ok, ok),
        "/api/studies/{s.pk}/annotations/?format=csv": (401, 401, 401, ok, gone, gone, ok, ok),
        "/api/studies/{s.pk}/protocol/": (401, 401, 401, ok, gone, gone, ok, ok),
        "/api/studies/{s.pk}/report/": (401, 401, 401, ok, gone, gone, ok, ok),
    }
    got = status_matrix(study, clients, expected)
    assert got == expected


def test_api_lists_only_visible_studies(world):
    study, clients = world
    listed = {
        role: {s["id"] for s in clients[role].get("/api/studies/").json()["results"]}
        for role in ("researcher", "other_researcher", "staff_none", "api_researcher", "superuser")
    }
    mine = set(Study.objects.filter(researchers__username="res").values_list("pk", flat=True))
    assert study.pk in mine and len(mine) == 2
    assert listed["researcher"] == mine
    assert listed["api_researcher"] == {study.pk}
    assert listed["other_researcher"] == set(
        Study.objects.filter(researchers__username="out").values_list("pk", flat=True)
    )
    assert listed["staff_none"] == set()
    assert listed["superuser"] == set(Study.objects.values_list("pk", flat=True))
    assert clients["worker"].get("/api/studies/").status_code == 401


def test_api_writes_into_another_study_change_nothing(world):
    study, clients = world
    before = db_snapshot()
    for role in ("other_researcher", "staff_none"):
        upload = io.BytesIO(b'{"judge": "x", "input_id": "q1", "system": "SysNorth", "score": 0}\n')
        upload.name = "r.jsonl"
        response = clients[role].post(f"/api/studies/{study.pk}/ratings/", {"file": upload})
        assert response.status_code == 404
    assert db_snapshot() == before


def test_importing_needs_the_add_study_permission_and_makes_you_its_researcher(world):
    _, clients = world
    bare = User.objects.create_user("bare", password="x" * 12, is_staff=True)
    client = Client()
    client.force_login(bare)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=bare).key}"

    def upload():
        data = io.BytesIO(pairwise_bundle())
        data.name = "s.jsonl"
        return {"file": data}

    count = Study.objects.count()
    assert client.post("/api/studies/import/", upload()).status_code == 403
    assert client.post("/admin/annotator/study/import/", upload()).status_code == 403
    assert Study.objects.count() == count
    # a staff user on no study who may add studies: the new study is theirs alone
    response = clients["staff_none"].post("/api/studies/import/", upload())
    assert response.status_code == 201
    new = Study.objects.get(pk=response.json()["id"])
    assert [u.username for u in new.researchers.all()] == ["none"]
    response = clients["staff_none"].post("/admin/annotator/study/import/", upload())
    assert response.status_code == 302
    newer = Study.objects.latest("pk")
    assert [u.username for u in newer.researchers.all()] == ["none"]
    for role in ("researcher", "other_researcher"):
        listed = [s["id"] for s in clients[role].get("/api/studies/").json()["results"]]
        assert new.pk not in listed and newer.pk not in listed


def test_import_study_command_names_the_researcher(world, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(pairwise_bundle())
    out = io.StringIO()
    call_command("import_study", str(path), "--researcher", "out", stdout=out)
    study = Study.objects.get(pk=int(out.getvalue()))
    assert [u.username for u in study.researchers.all()] == ["out"]
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("import_study", str(path), "--researcher", "nobody")


# --- the admin, enumerated from its registry ---------------------------------------------------
#: How each registered model reaches its study. A model registered in the admin but missing
#: here (or in SUPERUSER_ONLY) fails ``test_every_admin_model_is_covered``.
STUDY_PATH = {
    "annotator.study": "",
    "annotator.item": "study",
    "annotator.annotation": "study",
    "annotator.assignment": "study",
    "annotator.annotator": "participations__study",
    "annotator.system": "study",
    "annotator.judgerating": "study",
    "annotator.guidelinerevision": "study",
    "annotator.participation": "study",
    "annotator.qualificationtest": "studies",  # shared; also its creator's (created_by)
    "protocol.protocolconfig": "study",
    "protocol.systempair": "study",
    "protocol.round": "study",
    "protocol.decision": "round__study",
    "crowd.crowdstudy": "study",
}
#: Only superusers reach these (Django's model permissions, which researchers are not given).
SUPERUSER_ONLY = {"auth.user", "auth.group", "authtoken.tokenproxy"}
#: Admins that refuse deletion to researchers (a worker is shared by every study).
NO_DELETE_FOR_RESEARCHERS = {"annotator.annotator", "annotator.guidelinerevision"}


def label(model) -> str:
    return model._meta.label_lower


def rows_of(model, studies) -> list:
    path = STUDY_PATH[label(model)]
    lookup = {f"{path}__in" if path else "pk__in": [s.pk for s in studies]}
    return list(model._default_manager.filter(**lookup).distinct().order_by("pk"))


def researchers_studies(username: str) -> list:
    return list(Study.objects.filter(researchers__username=username))


def db_snapshot() -> dict:
    """Every row of every table of the study apps and of the users."""
    models = [
        model
        for app in (*RESEARCHER_APPS, "auth")
        for model in django_apps.get_app_config(app).get_models(include_auto_created=True)
    ]
    return {label(m): list(m._default_manager.order_by("pk").values()) for m in models}


def admin_url(model, page: str, pk=None) -> str:
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_{page}"
    return reverse(name, args=[pk] if pk is not None else [])


def test_every_admin_model_is_covered(world):
    registered = {label(m) for m in admin.site._registry}
    assert registered == set(STUDY_PATH) | SUPERUSER_ONLY
    for model, model_admin in admin.site._registry.items():
        if label(model) in STUDY_PATH:
            assert rows_of(model, researchers_studies("res")), f"no {label(model)} of A"
            assert isinstance(model_admin, ScopedAdmin), label(model)


def test_admin_pages_matrix(world):
    """Every registered admin's changelist, and the change, delete and history pages of an
    object of the researcher's study, for every role."""
    _, clients = world
    mine = researchers_studies("res")
    login = "login"
    for model in admin.site._registry:
        name = label(model)
        if name in SUPERUSER_ONLY:
            obj = model._default_manager.order_by("pk").first()
            for page in ("changelist", "change", "delete", "history"):
                url = admin_url(model, page, None if page == "changelist" else obj.pk)
                got = {role: _status(clients[role].get(url)) for role in ROLES}
                assert got == {
                    **dict.fromkeys(("anonymous", "worker", "blocked", "api_researcher"), login),
                    **dict.fromkeys(("researcher", "other_researcher", "staff_none"), 403),
                    "superuser": 200,
                }, (url, got)
            continue
        obj = rows_of(model, mine)[0]
        delete = 403 if name in NO_DELETE_FOR_RESEARCHERS else 200
        lists = {}  # role -> its changelist answer, read again below
        for page, own in (("changelist", 200), ("change", 200), ("history", 200),
                          ("delete", delete)):  # fmt: skip
            url = admin_url(model, page, None if page == "changelist" else obj.pk)
            answers = {role: clients[role].get(url) for role in ROLES}
            if page == "changelist":
                lists = answers
            got = {role: _status(answer) for role, answer in answers.items()}
            # another study's object does not exist for you: Django redirects to the index
            hidden = 200 if page == "changelist" else "missing"
            if page == "delete" and delete == 403:  # refused before the object is looked up
                hidden = 403
            assert got == {
                **dict.fromkeys(("anonymous", "worker", "blocked", "api_researcher"), login),
                "researcher": own,
                "other_researcher": hidden,
                "staff_none": hidden,
                "superuser": 200,
            }, (url, got)
        # the lists show only your studies' rows, and their filters only your studies
        for role, sees in (("researcher", True), ("other_researcher", False),
                           ("staff_none", False), ("superuser", True)):  # fmt: skip
            cl = lists[role].context["cl"]
            listed = set(cl.queryset.values_list("pk", flat=True))
            assert (obj.pk in listed) is sees, (name, role)
            if role in ("other_researcher", "staff_none"):
                theirs = {o.pk for o in rows_of(model, researchers_studies("out"))}
                assert listed == (theirs if role == "other_researcher" else set()), (name, role)
                filters = [f for f in cl.filter_specs if hasattr(f, "field")]
                for spec in filters:
                    related = spec.field.related_model
                    if related is None or label(related) not in STUDY_PATH:
                        continue
                    offered = {str(value) for value, _ in spec.lookup_choices}
                    forbidden = {str(o.pk) for o in rows_of(related, mine)}
                    assert not offered & forbidden, (name, spec.title)
                    assert isinstance(spec, admin.RelatedOnlyFieldListFilter)


def _status(response):
    if response.status_code == 302:
        if response.url.startswith("/admin/login/"):
            return "login"
        if response.url == reverse("admin:index"):
            return "missing"
    return response.status_code


def test_admin_forms_offer_only_your_studies_rows(world):
    """Add and change forms of every admin: a choice of a related object (a study, a test,
    a user…) never offers another study's rows."""
    _, clients = world
    mine = researchers_studies("res")
    for model in admin.site._registry:
        if label(model) in SUPERUSER_ONLY:
            continue
        pages = [admin_url(model, "add")]
        pages += [
            admin_url(model, "change", o.pk) for o in rows_of(model, researchers_studies("out"))[:1]
        ]
        for role in ("other_researcher", "staff_none"):
            for url in pages:
                response = clients[role].get(url)
                if response.status_code != 200:
                    continue
                form = response.context["adminform"].form
                for field_name, field in form.fields.items():
                    queryset = getattr(field, "queryset", None)
                    if queryset is None or label(queryset.model) not in STUDY_PATH:
                        continue
                    forbidden = {o.pk for o in rows_of(queryset.model, mine)}
                    offered = set(queryset.values_list("pk", flat=True))
                    assert not offered & forbidden, (url, role, field_name)


def test_admin_autocomplete_offers_only_your_studies(world):
    _, clients = world
    mine = {str(s.pk) for s in researchers_studies("res")}
    url = "/admin/autocomplete/?app_label=protocol&model_name=protocolconfig&field_name=study"
    for role, sees in (("researcher", True), ("other_researcher", False),
                       ("staff_none", False), ("superuser", True)):  # fmt: skip
        ids = {r["id"] for r in clients[role].get(url).json()["results"]}
        assert (mine <= ids) is sees and (not (mine & ids)) is not sees, role


def test_admin_actions_and_posts_on_another_studys_rows_change_nothing(world):
    """Every action of every admin, and the change and delete forms, posted by a staff user
    who may not see the rows (their ids posted anyway): the database is unchanged."""
    _, clients = world
    factory = RequestFactory().get("/")
    factory.user = User.objects.get(username="staff")
    mine = researchers_studies("res")
    before = db_snapshot()
    for model, model_admin in admin.site._registry.items():
        if label(model) in SUPERUSER_ONLY:
            continue
        rows = rows_of(model, mine)
        ids = [str(o.pk) for o in rows]
        changelist = admin_url(model, "changelist")
        for action in model_admin.get_actions(factory):
            for role in ("other_researcher", "staff_none"):
                data = {"action": action, "_selected_action": ids, "index": "0", "post": "yes"}
                clients[role].post(changelist, data)
            clients["staff_none"].post(changelist, {**data, "select_across": "1"})
        for role in ("other_researcher", "staff_none"):
            for obj in rows[:2]:
                clients[role].post(admin_url(model, "delete", obj.pk), {"post": "yes"})
                clients[role].post(admin_url(model, "change", obj.pk), _change_form(obj))
        assert db_snapshot() == before, label(model)
    # the same posts by the study's own researcher do act (the posts above were well formed)
    participation = Participation.objects.get(annotator__external_id="good")
    clients["researcher"].post(
        admin_url(Participation, "changelist"),
        {"action": "block", "_selected_action": [participation.pk], "index": "0"},
    )
    participation.refresh_from_db()
    assert participation.status == Participation.Status.BLOCKED
    rating = JudgeRating.objects.get()
    clients["researcher"].post(admin_url(JudgeRating, "delete", rating.pk), {"post": "yes"})
    assert not JudgeRating.objects.exists()


def _change_form(obj) -> dict:
    """The object's own field values, one changed: what a change form would post."""
    data = {}
    for field in obj._meta.concrete_fields:
        value = field.value_from_object(obj)
        if value is None or isinstance(value, (dict, list)):
            continue
        data[field.attname.removesuffix("_id") if field.is_relation else field.name] = (
            "on" if value is True else value
        )
    data["name"] = "changed by a stranger"
    data["completion_code"] = "STOLEN"
    return data


def test_study_change_posted_by_another_researcher_changes_nothing(world):
    study, clients = world
    before = db_snapshot()
    for role in ("other_researcher", "staff_none"):
        response = clients[role].post(
            admin_url(Study, "change", study.pk),
            {**_change_form(study), "researchers": [User.objects.get(username="out").pk]},
        )
        assert _status(response) == "missing"
    assert db_snapshot() == before


def test_qualification_tests_are_read_by_users_changed_by_their_author(world):
    """A researcher sees a test one of their studies uses but did not write, read-only; the
    author (and superusers) may change it; others do not see it."""
    _, clients = world
    test = QualificationTest.objects.get()
    test.created_by = User.objects.get(username="staff")
    test.save()
    url = admin_url(QualificationTest, "change", test.pk)
    page = clients["researcher"].get(url)
    assert page.status_code == 200 and not page.context["has_change_permission"]
    clients["researcher"].post(url, {"name": "renamed", "pass_threshold": 1})
    assert QualificationTest.objects.get().name == "A's test"
    assert _status(clients["other_researcher"].get(url)) == "missing"
    assert clients["superuser"].get(url).context["has_change_permission"]
    # a test a researcher writes is theirs
    clients["other_researcher"].post(
        admin_url(QualificationTest, "add"),
        {"name": "B's test", "kind": "pairwise", "options": "", "pass_threshold": 0,
         "max_attempts": 2, "questions-TOTAL_FORMS": 0,
         "questions-INITIAL_FORMS": 0},
    )  # fmt: skip
    mine = QualificationTest.objects.get(name="B's test")
    assert mine.created_by.username == "out"
    assert _status(clients["researcher"].get(admin_url(QualificationTest, "change", mine.pk))) == (
        "missing"
    )


def test_a_study_added_in_the_admin_is_its_creators(world):
    _, clients = world
    # "Add study" leads to the create page (no empty shells); pasted rows make the study
    response = clients["staff_none"].get(admin_url(Study, "add"))
    assert response.status_code == 302 and response.url == "/admin/annotator/study/import/"
    response = clients["staff_none"].post(
        "/admin/annotator/study/import/",
        {"rows": pairwise_bundle().decode(), "format": "auto", "kind": "pairwise"},
    )
    assert response.status_code == 302
    new = Study.objects.latest("pk")
    assert [u.username for u in new.researchers.all()] == ["none"]
    # its change page offers staff users and co-researchers, never anyone else
    response = clients["staff_none"].get(admin_url(Study, "change", new.pk))
    researchers = response.context["adminform"].form.fields["researchers"].queryset
    assert set(researchers.values_list("username", flat=True)) == {"res", "out", "none", "staff"}


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
    before = Annotation.objects.count()
    intruder = Client()
    intruder.get(f"/w/{study.public_id}/?worker=intruder")
    intruder.post(f"/w/{study.public_id}/task/", {"token": theirs, "answer": "left"})
    assert Annotation.objects.count() == before


def test_csrf_is_enforced_on_every_form(world):
    study, clients = world
    before = Annotation.objects.count()
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
    assert Annotation.objects.count() == before


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
def test_entry_and_submit_are_throttled(world, frozen_throttle_window):
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
    """The settings a production process reads (run in this process: tests/conftest.py
    ``settings_under``)."""
    got = settings_under(production_env(HUMEVAL_VAR_DIR=str(tmp_path)))
    assert got["SECRET_KEY"][:20] == "s" * 20
    assert got["ALLOWED_HOSTS"] == ["eval.example.org"]
    assert got["DEBUG"] is False and got["SESSION_COOKIE_SECURE"] is True


def test_production_hashes_passwords_with_djangos_slow_hashers(db):
    """The tests hash with one PBKDF2 round (tests/hashers.py); the project's settings keep
    Django's hashers, PBKDF2-SHA256 with at least a million rounds first, and still verify
    a hash the fast test hasher made."""
    from django.conf import global_settings
    from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password

    import config.settings as production

    hashers = getattr(production, "PASSWORD_HASHERS", global_settings.PASSWORD_HASHERS)
    assert hashers[0] == "django.contrib.auth.hashers.PBKDF2PasswordHasher"
    assert PBKDF2PasswordHasher.iterations >= 1_000_000
    fast = make_password("s3cret")
    assert fast.startswith("pbkdf2_sha256$1$")  # this run's fast hasher
    with override_settings(PASSWORD_HASHERS=hashers):
        assert check_password("s3cret", fast) and not check_password("wrong", fast)
        algorithm, rounds, *_ = make_password("s3cret").split("$")
        assert (algorithm, int(rounds) >= 1_000_000) == ("pbkdf2_sha256", True)
