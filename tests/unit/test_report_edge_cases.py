"""The report page's edge cases (issue 25, items 7 and 14), at the HTML level: a system that
never lost still gets a Bradley-Terry score (a stated prior), one label per item is said once,
the headline card covers every system, and judge ratings without human labels are named."""

from __future__ import annotations

import html as html_module
import json
import re

import pytest
from django.contrib.auth.models import User

from analysis import selectors
from analysis.render import SINGLE_LABEL, render_text
from annotator import services
from tests.conftest import pairwise_bundle
from tests.leasing import next_lease

SYSTEMS = ("s1", "s2", "s3")
STRENGTH = {"s1": 3, "s2": 2, "s3": 1}


def _answer_by_strength(study, workers, beat=lambda a, b: STRENGTH[a] > STRENGTH[b]):
    """Every worker answers every item it gets for the system ``beat`` prefers."""
    for name in workers:
        part = services.participation_enter(study=study, platform="link", external_id=name)
        while (a := next_lease(participation=part)) is not None:
            sa, sb = (o.system.name for o in a.item.output_list())
            a_wins = beat(sa, sb)
            answer = "left" if a_wins == (a.display_order == [0, 1]) else "right"
            services.annotation_submit(
                annotator=part.annotator, token=a.token, data={"answer": answer}
            )


@pytest.fixture
def researcher(db):
    return User.objects.create_user("res", password="x" * 12)


def _page(client, researcher, study, **params) -> str:
    client.force_login(researcher)
    response = client.get(f"/studies/{study.pk}/report/", {"n_boot": 50, **params})
    assert response.status_code == 200
    return html_module.unescape(response.content.decode().split('class="hv-report"')[1])


def test_a_system_that_never_lost_is_ranked_with_a_stated_prior(make_study, researcher, client):
    """s1 beats everyone on every item: without a prior no maximum-likelihood score exists
    (the ranking was all "undefined"); with ½ virtual win each way per pair it is defined,
    s1 first, and the page says why and how."""
    study = make_study(pairwise_bundle(n_inputs=4, systems=SYSTEMS), redundancy=2)
    study.researchers.add(researcher)
    _answer_by_strength(study, ("w1", "w2"))
    report = selectors.study_report(study, n_boot=50)
    prop = report["properties"][0]
    ranking = prop["ranking"]
    assert [r["system"] for r in ranking] == ["s1", "s2", "s3"]
    assert all(r["score"] is not None and r["low"] is not None for r in ranking)
    method = prop["ranking_method"]
    assert method["prior_used"] == 0.5 and method["n_boot_failed"] == 0
    assert "s1 never lost a comparison" in method["reason"]
    assert "regularising prior" in method["reason"]
    html = _page(client, researcher, study)
    ranking_html = html.split("Ranking (Bradley–Terry)")[1].split("</section>")[0]
    assert "regularising prior" in ranking_html and "undefined" not in ranking_html
    assert "regularising prior" in render_text(report)
    # the headline card orders every system, not one pair of them
    card = html.split("Order of the systems")[1].split("</div></div>")[0]
    assert all(s in card for s in SYSTEMS) and "small prior" in card
    assert "Expected win rate s" not in html.split("<h3>")[0]


def test_one_label_per_item_is_said_once_not_as_a_wall_of_undefined(make_study, researcher, client):
    study = make_study(pairwise_bundle(n_inputs=6, systems=SYSTEMS), redundancy=1)
    study.researchers.add(researcher)
    _answer_by_strength(study, ("w1", "w2"), beat=lambda a, b: (a, b) != ("s1", "s2"))
    html = _page(client, researcher, study)
    assert html.count(SINGLE_LABEL) == 1
    # the cards and the reliability block, up to its collapsed table of numbers
    head = html.split("<h3>Win rates")[0].split("<details>")[0]
    assert 'class="undefined"' not in head and "no item has two or more labels" not in head
    assert "Order of the systems" in head
    assert SINGLE_LABEL in render_text(selectors.study_report(study, n_boot=0))


def test_judge_ratings_without_human_labels_are_named_not_none(make_study, researcher, client):
    study = make_study(pairwise_bundle(n_inputs=2, systems=("s1", "s2")))
    study.researchers.add(researcher)
    ratings = "\n".join(
        json.dumps({"judge": "gpt", "input_id": f"in{i}", "system": "s1", "system_b": "s2",
                    "label": "A"})
        for i in range(2)
    ).encode()  # fmt: skip
    services.judge_ratings_import(study, ratings, filename="judges.jsonl")
    report = selectors.study_report(study, n_boot=0)
    assert report["counts"]["judges"] == [] and report["counts"]["judges_rated"] == ["gpt"]
    html = _page(client, researcher, study)
    meta = re.search(r'<p class="meta">(.*?)</p>', html, re.S).group(1)
    assert "judges: none" not in meta and "gpt (ratings stored" in meta
    assert "judge ratings (gpt: 2) are stored" in html
    assert "judges: gpt (ratings stored" in render_text(report)


def test_judges_rated_reads_distinct_names_not_every_row(monkeypatch):
    """The judges with a label, sorted, found from the distinct names (a 1 M-row frame is not
    walked row by row in Python: issue 30)."""
    import pandas as pd

    from analysis.report import _judges_rated

    judges = pd.DataFrame(
        {
            "item": range(6),
            "judge": ["b", "a", "b", "c", 7, "a"],
            "label": [1, None, 2, None, 3, 4],
        }
    )

    def no_row_walk(self):
        raise AssertionError("iterated the judge column row by row")

    monkeypatch.setattr(pd.Series, "__iter__", no_row_walk)
    assert _judges_rated(judges) == ["7", "a", "b"]
    assert _judges_rated(judges.astype({"judge": str}).iloc[[1, 3]]) == []
    assert _judges_rated(None) == []


def test_declared_labels_keep_the_frame_when_every_label_is_declared():
    """A study whose labels are all in the declared set is not copied (a copy of 1 M labels
    with text kept by pyarrow took 18 MiB of Arrow's pool, which keeps it: issue 30); one
    outside the set, or missing, is still told apart."""
    import pandas as pd

    from analysis.report import Property, _declared

    prop = Property("overall", "ordinal", (1, 2, 3))
    ann = pd.DataFrame({"item": ["a", "b", "c", "d"], "label": [1, 2, 3, 2]})
    known, unknown = _declared(ann, prop)
    assert known is ann and unknown.empty and list(unknown.columns) == ["item", "label"]
    mixed = pd.DataFrame({"item": ["a", "b", "c", "d"], "label": [1, 7, None, 3]})
    known, unknown = _declared(mixed, prop)
    assert list(known["item"]) == ["a", "d"] and list(unknown["item"]) == ["b"]
    known, unknown = _declared(mixed.iloc[[1]], prop)
    assert known.empty and list(unknown["label"]) == [7]
