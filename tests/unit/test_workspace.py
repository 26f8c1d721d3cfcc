"""The researcher's study workspace: the cost estimate (to the digit), its selectors, creating
a study from pasted rows or a file, the item preview (records nothing, names no system) and
the panel on a study's admin page."""

import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from annotator import services, workspace
from annotator.estimate import cost_estimate
from annotator.models import Annotation, Annotator, Assignment, Item, Participation, Study
from tests.conftest import active_markup, bundle, pairwise_bundle
from tests.protocol_sim import adaptive_bundle

# Outputs that never contain their system's name, so a page showing a name leaks it.
SECRET_SYSTEMS = ("sys-zeta-secret", "sys-omega-secret")


def secret_bundle(n_inputs: int = 3, **options) -> bytes:
    study = {"name": "secret", "kind": "pairwise", "redundancy": 2, **options}
    return bundle(
        [
            {
                "id": f"in{i}",
                "input": f"question {i}",
                "outputs": {s: f"reply {i}{k}" for k, s in enumerate(SECRET_SYSTEMS)},
            }
            for i in range(n_inputs)
        ],
        study,
    )


# --- the estimate, a pure function --------------------------------------------------------
def test_estimate_worked_example_to_the_digit():
    expected = cost_estimate(
        item_slots=300,
        adaptive=False,
        budget=None,
        measured_seconds=None,
        expected_seconds=45,
        pay_per_hour=Decimal("12.00"),
        currency="GBP",
    )
    assert expected.annotations == 300
    assert expected.basis == "work items × redundancy; gold checks not counted"
    assert (expected.seconds_per_item, expected.time_source) == (45.0, "expected")
    assert expected.worker_hours == 3.75
    assert expected.cost == Decimal("45.00") and expected.missing == []
    measured = cost_estimate(
        item_slots=300,
        adaptive=False,
        budget=None,
        measured_seconds=38.5,
        measured_n=40,
        expected_seconds=45,
        pay_per_hour=Decimal("12.00"),
        currency="GBP",
    )
    assert measured.time_source == "measured"
    assert round(measured.worker_hours, 6) == 3.208333
    assert measured.cost == Decimal("38.50")
    assert (measured.measured_seconds, measured.expected_seconds) == (38.5, 45.0)  # both shown
    assert measured.fee is None and measured.total == Decimal("38.50")


def test_estimate_adds_the_platform_fee_worked_example():
    # 300 × 45 s at 12.00/h = 45.00 of pay; a fee of 30 % of the pay = 13.50; 58.50 in all
    e = cost_estimate(
        item_slots=300,
        adaptive=False,
        budget=None,
        measured_seconds=None,
        expected_seconds=45,
        pay_per_hour=Decimal("12.00"),
        currency="GBP",
        fee_percent=Decimal("30"),
    )
    assert (e.cost, e.fee, e.total) == (Decimal("45.00"), Decimal("13.50"), Decimal("58.50"))
    # 33.33 % of 1.00 is 0.3333 → 0.33 (half-up to the cent)
    odd = cost_estimate(
        item_slots=1,
        adaptive=False,
        budget=None,
        measured_seconds=None,
        expected_seconds=3600,
        pay_per_hour=Decimal("1.00"),
        fee_percent=Decimal("33.33"),
    )
    assert (odd.fee, odd.total) == (Decimal("0.33"), Decimal("1.33"))


@pytest.mark.parametrize(
    "seconds, n, note",
    [
        (0.1, 300, "under 2 s per item is too fast for a person"),
        (30.0, 4, "only 4 labels so far (10 needed)"),
    ],
)
def test_estimate_keeps_the_expected_time_over_an_untrustworthy_median(seconds, n, note):
    e = cost_estimate(
        item_slots=300,
        adaptive=False,
        budget=None,
        measured_seconds=seconds,
        measured_n=n,
        expected_seconds=45,
        pay_per_hour=Decimal("12.00"),
    )
    assert (e.time_source, e.seconds_per_item, e.cost) == ("expected", 45.0, Decimal("45.00"))
    assert (e.measured_seconds, e.measured_n, e.measured_note) == (seconds, n, note)
    none = cost_estimate(
        item_slots=300,
        adaptive=False,
        budget=None,
        measured_seconds=seconds,
        measured_n=n,
        expected_seconds=None,
        pay_per_hour=Decimal("12.00"),
    )
    assert none.time_source is None and none.cost is None
    assert "an expected time per item" in none.missing


def test_estimate_adaptive_uses_budget_rounds_half_up_and_names_what_is_missing():
    adaptive = cost_estimate(
        item_slots=30,
        adaptive=True,
        budget=500,
        measured_seconds=None,
        expected_seconds=7,
        pay_per_hour=Decimal("9.99"),
    )
    # 500 × 7 s = 3500 s = 0.97222… h; × 9.99 = 9.7125 → 9.71
    assert (adaptive.annotations, adaptive.basis) == (500, "budget")
    assert adaptive.cost == Decimal("9.71")
    half = cost_estimate(
        item_slots=1,
        adaptive=False,
        budget=None,
        measured_seconds=None,
        expected_seconds=18,
        pay_per_hour=Decimal("1.00"),
    )
    assert half.cost == Decimal("0.01")  # 0.005 rounds up
    bare = cost_estimate(
        item_slots=10,
        adaptive=True,
        budget=None,
        measured_seconds=None,
        expected_seconds=None,
        pay_per_hour=None,
    )
    assert (bare.annotations, bare.worker_hours, bare.cost) == (10, None, None)
    assert len(bare.missing) == 3
    assert any("budget" in m for m in bare.missing) and "a pay rate" in bare.missing


# --- selectors ------------------------------------------------------------------------------
def _answer(study, worker: str, *, at, seconds: int) -> None:
    part = services.participation_enter(study=study, platform="link", external_id=worker)
    task = services.task_next(participation=part, now=at)
    part = Participation.objects.select_related("study", "annotator").get(pk=part.pk)
    services.task_answer(
        participation=part,
        token=task.assignment.token,
        data={"answer": "left"},
        time_spent_ms=seconds * 1000,
        now=at + timedelta(seconds=seconds),
    )


def test_progress_counts_active_workers_median_time_and_estimate_from_measured(
    make_study, monkeypatch
):
    study = make_study(pairwise_bundle(n_inputs=3))
    now = timezone.now()
    _answer(study, "early", at=now - timedelta(hours=2), seconds=10)  # then leases its next
    Assignment.objects.filter(state="issued").update(expires_at=now - timedelta(minutes=1))
    _answer(study, "recent", at=now - timedelta(minutes=3), seconds=30)  # live next lease
    _answer(study, "third", at=now - timedelta(minutes=20), seconds=20)
    Assignment.objects.filter(annotator__external_id="third", state="issued").update(
        expires_at=now - timedelta(minutes=5)
    )
    live = workspace.progress(study, now=now)
    assert (live["submitted"], live["target_annotations"]) == (3, 6)
    assert live["active_workers"] == 1 and live["workers"] == 3
    assert live["median_seconds"] == 20.0
    assert live["adaptive"] is False and live["rounds"] is None
    study.pay_per_hour, study.expected_seconds_per_item = Decimal("18.00"), 90
    estimate = workspace.estimate(study)
    # 3 labels are too few to replace the expected 90 s: 6 × 90 s at 18.00/h = 2.70
    assert (estimate.annotations, estimate.time_source) == (6, "expected")
    assert (estimate.measured_seconds, estimate.measured_n) == (20.0, 3)
    assert estimate.measured_note == "only 3 labels so far (10 needed)"
    assert estimate.cost == Decimal("2.70")
    monkeypatch.setattr("annotator.estimate.MIN_MEASURED_LABELS", 3)
    estimate = workspace.estimate(study)
    # 3 items × redundancy 2 = 6 annotations × 20 s (measured, not the expected 90) = 120 s
    assert (estimate.annotations, estimate.time_source) == (6, "measured")
    assert estimate.cost == Decimal("0.60")


def test_progress_and_estimate_count_the_same_annotations_gold_apart(make_study, admin_client):
    study = make_study(pairwise_bundle(n_inputs=4))
    gold = Item.objects.filter(study=study).order_by("pk").first()
    Item.objects.filter(pk=gold.pk).update(is_gold=True, redundancy=5, n_done=5, n_taken=5)
    live = workspace.progress(study)
    # 3 work items × redundancy 2 = 6, in the progress and in the estimate alike
    assert (live["target_annotations"], live["items"]) == (6, 3)
    assert workspace.estimate(study).annotations == 6
    assert (live["gold_items"], live["gold_submitted"]) == (1, 5)
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    assert "0 of 6 submitted" in page and "(work items × redundancy, as in the estimate)" in page
    assert "5 answers to 1 gold item" in page
    assert '6 <span class="help">(work items × redundancy; gold checks not counted)' in page


def test_simulated_labels_never_give_the_measured_median(make_study):
    study = make_study(pairwise_bundle(n_inputs=3))
    now = timezone.now()
    _answer(study, "person", at=now, seconds=30)
    Annotator.objects.filter(external_id="person").update(platform="simulated")
    assert workspace.measured_times(study) == (None, 0)
    assert workspace.progress(study)["simulated"] == 1
    _answer(study, "real", at=now, seconds=20)
    assert workspace.measured_times(study) == (20.0, 1)


def test_checklist_names_what_is_missing_and_where_to_fix_it(make_study):
    one_system = make_study()
    Item.objects.filter(study=one_system).update(is_active=False)  # no item left to serve
    checks = {c.name: c for c in workspace.checklist(one_system)}
    assert not checks["Content"].ok and checks["Content"].required
    assert "2 systems, 0 items" in checks["Content"].detail
    assert checks["Content"].fix == "/admin/annotator/study/import/"
    codes = checks["Completion codes (Prolific)"]
    assert not codes.ok and "completion, fail, no work" in codes.detail
    assert codes.fix == "#id_completion_code"
    assert checks["Gold checks"].fix_text == f"Run: python manage.py prepare_checks {one_system.pk}"
    with_action = {c.name: c for c in workspace.checklist(one_system, checks_action=True)}
    assert with_action["Gold checks"].fix == "/admin/annotator/study/"
    assert "Budget" not in checks


@pytest.mark.django_db(transaction=True)
def test_adaptive_study_reports_rounds_and_budget_through_the_signal():
    study = services.study_import(adaptive_bundle(budget=200), filename="a.jsonl")
    live = workspace.progress(study)
    assert live["adaptive"] and live["budget"] == 200 and live["budget_percent"] == 0
    assert live["rounds"] == {
        "rounds": 1,
        "current": 1,
        "current_state": "Collecting",
        "committed": 30,
        "open_pairs": 6,
        "settled_pairs": 0,
    }
    checks = {c.name: c for c in workspace.checklist(study)}
    assert checks["Budget"].ok
    study.budget = None
    assert {c.name: c for c in workspace.checklist(study)}["Budget"].fix == "#id_budget"
    assert workspace.estimate(study).annotations == 30  # released items only


# --- creating a study ------------------------------------------------------------------------
def test_add_study_leads_to_the_create_page(admin_client):
    response = admin_client.get("/admin/annotator/study/add/")
    assert response.status_code == 302 and response.url == "/admin/annotator/study/import/"
    page = admin_client.get(response.url).content.decode()
    assert "Or paste rows" in page and "input_id,input,system,output" in page
    assert Study.objects.count() == 0


def test_create_from_pasted_jsonl_rows(admin_client):
    rows = pairwise_bundle(n_inputs=2).decode().replace("\n", "\r\n")  # as a browser posts
    response = admin_client.post("/admin/annotator/study/import/", {"rows": rows})
    study = Study.objects.get()
    assert response.status_code == 302 and response.url.endswith(f"/{study.pk}/change/")
    assert (study.name, study.source, study.items.count()) == ("pairwise test", "pasted.jsonl", 2)
    assert study.researchers.filter(username="boss").exists()


def test_create_from_pasted_csv_rows_with_the_kind_chosen(admin_client):
    rows = "input_id,input,system,output\nq1,Hi,m1,Hello\nq1,Hi,m2,Hey\n"
    admin_client.post(
        "/admin/annotator/study/import/", {"rows": rows, "kind": "pairwise", "name": "From CSV"}
    )
    study = Study.objects.get()
    assert (study.name, study.kind, study.source) == ("From CSV", "pairwise", "pasted.csv")
    assert sorted(study.systems.values_list("name", flat=True)) == ["m1", "m2"]


def test_bad_pasted_rows_name_every_fault_and_create_nothing(admin_client):
    rows = '{"id": "q", "outputs": {"a": ""}}\nnot json\n'
    page = admin_client.post(
        "/admin/annotator/study/import/", {"rows": rows, "format": "jsonl"}
    ).content.decode()
    assert "nothing was imported" in page and "line 1" in page and "line 2" in page
    assert Study.objects.count() == 0


def test_create_needs_exactly_one_of_file_or_rows(admin_client):
    upload = io.BytesIO(pairwise_bundle())
    upload.name = "s.jsonl"
    both = admin_client.post(
        "/admin/annotator/study/import/", {"file": upload, "rows": "input_id\n"}
    ).content.decode()
    neither = admin_client.post("/admin/annotator/study/import/", {"rows": "  "}).content.decode()
    for page in (both, neither):
        assert "Upload a file or paste rows (one of the two)." in page
    assert Study.objects.count() == 0
    upload.seek(0)
    admin_client.post("/admin/annotator/study/import/", {"file": upload})
    assert Study.objects.get().source == "s.jsonl"


# --- preview --------------------------------------------------------------------------------
def test_preview_records_nothing_and_names_no_system(admin_client, make_study):
    study = make_study(secret_bundle())
    first, second, third = Item.objects.filter(study=study).values_list("pk", flat=True)
    tables = (Assignment, Annotation, Participation, Annotator)
    before = [m.objects.count() for m in tables]
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/preview/").content.decode()
    assert "Preview — nothing is recorded" in page
    assert "reply 00" in page and "reply 01" in page  # both responses
    assert page.count(" disabled>") == 3  # left, right, tie: no button is live
    assert 'name="token"' not in page and "csrfmiddlewaretoken" not in page
    assert 'method="post"' not in page
    assert f"/preview/{second}/" in page and "Previous item" not in page
    middle = admin_client.get(f"/admin/annotator/study/{study.pk}/preview/{second}/")
    assert f"/preview/{first}/" in middle.content.decode()
    assert f"/preview/{third}/" in middle.content.decode()
    posted = admin_client.post(
        f"/admin/annotator/study/{study.pk}/preview/{second}/", {"answer": "left"}
    )
    for response in (page, middle.content.decode(), posted.content.decode()):
        for name in SECRET_SYSTEMS:
            assert name not in response
    assert [m.objects.count() for m in tables] == before
    assert Item.objects.filter(study=study, n_taken__gt=0).count() == 0


def test_preview_shows_both_orders_and_refuses_foreign_items(admin_client, make_study):
    study = make_study(secret_bundle(n_inputs=1))
    other = make_study(secret_bundle(n_inputs=1))
    foreign = Item.objects.get(study=other).pk
    url = f"/admin/annotator/study/{study.pk}/preview/"
    assert admin_client.get(f"{url}{foreign}/").status_code == 404
    lefts = set()
    for _ in range(40):
        page = admin_client.get(url).content.decode()
        lefts.add(page.index("reply 00") < page.index("reply 01"))
    assert lefts == {True, False}  # a random display order each time


def test_preview_of_a_likert_item_disables_the_scale(admin_client, make_study):
    study = make_study(
        bundle(
            [{"id": "x", "outputs": {"m": "rated text"}}],
            {"kind": "likert", "criteria": [{"name": "ok", "label": "OK?", "scale": [1, 3]}]},
        )
    )
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/preview/").content.decode()
    assert "rated text" in page and page.count("required disabled") == 3


# --- the panel -------------------------------------------------------------------------------
def test_change_page_panel_links_estimate_and_small_fixes(admin_client, make_study):
    study = make_study(pairwise_bundle(n_inputs=4))
    Study.objects.filter(pk=study.pk).update(
        pay_per_hour=Decimal("12.00"), expected_seconds_per_item=45
    )
    url = f"/admin/annotator/study/{study.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "Launch checklist" in page and "(recommended)" in page
    prolific = (
        f"http://testserver/w/{study.public_id}/prolific/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&amp;STUDY_ID={{%STUDY_ID%}}&amp;SESSION_ID={{%SESSION_ID%}}"
    )
    assert prolific in page and "%7B" not in page  # Prolific's placeholders, as written
    assert f"http://testserver/w/{study.public_id}/?worker=WORKER_ID" in page
    assert f"python manage.py invite_links {study.pk} --count 20" in page
    assert f"/admin/annotator/study/{study.pk}/invites/" in page
    assert 'data-copy="entry-link-1"' in page and "humeval/workspace.js" in page
    # 4 items × 2 = 8 annotations × 45 s = 0.10 h × 12.00 = 1.20
    assert '<dd id="estimate-cost">1.20 GBP</dd>' in page
    assert '<dd id="estimate-total">1.20 GBP</dd>' in page
    assert "no fee rate set" in page
    assert '<dd id="estimate-hours">0.10 h</dd>' in page
    assert "Used only when collection is" in page
    assert '<textarea name="options"' in page  # the kind's settings, editable in one place
    assert "/w/STUDY_ID/?worker=WORKER_ID" in page  # the help text names the whole link
    assert f"/admin/annotator/study/{study.pk}/preview/" in page
    Study.objects.filter(pk=study.pk).update(open_links=False)
    closed = admin_client.get(url).content.decode()
    assert "?worker=WORKER_ID" not in closed.replace("/w/STUDY_ID/?worker=WORKER_ID", "")
    assert "Open links (<code>?worker=…</code>) are off" in closed


def test_panel_has_no_inline_script_or_handler(admin_client, make_study):
    study = make_study()
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    start = page.index('id="workspace"')
    panel = page[start : page.index("</section>", start)]
    assert "<script" not in panel and active_markup(panel) == []
    assert "style=" not in panel


# --- invitation links ------------------------------------------------------------------------
def test_admin_makes_signed_invitation_links_to_copy_or_download(admin_client, make_study):
    from django.core.management import call_command

    from annotator.invites import invite_worker

    study = make_study(pairwise_bundle(n_inputs=2))
    url = f"/admin/annotator/study/{study.pk}/invites/"
    assert "Make invitation links" in admin_client.get(url).content.decode()
    page = admin_client.post(url, {"count": "3", "prefix": "lab", "show": "1"})
    html = page.content.decode()
    assert page.status_code == 200 and "3 invitation links" in html
    tokens = set(re.findall(rf"/w/{study.public_id}/i/([^/]+)/", html))
    assert sorted(invite_worker(study, t) for t in tokens) == ["lab-001", "lab-002", "lab-003"]
    csv_page = admin_client.post(url, {"workers": "ann\nbob, cy", "download": "1"})
    assert csv_page["Content-Type"].startswith("text/csv")
    assert "attachment" in csv_page["Content-Disposition"]
    rows = csv_page.content.decode().splitlines()
    assert rows[0] == "worker,link" and [r.split(",")[0] for r in rows[1:]] == ["ann", "bob", "cy"]
    # the command makes the same links (same service)
    out = io.StringIO()
    call_command(
        "invite_links", str(study.pk), "--workers", "ann", "--host", "http://testserver", stdout=out
    )
    worker, link = out.getvalue().strip().split("\t")
    # a signature carries the second it was made in: the links are alike, not equal
    for made in (link, rows[1].split(",")[1]):
        prefix, token = re.fullmatch(r"(.*/i/)([^/]+)/", made).groups()
        assert prefix == f"http://testserver/w/{study.public_id}/i/"
        assert invite_worker(study, token) == worker == "ann"
    assert Participation.objects.count() == 0  # nothing stored until a worker opens one


@pytest.mark.parametrize(
    "data, error",
    [
        ({"count": "0"}, "greater than or equal to 1"),
        ({"count": "1001"}, "less than or equal to 1000"),
        ({"workers": "<script>x"}, "Not a worker id"),
        ({"workers": "a,a"}, "listed twice"),
        ({}, "Give a number of links or a list of worker ids"),
    ],
)
def test_invitation_form_refuses_bad_input_with_a_400(admin_client, make_study, data, error):
    study = make_study(pairwise_bundle(n_inputs=2))
    page = admin_client.post(f"/admin/annotator/study/{study.pk}/invites/", data)
    assert page.status_code == 400 and error in page.content.decode()
    assert "/i/" not in page.content.decode().split("invite-form")[-1]


def test_invitation_links_need_change_permission_on_the_study(make_study, db):
    from django.contrib.auth.models import Permission

    study = make_study(pairwise_bundle(n_inputs=2))
    viewer = User.objects.create_user("viewer", password="y" * 12, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_study"))
    study.researchers.add(viewer)
    client = Client()
    client.login(username="viewer", password="y" * 12)
    url = f"/admin/annotator/study/{study.pk}/invites/"
    assert client.post(url, {"count": "2"}).status_code == 404
