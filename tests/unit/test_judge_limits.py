"""The LLM judge against hostile or stalled endpoints (issue 31 item 2), prompts that carry
the text as written (issue 25 item 6) and kinds no judge rates (issue 25 item 16), against
the stand-in server process of tests/judge_server.py."""

from __future__ import annotations

import threading
import time
import tracemalloc

import pytest
from django.core.management.base import CommandError

from annotator import judging
from annotator.models import JudgeRating, JudgeRun
from tests.conftest import boss_client, bundle
from tests.protocol_sim import ranking_bundle
from tests.unit.test_judge import KEY, MODEL, judge_servers, run


@pytest.fixture
def judge_server(tmp_path):
    with judge_servers(tmp_path) as start:
        yield start


HOSTILE = "<b>if a < b && c > \"d\" 'e'</b> &amp; {{ x }}"


def study_with_inputs(make_study, texts: list[str], kind: str = "pairwise"):
    records = [
        {"id": f"in{i}", "input": text, "outputs": {"s1": f"one {i}", "s2": f"answer two {i}"}}
        for i, text in enumerate(texts)
    ]
    return make_study(bundle(records, {"kind": kind, "redundancy": 1}))


def test_prompts_carry_the_text_as_written_for_every_kind_with_a_judge(
    make_study, judge_server, monkeypatch
):
    """Issue 25 item 6: the model reads ``< & " '`` as written, not ``&lt; &amp; …``, in
    every field of the pairwise and the Likert prompt (input, outputs, reference, question,
    criterion label and anchors)."""
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    pair = make_study(
        bundle(
            [
                {
                    "id": "p",
                    "input": HOSTILE,
                    "reference": "ref " + HOSTILE,
                    "outputs": {"s1": "A1 " + HOSTILE, "s2": "B2 " + HOSTILE},
                }
            ],
            {"kind": "pairwise", "redundancy": 1, "question": "Q " + HOSTILE},
        )
    )
    likert = make_study(
        bundle(
            [{"id": "l", "input": HOSTILE, "outputs": {"m1": "L1 " + HOSTILE}}],
            {
                "kind": "likert",
                "redundancy": 1,
                "criteria": [
                    {"name": "c", "label": "C " + HOSTILE, "labels": ["yes <", "no &"]},
                ],
            },
        )
    )
    run(pair, server)
    run(likert, server)
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests()]
    assert len(prompts) == 2
    for prompt in prompts:
        assert "&lt;" not in prompt and "&amp;amp;" not in prompt and "&#x27;" not in prompt
        assert f"Input:\n{HOSTILE}\n" in prompt
    pairwise_prompt = next(p for p in prompts if "Response A:" in p)
    for text in ("ref " + HOSTILE, "A1 " + HOSTILE, "B2 " + HOSTILE, "Q " + HOSTILE):
        assert text in pairwise_prompt
    likert_prompt = next(p for p in prompts if "Response A:" not in p)
    for text in ("L1 " + HOSTILE, "C " + HOSTILE, "yes <, no &"):
        assert text in likert_prompt


@pytest.mark.parametrize(
    ("data", "noun"),
    [
        (ranking_bundle(3, collection="all"), "ranking"),
        # error spans: the judge proposes spans (issue 28, tests/unit/test_judge_prefill.py)
    ],
)
def test_a_kind_without_a_judge_form_is_refused_with_the_reason(
    make_study, judge_server, data, noun, db
):
    """Issue 25 item 16: ``run_judge`` on a ranking study names the reason
    (not "cannot read the prompt …/ranking.txt"), in the command and the admin, and sends
    nothing."""
    study = make_study(data)
    server = judge_server()
    reason = f"an LLM judge cannot rate a {noun} study"
    with pytest.raises(CommandError, match=reason) as refused:
        run(study, server)
    assert "prompt" not in str(refused.value)
    client = boss_client()
    form = {
        "action": "run_judge",
        "_selected_action": [study.pk],
        "apply": "1",
        "endpoint": "own",
        "base_url": server.url,
        "model": MODEL,
        "samples": "1",
        "concurrency": "1",
        "criterion": "",
    }
    done = client.post("/admin/annotator/study/", form, follow=True)
    assert reason in str(list(done.context["messages"])[0])
    assert server.requests() == [] and not JudgeRun.objects.exists()


def test_hostile_answers_fail_their_item_alone_and_the_run_goes_on(
    make_study, judge_server, settings
):
    """Issue 31 item 2: a 300 MB answer (streamed without a length: the client stops
    reading past the 1 MiB cap, in bounded memory), a body nested 100,000 deep and
    ``Retry-After: not-a-date`` each touch only their own item: the first two fail, named,
    the third is retried after the backoff and stored; every other item is stored."""
    settings.HUMEVAL_JUDGE_MAX_ANSWER_BYTES = 1024 * 1024
    study = study_with_inputs(
        make_study, ["plain 0", "HUGEANSWER", "NESTEDANSWER", "BADRETRYAFTER", "plain 4"]
    )
    server = judge_server()
    tracemalloc.start()
    try:
        result = judging.judge_run(
            study, base_url=server.url, model=MODEL, api_key=KEY, retry_base=0.05, max_tries=2
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.total, result.stored, result.failed) == (5, 3, 2)
    assert not result.stopped
    errors = "\n".join(result.errors)
    assert "input in1, s1 vs s2, sample 0" in errors and "1,048,576-byte cap" in errors
    assert "input in2, s1 vs s2, sample 0" in errors and "not a chat completion" in errors
    stored = set(JudgeRating.objects.values_list("input__external_id", flat=True))
    assert stored == {"in0", "in3", "in4"}
    assert len([r for r in server.requests() if "BADRETRYAFTER" in str(r["body"])]) == 2
    sent = [line["sent"] for line in server.lines() if "sent" in line]
    assert len(sent) == 1  # an answer past the cap is not asked again
    assert max(sent) < 64 * 1024 * 1024  # the server could not push the 300 MB through
    assert peak < 24 * 1024 * 1024  # the client held about the cap, never the answer


def test_a_stalled_endpoint_ends_each_call_at_its_time_limit(make_study, judge_server):
    """An endpoint that trickles one byte at a time never ends a call by itself (each read
    gets a byte before the read timeout): the call's total limit shuts its socket."""
    study = study_with_inputs(make_study, ["a", "b", "c"])
    server = judge_server(trickle=0.2)
    started = time.monotonic()
    result = judging.judge_run(
        study,
        base_url=server.url,
        model=MODEL,
        api_key=KEY,
        concurrency=3,
        max_tries=1,
        client_options={"call_seconds": 1.5, "read_timeout": 30},
    )
    elapsed = time.monotonic() - started
    assert (result.failed, result.stored) == (3, 0)
    assert all("no complete answer within 1.5 s" in e for e in result.errors), result.errors
    assert elapsed < 10


def test_a_run_stops_at_its_deadline(make_study, judge_server):
    study = study_with_inputs(make_study, [f"x{i}" for i in range(6)])
    server = judge_server(trickle=0.5)
    started = time.monotonic()
    result = judging.judge_run(
        study, base_url=server.url, model=MODEL, api_key=KEY, concurrency=2, run_seconds=2
    )
    assert time.monotonic() - started < 8
    assert result.stopped == "deadline" and result.stored == 0
    assert result.failed + result.not_run == 6
    assert "stopped at its deadline" in result.summary()


def test_a_cancelled_run_stops_within_seconds(make_study, judge_server):
    study = study_with_inputs(make_study, [f"x{i}" for i in range(6)])
    server = judge_server(trickle=0.5)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    started = time.monotonic()
    result = judging.judge_run(
        study,
        base_url=server.url,
        model=MODEL,
        api_key=KEY,
        concurrency=2,
        should_stop=stop.is_set,
    )
    assert time.monotonic() - started < 6
    assert result.stopped == "cancelled" and result.not_run >= 4
    assert "cancelled" in result.summary()


def test_retry_after_that_is_not_a_number_nor_a_date_falls_back_to_the_backoff():
    client = judging.ChatClient("http://127.0.0.1:9/v1", "m", retry_base=0.5, max_wait=60)
    for value in ("not-a-date", "nan", "inf", "-inf", "Tue, 99 Foo 2026", "1e999", "\x00"):
        assert client._wait(1, value) == 1.0, value
    assert client._wait(0, "3") == 3.0
    assert client._wait(0, "999") == 60.0
    client.close()


def test_cancel_action_marks_the_studys_active_runs_only(make_study, db):
    """The admin's "Cancel LLM judge runs" asks the selected studies' queued and running
    runs to stop (the run checks about once a second); a queued one then never starts."""
    study, other = study_with_inputs(make_study, ["a"]), study_with_inputs(make_study, ["b"])
    mine = judging.judge_run_create(
        study, base_url="http://127.0.0.1:9/v1", model=MODEL, own_key="sk-researcher"
    )
    theirs = judging.judge_run_create(other, base_url="http://127.0.0.1:9/v1", model=MODEL)
    client = boss_client()
    done = client.post(
        "/admin/annotator/study/",
        {"action": "cancel_judge_runs", "_selected_action": [study.pk]},
        follow=True,
    )
    assert "1 judge run(s) asked to stop" in str(list(done.context["messages"])[0])
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.cancel_requested and not theirs.cancel_requested
    assert (mine.state, mine.message) == ("cancelled", "cancelled before it started")
    assert mine.own_key == ""  # erased at once
    assert theirs.state == "queued"
    assert judging.judge_run_execute(mine.pk) == f"run {mine.pk} is cancelled already"
    assert JudgeRun.objects.get(pk=mine.pk).started_at is None  # the queued task did nothing
    # a running run whose worker died: the first request marks it, the second ends it
    JudgeRun.objects.filter(pk=theirs.pk).update(state="running")
    assert judging.judge_runs_cancel([other]) == 1
    assert JudgeRun.objects.get(pk=theirs.pk).state == "running"
    assert judging.judge_runs_cancel([other]) == 1
    assert JudgeRun.objects.get(pk=theirs.pk).state == "cancelled"
