"""``run_judge`` and the study admin's "Rate with an LLM judge" against a real HTTP server
process on loopback (tests/judge_server.py: deterministic answers, scripted 503 / 429,
malformed answers), and the ratings it stores read by the report and the protocol."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis import selectors as report_selectors
from annotator import judging
from annotator.models import Input, JudgeRating, JudgeRun, Output, System
from protocol.models import SystemPair
from protocol.selectors import metric_labels
from tests.conftest import boss_client, bundle
from tests.unit.test_report import annotate

SERVER = Path(__file__).resolve().parent.parent / "judge_server.py"
KEY = "sk-test-0123456789abcdef"
MODEL = "mock-judge"


@dataclass
class Server:
    url: str
    log: Path

    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def requests(self) -> list[dict]:
        return [line for line in self.lines() if "body" in line]


@contextmanager
def judge_servers(tmp_path: Path):
    """``start(fail=0, trickle=0)`` starts one stand-in server process; all are stopped at
    the end."""
    procs: list[subprocess.Popen] = []

    def start(fail: int = 0, trickle: float = 0.0) -> Server:
        log = tmp_path / f"requests{len(procs)}.jsonl"
        log.touch()
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(log), "--key", KEY, "--fail", str(fail)]
            + ["--trickle", str(trickle)],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        port = int(proc.stdout.readline())
        return Server(f"http://127.0.0.1:{port}/v1", log)

    try:
        yield start
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def judge_server(tmp_path):
    with judge_servers(tmp_path) as start:
        yield start


OUTPUTS = {  # per input: s1, s2, s3 (lengths decide the server's answer)
    "in0": ("the longest answer of all", "short", "mid answer"),
    "in1": ("one", "two", "three"),
    "in2": ("same", "size", "much longer one"),
}


@pytest.fixture
def pairwise(make_study):
    records = [
        {
            "id": i,
            "input": f"question {i}" + (" MALFORMED" if i == "in1" else ""),
            "outputs": dict(zip(("s1", "s2", "s3"), texts, strict=True)),
        }
        for i, texts in OUTPUTS.items()
    ]
    return make_study(bundle(records, {"name": "judged", "kind": "pairwise", "redundancy": 2}))


def run(study, server: Server, *args: str, **env) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "run_judge",
        str(study.pk),
        "--base-url",
        server.url,
        "--model",
        MODEL,
        "--retry-base",
        "0.01",
        "--api-key-env",  # the operator names the key at the shell (a later one wins)
        judging.API_KEY_ENV,
        *args,
        stdout=out,
        stderr=err,
    )
    return out.getvalue(), err.getvalue()


def expected(rating: JudgeRating) -> str:
    """The server's preference in the rating's system order: the longer output."""
    a = Output.objects.get(input=rating.input, system=rating.system).text
    b = Output.objects.get(input=rating.input, system=rating.other_system).text
    return "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"


def test_run_judge_rates_every_pair_through_503_and_429(pairwise, judge_server, monkeypatch):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server(fail=4)  # 503, 429 (Retry-After: 1), 503, 429
    started = time.monotonic()
    out, err = run(pairwise, server, "--concurrency", "1")
    assert time.monotonic() - started >= 2.0  # both Retry-After waits were honoured
    assert "9 ratings stored (3 unparseable), 0 already stored, 0 failed, of 9" in out
    assert "judged 9/9" in err
    ratings = list(JudgeRating.objects.filter(study=pairwise).select_related("input"))
    assert len(ratings) == 9 and {r.judge for r in ratings} == {MODEL}
    assert len(server.requests()) == 9 + 4
    assert len({r.prompt_hash for r in ratings}) == 1
    assert ratings[0].prompt_hash == judging.PromptTemplate.load("pairwise").hash
    for r in ratings:
        assert r.system_id < r.other_system_id and r.criterion == "" and r.sample == 0
        if r.input.external_id == "in1":  # malformed: kept raw, not guessed
            assert (r.parse_ok, r.label, r.score) == (False, "", None)
            assert r.raw_answer.startswith("Well, both have merits")
        else:
            assert r.parse_ok and r.raw_answer in ("A", "B", "tie")
            assert r.label == expected(r)
    assert {r.label for r in ratings if r.parse_ok} == {"A", "B", "tie"}


def test_order_is_drawn_per_call_and_recorded(pairwise, judge_server, monkeypatch):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    run(pairwise, server, "--samples", "4", "--concurrency", "3")
    ratings = JudgeRating.objects.filter(study=pairwise)
    assert ratings.count() == 9 * 4
    assert sorted(set(ratings.values_list("sample", flat=True))) == [0, 1, 2, 3]
    firsts = {(r.system_id == r.shown_first_id) for r in ratings}
    assert firsts == {True, False}  # both orders occur
    prompts = [req["body"]["messages"][0]["content"] for req in server.requests()]
    for r in ratings.filter(parse_ok=True):
        shown = Output.objects.get(input=r.input, system=r.shown_first).text
        other_id = r.other_system_id if r.shown_first_id == r.system_id else r.system_id
        second = Output.objects.get(input=r.input, system_id=other_id).text
        assert any(f"Response A:\n{shown}\n\nResponse B:\n{second}\n" in p for p in prompts)
        assert r.label == expected(r)  # the display order was mapped back to system order
        pair = (r.system_id, r.other_system_id)
        assert (r.shown_first_id == r.system_id) == judging.draw_first(
            0, MODEL, r.input_id, pair, r.sample
        )


def test_rerun_adds_nothing_and_the_key_is_sent_but_never_stored(
    pairwise, judge_server, monkeypatch
):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    run(pairwise, server)
    before = list(JudgeRating.objects.values_list("pk", "label", "raw_answer"))
    out, _ = run(pairwise, server)
    assert "0 ratings stored (0 unparseable), 9 already stored, 0 failed, of 9" in out
    assert list(JudgeRating.objects.values_list("pk", "label", "raw_answer")) == before
    requests = server.requests()
    assert len(requests) == 9
    assert {r["headers"]["Authorization"] for r in requests} == {f"Bearer {KEY}"}
    assert {r["body"]["model"] for r in requests} == {MODEL}
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert KEY not in dump.getvalue() and len(dump.getvalue()) > 1000


def test_a_wrong_key_stops_the_run_and_stores_nothing(pairwise, judge_server, monkeypatch):
    monkeypatch.setenv("OTHER_KEY", "wrong")
    server = judge_server()
    with pytest.raises(CommandError, match="HTTP 401"):
        run(pairwise, server, "--api-key-env", "OTHER_KEY", "--concurrency", "1")
    assert not JudgeRating.objects.exists()
    assert len(server.requests()) <= 2  # the calls already under way, not the other 7


def test_a_rejected_call_fails_alone_and_is_retried_by_the_rerun(
    pairwise, judge_server, monkeypatch
):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    out = Output.objects.get(input__external_id="in2", system__name="s3")
    out.text = "BADREQUEST " + out.text
    out.save()
    with pytest.raises(CommandError, match="2 calls failed; run the command again"):
        run(pairwise, server)
    assert JudgeRating.objects.count() == 7
    out.text = "fixed"
    out.save()
    text, _ = run(pairwise, server)
    assert "2 ratings stored (0 unparseable), 7 already stored, 0 failed, of 9" in text


def test_another_prompt_under_the_same_judge_is_refused(
    pairwise, judge_server, monkeypatch, tmp_path
):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    run(pairwise, server)
    prompt = tmp_path / "mine.txt"
    prompt.write_text(
        "Input: {{ input }}\nResponse A:\n{{ first }}\n\nResponse B:\n{{ second }}\n\n"
        "Which response is better? Answer {{ labels|join:', ' }}"
    )
    with pytest.raises(CommandError, match="already has ratings in this study from another"):
        run(pairwise, server, "--prompt", str(prompt))
    run(pairwise, server, "--prompt", str(prompt), "--judge", "mock-judge-v2")
    assert JudgeRating.objects.filter(judge="mock-judge-v2").count() == 9


def test_a_prompt_cannot_reach_beyond_its_variables(pairwise, judge_server, tmp_path):
    server = judge_server()
    for text in ("{{ input.__class__ }}", '{% include "/etc/passwd" %}', "{% load os %}"):
        prompt = tmp_path / "evil.txt"
        prompt.write_text(text)
        with pytest.raises(CommandError, match="prompt"):
            run(pairwise, server, "--prompt", str(prompt))
    assert server.requests() == [] and not JudgeRating.objects.exists()


@pytest.fixture
def likert(make_study):
    records = [
        {"id": f"q{i}", "input": f"question {i}", "outputs": {"m1": "x" * (i + 1), "m2": "yy"}}
        for i in range(3)
    ]
    study = {
        "kind": "likert",
        "redundancy": 2,
        "criteria": [
            {"name": "fluency", "label": "How fluent?", "scale": [1, 5]},
            {"name": "safe", "label": "Is it safe?", "labels": ["yes", "no"]},
        ],
    }
    return make_study(bundle(records, study))


def test_likert_study_is_rated_per_output_and_criterion(likert, judge_server, monkeypatch):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    out, _ = run(likert, server, "--criterion", "fluency")
    assert "6 ratings stored (0 unparseable)" in out
    out, _ = run(likert, server)
    assert "6 ratings stored (0 unparseable), 6 already stored, 0 failed, of 12" in out
    for r in JudgeRating.objects.filter(study=likert).select_related("input", "system"):
        text = Output.objects.get(input=r.input, system=r.system).text
        assert r.other_system is None and r.shown_first is None
        if r.criterion == "fluency":  # the server picks choices[len % 5] of 1..5
            assert (r.score, r.label) == (1 + len(text) % 5, "")
        else:
            assert (r.score, r.label) == (None, ["yes", "no"][len(text) % 2])
    with pytest.raises(CommandError, match="no criterion 'tone'"):
        run(likert, server, "--criterion", "tone")


def test_report_and_protocol_use_the_judges_ratings(pairwise, judge_server, monkeypatch):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    annotate(pairwise)
    run(pairwise, judge_server())
    report = report_selectors.study_report(pairwise, n_boot=50)
    judges = {j["judge"]: j for j in report["properties"][0]["judges"]}
    assert MODEL in judges
    n_items = pairwise.items.exclude(input__external_id="in1").count()
    assert judges[MODEL]["n_items"] == n_items  # the unparseable input is left out
    assert f"judge '{MODEL}': 3 answers could not be parsed and are left out" in report["notes"]
    s1, s2 = System.objects.filter(study=pairwise, name__in=["s1", "s2"]).order_by("name")
    pair = SystemPair.objects.create(study=pairwise, system_a=s2, system_b=s1)
    labels = metric_labels(pairwise, pair, MODEL, 0.0)
    names = dict(Input.objects.filter(study=pairwise).values_list("pk", "external_id"))
    by_input = {names[i]: v for i, v in labels.items()}
    # in0: s1 longer (the pair's b wins: index 2); in2: equal length (tie: 1); in1 unparseable
    assert by_input == {"in0": 2, "in2": 1}


def test_admin_action_asks_then_rates(pairwise, judge_server, monkeypatch, db, settings):
    monkeypatch.setenv("ADMIN_JUDGE_KEY", KEY)
    server = judge_server()
    settings.HUMEVAL_JUDGE_ENDPOINTS = [(server.url, "ADMIN_JUDGE_KEY")]
    client = boss_client()
    url = "/admin/annotator/study/"
    chosen = {"action": "run_judge", "_selected_action": [pairwise.pk]}
    page = client.post(url, chosen)
    html = page.content.decode()
    assert page.status_code == 200 and 'name="endpoint"' in html
    assert f"{server.url} (sends the operator&#x27;s key ADMIN_JUDGE_KEY)" in html
    assert html.count("Rate with an LLM judge</h1>") == 1  # one heading, not two
    default = judging.PromptTemplate.load("pairwise").text
    assert page.context["form"]["prompt"].value() == default  # the kind's prompt, editable
    assert not JudgeRating.objects.exists()  # asking changes nothing
    form = {
        **chosen,
        "apply": "1",
        "endpoint": server.url,
        "model": MODEL,
        "prompt": default,
        "samples": "1",
        "concurrency": "2",
        "criterion": "",
    }
    bad = client.post(url, {**form, "prompt": "{% load os %}"})
    assert "is not a valid template" in bad.content.decode()
    done = client.post(url, form, follow=True)
    shown = [str(m) for m in done.context["messages"]]
    assert shown == [
        f"{pairwise.name}: 9 ratings stored (3 unparseable), 0 already stored, 0 failed, of 9 "
        f"(sent the operator's key ADMIN_JUDGE_KEY to {server.url})."
    ]
    assert JudgeRating.objects.filter(study=pairwise, judge=MODEL).count() == 9
    assert {r["headers"]["Authorization"] for r in server.requests()} == {f"Bearer {KEY}"}
    run = JudgeRun.objects.get()
    assert (run.state, run.stored, run.key_sent) == (
        "done",
        9,
        "the operator's key ADMIN_JUDGE_KEY",
    )


def test_the_admin_prompt_field_changes_what_is_sent(pairwise, judge_server, db, settings):
    server = judge_server()
    client = boss_client()
    mine = (
        "MY PROMPT\nResponse A:\n{{ first }}\n\nResponse B:\n{{ second }}\n\n"
        "Which response is better? {{ labels|join:', ' }}"
    )
    form = {
        "action": "run_judge",
        "_selected_action": [pairwise.pk],
        "apply": "1",
        "endpoint": "own",
        "base_url": server.url,
        "api_key": KEY,
        "model": MODEL,
        "judge": "mock-judge-my-prompt",
        "prompt": mine,
        "samples": "1",
        "concurrency": "1",
        "criterion": "",
    }
    client.post("/admin/annotator/study/", form)
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests()]
    assert len(prompts) == 9 and all(p.startswith("MY PROMPT\nResponse A:") for p in prompts)
    hashes = set(JudgeRating.objects.values_list("prompt_hash", flat=True))
    assert hashes == {judging.PromptTemplate.from_text(mine).hash}
    assert set(JudgeRating.objects.values_list("judge", flat=True)) == {"mock-judge-my-prompt"}


def test_the_operators_key_never_goes_to_an_unlisted_url(
    pairwise, judge_server, monkeypatch, db, settings
):
    """Issue 31 item 3: the operator's key is bound to the listed endpoint; a researcher who
    enters another URL (their own server) can send their own key or none, never the
    operator's; the form says which, and the run records what the worker sent."""
    monkeypatch.setenv("OPERATOR_KEY", "sk-operator-secret")
    listed, theirs = judge_server(), judge_server()
    settings.HUMEVAL_JUDGE_ENDPOINTS = [(listed.url, "OPERATOR_KEY")]
    client = boss_client()
    form = {
        "action": "run_judge",
        "_selected_action": [pairwise.pk],
        "apply": "1",
        "model": MODEL,
        "samples": "1",
        "concurrency": "1",
        "criterion": "",
    }
    url = "/admin/annotator/study/"
    # the listed URL typed in as "your own": refused (it would take the operator's key)
    page = client.post(url, {**form, "endpoint": "own", "base_url": listed.url + "/"})
    assert "This endpoint is listed above: pick it there." in page.content.decode()
    # a listed endpoint with a key of the researcher's: refused
    page = client.post(url, {**form, "endpoint": listed.url, "api_key": "mine"})
    assert "A listed endpoint sends the key bound to it" in page.content.decode()
    # their own URL without a key: no key is sent, and the message says so
    done = client.post(url, {**form, "endpoint": "own", "base_url": theirs.url}, follow=True)
    assert f"(sent no key to {theirs.url})" in str(list(done.context["messages"])[0])
    assert theirs.requests()
    assert all("Authorization" not in r["headers"] for r in theirs.requests())
    # the run row cannot be turned to the operator's key for another URL: the worker looks
    # the URL up in its own list
    run = judging.judge_run_create(pairwise, base_url=theirs.url, model="other-judge")
    JudgeRun.objects.filter(pk=run.pk).update(key_source=JudgeRun.Key.ENDPOINT)
    assert "is not a listed judge endpoint" in judging.judge_run_execute(run.pk)
    # their own URL with their key: that key, never the operator's
    client.post(url, {**form, "endpoint": "own", "base_url": theirs.url, "api_key": KEY})
    keys = {r["headers"].get("Authorization") for r in theirs.requests()}
    assert keys == {None, f"Bearer {KEY}"}
    run = JudgeRun.objects.filter(key_source="own").get()
    assert run.own_key == "" and run.key_sent == "the researcher's own key"  # erased
    assert listed.requests() == []
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert "sk-operator-secret" not in dump.getvalue() and KEY not in dump.getvalue()
    # the command line: an unlisted URL gets no key unless the operator names one
    monkeypatch.setenv(judging.API_KEY_ENV, "sk-operator-secret")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="HTTP 401"):  # the stand-in wants a key
        call_command(
            "run_judge",
            str(pairwise.pk),
            "--base-url",
            theirs.url,
            "--model",
            "cli-judge",
            "--concurrency",
            "1",
            stdout=out,
            stderr=err,
        )
    assert "no key variable for this URL: no API key is sent" in err.getvalue()
    sent = {r["headers"].get("Authorization") for r in theirs.requests()}
    assert "Bearer sk-operator-secret" not in sent


def test_the_report_reads_every_sample_for_the_judges_self_agreement(
    pairwise, judge_server, monkeypatch
):
    """``--samples 3``: the human-vs-judge figures read sample 0 alone; the agreement among
    the judge's samples reads all three (the stand-in server answers alike every time)."""
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    annotate(pairwise)
    run(pairwise, judge_server(), "--samples", "3")
    assert JudgeRating.objects.filter(study=pairwise, parse_ok=True).count() == 3 * 6
    prop = report_selectors.study_report(pairwise, n_boot=0)["properties"][0]
    judges = {j["judge"]: j for j in prop["judges"]}
    n_items = pairwise.items.exclude(input__external_id="in1").count()
    assert judges[MODEL]["n_items"] == n_items  # one label per item, not three
    rows = [r for r in prop["judges_extra"]["samples"] if r["judge"] == MODEL]
    assert rows and all(r["n_samples"] == 3 for r in rows)
    percent = next(r for r in rows if "percent" in r["metric"].lower())
    assert percent["value"] == pytest.approx(1.0)


def test_the_admin_says_what_the_key_is_when_the_worker_sends_it(
    pairwise, judge_server, monkeypatch, db, settings
):
    """Issue 31 item 8: with a broker, the form cannot know the worker's environment; it says
    which key the worker will send (the operator's key bound to the endpoint), never that
    none is sent, and the run row records what the worker did send."""
    server = judge_server()
    settings.HUMEVAL_JUDGE_ENDPOINTS = [(server.url, "WORKER_ONLY_KEY")]
    monkeypatch.delenv("WORKER_ONLY_KEY", raising=False)  # not in the web process
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued = []
    monkeypatch.setattr("annotator.tasks.run_judge.delay", lambda run_id: queued.append(run_id))
    client = boss_client()
    form = {
        "action": "run_judge",
        "_selected_action": [pairwise.pk],
        "apply": "1",
        "endpoint": server.url,
        "model": MODEL,
        "samples": "1",
        "concurrency": "1",
        "criterion": "",
    }
    done = client.post("/admin/annotator/study/", form, follow=True)
    text = str(list(done.context["messages"])[0])
    assert "will send the operator's key WORKER_ONLY_KEY (as set on the judge worker)" in text
    assert "not set" not in text
    monkeypatch.setenv("WORKER_ONLY_KEY", KEY)  # the worker's environment
    judging.judge_run_execute(queued[0])
    assert {r["headers"]["Authorization"] for r in server.requests()} == {f"Bearer {KEY}"}
    assert JudgeRun.objects.get().key_sent == "the operator's key WORKER_ONLY_KEY"
