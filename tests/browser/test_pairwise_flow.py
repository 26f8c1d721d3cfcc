"""A worker annotates three pairwise items in real Chromium; the API returns exactly those."""

import json
import urllib.request

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from annotator.models import Output
from tests.conftest import bundle
from tests.services import require_postgres_and_redis


@pytest.mark.django_db(transaction=True)
def test_worker_annotates_three_items_and_export_returns_them(base_url, page, make_study):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [
                {
                    "id": f"q{i}",
                    "input": f"Question {i}?",
                    "outputs": {
                        "system-north": f"North answers {i}.",
                        "system-south": f"South answers {i}.",
                    },
                }
                for i in range(3)
            ],
            {"kind": "pairwise", "redundancy": 1},
        )
    )
    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    token = Token.objects.create(user=researcher)

    requests_seen: list[str] = []
    page.on("request", lambda r: requests_seen.append(r.url + (r.post_data or "")))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-123")
    page.click("text=Start")
    expected, lefts = [], []
    for step, choice in enumerate(["left", "right", "tie"]):
        page.wait_for_selector("#output-left")
        assert page.inner_text("#progress-text") == f"Task {step + 1}"  # no per-worker cap
        html = page.content()
        assert "system-north" not in html and "system-south" not in html
        left_text = page.inner_text("#output-left .text").strip()
        right_text = page.inner_text("#output-right .text").strip()
        lefts.append(Output.objects.get(text=left_text).system.name)
        chosen = {"left": left_text, "right": right_text}.get(choice)
        expected.append(Output.objects.get(text=chosen).system.name if chosen else None)
        page.click(f'button[name="answer"][value="{choice}"]')
        page.wait_for_load_state("load")
    page.wait_for_selector("text=You have finished: 3 items")
    assert not any("system-" in url for url in requests_seen)

    request = urllib.request.Request(
        f"{base_url}/api/studies/{study.pk}/annotations/",
        headers={"Authorization": f"Token {token.key}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the live test server
        rows = json.load(response)["results"]
    assert len(rows) == 3
    assert [r["preferred_system"] for r in rows] == expected
    assert [r["left_system"] for r in rows] == lefts
    assert [r["raw_answer"] for r in rows] == ["left", "right", "tie"]
    for row in rows:
        if row["raw_answer"] == "tie":
            assert row["label"] == "tie"
        else:
            a_is_preferred = row["preferred_system"] == row["system_a"]
            assert row["label"] == ("A" if a_is_preferred else "B")
        assert row["annotator"] != "prolific-123" and row["time_spent_ms"] >= 0
