"""Export API: authentication, per-study permission, filters, formats, cursor pages, import."""

import base64
import csv
import io
import json

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import services
from annotator.models import Annotation, Study
from tests.conftest import bundle, make_superuser, pairwise_bundle
from tests.leasing import next_lease


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def researcher(db):
    return User.objects.create_user("res", password="x" * 12)


@pytest.fixture
def annotated(make_study, researcher):
    """A 3-system study with 6 labels from two workers; the researcher is named on it."""
    study = make_study(pairwise_bundle(n_inputs=2, systems=("s1", "s2", "s3")))
    study.researchers.add(researcher)
    for name in ("w1", "w2"):
        w = services.participation_enter(study=study, platform="link", external_id=name)
        while (a := next_lease(participation=w)) is not None:
            services.annotation_submit(
                annotator=w.annotator, token=a.token, data={"answer": "left"}, time_spent_ms=5
            )
    return study


def test_anonymous_and_wrong_token_are_refused(annotated):
    assert APIClient().get("/api/studies/").status_code == 401
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert bad.get(f"/api/studies/{annotated.pk}/annotations/").status_code == 401


def test_researchers_see_only_their_studies(annotated, researcher, make_study):
    other = make_study(name="someone else's")
    stranger = User.objects.create_user("stranger", password="x" * 12)
    mine = client_for(researcher).get("/api/studies/").json()
    assert [s["id"] for s in mine["results"]] == [annotated.pk]
    assert client_for(stranger).get("/api/studies/").json()["results"] == []
    assert client_for(stranger).get(f"/api/studies/{annotated.pk}/annotations/").status_code == 404
    assert client_for(researcher).get(f"/api/studies/{other.pk}/").status_code == 404
    # being staff grants no study; a superuser sees every study
    staff = User.objects.create_user("staff", password="x" * 12, is_staff=True)
    assert client_for(staff).get("/api/studies/").json()["results"] == []
    assert client_for(staff).get(f"/api/studies/{other.pk}/annotations/").status_code == 404
    root = make_superuser("root")
    assert {s["id"] for s in client_for(root).get("/api/studies/").json()["results"]} == {
        annotated.pk,
        other.pk,
    }


def test_labels_carry_provenance_and_normalised_answers(annotated, researcher):
    rows = client_for(researcher).get(f"/api/studies/{annotated.pk}/annotations/").json()["results"]
    assert len(rows) == 12  # 2 inputs × 3 pairs × redundancy 2
    for row in rows:
        annotation = Annotation.objects.select_related("assignment").get(pk=row["annotation_id"])
        left_is_a = annotation.assignment.display_order == [0, 1]
        assert row["left_system"] == (row["system_a"] if left_is_a else row["system_b"])
        assert row["raw_answer"] == "left"
        assert row["label"] == ("A" if left_is_a else "B")
        assert row["preferred_system"] == row["left_system"]
        assert row["study_config_version"] == 1
        assert row["annotator"] == annotation.annotator.pseudonym
        assert row["time_spent_ms"] is not None and row["source"] == "platform"
        assert set(row) >= {"item_id", "input_id", "round", "is_gold", "submitted_at"}


def test_filters(annotated, researcher):
    client = client_for(researcher)
    url = f"/api/studies/{annotated.pk}/annotations/"
    pair = client.get(url, {"pair": "s3,s1"}).json()["results"]
    assert len(pair) == 4 and {(r["system_a"], r["system_b"]) for r in pair} == {("s1", "s3")}
    assert len(client.get(url, {"system": "s2"}).json()["results"]) == 8
    someone = Annotation.objects.filter(study=annotated).first().annotator.pseudonym
    assert len(client.get(url, {"annotator": someone}).json()["results"]) == 6
    assert client.get(url, {"submitted_after": "2999-01-01T00:00:00Z"}).json()["results"] == []
    assert client.get(url, {"round": 3}).json()["results"] == []
    assert client.get(url, {"pair": "s1"}).status_code == 400
    assert client.get(url, {"submitted_after": "yesterday"}).status_code == 400


def test_cursor_pagination_visits_every_label_once(annotated, researcher):
    client = client_for(researcher)
    url, seen = f"/api/studies/{annotated.pk}/annotations/?page_size=5", []
    while url:
        page = client.get(url).json()
        seen += [r["annotation_id"] for r in page["results"]]
        url = page["next"]
    assert sorted(seen) == sorted(Annotation.objects.values_list("id", flat=True))
    assert len(seen) == len(set(seen)) == 12


def _cursor(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: Cursors no `next` link ever holds: bad base64, non-ASCII, positions that are not label ids
#: (text, empty, fractional, beyond 64 bits), bad offsets and directions, a huge offset.
CRAFTED_CURSORS = [
    _cursor("p=abc"),
    _cursor("p="),
    _cursor("p=1.5"),
    _cursor("p=1e3"),
    _cursor("p=" + "9" * 30),
    _cursor("p=-" + "9" * 30),
    _cursor("p=9223372036854775808"),
    _cursor("p=%00"),
    _cursor("o=-1&p=1"),
    _cursor("o=x"),
    _cursor("r=2x"),
    _cursor("r="),
    "!!!not base64!!!",
    "cD1hYmM",  # padding missing
    base64.b64encode("p=é".encode()).decode(),
    base64.b64encode(b"\xff\xfe").decode(),
    "",
]


@pytest.mark.parametrize("cursor", CRAFTED_CURSORS)
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_malformed_cursor_answers_404_not_500(annotated, researcher, cursor, fmt):
    url = f"/api/studies/{annotated.pk}/annotations/"
    response = client_for(researcher).get(url, {"cursor": cursor, "format": fmt})
    if cursor == "":  # an empty cursor is no cursor: the first page
        assert response.status_code == 200
        return
    assert response.status_code == 404, response.content
    if fmt == "json":
        assert response.json() == {"detail": "Invalid cursor"}


def test_odd_but_valid_cursors_still_page(annotated, researcher):
    """A huge offset is capped (DRF's offset cutoff); a far position gives an empty page."""
    client, url = client_for(researcher), f"/api/studies/{annotated.pk}/annotations/"
    assert client.get(url, {"cursor": _cursor("o=99999999999&p=1")}).status_code == 200
    far = client.get(url, {"cursor": _cursor("p=9223372036854775807")})
    assert far.status_code == 200 and far.json()["results"] == []
    back = client.get(url, {"cursor": _cursor("r=1&p=-9223372036854775808")})
    assert back.status_code == 200 and back.json()["results"] == []


@pytest.mark.parametrize(
    "page", ["abc", "", "0", "-1", "1.5", "1e3", "last", "9" * 40, "\u0661", " 1", "2"]
)
def test_a_malformed_or_missing_page_of_the_study_list_answers_404_json(researcher, page):
    response = client_for(researcher).get("/api/studies/", {"page": page})
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid page."}


@pytest.mark.parametrize(
    "query",
    [
        {"round": "x"},
        {"round": "9" * 40},
        {"round": ""},
        {"source": "crowd"},
        {"source": ""},
        {"flagged": "yes"},
        {"submitted_before": "2025-13-01T00:00:00Z"},
        {"submitted_after": "9999-12-31T23:59:59-23:59"},
        {"pair": ","},
        {"system": "\x00"},
        {"page_size": "0"},
        {"page_size": "-5"},
        {"page_size": "9" * 40},
    ],
)
def test_a_bad_filter_never_answers_5xx(annotated, researcher, query):
    response = client_for(researcher).get(f"/api/studies/{annotated.pk}/annotations/", query)
    assert response.status_code < 500, response.content
    assert response["Content-Type"].startswith("application/json")
    if response.status_code != 200:
        assert response.status_code == 400 and isinstance(response.json(), dict)


def test_source_filter_takes_platform_or_import(annotated, researcher):
    client, url = client_for(researcher), f"/api/studies/{annotated.pk}/annotations/"
    assert len(client.get(url, {"source": "platform"}).json()["results"]) == 12
    assert client.get(url, {"source": "import"}).json()["results"] == []
    parameters = client.get("/api/schema/", {"format": "json"}).json()["paths"][
        "/api/studies/{id}/annotations/"
    ]["get"]["parameters"]
    source = next(p for p in parameters if p["name"] == "source")
    assert sorted(source["schema"]["enum"]) == ["import", "platform"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/studies/{pk}/annotations/",
        "/api/studies/",
        "/api/studies/{pk}/",
        "/api/studies/{pk}/report/",
        "/api/studies/{pk}/protocol/",
    ],
)
def test_an_unsupported_format_answers_406_naming_the_supported_ones(annotated, researcher, url):
    response = client_for(researcher).get(url.format(pk=annotated.pk), {"format": "xml"})
    assert response.status_code == 406
    assert response["Content-Type"].startswith("application/json")
    detail = response.json()["detail"]
    assert detail.startswith("Unsupported format 'xml'; supported formats: json")
    if "annotations" in url:
        assert detail == "Unsupported format 'xml'; supported formats: json, jsonl, csv."


def test_jsonl_and_csv_formats_with_link_header(annotated, researcher):
    client = client_for(researcher)
    url = f"/api/studies/{annotated.pk}/annotations/"
    jsonl = client.get(url, {"format": "jsonl", "page_size": 10})
    assert jsonl["Content-Type"].startswith("application/jsonl")
    lines = [json.loads(line) for line in jsonl.content.decode().splitlines()]
    assert len(lines) == 10 and 'rel="next"' in jsonl["Link"]
    rest = client.get(jsonl["Link"].split(";")[0].strip("<>"))
    assert len(rest.content.decode().splitlines()) == 2
    response = client.get(url, {"format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 12 and rows[0]["label"] in {"A", "B"}
    assert "Link" not in response


def test_csv_neutralises_formula_cells(make_study, researcher):
    study = make_study(
        bundle(
            [{"id": '=HYPERLINK("http://x")', "input": "q", "outputs": {"+a": "x", "@b": "y"}}],
            {"kind": "pairwise", "redundancy": 1},
        )
    )
    study.researchers.add(researcher)
    w = services.participation_enter(study=study, platform="link", external_id="w")
    a = next_lease(participation=w)
    services.annotation_submit(annotator=w.annotator, token=a.token, data={"answer": "tie"})
    body = (
        client_for(researcher)
        .get(f"/api/studies/{study.pk}/annotations/", {"format": "csv"})
        .content.decode()
    )
    row = next(csv.DictReader(io.StringIO(body)))
    assert row["input_id"] == '\'=HYPERLINK("http://x")'
    assert {row["system_a"], row["system_b"]} == {"'+a", "'@b"}


def test_import_endpoint_needs_permission_and_reports_errors(researcher):
    client = client_for(researcher)
    upload = io.BytesIO(pairwise_bundle())
    upload.name = "s.jsonl"
    assert (
        client.post("/api/studies/import/", {"file": upload}, format="multipart").status_code == 403
    )
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    researcher = User.objects.get(pk=researcher.pk)
    client = client_for(researcher)
    bad = io.BytesIO(b'{"id": 1, "outputs": {}}\n')
    bad.name = "bad.jsonl"
    response = client.post("/api/studies/import/", {"file": bad}, format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"] == [  # every fault at once: the record and the options
        "line 1 (input '1'): missing 'outputs' (an object mapping system name to output text "
        "or conversation)",
        "study: 'kind' must be one of pairwise, likert, ranking, error_spans (got None)",
    ]
    assert Study.objects.count() == 0
    upload.seek(0)
    response = client.post(
        "/api/studies/import/", {"file": upload, "name": "via api"}, format="multipart"
    )
    assert response.status_code == 201
    study = Study.objects.get(pk=response.json()["id"])
    assert study.name == "via api" and researcher in study.researchers.all()


def test_openapi_schema_and_docs(researcher):
    client = client_for(researcher)
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/studies/", "/api/studies/{id}/annotations/", "/api/studies/import/"} <= set(paths)
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    assert b"cdn.jsdelivr" not in docs.content  # served locally: no internet needed


def test_export_labels_command_matches_api(annotated, researcher, tmp_path):
    from django.core.management import call_command

    out = tmp_path / "labels.jsonl"
    call_command("export_labels", str(annotated.pk), "--format", "jsonl", "-o", str(out))
    cli = [json.loads(line) for line in out.read_text().splitlines()]
    api = client_for(researcher).get(f"/api/studies/{annotated.pk}/annotations/").json()["results"]
    assert cli == api
    call_command(
        "export_labels", str(annotated.pk), "--format", "json", "--pair", "s1,s2", "-o", str(out)
    )
    assert {(r["system_a"], r["system_b"]) for r in json.loads(out.read_text())} == {("s1", "s2")}
    call_command("export_labels", str(annotated.pk), "--format", "csv", "-o", str(out))
    assert len(list(csv.DictReader(out.open()))) == 12
