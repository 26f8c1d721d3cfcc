"""Schemathesis against the OpenAPI schema served at ``/api/schema/``: every operation and
method, valid and invalid data (examples, coverage and fuzzing phases), every schemathesis
check, on PostgreSQL; the WSGI app is called in process.

The data is real: a pairwise study with collected labels and judge ratings, an adaptive
study whose protocol has started and has labels in round 1, a Likert study with
per-criterion scores, a Judge-Bench study with imported labels, and a study the researcher
may not read. It is committed once for the module; each test's requests run in a
transaction that is rolled back. Path ids, label filters and uploaded files are drawn mostly
from that data, sometimes at random.

Each operation runs as the studies' researcher (who may also import), as an authenticated
user without any permission, and anonymously: every answer must be one the schema documents
(status, content type, headers, body), none may be a 5xx, and the two outsiders must never
see a study. The error answers that fuzzing rarely reaches (429, 413, 415, CSRF 403, an
error in CSV) are provoked one by one and validated the same way.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass

import pytest
import schemathesis
from django.core.cache import cache
from schemathesis.checks import CHECKS, load_all_checks

from analysis.views import MAX_N_BOOT
from tests.conftest import LLMBAR, bundle, pairwise_bundle
from tests.leasing import next_lease

#: In one process of the parallel phase, one test after another (one ``xdist_group``): the
#: module's data is built once, and the closing test reads the statuses the fuzzing saw in
#: this process. Each operation is a test of its own (``schema.parametrize``), which
#: pytest-xdist runs like any other.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("schemathesis")]

#: Fuzzed examples per operation and identity (the examples and coverage phases add their
#: own deterministic cases). Tuned so the module runs in about a minute on 2 cores; a longer
#: hunt: HUMEVAL_SCHEMATHESIS_EXAMPLES=500 HUMEVAL_SCHEMATHESIS_SEED=<n>.
MAX_EXAMPLES = int(os.environ.get("HUMEVAL_SCHEMATHESIS_EXAMPLES", "40"))
SEED = int(os.environ.get("HUMEVAL_SCHEMATHESIS_SEED", "6"))

load_all_checks()
#: Every check schemathesis has, not only the default set.
ALL_CHECKS = [check for check in CHECKS.get_all() if not isinstance(check, type)]

RATINGS = (
    '{"judge": "comet", "input_id": "in0", "system": "s1", "score": 0.5}\n'
    '{"judge": "comet", "input_id": "in0", "system": "s2", "score": -0.25}\n'
    '{"judge": "llm", "input_id": "in1", "system": "s1", "system_b": "s3", "label": "A"}\n'
)
SYSTEMS = ["s1", "s2", "s3"]

#: Values from the fixtures' data, offered to filters and uploads part of the time.
DICTIONARIES = {
    "systems": {"values": [*SYSTEMS, "alpha", "output_a", "response"]},
    "pairs": {"values": ["s1,s2", "s2,s1", " s1 , s3", "output_a,output_b"]},
    # A study bundle, and ratings that fit the pairwise, adaptive and Likert studies (under
    # several judges, so that a second file is not only a repeat).
    "files": {
        "values": [
            pairwise_bundle(2).decode(),
            RATINGS,
            '{"judge": "bleu", "input_id": "in0", "system": "s1", "score": 0.1}\n',
            '{"judge": "gpt", "input_id": "in1", "system": "s1", "criterion": "safe", '
            '"label": "no"}\n',
        ]
    },
}

CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
        },
        "checks": {"enabled": True},
        "dictionaries": DICTIONARIES,
        "parameters": {
            "query.system": {"dictionary": "systems", "probability": 0.5},
            "query.pair": {"dictionary": "pairs", "probability": 0.5},
            "body.file": {"dictionary": "files", "probability": 0.5},
        },
        "operations": [
            {
                # The schema can say that `file` is a file, not that it is a valid study or
                # ratings file: rejecting its content (400, every reason listed) or its size
                # (413) is the documented answer to a schema-valid upload.
                "include-operation-id": ["studies_import_create", "studies_ratings_create"],
                "checks": {
                    "positive_data_acceptance": {
                        "expected-statuses": ["2xx", "400", "401", "403", "404", "413", "429"]
                    }
                },
            }
        ],
    }
)


@schemathesis.deserializer("text/csv", "application/jsonl")
def _text(ctx, response) -> str:
    """CSV and JSON Lines bodies are documented as text; validate them as such."""
    return response.content.decode("utf-8")


def _load_schema():
    from config.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application, config=CONFIG)


schema = _load_schema()

#: (identity, operation) → statuses answered, for the coverage check at the end.
SEEN: dict[tuple[str, str], set[int]] = defaultdict(set)


@dataclass
class World:
    studies: dict[str, int]
    tokens: dict[str, str]
    users: dict[str, int]
    job: str = ""  # the researcher's finished import job (GET /api/jobs/{public_id}/)
    export_job: str = ""  # and export job, its file kept (GET /api/jobs/{public_id}/download/)

    def headers(self, identity: str) -> dict[str, str] | None:
        token = self.tokens.get(identity)
        return {"Authorization": f"Token {token}"} if token else None


def _label_everything(study, workers, data) -> None:
    from annotator import services

    for name in workers:
        part = services.participation_enter(study=study, platform="link", external_id=name)
        while (a := next_lease(participation=part)) is not None:
            services.annotation_submit(
                annotator=part.annotator,
                token=a.token,
                data=data,
                time_spent_ms=1200,
            )


def _build_world() -> World:
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    from annotator import jobs, services
    from annotator.models import Annotation, ImportJob, JudgeRating
    from protocol.models import Round

    def make(data: bytes, filename: str = "study.jsonl", **overrides):
        return services.study_import(
            data,
            filename=filename,
            overrides={
                "open_links": True,
                "gold_rate_start": 0.0,
                "gold_rate_end": 0.0,
                **overrides,
            },
        )

    researcher = User.objects.create_user("schema-researcher", password="x" * 12)
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    outsider = User.objects.create_user("schema-outsider", password="x" * 12)

    # A study name a spreadsheet would run as a formula.
    pairwise = make(pairwise_bundle(n_inputs=3, systems=SYSTEMS), name="=cmd|' /C calc'!A0")
    _label_everything(pairwise, ["w1", "w2"], {"answer": "left"})
    services.judge_ratings_import(pairwise, RATINGS.encode(), filename="r.jsonl")

    adaptive = make(
        pairwise_bundle(n_inputs=6, systems=SYSTEMS, redundancy=1, batch_size=2),
        collection="adaptive",
        name="adaptive",
    )
    _label_everything(adaptive, ["w3"], {"answer": "tie"})

    likert = make(
        bundle(
            [{"id": f"in{i}", "input": f"q{i}", "outputs": {"s1": f"a{i}"}} for i in range(2)],
            {
                "kind": "likert",
                "redundancy": 1,
                "criteria": [
                    {"name": "fluency", "label": "Fluent?", "scale": [1, 5]},
                    {"name": "safe", "label": "Safe?", "labels": ["yes", "no"]},
                ],
            },
        ),
        name="likert",
    )
    _label_everything(likert, ["w4"], {"scores": {"fluency": 4, "safe": "yes"}})
    judgebench = make(LLMBAR.read_bytes(), filename=LLMBAR.name, name="judge-bench")
    # A ranking study: labels without a pair (empty system_a …), no Judge-Bench form (409).
    ranking = make(bundle(
        [{"id": f"in{i}", "input": f"q{i}", "outputs": {s: f"{s}{i}" for s in SYSTEMS}}
         for i in range(2)],
        {"kind": "ranking", "redundancy": 1},
    ), name="ranking")  # fmt: skip
    _label_everything(ranking, ["w6"], {"ranking": "[[2], [0], [1]]"})
    hidden = make(pairwise_bundle(n_inputs=2), name="not yours")
    _label_everything(hidden, ["w5"], {"answer": "right"})

    for study in (pairwise, adaptive, likert, judgebench, ranking):
        study.researchers.add(researcher)
    assert Round.objects.filter(study=adaptive).exists()
    for study in (pairwise, adaptive, likert, judgebench, ranking):
        assert Annotation.objects.filter(study=study).exists()
    assert JudgeRating.objects.filter(study=pairwise).exists()
    return World(
        studies={
            "pairwise": pairwise.pk,
            "adaptive": adaptive.pk,
            "likert": likert.pk,
            "judgebench": judgebench.pk,
            "ranking": ranking.pk,
            "hidden": hidden.pk,
        },
        tokens={
            "researcher": Token.objects.create(user=researcher).key,
            "outsider": Token.objects.create(user=outsider).key,
        },
        users={"researcher": researcher.pk, "outsider": outsider.pk},
        job=str(
            ImportJob.objects.create(
                owner=researcher, filename="big.jsonl", status="done", study=pairwise
            ).public_id
        ),
        export_job=str(  # run here, not queued: no message left for a later test's worker
            jobs.export_job_run(
                ImportJob.objects.create(
                    owner=researcher,
                    operation="export",
                    filename="s.judgebench.json",
                    study=pairwise,
                ).pk
            ).public_id
        ),
    )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Committed data, removed again (as a transactional test would) when the module ends."""
    from django.core.management import call_command

    with django_db_blocker.unblock():
        try:
            yield _build_world()
        finally:
            from annotator.jobs import job_file
            from annotator.models import ImportJob

            for job in ImportJob.objects.filter(operation=ImportJob.Operation.EXPORT):
                job_file(job).unlink(missing_ok=True)
            call_command("flush", interactive=False, verbosity=0)


#: The most bootstrap resamples a report computes here, whatever valid n_boot was asked.
FUZZ_N_BOOT = 20


@pytest.fixture(scope="module", autouse=True)
def _few_resamples():
    """A valid bootstrap size (default 1,000, at most 10,000) changes only how long the
    report takes, not its shape: the query is validated as sent (10,000 is accepted,
    10,001 answers 400), then at most 20 resamples are drawn. (The coverage phase sends
    its boundary values as strings: rewriting the query's integers missed them, and the
    report operation took about five minutes.)"""
    from analysis import selectors

    study_report = selectors.study_report

    def capped(study, *, n_boot: int = 1000, **options):
        CALLS.append(n_boot)
        return study_report(study, n_boot=min(n_boot, FUZZ_N_BOOT), **options)

    selectors.study_report = capped
    yield
    selectors.study_report = study_report


#: n_boot of every report computed (each capped at FUZZ_N_BOOT).
CALLS: list[int] = []


#: Worker models fitted (a fit's key: the labels and options) and answered from a fit.
FITS = {"fitted": 0, "repeated": 0}


@pytest.fixture(scope="module", autouse=True)
def _each_worker_model_fitted_once():
    """A report with ``worker_models=true`` fits Dawid-Skene and MACE (about a second a
    report on the pairwise study, the one with two labels an item; the fuzzing asks for it
    over a hundred times on the same labels). Both are deterministic on their input (Dawid-
    Skene starts from the majority vote, MACE is seeded), so each distinct input (the labels
    frame, exactly, and the options) is fitted once and a repeat gets a copy of that fit:
    the report built from it, and the answer, are what a new fit would give."""
    import copy
    import pickle

    from analysis import report_judges

    def once(fit):
        fits: dict[bytes, object] = {}

        def fitted(annotations, **options):
            key = pickle.dumps((annotations, sorted(options.items())))
            if key not in fits:
                fits[key] = fit(annotations, **options)
                FITS["fitted"] += 1
            else:
                FITS["repeated"] += 1
            return copy.deepcopy(fits[key])

        return fitted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_judges, "dawid_skene", once(report_judges.dawid_skene))
        patch.setattr(report_judges, "mace", once(report_judges.mace))
        yield


@pytest.fixture(scope="module", autouse=True)
def _one_connection_per_test():
    """Requests run inside the test's transaction, so Django must not close the connection
    at the end of each request (its own test client disconnects the same handler)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _answers(case, response) -> bool:
    """The response answers the case itself (checks also see the probes some checks send,
    such as OPTIONS or an undeclared method)."""
    return response.request.method == case.operation.method.upper()


def _sees_nothing(ctx, response, case) -> None:
    """A user named on no study, or nobody, gets no study: only an empty list succeeds."""
    if _answers(case, response) and 200 <= response.status_code < 300:
        body = response.json() if case.operation.path == "/api/studies/" else {}
        assert body.get("count") == 0 and body.get("results") == [], (
            f"{case.operation.label} answered {response.status_code} to an outsider"
        )


def _must_authenticate(ctx, response, case) -> None:
    """401, or 404 / 406 for a path or format that exists for nobody (DRF negotiates the
    format before it authenticates): nothing about any study."""
    assert not _answers(case, response) or response.status_code in (401, 404, 406), (
        f"{case.operation.label} answered {response.status_code} without credentials"
    )


IDENTITY_CHECKS = {
    "researcher": [],
    "outsider": [_sees_nothing],
    "anonymous": [_sees_nothing, _must_authenticate],
}


def _call_and_validate(case, world: World, identity: str) -> None:
    # Most generated study ids become one of the fixtures' studies (the hidden one too);
    # the rest, and every id that is not an integer, are sent as generated.
    study_id = str((case.path_parameters or {}).get("id"))
    if re.fullmatch(r"-?[0-9]+", study_id):
        ids = list(world.studies.values())
        if int(study_id) % 8 < len(ids):
            case.path_parameters["id"] = ids[int(study_id) % 8]
    job_id = (case.path_parameters or {}).get("public_id")
    if isinstance(job_id, str) and re.fullmatch(r"[0-9a-f-]{36}", job_id) and job_id[0] < "8":
        # half of the well-formed ids
        download = case.path.endswith("/download/")
        case.path_parameters["public_id"] = world.export_job if download else world.job
    cache.clear()  # throttle counters: this is about conformance; 429 is tested below
    response = case.call_and_validate(
        headers=world.headers(identity),
        checks=ALL_CHECKS,
        additional_checks=IDENTITY_CHECKS[identity],
    )
    if case.method.upper() == case.operation.method.upper():
        SEEN[identity, case.operation.label].add(response.status_code)


@schema.parametrize()
@pytest.mark.django_db
def test_as_the_studies_researcher(case, world):
    _call_and_validate(case, world, "researcher")


@schema.parametrize()
@pytest.mark.django_db
def test_as_a_user_without_permission(case, world):
    _call_and_validate(case, world, "outsider")


@schema.parametrize()
@pytest.mark.django_db
def test_anonymously(case, world):
    _call_and_validate(case, world, "anonymous")


# --- error answers fuzzing rarely reaches, provoked one by one --------------------------------
def _validate(case, response) -> None:
    case.validate_response(response, checks=ALL_CHECKS)


@pytest.mark.django_db
def test_throttled_answer_is_documented_in_every_format(world, monkeypatch):
    from rest_framework.throttling import UserRateThrottle

    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "2/min", "anon": "2/min"})
    cache.clear()
    operation = schema["/api/studies/{id}/annotations/"]["GET"]
    for fmt in ("json", "csv", "jsonl"):
        cache.clear()
        case = operation.Case(
            path_parameters={"id": world.studies["pairwise"]}, query={"format": fmt}
        )
        statuses = []
        for _ in range(3):
            response = case.call(headers=world.headers("researcher"))
            statuses.append(response.status_code)
        assert statuses == [200, 200, 429]
        assert int(response.headers["retry-after"][0]) > 0
        _validate(case, response)
    cache.clear()


@pytest.mark.django_db
def test_too_large_upload_is_documented(world, settings):
    settings.HUMEVAL_IMPORT_MAX_BYTES = 64
    cache.clear()
    operation = schema["/api/studies/{id}/ratings/"]["POST"]
    case = operation.Case(
        path_parameters={"id": world.studies["pairwise"]},
        body={"file": RATINGS.encode() * 2, "judge": "big"},
        media_type="multipart/form-data",
    )
    response = case.call(headers=world.headers("researcher"))
    assert response.status_code == 413, response.text
    assert response.json()["errors"]
    _validate(case, response)


@pytest.mark.django_db
def test_wrong_media_type_is_documented(world):
    cache.clear()
    operation = schema["/api/studies/{id}/ratings/"]["POST"]
    case = operation.Case(path_parameters={"id": world.studies["pairwise"]})
    response = case.call(
        headers={**world.headers("researcher"), "Content-Type": "application/json"},
        data=b'{"file": "x"}',
    )
    assert response.status_code == 415, response.text
    _validate(case, response)


@pytest.mark.django_db
def test_session_without_csrf_token_is_documented(world):
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(pk=world.users["researcher"]))
    session = client.cookies["sessionid"].value
    cache.clear()
    operation = schema["/api/studies/{id}/ratings/"]["POST"]
    case = operation.Case(
        path_parameters={"id": world.studies["pairwise"]},
        body={"file": RATINGS.encode(), "judge": "csrf"},
        media_type="multipart/form-data",
    )
    response = case.call(cookies={"sessionid": session})
    assert response.status_code == 403, response.text
    assert "CSRF" in response.json()["detail"]
    _validate(case, response)


@pytest.mark.django_db
def test_invalid_filter_answers_an_error_in_csv_not_a_label_row(world):
    cache.clear()
    operation = schema["/api/studies/{id}/annotations/"]["GET"]
    case = operation.Case(
        path_parameters={"id": world.studies["pairwise"]},
        query={"format": "csv", "pair": "s1", "flagged": "maybe"},
    )
    response = case.call(headers=world.headers("researcher"))
    assert response.status_code == 400
    assert response.text.splitlines()[0] == "error"
    assert "annotation_id" not in response.text
    case = operation.Case(
        path_parameters={"id": world.studies["pairwise"]},
        query={"format": "jsonl", "submitted_after": "2025-01-01T00:00:00+23:30"},
    )
    response = case.call(headers=world.headers("researcher"))
    assert response.status_code == 200
    assert response.text.count("\n") == len(response.text.splitlines())
    assert response.headers["content-type"][0].startswith("application/jsonl")


#: Cursors no `next` link holds (fuzzing rarely builds valid base64 of a bad position):
#: each must answer the documented JSON 404, never a 5xx.
CRAFTED_CURSORS = [
    "cD1hYmM=",  # p=abc
    "cD0=",  # p= (empty)
    "cD0xLjU=",  # p=1.5
    "cD05OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5",  # p=9…9 (beyond 64 bits)
    "bz0tMSZwPTE=",  # o=-1&p=1
    "cj14",  # r=x
    "cD1hYmM",  # p=abc without padding
    "//79",  # bytes that are not ASCII
]


@pytest.mark.django_db
@pytest.mark.parametrize("cursor", CRAFTED_CURSORS)
def test_a_crafted_cursor_answers_the_documented_404(world, cursor):
    cache.clear()
    operation = schema["/api/studies/{id}/annotations/"]["GET"]
    for fmt in ("json", "csv"):
        case = operation.Case(
            path_parameters={"id": world.studies["pairwise"]},
            query={"cursor": cursor, "format": fmt},
        )
        response = case.call(headers=world.headers("researcher"))
        assert response.status_code == 404, response.text
        if fmt == "json":
            assert response.json() == {"detail": "Invalid cursor"}
        _validate(case, response)


@pytest.mark.django_db
def test_an_unsupported_format_is_a_documented_406(world):
    cache.clear()
    operation = schema["/api/studies/{id}/annotations/"]["GET"]
    case = operation.Case(
        path_parameters={"id": world.studies["pairwise"]}, query={"format": "xml"}
    )
    response = case.call(headers=world.headers("researcher"))
    assert response.status_code == 406
    assert response.json()["detail"] == (
        "Unsupported format 'xml'; supported formats: json, jsonl, csv."
    )
    case.validate_response(response, checks=ALL_CHECKS)


def test_the_researcher_got_real_answers_from_every_operation():
    """The fuzzing reached the data: every operation it ran as the researcher succeeded at
    least once (a run of only errors would prove little)."""
    print("SEEN", {k: sorted(v) for k, v in SEEN.items()}, "worker models", FITS)
    ran = {op for identity, op in SEEN if identity == "researcher"}
    if not ran:
        pytest.skip("the fuzzing tests did not run in this session")
    # the largest valid bootstrap size was asked, accepted and (capped) computed
    assert MAX_N_BOOT in CALLS and max(CALLS) == MAX_N_BOOT
    failed = sorted(op for op in ran if not any(200 <= s < 300 for s in SEEN["researcher", op]))
    assert not failed, f"never a 2xx as the researcher: {failed}"
