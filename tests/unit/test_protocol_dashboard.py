"""The protocol dashboard and its JSON: pair matrix, rounds, partial order; permissions."""

import json
import re

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import services
from protocol.charts import budget_chart, partial_order_chart
from protocol.models import ProtocolConfig
from protocol.outcome import pair_status, protocol_outcome, views_compared
from protocol.selectors import dashboard, partial_order, ranking, ranking_comparisons
from tests.conftest import active_markup, boss_client
from tests.protocol_sim import adaptive_bundle, run_workers

STOPPED = "stopped early: a decision was unlikely even with more labels"


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
    # the pair's level lies between the study level and the lone-pair level, both calibrated
    # and stored when round 1 was decided
    config = ProtocolConfig.objects.get(study=finished_study)
    lone, level = config.lone_decision_level, config.decision_level
    assert 0.9 < lone < 1 and 0.5 <= level <= 1 and 0 < config.futility_threshold <= 0.2
    assert predicted["s1 wins"] >= min(level, lone) - 1e-4
    json.dumps(data)


def test_dashboard_page_needs_login_and_draws_svg(finished_study):
    url = f"/studies/{finished_study.pk}/protocol/"
    assert Client().get(url).status_code == 302  # to the login page
    client = boss_client()
    page = client.get(url).content.decode()
    assert page.count("<svg") == 3 and "Partial order" in page and "θ = P(" in page
    assert "if every input were labelled: s1 wins" in page
    assert active_markup(page) == []


def chart_svg(chart: dict) -> str:
    """The chart as the dashboard writes it (the shared partial charts/chart.svg.html)."""
    return render_to_string("charts/chart.svg.html", {"chart": chart})


def test_svg_escapes_system_names():
    evil = "<script>alert(1)</script>"
    svg = chart_svg(
        partial_order_chart(
            {
                "systems": [{"name": evil, "layer": 0}, {"name": "b", "layer": 1}],
                "edges": [{"winner": evil, "loser": "b"}],
            }
        )
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_static_study_gets_a_page_saying_it_is_not_adaptive(transactional_db):
    study = services.study_import(
        adaptive_bundle(n_inputs=7, systems=("s1", "s2"), collection="all"), filename="s.jsonl"
    )
    assert run_workers(study) == 7
    response = boss_client().get(f"/studies/{study.pk}/protocol/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "not an adaptive study" in page and "Collected 0 annotations" not in page
    count = re.search(r'<p id="label-count">(.*?)</p>', page, re.S).group(1)
    assert re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", count)).startswith(
        "It has 7 labels: 7 collected on the platform from 1 worker and 0 imported, on 7 items"
    )
    assert f'href="/studies/{study.pk}/report/"' in page
    assert f'href="/api/studies/{study.pk}/annotations/?format=csv"' in page
    assert "<svg" not in page


def test_finished_adaptive_study_says_done_and_what_next(finished_study):
    data = dashboard(finished_study)
    outcome = protocol_outcome(data)
    assert outcome is not None
    decided = [p for p in data["pairs"] if p["state"] == "decided"]
    assert len(outcome["wins"]) == len(decided) > 0
    assert {"winner": "s1", "loser": "s3"} in outcome["wins"]
    assert len(outcome["wins"]) + len(outcome["equivalent"]) + len(outcome["undecided"]) == 6
    page = boss_client().get(f"/studies/{finished_study.pk}/protocol/").content.decode()
    done = re.search(r'<section class="done" id="protocol-done".*?</section>', page, re.S)
    assert done is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", done.group(0)))
    assert "Done — what next" in text and "The protocol has finished" in text
    assert "s1 beats s3" in text
    assert f'href="/studies/{finished_study.pk}/report/"' in done.group(0)
    assert f"/api/studies/{finished_study.pk}/annotations/?format=jsonl" in done.group(0)
    for u in outcome["undecided"]:
        assert f"{u['pair'][0]} vs {u['pair'][1]}: {u['why']}" in text


def test_running_adaptive_study_has_no_done_message(transactional_db):
    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    run_workers(study, n_workers=1, per_worker=3)  # round 1 is still collecting
    data = dashboard(study)
    assert any(p["state"] == "open" for p in data["pairs"])
    assert protocol_outcome(data) is None
    page = boss_client().get(f"/studies/{study.pk}/protocol/").content.decode()
    assert 'id="protocol-done"' not in page and "adaptive protocol" in page


def test_outcome_waits_for_the_last_round_and_names_why_pairs_stayed_undecided():
    pair = {"system_a": "a", "system_b": "b", "winner": None, "outcome": "budget"}
    data = {
        "pairs": [{**pair, "state": "exhausted"}],
        "rounds": [{"state": "closed"}],
        "partial_order": {"systems": [], "edges": []},
        "budget": 10,
        "spent": 10,
    }
    assert protocol_outcome(data) is None  # the last round still awaits its decision
    data["rounds"] = [{"state": "decided"}]
    outcome = protocol_outcome(data)
    assert outcome["undecided"] == [
        {"pair": ("a", "b"), "why": "the budget ran out before it was decided"}
    ]
    assert outcome["budget_spent"] and not outcome["all_decided"] and outcome["wins"] == []


@pytest.mark.parametrize("spent,budget", [(7, None), (48, 60), (1234, 1000)])
def test_budget_chart_has_a_labelled_y_axis(spent, budget):
    rounds = [
        {"number": 1, "collected": spent // 2, "spent_so_far": spent // 2},
        {"number": 2, "collected": spent - spent // 2, "spent_so_far": spent},
    ]
    svg = chart_svg(budget_chart(rounds, budget))
    ticks = re.findall(
        r'<g class="y-tick"><line [^>]*y1="([\d.]+)"[^>]*/><text [^>]*>(\d+)</text></g>', svg
    )
    values = [int(v) for _, v in ticks]
    ys = [float(y) for y, _ in ticks]
    assert values[0] == 0 and values == sorted(values) and 3 <= len(values) <= 7
    assert values[-1] >= max(spent, budget or 0)  # the axis reaches the highest mark
    steps = {b - a for a, b in zip(values[:-1], values[1:], strict=True)}
    assert len(steps) == 1 and str(steps.pop())[0] in "125"  # even, round steps
    assert ys == sorted(ys, reverse=True)  # higher values drawn higher up
    assert ">annotations</text>" in svg and ">round</text>" in svg


def test_dashboard_ranks_every_system_from_the_labels_beside_the_partial_order(finished_study):
    """The ranking counts the labels the pairs count (each pair's human counts, in system
    order), equals the core function on them, and puts the decided winner s1 above s3."""
    import pandas as pd

    from ranking import bradley_terry

    data = dashboard(finished_study)
    comparisons = pd.DataFrame(ranking_comparisons(finished_study))
    for p in data["pairs"]:
        got = comparisons[
            (comparisons["system_a"] == p["system_a"]) & (comparisons["system_b"] == p["system_b"])
        ]["outcome"].value_counts()
        assert [int(got.get(o, 0)) for o in ("A", "tie", "B")] == p["human_counts"]
    result = ranking(finished_study, n_boot=100, seed=3)
    core = bradley_terry(comparisons, n_boot=100, seed=3)
    assert [r["system"] for r in result["rows"]] == core["system"].tolist()
    assert [r["score"] for r in result["rows"]] == pytest.approx(core["score"].tolist())
    assert [r["high"] for r in result["rows"]] == pytest.approx(core["high"].tolist())
    score = {r["system"]: r["score"] for r in result["rows"]}
    assert score["s1"] > score["s3"]
    json.dumps(result, allow_nan=False)
    page = boss_client().get(f"/studies/{finished_study.pk}/protocol/").content.decode()
    section = re.search(r'<section class="ranking" id="ranking".*?</section>', page, re.S)
    assert section is not None and "<svg" in section.group(0)
    assert page.index("Partial order") < page.index('id="ranking"') < page.index("<h2>Pairs")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section.group(0)))
    top = ranking(finished_study)["rows"][0]  # the page's: 200 resamples, seed 0
    assert f"{top['system']} {top['score']:.1f} [{top['low']:.1f}, {top['high']:.1f}]" in text
    assert "a tie counts as half a win to each side" in text
    assert active_markup(page) == []


def test_dashboard_without_labels_has_no_ranking_yet(transactional_db):
    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    assert ranking(study) == {"rows": [], "n_boot": 200, "n_comparisons": 0,
                              "reason": "no human labels yet"}  # fmt: skip
    page = boss_client().get(f"/studies/{study.pk}/protocol/").content.decode()
    assert 'id="no-ranking"' in page and "no human labels yet" in page


@pytest.mark.parametrize(
    "state,outcome,winner,status",
    [
        ("open", "open", None, "open: collecting labels"),
        ("decided", "decided", "s1", "decided: s1 is better"),
        ("equivalent", "equivalent", None, "closed: practically equivalent"),
        (
            "exhausted",
            "futile",
            None,
            "stopped early: a decision was unlikely even with more labels",
        ),
        ("exhausted", "exhausted", None, "closed undecided: every input was labelled"),
        ("exhausted", "budget", None, "closed undecided: the budget ran out"),
        ("exhausted", None, None, "closed undecided"),
    ],
)
def test_pair_status_says_why_every_closed_pair_closed(state, outcome, winner, status):
    assert pair_status(state, outcome, winner) == status


@pytest.fixture
def retired_study(transactional_db):
    """A finished study whose equal pair s3 vs s4 has a pool large enough (200 inputs) to be
    retired as futile long before its inputs run out."""
    study = services.study_import(adaptive_bundle(n_inputs=200), filename="a.jsonl")
    run_workers(study)
    return study


def test_a_futile_pair_reads_retired_in_the_page_its_json_and_the_admin(retired_study):
    """The protocol retires s3 vs s4 (equal systems) as futile: the matrix, the JSON and the
    admin's pair list say it was stopped early (not "cannot be decided within the budget"
    while half the budget is left), not the bare
    state ``exhausted``; every pair's status in the JSON follows its state and reason."""
    finished_study = retired_study
    data = dashboard(finished_study)
    by_pair = {(p["system_a"], p["system_b"]): p for p in data["pairs"]}
    futile = by_pair[("s3", "s4")]
    assert (futile["state"], futile["outcome"]) == ("exhausted", "futile")
    assert futile["status"] == STOPPED
    for p in data["pairs"]:
        assert p["status"] == pair_status(
            p["state"], p["outcome"], p["winner"], p.get("implied_by")
        )
    client = boss_client()
    page = client.get(f"/studies/{finished_study.pk}/protocol/").content.decode()
    cells = [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c))
        for c in re.findall(r'<span class="status">(.*?)</span>', page, re.S)
    ]
    assert len(cells) == 2 * len(data["pairs"])  # the matrix shows each pair twice
    assert cells.count(STOPPED) == 2 * sum(p["outcome"] == "futile" for p in data["pairs"])
    assert "decided: s1 is better" in cells and "exhausted" not in cells
    api = client.get(f"/api/studies/{finished_study.pk}/protocol/").json()
    assert {(p["system_a"], p["system_b"]): p["status"] for p in api["pairs"]} == {
        k: p["status"] for k, p in by_pair.items()
    }
    admin = client.get(f"/admin/protocol/systempair/?study__id__exact={finished_study.pk}")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", admin.content.decode()))
    assert admin.status_code == 200
    assert STOPPED in text
    assert "decided: s1 is better" in text


def _pair(a, b, state, counts, winner=None, outcome=None, predicted=None):
    return {
        "system_a": a,
        "system_b": b,
        "state": state,
        "winner": winner,
        "human_counts": counts,
        "outcome": outcome,
        "status": pair_status(state, outcome, winner),
        "predicted": predicted,
    }


def test_views_compared_says_where_the_partial_order_and_ranking_differ():
    """Worked example: beta beats gamma (decided, 9–2 in their own labels) but both rank 2;
    alpha beats delta decided while delta scores higher (reversed); alpha ranks above beta,
    a pair still open."""
    data = {
        "pairs": [
            _pair("beta", "gamma", "decided", [9, 1, 2], winner="beta"),
            _pair("delta", "alpha", "decided", [3, 0, 8], winner="alpha"),
            _pair("alpha", "beta", "open", [4, 0, 3]),
            _pair("gamma", "delta", "exhausted", [2, 0, 2], outcome="futile"),
        ],
        "partial_order": {
            "systems": [],
            "edges": [
                {"winner": "beta", "loser": "gamma"},
                {"winner": "alpha", "loser": "delta"},
            ],
        },
    }
    ranking_ = {
        "rows": [
            {"system": "delta", "score": 1100.0, "rank": 1},
            {"system": "alpha", "score": 1050.0, "rank": 1},
            {"system": "beta", "score": 990.0, "rank": 2},
            {"system": "gamma", "score": 960.0, "rank": 2},
        ]
    }
    got = views_compared(data, ranking_)
    assert got["agree"] is False
    assert got["same_rank"] == [
        {
            "winner": "beta",
            "loser": "gamma",
            "rank": 2,
            "loser_rank": 2,
            "labels": {"first": 9, "ties": 1, "second": 2},
        }
    ]
    assert [(e["winner"], e["loser"]) for e in got["reversed"]] == [("alpha", "delta")]
    assert got["reversed"][0]["labels"] == {"first": 8, "ties": 0, "second": 3}
    assert got["ranked_not_decided"] == [
        {
            "better": "alpha",
            "worse": "beta",
            "status": "open: collecting labels",
            "labels": {"first": 4, "ties": 0, "second": 3},
        },
        {
            "better": "delta",
            "worse": "gamma",
            "status": STOPPED,
            "labels": {"first": 2, "ties": 0, "second": 2},
        },
    ]
    agreeing = {"rows": [{**r, "rank": i + 1} for i, r in enumerate(ranking_["rows"])]}
    agreeing["rows"][0]["score"], agreeing["rows"][1]["score"] = 1050.0, 1100.0
    data["pairs"] = data["pairs"][:2]
    agreeing["rows"] = sorted(agreeing["rows"], key=lambda r: -r["score"])
    for i, row in enumerate(agreeing["rows"]):
        row["rank"] = i + 1
    assert views_compared(data, agreeing)["agree"] is True


def test_a_futile_pair_reads_as_what_happened_with_the_predicted_chance():
    predicted = [
        {"outcome": "a wins", "probability": 0.05},
        {"outcome": "b wins", "probability": 0.03},
        {"outcome": "undecided", "probability": 0.92},
    ]
    data = {
        "pairs": [_pair("a", "b", "exhausted", [5, 3, 5], outcome="futile", predicted=predicted)],
        "rounds": [{"state": "decided"}],
        "partial_order": {"systems": [], "edges": []},
        "budget": 200,
        "spent": 100,  # half the budget left: nothing about the budget is claimed
    }
    (why,) = protocol_outcome(data)["undecided"]
    assert why["why"] == (
        "stopped early: even the labels still available to it were unlikely to decide it "
        "(predicted chance of a decision: 8%)"
    )
    assert "budget" not in why["why"]


def test_matrix_labels_every_figure_and_the_ranking_is_compared(finished_study):
    data = dashboard(finished_study)
    page = boss_client().get(f"/studies/{finished_study.pk}/protocol/").content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "θ=" not in text and "n=" not in text
    assert "θ : the posterior probability that a is preferred to b" in text
    pair = data["pairs"][0]
    a, b = pair["system_a"], pair["system_b"]
    n_a, ties, n_b = pair["human_counts"]
    assert f"θ = P({a} preferred to {b}) = {pair['theta']:.3f}" in text
    assert f"labels: {n_a} for {a} · {ties} tie{'' if ties == 1 else 's'} · {n_b} for {b}" in text
    assert "if every input were labelled:" in text
    assert (
        "The partial order and this ranking" in text and "They answer different questions" in text
    )
    compared = views_compared(data, ranking(finished_study))
    for e in compared["same_rank"]:
        assert f"{e['winner']} beats {e['loser']} (decided; their own labels:" in text
    if compared["agree"]:
        assert "They agree: the ranking puts every decided winner above its loser" in text
