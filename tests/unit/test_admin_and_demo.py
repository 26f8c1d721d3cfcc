"""The researcher's admin (import, progress, config versions) and the demo command."""

import io

import pytest
from django.core.management import call_command
from django.test import Client

from annotator.models import Annotation, Study
from tests.conftest import pairwise_bundle


def test_admin_import_creates_study_or_lists_errors(admin_client):
    bad = io.BytesIO(b'{"id": "q", "outputs": {"a": "x"}}\n{"id": "q", "outputs": {"a": "y"}}\n')
    bad.name = "bad.jsonl"
    page = admin_client.post("/admin/annotator/study/import/", {"file": bad}).content.decode()
    assert "nothing was imported" in page
    assert (
        "line 2 (input &#x27;q&#x27;): duplicate input id &#x27;q&#x27; (first on line 1)" in page
    )
    assert Study.objects.count() == 0
    good = io.BytesIO(pairwise_bundle())
    good.name = "good.jsonl"
    response = admin_client.post("/admin/annotator/study/import/", {"file": good, "name": "N"})
    study = Study.objects.get()
    assert response.status_code == 302 and response.url.endswith(f"/{study.pk}/change/")
    assert study.name == "N"


def test_admin_shows_progress_and_bumps_config_version(admin_client, make_study):
    study = make_study()
    change = admin_client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    assert "0 of 6 submitted" in change
    assert f"/w/{study.public_id}/?worker=WORKER_ID" in change
    listing = admin_client.get("/admin/annotator/study/").content.decode()
    assert "0 / 6" in listing and "Create a study from a file or pasted rows" in listing
    form = {
        "name": study.name,
        "kind": "pairwise",
        "question": "Which is more helpful?",
        "instructions": "",
        "allow_tie": "on",
        "render_markdown": "on",
        "redundancy": 2,
        "items_per_worker": "",
        "lease_seconds": 600,
        "batch_size": 10,
        "budget": "",
        "gamma": 0.05,
        "collection": "all",
        "open_links": "on",
        "completion_code": "CODE-7",
        "gold_rate_start": 0.3,
        "gold_rate_end": 0.05,
        "gold_rate_halflife": 20,
        "max_strikes": 3,
        "is_active": "on",
        "description": "",
        "language": "en",
        "languages": "[]",
        "instructions_by_language": "{}",
    }
    response = admin_client.post(f"/admin/annotator/study/{study.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    study.refresh_from_db()
    assert (study.question, study.config_version) == ("Which is more helpful?", 2)
    assert (study.completion_code, study.gold_rate_start) == ("CODE-7", 0.3)


def test_admin_cannot_edit_annotations(admin_client):
    assert admin_client.get("/admin/annotator/annotation/add/").status_code == 403


def test_demo_command_is_idempotent(db, capsys):
    call_command("demo")
    first = capsys.readouterr().out
    call_command("demo")
    assert Study.objects.count() == 5
    kinds = sorted(Study.objects.values_list("kind", "collection"))
    assert kinds == [
        ("error_spans", "all"),
        ("likert", "all"),
        ("pairwise", "adaptive"),
        ("pairwise", "all"),
        ("ranking", "all"),
    ]
    for study in Study.objects.all():
        assert f"/w/{study.public_id}/?worker=demo-worker-1" in first
    assert "user 'admin', password 'demo-admin'" in first
    assert Annotation.objects.filter(source="import").count() > 0
    adaptive = Study.objects.get(collection="adaptive")
    assert f"python manage.py simulate_crowd {adaptive.pk} --until-done" in first
    assert "http://127.0.0.1:8000/admin/" in first


@pytest.mark.parametrize(
    ("addr", "base"),
    [
        ("127.0.0.1:8123", "http://127.0.0.1:8123/"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000/"),
        ("8124", "http://127.0.0.1:8124/"),
    ],
)
def test_demo_links_follow_the_served_address(db, capsys, monkeypatch, addr, base):
    monkeypatch.setenv("HUMEVAL_DEMO_ADDR", addr)
    call_command("demo")
    out = capsys.readouterr().out
    links = [word for word in out.split() if "://" in word]
    assert links and all(link.strip("'").startswith(base) for link in links), links
    call_command("demo", addr="localhost:7000")
    assert "http://localhost:7000/admin/" in capsys.readouterr().out


def test_demo_pairwise_instructions_are_for_people(db, capsys):
    call_command("demo")
    study = Study.objects.get(kind="pairwise", collection="all")
    for judge_prompt in ("model_a", "Do NOT output", "# Instruction", "…"):
        assert judge_prompt not in study.instructions
    assert "Left is better" in study.instructions and "`←`" in study.instructions
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=reader")
    page = client.get(f"/w/{study.public_id}/instructions/").content.decode()
    assert "follows the instruction better" in page and "model_a" not in page
    assert 'class="button button-primary"' in page
    task = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert "Which response follows the instruction better?" in task
    assert "model_a" not in task and "Instruction:" not in task


def test_demo_checks_the_port_first_and_names_the_variable(db, capsys):
    """A busy port stops the demo before it prints links to it (was: links to :8000, then
    runserver's 'That port is already in use.')."""
    import socket

    from django.core.management.base import CommandError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError) as err:
            call_command("demo", addr=f"127.0.0.1:{port}", check_port=True)
    message = str(err.value)
    assert f"127.0.0.1:{port} is already in use" in message
    assert "HUMEVAL_DEMO_ADDR=127.0.0.1:8123 ./run demo" in message
    assert "/w/" not in capsys.readouterr().out and not Study.objects.exists()
    # a free port passes the check
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    call_command("demo", addr=f"127.0.0.1:{free}", check_port=True)
    assert f"http://127.0.0.1:{free}/admin/" in capsys.readouterr().out


def test_demo_names_each_report_and_resets(db, capsys):
    call_command("demo")
    out = capsys.readouterr().out
    reports = out.split("Reports (log in as admin first):")[1].split("\n\n")[0].splitlines()
    for study in Study.objects.all():
        at = reports.index(f"  {study.name}")
        assert reports[at + 1] == f"    http://127.0.0.1:8000/studies/{study.pk}/report/"
    assert "./run demo --reset" in out
    pairwise = Study.objects.get(kind="pairwise", collection="all")
    client = Client()
    client.get(f"/w/{pairwise.public_id}/?worker=someone")  # a worker took part
    before = set(Study.objects.values_list("pk", flat=True))
    call_command("demo", reset=True)
    out = capsys.readouterr().out
    assert "Reset: deleted 5 demo studies and their labels." in out
    assert Study.objects.count() == 5 and not before & set(
        Study.objects.values_list("pk", flat=True)
    )
    assert not Annotation.objects.filter(source="platform").exists()
    from annotator.models import Participation, QualificationTest

    assert not Participation.objects.exists()
    assert QualificationTest.objects.filter(studies=None).count() == 0


def test_favicon_is_served(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
    assert client.post("/favicon.ico").status_code == 405


def test_embedded_mode_silences_kombus_no_hostname_warning(settings):
    import logging

    assert not settings.CELERY_BROKER_URL  # the unit tests run embedded, as the demo does
    kombu = logging.getLogger("kombu.connection")
    assert not kombu.isEnabledFor(logging.WARNING) and kombu.isEnabledFor(logging.ERROR)


def test_readme_pyproject_and_docs_name_the_four_kinds():
    import re
    import tomllib

    from tests.conftest import ROOT

    intro = (ROOT / "README.md").read_text(encoding="utf-8").split("## ")[0]
    description = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    kinds_doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    kinds_doc = kinds_doc.split("## Task kinds")[1][:400]
    importing = (ROOT / "docs" / "import-formats.md").read_text(encoding="utf-8")[:400]
    for where in (intro, description, kinds_doc, importing):
        flat = re.sub(r"\s+", " ", where).lower()
        assert "pairwise" in flat and "likert" in flat and "ranking" in flat
        assert re.search(r"error[ _-]span", flat), where
        assert "criteri" in flat or where is importing


def test_run_demo_shows_install_progress_and_passes_reset_and_the_port_check(tmp_path):
    """``./run demo`` with a stand-in venv (its pip and python only print): the first install
    names each package as it comes instead of printing nothing but pip's warnings, and the
    demo command gets ``--check-port`` and ``--reset``."""
    import os
    import subprocess

    from tests.conftest import ROOT

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    pip = venv / "bin" / "pip"
    pip.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--upgrade*) exit 0 ;; esac\n'
        "echo 'Obtaining file:///x'\n"
        "echo 'Collecting django>=5.0 (from humeval==0.1.0)'\n"
        "echo 'Collecting celery>=5.3'\n"
        "echo 'BuildBackendWarning: Editable installation.' >&2\n"
        "echo 'Installing collected packages: django, celery'\n"
        "echo 'Successfully installed celery-5.4 django-5.1'\n"
    )
    python = venv / "bin" / "python"
    python.write_text('#!/bin/sh\necho "python $*"\n')
    for exe in (pip, python):
        exe.chmod(0o755)
    env = {**os.environ, "HUMEVAL_VENV": str(venv), "HUMEVAL_DEMO_ADDR": "127.0.0.1:8123"}
    run = subprocess.run(
        [str(ROOT / "run"), "demo", "--reset"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = run.stdout
    assert "Installing humeval and its dependencies into" in out
    assert "  fetched django>=5.0 (from humeval==0.1.0)\n  fetched celery>=5.3\n" in out
    assert "installing them (the longest step)" in out and "  done." in out
    assert "BuildBackendWarning" not in out + run.stderr  # kept in the venv's pip log
    assert "BuildBackendWarning" in (venv / "pip-install.log").read_text()
    assert "python manage.py demo --addr 127.0.0.1:8123 --check-port --reset" in out
    assert "python manage.py runserver 127.0.0.1:8123" in out
