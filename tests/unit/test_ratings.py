"""Judge and metric ratings: the three shapes, whole-file rejection, CLI and API."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import services
from annotator.errors import ImportRejected
from annotator.models import JudgeRating
from tests.conftest import pairwise_bundle

GOOD = (
    b'{"judge": "comet", "input_id": "in0", "system": "alpha", "score": 0.5}\n'
    b'{"judge": "comet", "input_id": "in0", "system": "beta", "score": -1e-3}\n'
    b'{"judge": "llm", "input_id": "in1", "system": "alpha", "system_b": "beta", "label": "beta"}\n'
    b'{"judge": "llm", "input_id": "in2", "system": "beta", "system_b": "alpha", "label": "tie"}\n'
    b'{"judge": "llm", "input_id": "in2", "system": "beta", "criterion": "safe", "label": "yes"}\n'
)


@pytest.fixture
def study(make_study):
    return make_study(pairwise_bundle(n_inputs=3))


def test_three_shapes_are_stored(study):
    assert services.judge_ratings_import(study, GOOD, filename="r.jsonl") == 5
    rows = list(
        JudgeRating.objects.order_by("id").values_list(
            "judge",
            "input__external_id",
            "system__name",
            "other_system__name",
            "criterion",
            "score",
            "label",
        )
    )
    assert rows == [
        ("comet", "in0", "alpha", None, "", 0.5, ""),
        ("comet", "in0", "beta", None, "", -0.001, ""),
        ("llm", "in1", "alpha", "beta", "", None, "B"),
        ("llm", "in2", "beta", "alpha", "", None, "tie"),
        ("llm", "in2", "beta", None, "safe", None, "yes"),
    ]


def test_csv_with_default_judge(study):
    data = b"input_id,system,system_b,score,label\nin0,alpha,,0.25,\nin0,alpha,beta,,A\n"
    assert services.judge_ratings_import(study, data, filename="r.csv", judge="bleu") == 2
    assert set(JudgeRating.objects.values_list("judge", flat=True)) == {"bleu"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"input_id": "in0", "system": "alpha", "score": 1}\n', "line 1: no 'judge'"),
        (
            b'{"judge": "j", "input_id": "zz", "system": "alpha", "score": 1}\n',
            "line 1: unknown input 'zz'",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "gamma", "score": 1}\n',
            "line 1: unknown system 'gamma'",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": "high"}\n',
            "line 1: score 'high' is not a number",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": NaN}\n',
            "line 1: score must be a finite number",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "system_b": "beta", '
            b'"label": "better"}\n',
            "line 1: a preference 'label' is A, B or tie (got 'better')",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "alpha"}\n',
            "line 1: give a 'score', or 'system_b' and a preference 'label'",
        ),
        (
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": 1}\n'
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": 2}\n',
            "line 2: the same rating again (first on line 1)",
        ),
        (b"{oops\n", "line 1: not valid JSON"),
    ],
)
def test_bad_rating_files_store_nothing(study, data, message):
    with pytest.raises(ImportRejected) as info:
        services.judge_ratings_import(study, data, filename="r.jsonl")
    assert any(e.startswith(message) for e in info.value.errors), info.value.errors
    assert JudgeRating.objects.count() == 0


def test_reimport_is_refused_whole(study):
    services.judge_ratings_import(study, GOOD, filename="r.jsonl")
    with pytest.raises(ImportRejected, match="already stored for judge 'comet'"):
        services.judge_ratings_import(study, GOOD, filename="r.jsonl")
    assert JudgeRating.objects.count() == 5


def test_command_and_api(study, tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(GOOD)
    call_command("import_ratings", str(study.pk), str(path))
    assert capsys.readouterr().out.strip() == "5 ratings imported"
    with pytest.raises(CommandError, match="already stored"):
        call_command("import_ratings", str(study.pk), str(path))
    user = User.objects.create_user("r", password="x" * 12)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    upload = io.BytesIO(b"input_id,system,score\nin1,beta,3\n")
    upload.name = "m.csv"
    url = f"/api/studies/{study.pk}/ratings/"
    assert client.post(url, {"file": upload, "judge": "m"}, format="multipart").status_code == 404
    study.researchers.add(user)
    upload.seek(0)
    response = client.post(url, {"file": upload, "judge": "m"}, format="multipart")
    assert (response.status_code, response.json()) == (201, {"imported": 1})
