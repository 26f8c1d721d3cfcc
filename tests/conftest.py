import json
import os
import random
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

ROOT = Path(__file__).resolve().parent.parent
LLMBAR = ROOT / "demo" / "llmbar_natural.judgebench.json"
DATA = ROOT / "data"
MQM = DATA / "mqm_newstest2021_ende.avg_seg_scores.tsv"
JUDGEBENCH_EXAMPLE = DATA / "judgebench_schema_example.json"

# Hermetic: a test reads nothing beside the repository (a clone elsewhere has nothing
# there). An audit hook notes every file opened next to the repository but outside it (the
# interpreter, its packages, the temporary directory and hidden directories such as a
# home's .cache excepted); the autouse fixture
# ``_reads_nothing_beside_the_repo`` fails the test that did it.
_BESIDE = os.path.realpath(ROOT.parent)
_REPO = os.path.realpath(ROOT) + os.sep
#: The folder of data beside the repository that a clone elsewhere does not have: a read
#: there is caught wherever the repository lies (also in the temporary directory).
_SHARED = os.path.join(_BESIDE, "shared") + os.sep
_ALLOWED = tuple(
    os.path.realpath(p) + os.sep
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, tempfile.gettempdir()}
)
OUTSIDE_READS: list[str] = []


def _beside(full: str) -> bool:
    """``full`` (ending in a separator) is next to the repository, not in it nor allowed;
    a hidden directory (a repository cloned into a home: ~/.cache, ~/.config) is no data."""
    if full.startswith(_SHARED):
        return True
    if not full.startswith(_BESIDE + os.sep) or full.startswith(_REPO):
        return False
    if full.startswith(_ALLOWED):
        return False
    return not full[len(_BESIDE) + 1 :].startswith(".")


def _outside_the_repo(path) -> bool:
    if isinstance(path, int):
        return False
    path = os.fsdecode(path)
    full = os.path.abspath(path) + os.sep
    if not full.startswith(_BESIDE + os.sep):
        return False  # cheap first: most opens are of the interpreter's own files
    if not full.startswith(_REPO):
        return _beside(full)  # named beside the repository (a symlink there counts too)
    # in the repository: a symlink there may lead out of it
    return _beside(os.path.realpath(path) + os.sep)


def _audit(event: str, args: tuple) -> None:
    if event == "open" and args and args[0] is not None and _outside_the_repo(args[0]):
        OUTSIDE_READS.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)

# Deterministic: Hypothesis draws the same examples on every run (its "explore" profile,
# HUMEVAL_HYPOTHESIS=explore, searches afresh each time), and keeps no example database.
hypothesis_settings.register_profile("deterministic", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", database=None)
hypothesis_settings.load_profile(os.environ.get("HUMEVAL_HYPOTHESIS", "deterministic"))

FAST_HASHER = "tests.hashers.FastPBKDF2PasswordHasher"


def pytest_configure(config):
    """Passwords hashed with one PBKDF2 round, not a million (a login took a second): the
    fast hasher first, and in place of Django's own for the ``pbkdf2_sha256`` hashes."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = [FAST_HASHER] + [
        h for h in settings.PASSWORD_HASHERS if not h.endswith(".PBKDF2PasswordHasher")
    ]


def bundle(records: list[dict], study: dict | None = None) -> bytes:
    """A JSONL study bundle."""
    lines = [json.dumps({"study": study})] if study is not None else []
    lines += [json.dumps(r) for r in records]
    return ("\n".join(lines) + "\n").encode()


def pairwise_bundle(n_inputs: int = 3, systems=("alpha", "beta"), **options) -> bytes:
    study = {"name": "pairwise test", "kind": "pairwise", "redundancy": 2, **options}
    records = [
        {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {s: f"answer {i} by {s}" for s in systems},
        }
        for i in range(n_inputs)
    ]
    return bundle(records, study)


def settings_under(env: dict[str, str]) -> dict:
    """The project's settings module run afresh in this process with exactly ``env`` as its
    environment (restored after): the values a process started with that environment reads,
    without starting one (a Python process with Django took seconds under load). An error
    the settings raise (``ImproperlyConfigured``) is raised here."""
    import runpy
    from unittest import mock

    with mock.patch.dict(os.environ, env, clear=True):
        return runpy.run_path(str(ROOT / "config" / "settings.py"))


#: The password of every user the tests make (hashed fast: tests/hashers.py).
PASSWORD = "x" * 12


def make_superuser(username: str = "boss"):
    """A new superuser (password ``PASSWORD``)."""
    from django.contrib.auth.models import User

    return User.objects.create_superuser(username, f"{username}@example.org", PASSWORD)


def boss_client():
    """A test client logged in (through the login, not ``force_login``) as a new superuser
    ``boss``."""
    from django.test import Client

    make_superuser()
    client = Client()
    assert client.login(username="boss", password=PASSWORD)
    return client


@pytest.fixture
def admin_client(db):
    """A client logged in as the superuser ``boss`` (pytest-django's own logs in ``admin``
    with ``force_login``)."""
    return boss_client()


@pytest.fixture
def make_study(db):
    from annotator import services

    def make(data: bytes | None = None, filename: str = "study.jsonl", **overrides):
        return services.study_import(
            data if data is not None else pairwise_bundle(),
            filename=filename,
            overrides={
                "open_links": True,
                "gold_rate_start": 0.0,
                "gold_rate_end": 0.0,
                **overrides,
            },
        )

    return make


def active_markup(html: str) -> list[str]:
    """Script tags, event-handler attributes and javascript: URLs present as real markup."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            own_script = tag == "script" and (dict(attrs).get("src") or "").startswith(
                ("/static/", "/w/jsi18n/")  # the platform's files, its script catalog
            )
            if tag in ("script", "iframe", "object", "embed") and not own_script:
                found.append(f"<{tag}>")
            for name, value in attrs:
                if name.startswith("on"):
                    found.append(f"{tag}[{name}]")
                if name in ("href", "src", "action") and (value or "").strip().lower().startswith(
                    ("javascript:", "data:", "vbscript:")
                ):
                    found.append(f"{tag}[{name}={value}]")

    Parser().feed(html)
    return found


@pytest.fixture(autouse=True)
def _reads_nothing_beside_the_repo():
    OUTSIDE_READS.clear()
    yield
    found, OUTSIDE_READS[:] = list(OUTSIDE_READS), []
    assert not found, f"files read outside the repository: {found}"


@pytest.fixture(autouse=True)
def _seeded_services_rng(request, monkeypatch):
    """The services' draws (display and question orders, item groups) seeded per test: the
    same test draws the same orders in any run, in any worker, in any order of tests."""
    from annotator.services import leasing, qualification, studies, submission

    rng = random.Random(request.node.nodeid)
    for module in (leasing, qualification, studies, submission):  # each looks up its _RNG
        monkeypatch.setattr(module, "_RNG", rng)


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    """Each test starts with no throttle counts: the entry limit is per address per minute,
    and every test client comes from the same address."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def frozen_throttle_window(monkeypatch):
    """The throttle's wall clock held still, so a token bucket refills nothing while a test
    counts requests on a slow machine."""
    import time
    from types import SimpleNamespace

    from annotator import throttle

    now = (time.time() // 3600) * 3600 + 30.0
    monkeypatch.setattr(
        throttle, "time", SimpleNamespace(time=lambda: now, monotonic=time.monotonic)
    )
