"""The protocol dashboard in Chromium says why each pair closed: a futile pair reads as what
happened ("stopped early: …", never "cannot be decided within the budget" with budget
left) in the matrix and in the admin's pair list; every figure in a cell is labelled and the
ranking beside the partial order says where and why the two differ."""

import pytest
from playwright.sync_api import expect

from annotator import services
from config.celery import app
from protocol.outcome import views_compared
from protocol.selectors import dashboard, ranking
from tests.conftest import make_superuser
from tests.protocol_sim import adaptive_bundle, run_workers
from tests.services import require_postgres_and_redis

WIDTHS = (1280, 390)
RETIRED = "stopped early: a decision was unlikely even with more labels"


@pytest.fixture
def eager():
    """Rounds decided in this process (no Celery worker needed to reach the end)."""
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.mark.django_db(transaction=True)
def test_dashboard_and_admin_say_why_pairs_closed(base_url, page, eager):
    """At 1280 and 390 px, one simulated study (the simulation is most of the test's time)."""
    require_postgres_and_redis()
    # 200 inputs: the equal pair s3 vs s4 is retired as futile long before they run out
    study = services.study_import(adaptive_bundle(n_inputs=200), filename="a.jsonl")
    run_workers(study)
    pairs = {(p["system_a"], p["system_b"]): p for p in dashboard(study)["pairs"]}
    assert pairs[("s3", "s4")]["outcome"] == "futile"  # equal systems: retired as futile
    make_superuser()
    violations: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "x" * 12)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base_url}/studies/{study.pk}/protocol/")
        legend = page.locator("#pairs-legend")
        expect(legend).to_contain_text("θ: the posterior probability that a is preferred to b")
        compared = page.locator("#views-compared")
        expect(compared).to_contain_text("They answer different questions.")
        data = dashboard(study)
        for e in views_compared(data, ranking(study))["same_rank"]:
            expect(compared).to_contain_text(f"{e['winner']} beats {e['loser']} (decided;")
        rows = page.locator("table.matrix tbody tr")
        names = [rows.nth(i).locator("th").inner_text().strip() for i in range(rows.count())]
        columns = page.locator("table.matrix thead th").all_inner_texts()[1:]
        for i, row in enumerate(names):
            cells = rows.nth(i).locator("td")
            for j, col in enumerate(columns):
                pair = pairs.get((row, col)) or pairs.get((col, row))
                if pair is None:
                    continue
                status = cells.nth(j).locator(".status").inner_text().strip()
                if pair.get("implied_by"):  # the chain on its own line under the status
                    chain = " > ".join(pair["implied_by"])
                    assert pair["status"] == f"{status} ({chain})", (row, col, status)
                    implied = cells.nth(j).locator(".implied").inner_text().strip()
                    assert implied == f"from the decided pairs {chain}", (row, col, implied)
                else:
                    assert status == pair["status"], (row, col, status)
                figures = cells.nth(j).locator(".figures").all_inner_texts()
                a, b = pair["system_a"], pair["system_b"]
                assert figures[0] == f"θ = P({a} preferred to {b}) = {pair['theta']:.3f}"
                assert figures[1].startswith("labels: ") and f" for {a} · " in figures[1]
                if pair["outcome"] == "futile":
                    assert status == RETIRED
                assert status != "exhausted"
        page.goto(f"{base_url}/admin/protocol/systempair/?study__id__exact={study.pk}")
        page.wait_for_selector("#result_list")
        listed = page.locator("#result_list td.field-status").all_inner_texts()
        assert sorted(listed) == sorted(p["status"] for p in pairs.values())
        assert RETIRED in listed
    assert violations == []
