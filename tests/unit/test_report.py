"""The study report from the database: selectors, page, API, ``manage.py analyze`` and the
round trip through ``export_labels`` and ``python -m analysis report``."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analysis import agreement, selectors
from analysis.__main__ import main as cli_main
from analysis.aggregation import soft_vote
from analysis.pairwise import pairwise_win_rates
from annotator import services
from annotator.models import Annotation, Item, Participation
from tests.conftest import active_markup, bundle, make_superuser, pairwise_bundle
from tests.leasing import next_lease

HOSTILE = "<script>alert(1)</script>"
N_BOOT = 200


def annotate(study, workers=("w1", "w2", "w3"), seed=0, likert=None) -> None:
    """Every worker labels until nothing is left; answers drawn with a fixed seed."""
    rng = random.Random(seed)
    for name in workers:
        part = services.participation_enter(study=study, platform="link", external_id=name)
        while (a := next_lease(participation=part)) is not None:
            if likert is None:
                answer = rng.choices(["left", "right", "tie"], weights=[5, 3, 2])[0]
                services.annotation_submit(
                    annotator=part.annotator, token=a.token, data={"answer": answer}
                )
            else:
                services.annotation_submit(
                    annotator=part.annotator, token=a.token, data={"scores": likert(rng)}
                )


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


JUDGE_PAIRWISE = "\n".join(
    json.dumps(r)
    for r in [
        {"judge": "gpt", "input_id": f"in{i}", "system": s, "system_b": t, "label": lab}
        for i in range(3)
        for (s, t), lab in zip(
            [("s1", "s2"), ("s3", "s1"), ("s3", "s2")],  # two stored against the items' order
            ["A", "B", "tie"] if i % 2 else ["s2", "A", "B"],
            strict=True,
        )
    ]
    + [
        {"judge": "bleu", "input_id": f"in{i}", "system": s, "score": (i * 7 + k) % 5 / 10}
        for i in range(3)
        for k, s in enumerate(("s1", "s2", "s3"))
    ]
).encode()


@pytest.fixture
def researcher(db):
    return User.objects.create_user("res", password="x" * 12)


@pytest.fixture
def pairwise(make_study, researcher):
    study = make_study(pairwise_bundle(n_inputs=3, systems=("s1", "s2", "s3")), redundancy=3)
    study.researchers.add(researcher)
    annotate(study)
    services.judge_ratings_import(study, JUDGE_PAIRWISE, filename="judges.jsonl")
    return study


def comparable(report: dict) -> list[dict]:
    """The figures of a report, without what names its origin (title, source, notes) and
    the style-controlled ranking (it needs the outputs' texts, which an export lacks)."""
    drop = {"title", "notes", "labels_inferred", "style"}
    return [{k: v for k, v in p.items() if k not in drop} for p in report["properties"]]


# --------------------------------------------------------------------------------------------


def test_report_figures_equal_the_core_on_the_study_frames(pairwise):
    report = selectors.study_report(pairwise, n_boot=N_BOOT)
    data = selectors.study_dataset(pairwise)
    ann = data.annotations
    assert len(ann) == 27 and not ann["flagged"].any()
    prop = report["properties"][0]
    assert prop["labels"] == ["A", "B", "tie"]
    alpha = agreement.krippendorff_alpha(ann, level="nominal", labels=prop["labels"], n_boot=N_BOOT)
    got = prop["reliability"][0]
    assert (got["metric"], got["level"]) == ("krippendorff_alpha", "nominal")
    assert got["value"] == pytest.approx(alpha.value) and got["high"] == pytest.approx(alpha.high)
    rates = pairwise_win_rates(soft_vote(ann), data.items, n_boot=N_BOOT)
    assert [r["expected_win_rate"] for r in prop["pairwise"]["pairs"]] == pytest.approx(
        rates["expected_win_rate"].tolist()
    )
    assert {j["judge"] for j in prop["judges"]} == {"gpt", "bleu"}
    assert prop["position_bias"]["overall"]["n"] == 27 - prop["label_distribution"][2]["count"]
    from statsmodels.stats.multitest import multipletests

    workers = prop["position_bias"]["annotators"]
    tested = [w for w in workers if w["p_value"] is not None]
    assert len(tested) >= 2
    holm = multipletests([w["p_value"] for w in tested], method="holm")[1]
    assert [w["p_holm"] for w in tested] == pytest.approx(holm.tolist(), abs=1e-12)
    assert prop["prioritisation"]["reason"] == "no input has a priority score"


def test_judge_preference_in_reverse_orientation_is_flipped(make_study):
    study = make_study(pairwise_bundle(n_inputs=2, systems=("alpha", "beta")))
    item = Item.objects.get(study=study, input__external_id="in0")
    assert [o.system.name for o in item.output_list()] == ["alpha", "beta"]
    ratings = (
        b'{"judge": "j", "input_id": "in0", "system": "beta", "system_b": "alpha", "label": "A"}\n'
        b'{"judge": "j", "input_id": "in1", "system": "alpha", "system_b": "beta", "label": "A"}\n'
        b'{"judge": "k", "input_id": "in0", "system": "beta", "system_b": "alpha", '
        b'"label": "beta"}\n'
    )
    services.judge_ratings_import(study, ratings, filename="r.jsonl")
    data = selectors.study_dataset(study)
    frame, notes = selectors.study_judges(study, data)
    got = {(r.judge, r.item): r.label for r in frame.itertuples()}
    in1 = Item.objects.get(study=study, input__external_id="in1").pk
    # "beta is better" stored as (beta, alpha) = A becomes B on the item whose A is alpha
    assert got == {("j", item.pk): "B", ("j", in1): "A", ("k", item.pk): "B"}
    assert notes == []


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_round_trip_gives_the_same_numbers(pairwise, tmp_path, capsys, fmt):
    labels = tmp_path / f"labels.{fmt}"
    judges = tmp_path / "judges.jsonl"
    judges.write_bytes(JUDGE_PAIRWISE)
    call_command("export_labels", pairwise.pk, format=fmt, output=str(labels))
    out = io.StringIO()
    call_command("analyze", pairwise.pk, "--json", "--n-boot", str(N_BOOT), stdout=out)
    from_db = json.loads(out.getvalue())
    capsys.readouterr()
    assert (
        cli_main(
            ["report", str(labels), "--judge", str(judges), "--json"] + ["--n-boot", str(N_BOOT)]
        )
        == 0
    )
    from_file = json.loads(capsys.readouterr().out)
    assert comparable(from_file) == comparable(from_db)
    assert from_file["counts"] == from_db["counts"]
    assert from_db["properties"][0]["judges"][0]["n_items"] == 9


def test_likert_round_trip_through_csv(make_study, tmp_path, capsys):
    study = make_study(
        bundle(
            [
                {"id": f"q{i}", "input": f"question {i}", "outputs": {"m1": f"a{i}", "m2": f"b{i}"}}
                for i in range(5)
            ],
            {
                "kind": "likert",
                "redundancy": 3,
                "criteria": [
                    {"name": "fluency", "label": "How fluent?", "scale": [1, 5]},
                    {"name": "safe", "label": "Is it safe?", "labels": ["yes", "no"]},
                ],
            },
        )
    )
    annotate(
        study,
        workers=("a", "b", "c"),
        likert=lambda rng: {"fluency": rng.randint(2, 5), "safe": rng.choice(["yes", "no"])},
    )
    ratings = "\n".join(
        json.dumps({"judge": "llm", "input_id": f"q{i}", "system": s, "criterion": c, **v})
        for i in range(5)
        for s in ("m1", "m2")
        for c, v in (("fluency", {"score": 1 + (i + len(s)) % 5}), ("safe", {"label": "yes"}))
    )
    services.judge_ratings_import(study, ratings.encode(), filename="r.jsonl")
    (tmp_path / "judge.jsonl").write_text(ratings)
    call_command("export_labels", study.pk, format="csv", output=str(tmp_path / "labels.csv"))
    out = io.StringIO()
    call_command("analyze", study.pk, "--json", "--n-boot", "100", stdout=out)
    from_db = json.loads(out.getvalue())
    args = ["report", str(tmp_path / "labels.csv"), "--judge", str(tmp_path / "judge.jsonl")]
    assert (
        cli_main(
            [
                *args,
                "--json",
                "--n-boot",
                "100",
                "--labels",
                "fluency=1:5",
                "--labels",
                "safe=yes,no",
            ]
        )
        == 0
    )
    from_file = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in from_db["properties"]] == ["fluency", "safe"]
    assert comparable(from_file) == comparable(from_db)
    fluency = from_db["properties"][0]
    assert fluency["level"] == "ordinal" and fluency["judges"][0]["judge"] == "llm"
    assert {r["system"] for r in fluency["likert"]["systems"]} == {"all", "m1", "m2"}
    assert from_db["properties"][1]["level"] == "nominal"


def test_flagged_labels_are_excluded_by_default_and_counted(pairwise):
    part = Participation.objects.get(study=pairwise, annotator__external_id="w2")
    services.participation_set_blocked(part, True)
    n_flagged = Annotation.objects.filter(study=pairwise, is_flagged=True).count()
    assert n_flagged > 0
    gold = Item.objects.filter(study=pairwise).first()
    Item.objects.filter(pk=gold.pk).update(is_gold=True)
    n_gold = Annotation.objects.filter(item=gold).count()
    n_gold_flagged = Annotation.objects.filter(item=gold, is_flagged=True).count()
    default = selectors.study_report(pairwise, n_boot=0)
    assert default["counts"]["flagged_excluded"] == n_flagged - n_gold_flagged
    assert default["counts"]["gold_excluded"] == n_gold
    assert default["counts"]["labels"] == 27 - n_flagged - n_gold + n_gold_flagged
    assert any("flagged label(s)" in note and "excluded" in note for note in default["notes"])
    included = selectors.study_report(pairwise, include_flagged=True, n_boot=0)
    assert included["counts"]["labels"] == 27 - n_gold
    assert included["counts"]["flagged_excluded"] == 0


def test_api_permissions_and_parameters(pairwise, researcher, make_study):
    url = f"/api/studies/{pairwise.pk}/report/"
    assert APIClient().get(url).status_code == 401
    stranger = User.objects.create_user("stranger", password="x" * 12)
    other = make_study(name="theirs")
    other.researchers.add(stranger)
    assert client_for(stranger).get(url).status_code == 404
    assert client_for(researcher).get(f"/api/studies/{other.pk}/report/").status_code == 404
    response = client_for(researcher).get(url, {"n_boot": N_BOOT, "threshold": 0.2})
    assert response.status_code == 200
    body = response.json()
    assert body["settings"]["threshold"] == 0.2
    ann = selectors.study_dataset(pairwise).annotations
    alpha = agreement.krippendorff_alpha(ann, labels=["A", "B", "tie"], n_boot=0)
    assert body["properties"][0]["reliability"][0]["value"] == pytest.approx(alpha.value)
    staff = make_superuser("staff")
    assert client_for(staff).get(url, {"n_boot": 0, "include_flagged": "true"}).status_code == 200
    assert client_for(staff).get(url, {"threshold": 2}).status_code == 400
    assert client_for(staff).get(url, {"n_boot": 10**6}).status_code == 400
    schema = client_for(staff).get("/api/schema/", {"format": "json"})
    assert "/api/studies/{id}/report/" in schema.json()["paths"]


def test_a_seed_beyond_32_bits_is_a_400_not_a_500(pairwise, researcher):
    """MACE (crowd-kit, numpy's RandomState) takes seeds below 2**32 only: the API refuses a
    larger one with a 400 instead of failing inside the report."""
    url = f"/api/studies/{pairwise.pk}/report/"
    client = client_for(researcher)
    query = {"n_boot": 0, "worker_models": "true"}
    assert client.get(url, {**query, "seed": 2**32 - 1}).status_code == 200
    response = client.get(url, {**query, "seed": 2**32})
    assert response.status_code == 400 and "seed" in response.json()


def test_page_renders_svg_and_escapes_hostile_names(make_study, researcher, client):
    study = make_study(pairwise_bundle(n_inputs=3, systems=(HOSTILE, "beta")), redundancy=2)
    study.researchers.add(researcher)
    annotate(study, workers=("w1", "w2"))
    url = f"/studies/{study.pk}/report/"
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    client.force_login(researcher)
    page = client.get(url, {"n_boot": 50})
    html = page.content.decode()
    assert page.status_code == 200
    assert "<svg" in html and active_markup(html) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and HOSTILE not in html
    assert "Krippendorff" in html
    assert client.get(url, {"threshold": "lots"}).status_code == 400
    stranger = User.objects.create_user("stranger", password="x" * 12)
    client.force_login(stranger)
    assert client.get(url).status_code == 404


def test_undefined_values_show_their_reason(make_study, researcher, client):
    study = make_study(pairwise_bundle(n_inputs=3), redundancy=1)
    study.researchers.add(researcher)
    annotate(study, workers=("only",))
    client.force_login(researcher)
    html = client.get(f"/studies/{study.pk}/report/", {"n_boot": 20}).content.decode()
    assert "undefined" in html and "no item has two or more labels" in html
    assert "NaN" not in html and "nan" not in html.replace("nanc", "")
    out = io.StringIO()
    call_command("analyze", study.pk, "--n-boot", "20", stdout=out)
    text = out.getvalue()
    assert "Krippendorff's alpha (nominal)   undefined" in text
    assert "no item has two or more labels" in text
    empty = make_study(name="nothing yet")
    report = selectors.study_report(empty, n_boot=0)
    assert report["properties"][0]["empty"] == "no human labels for this property"
    assert "the study has no labels yet" in report["notes"]


def test_report_options_say_what_they_do(pairwise, researcher, client):
    """The interval option is a labelled checkbox with help text, and ticking it adds a row
    for Krippendorff's alpha at the interval level (undefined here: pairwise labels are not
    numbers, which the row says)."""
    client.force_login(researcher)
    url = f"/studies/{pairwise.pk}/report/"
    html = client.get(url, {"n_boot": 0}).content.decode()
    label = re.search(r'<label for="id_interval">(.*?)</label>', html, re.S).group(1)
    assert 'type="checkbox"' in label and 'aria-describedby="id_interval_helptext"' in label
    assert "Also compute Krippendorff&#x27;s alpha at the interval level" in label
    help_text = re.search(r'<small class="help" id="id_interval_helptext">(.*?)</small>', html)
    assert "numeric labels" in help_text.group(1)
    for name in ("threshold", "n_boot", "include_flagged"):
        assert f'id="id_{name}_helptext"' in html
    plain = selectors.study_report(pairwise, n_boot=0)
    with_interval = selectors.study_report(pairwise, n_boot=0, interval=True)
    levels = [
        [r.get("level") for r in p["reliability"] if r["metric"] == "krippendorff_alpha"]
        for p in (plain["properties"][0], with_interval["properties"][0])
    ]
    assert levels[0] == ["nominal"] and levels[1] == ["nominal", "interval"]
    ticked = client.get(url, {"n_boot": 0, "interval": "on"}).content.decode()
    assert "the interval level needs numeric labels" in ticked.split('class="hv-report"')[1]


def test_fleiss_is_defined_for_unequal_label_counts(make_study, researcher, client):
    """Items with different numbers of labels get Gwet's generalised Fleiss' kappa (it used to
    be undefined), the same value as the analysis core, shown on the page."""
    study = make_study(pairwise_bundle(n_inputs=3), redundancy=3)
    study.researchers.add(researcher)
    annotate(study, workers=("w1", "w2"))
    part = services.participation_enter(study=study, platform="link", external_id="w3")
    a = next_lease(participation=part)  # a third label on one item only
    services.annotation_submit(annotator=part.annotator, token=a.token, data={"answer": "left"})
    report = selectors.study_report(study, n_boot=0)
    fleiss = next(
        r for r in report["properties"][0]["reliability"] if r["metric"] == "fleiss_kappa"
    )
    dataset = selectors.study_dataset(study)
    prop = dataset.properties[0]
    ann = dataset.annotations
    if "property" in ann.columns:
        ann = ann[ann["property"] == prop.name]
    expected = agreement.fleiss_kappa(ann, labels=list(prop.labels), n_boot=0)
    assert fleiss["value"] == pytest.approx(expected.value)
    assert "Gwet 2014" in fleiss["source"]
    client.force_login(researcher)
    html = client.get(f"/studies/{study.pk}/report/", {"n_boot": 0}).content.decode()
    assert "Gwet 2014" in html


def test_api_and_page_carry_the_ranking_per_property(pairwise, researcher, client):
    """The report API's ``ranking``: one row per system with score, interval and rank, as
    the pure report computes it from the study's frames; the page draws it."""
    from analysis.report import build_report

    body = client_for(researcher).get(f"/api/studies/{pairwise.pk}/report/", {"n_boot": 50})
    prop = body.json()["properties"][0]
    assert {r["system"] for r in prop["ranking"]} == {"s1", "s2", "s3"}
    for row in prop["ranking"]:
        assert set(row) >= {"system", "score", "low", "high", "rank"}
        # display orders are drawn per assignment: a system may happen never to lose, and
        # then its score is undefined, with the reason said
        assert row["rank"] >= 1 if row["score"] is not None else row["reason"]
    assert prop["ranking_method"]["n_inputs"] == 3 and prop["ranking_method"]["n_boot"] == 50
    data = selectors.study_dataset(pairwise)
    props = selectors.study_properties(pairwise)
    pure = build_report(data.annotations, props, items=data.items, n_boot=50)
    assert prop["ranking"] == pure["properties"][0]["ranking"]
    client.force_login(researcher)
    html = client.get(f"/studies/{pairwise.pk}/report/", {"n_boot": 50}).content.decode()
    assert "Ranking (Bradley–Terry)" in html and active_markup(html) == []
