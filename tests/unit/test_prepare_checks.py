"""``prepare_checks`` (command) and the study admin's action: gold checks and a
qualification test from items with a known answer, or a clear reason why none were made."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotator.models import Item, Participation, QualificationQuestion, Study
from tests.conftest import LLMBAR, boss_client, pairwise_bundle


@pytest.fixture
def llmbar(make_study):
    """LLMBar: every instance's expert label (majority_human) is a known answer."""
    return make_study(LLMBAR.read_bytes(), filename="llmbar.json")


def test_command_makes_gold_checks_and_a_test(llmbar, capsys):
    call_command("prepare_checks", str(llmbar.pk), "--gold", "6", "--qualification", "10")
    out = capsys.readouterr().out
    assert "made 6 gold checks and a qualification test of 10 questions (9 correct to pass)" in out
    llmbar.refresh_from_db()
    assert Item.objects.filter(study=llmbar, is_gold=True, is_active=True).count() == 6
    questions = QualificationQuestion.objects.filter(test=llmbar.qualification)
    assert questions.count() == 10
    assert Item.objects.filter(study=llmbar, is_active=False).count() == 10  # out of the pool
    assert {q.expected["value"] for q in questions} <= {"A", "B"}
    assert {len(q.outputs) for q in questions} == {2}
    assert llmbar.qualification.kind == "pairwise"
    # a new worker now takes the test first
    client = Client()
    client.get(f"/w/{llmbar.public_id}/?worker=new")
    assert Participation.objects.get(annotator__external_id="new").status == "qualifying"


def test_command_refuses_and_changes_nothing(llmbar, make_study):
    with pytest.raises(CommandError, match="give --gold N and/or --qualification N"):
        call_command("prepare_checks", str(llmbar.pk))
    with pytest.raises(CommandError, match="no study with id 999"):
        call_command("prepare_checks", "999", "--gold", "1")
    with pytest.raises(CommandError, match="Only 100 unused items have a known answer; 101"):
        call_command("prepare_checks", str(llmbar.pk), "--gold", "101")
    plain = make_study(pairwise_bundle())
    with pytest.raises(CommandError, match="nothing was made: No unused work item has a known"):
        call_command("prepare_checks", str(plain.pk), "--qualification", "2")
    assert not Item.objects.filter(is_gold=True).exists()
    assert not Study.objects.exclude(qualification=None).exists()


def test_admin_action_asks_then_prepares(llmbar, make_study, db):
    client = boss_client()
    plain = make_study(pairwise_bundle())
    url = "/admin/annotator/study/"
    chosen = {"action": "prepare_checks", "_selected_action": [llmbar.pk, plain.pk]}
    page = client.post(url, chosen)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Prepare gold checks and a qualification test" in html and 'name="gold"' in html
    assert not Item.objects.filter(is_gold=True).exists()  # asking changes nothing
    nothing = client.post(url, {**chosen, "apply": "1", "gold": "0", "qualification": "0"})
    assert "Ask for gold checks, qualification questions or both." in nothing.content.decode()
    apply = {**chosen, "apply": "1", "gold": "4", "qualification": "5"}
    done = client.post(url, apply, follow=True)
    shown = [str(m) for m in done.context["messages"]]
    assert (
        f"{llmbar.name}: made 4 gold checks and a qualification test of 5 questions "
        "(4 correct to pass)." in shown
    )
    assert any(m.startswith(f"{plain.name}: nothing was made. No unused work item") for m in shown)
    assert Item.objects.filter(study=llmbar, is_gold=True).count() == 4
    assert not Item.objects.filter(study=plain, is_gold=True).exists()
    llmbar.refresh_from_db()
    assert llmbar.qualification.questions.count() == 5
    assert llmbar.qualification.created_by.username == "boss"  # its author may edit it


def test_action_is_listed_on_the_study_changelist(llmbar, db):
    client = boss_client()
    page = client.get("/admin/annotator/study/").content.decode()
    assert "Prepare gold checks and a qualification test from known answers" in page


def test_a_researcher_who_may_only_view_studies_prepares_nothing(llmbar, db):
    """The action writes (gold items, a test): it needs the change permission, like the
    study's change form; a researcher of the study with view permission only is refused."""
    from django.contrib.auth.models import Permission

    viewer = User.objects.create_user("viewer", password="x" * 12, is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_study"))
    llmbar.researchers.add(viewer)
    client = Client()
    client.force_login(viewer)
    url = "/admin/annotator/study/"
    assert client.get(url).status_code == 200  # they do see the study
    client.post(
        url,
        {"action": "prepare_checks", "_selected_action": [llmbar.pk], "apply": "1",
         "gold": "4", "qualification": "5"},
    )  # fmt: skip
    assert not Item.objects.filter(study=llmbar, is_gold=True).exists()
    llmbar.refresh_from_db()
    assert llmbar.qualification is None
