"""The protocol dashboard and its JSON: pair matrix, rounds, partial order; permissions."""

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import services
from protocol.charts import partial_order_svg
from protocol.models import ProtocolConfig
from protocol.selectors import partial_order
from tests.conftest import active_markup
from tests.protocol_sim import adaptive_bundle, run_workers


@pytest.fixture
def finished_study(transactional_db):
    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    run_workers(study)
    return study


def test_partial_order_layers_follow_the_wins(finished_study):
    order = partial_order(finished_study)
    layer = {s["name"]: s["layer"] for s in order["systems"]}
    wins = {(e["winner"], e["loser"]) for e in order["edges"]}
    assert ("s1", "s3") in wins
    for winner, loser in wins:
        assert layer[winner] < layer[loser]
    assert layer["s1"] == 0


def test_api_matches_database_and_is_per_study(finished_study):
    owner = User.objects.create_user("o", password="x" * 12)
    finished_study.researchers.add(owner)
    stranger = User.objects.create_user("s", password="x" * 12)
    url = f"/api/studies/{finished_study.pk}/protocol/"
    assert APIClient().get(url).status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=stranger).key}")
    assert client.get(url).status_code == 404
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=owner).key}")
    data = client.get(url).json()
    assert len(data["pairs"]) == 6 and data["spent"] == data["committed"]
    assert [r["number"] for r in data["rounds"]] == list(range(1, len(data["rounds"]) + 1))
    assert data["rounds"][-1]["spent_so_far"] == data["spent"]
    s1s3 = next(p for p in data["pairs"] if (p["system_a"], p["system_b"]) == ("s1", "s3"))
    assert s1s3["state"] == "decided" and s1s3["winner"] == "s1" and s1s3["theta"] > 0.975
    # decided before its 40 inputs were used: Algorithm 1 significant now and the same outcome
    # predicted on all inputs with at least the calibrated level
    predicted = {p["outcome"]: p["probability"] for p in s1s3["predicted"]}
    assert set(predicted) == {"s1 wins", "s3 wins", "undecided"}
    assert sum(predicted.values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(s1s3["human_counts"]) < 40
    level = ProtocolConfig.objects.get(study=finished_study).decision_level
    assert 0.9 < level < 1 and predicted["s1 wins"] >= level - 1e-4
    json.dumps(data)


def test_dashboard_page_needs_login_and_draws_svg(finished_study):
    url = f"/studies/{finished_study.pk}/protocol/"
    assert Client().get(url).status_code == 302  # to the login page
    User.objects.create_superuser("boss", "b@example.org", "x" * 12)
    client = Client()
    client.login(username="boss", password="x" * 12)
    page = client.get(url).content.decode()
    assert page.count("<svg") == 2 and "Partial order" in page and "θ=" in page
    assert "on all inputs: s1 wins" in page
    assert active_markup(page) == []


def test_svg_escapes_system_names():
    evil = "<script>alert(1)</script>"
    svg = partial_order_svg(
        {
            "systems": [{"name": evil, "layer": 0}, {"name": "b", "layer": 1}],
            "edges": [{"winner": evil, "loser": "b"}],
        }
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg
