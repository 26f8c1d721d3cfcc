"""Rounds never stall on an abandoned lease, in Chromium with a real Celery worker deciding
the rounds: one worker opens a task and leaves, another's page stays open past the idle
time (its heartbeat keeps the lease), a third gets the abandoned item, and the worker whose
answer completes the round lands on the next round's task."""

import time

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect

from annotator import services
from annotator.models import Annotation, Assignment, Item
from protocol.models import Round
from tests.protocol_sim import adaptive_bundle
from tests.services import CeleryWorker, require_postgres_and_redis

IDLE = 2.0  # seconds without a heartbeat before a lease may go to a worker who has none


@pytest.fixture
def contexts(browser):
    """Browser contexts opened by the test, closed before the database goes."""
    opened: list = []
    yield opened
    for context in opened:
        context.close()


@pytest.fixture
def celery_worker(live_server, tmp_path):
    require_postgres_and_redis()
    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "celery.log")
    worker.start()
    yield worker
    worker.stop()


def open_task(browser, contexts, base_url, study, name: str, errors: list[str]):
    """A worker's own browser context on their first task page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    contexts.append(context)
    page = context.new_page()
    page.on(
        "console",
        lambda m: "Content Security Policy" in m.text and errors.append(f"{name}: {m.text}"),
    )
    page.on(  # every heartbeat of a live lease is accepted
        "response",
        lambda r: "/renew/" in r.url and r.status != 200 and errors.append(f"{name}: {r.status}"),
    )
    page.goto(f"{base_url}/w/{study.public_id}/?worker={name}")
    page.click("text=Start")
    page.wait_for_selector("#task-form")
    page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
    return context, page


def token_of(page) -> str:
    return page.get_attribute('input[name="token"]', "value")


def answer(page) -> None:
    page.click('button[name="answer"][value="left"]')
    page.wait_for_load_state("load")


@pytest.mark.django_db(transaction=True)
def test_abandoned_lease_does_not_stall_the_round_and_the_completer_gets_the_next_task(
    browser, contexts, base_url, settings, celery_worker
):
    settings.HUMEVAL_LEASE_IDLE_SECONDS = IDLE
    settings.HUMEVAL_LEASE_HEARTBEAT_SECONDS = IDLE / 4
    settings.HUMEVAL_THROTTLE_RENEW = "600/min"
    # one pair, round 1 = 5 items of one annotation each; 200 inputs: nothing decided early
    study = services.study_import(
        adaptive_bundle(n_inputs=200, systems=("s1", "s2")), filename="a.jsonl"
    )
    assert Item.objects.filter(study=study, round_number=1).count() == 5
    errors: list[str] = []

    gone, page = open_task(browser, contexts, base_url, study, "leaver", errors)
    abandoned = Assignment.objects.get(token=token_of(page))
    gone.close()  # the worker closes the browser: their item stays leased
    left_at = time.monotonic()

    _, staying = open_task(browser, contexts, base_url, study, "stayer", errors)
    kept = Assignment.objects.get(token=token_of(staying))

    _, working = open_task(browser, contexts, base_url, study, "worker", errors)
    for _ in range(3):  # the three free items
        answer(working)
    # the two others are leased: once the leaver's lease is idle, the next look (this
    # answer, or the waiting page looking again) gets their item
    working.wait_for_selector("#task-form", timeout=20_000)
    assert Assignment.objects.get(pk=abandoned.pk).state == "expired"
    taken = Assignment.objects.get(token=token_of(working))
    assert taken.item_id == abandoned.item_id
    answer(working)
    working.wait_for_selector("#waiting")

    # the stayer's page has been open for longer than the idle time: its heartbeat kept it
    time.sleep(IDLE + 0.5)
    lease = Assignment.objects.get(pk=kept.pk)
    assert lease.state == "issued"
    assert (timezone.now() - lease.seen_at).total_seconds() < IDLE
    assert Round.objects.get(study=study, number=1).state == "open"

    # the stayer's answer completes round 1: no web process waits for the decision; the
    # answer shows the waiting page, which looks again soon and lands on round 2's task
    answered = token_of(staying)
    with staying.expect_navigation():
        staying.click('button[name="answer"][value="left"]')
    # the first decision calibrates (seconds)
    expect(staying.locator('input[name="token"]')).not_to_have_value(answered, timeout=40_000)
    rnd = Round.objects.get(study=study, number=1)
    assert rnd.state == "decided"
    stalled_for = time.monotonic() - left_at
    nxt = Assignment.objects.get(token=token_of(staying))
    assert nxt.item.round_number == 2 and nxt.state == "issued"
    assert staying.inner_text("#progress-text") == "Task 2"
    # the worker on the waiting page continues by itself
    working.wait_for_selector("#task-form", timeout=15_000)
    assert Assignment.objects.get(token=token_of(working)).item.round_number == 2

    labels = Annotation.objects.filter(study=study, item__round_number=1)
    assert labels.count() == 5 and not labels.filter(annotator__external_id="leaver").exists()
    assert all(i.n_done == i.n_taken == 1 for i in Item.objects.filter(round_number=1))
    assert stalled_for < 60, stalled_for  # not the 1,800-second lease (a busy machine: 35 s)
    assert errors == []  # no CSP violation, no refused heartbeat
    print(f"round 1 decided {stalled_for:.1f} s after the leaver left")  # noqa: T201
