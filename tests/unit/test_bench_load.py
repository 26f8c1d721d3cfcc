"""Smoke test of the load bench's pure helpers (the bench itself never runs in the tests)."""

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from annotator.importers import parse_study_file

PATH = Path(__file__).resolve().parents[2] / "bench" / "load.py"


@pytest.fixture(scope="module")
def load():
    spec = importlib.util.spec_from_file_location("bench_load", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_load"] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_load", None)


def test_percentile_interpolates(load):
    assert load.percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.5
    assert load.percentile([5.0], 99) == 5.0
    assert load.percentile(list(range(101)), 95) == 95


def test_slices_are_measured_end_to_end(load):
    """Alternating slices: only what falls in a window counts, and the timeline lays the
    windows end to end (the pauses between them are not measured time)."""
    stats = load.LoadStats(windows=[(10.0, 20.0), (30.0, 40.0)])
    stats.start, stats.deadline = stats.windows[-1]
    assert [stats.measuring(t) for t in (9.9, 10.0, 19.9, 20.0, 25.0, 30.0, 40.0)] == [
        False, True, True, False, False, True, False,
    ]  # fmt: skip
    assert [stats.measured(t) for t in (5.0, 15.0, 25.0, 35.0, 45.0)] == [0, 5, 10, 15, 20]
    stats.cycles = [12.0] * 5 + [19.0] * 10 + [25.0] * 50 + [31.0] * 15 + [39.5] * 20
    assert load.timeline(stats, bucket=5.0) == "1 2 3 4"  # cycles per second; 25.0 paused


def test_usage_adds_up_per_service(load):
    a = load.Usage(10.0, {"gunicorn": 12.0, "postgres": 3.0}, 1.5, 19.0)
    b = load.Usage(5.0, {"gunicorn": 6.0, "celery": 0.5}, 0.5, 9.5)
    total = a + b
    assert (total.wall, total.client, total.machine) == (15.0, 2.0, 28.5)
    assert total.by_service == {"gunicorn": 18.0, "postgres": 3.0, "celery": 0.5}


def test_task_page_yields_tokens_and_shown_systems(load):
    html = (
        '<ul class="messages" role="alert"><li class="error">Too late.</li></ul>'
        '<input type="hidden" name="csrfmiddlewaretoken" value="abc123">'
        '<input type="hidden" name="token" value="0f8fad5b-d9cb-469f-a165-70867728950e">'
        '<div class="text scroll"><p>s03 says 7</p></div>'
        '<div class="text scroll"><p>s01 says 7</p></div>'
    )
    page = load.parse_task_page(html)
    assert (page.token, page.csrf) == ("0f8fad5b-d9cb-469f-a165-70867728950e", "abc123")
    assert (page.left, page.right, page.messages) == ("s03", "s01", "Too late.")
    assert load.parse_task_page("<h1>No work left</h1>") is None


def test_answers_follow_quality(load):
    rng = random.Random(0)
    answers = [load.choose_answer("s02", "s01", rng) for _ in range(2000)]
    assert 0.8 < answers.count("right") / len(answers) < 0.9
    assert set(load.choose_answer("s02", "s03", rng) for _ in range(100)) == {
        "left",
        "right",
        "tie",
    }


def test_set_cookie_parsing(load):
    assert load.parse_set_cookie("sessionid=xyz; HttpOnly; Path=/") == ("sessionid", "xyz", False)
    gone = 'messages=""; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/'
    assert load.parse_set_cookie(gone) == ("messages", "", True)


def test_bundle_is_a_valid_adaptive_study(load):
    spec = parse_study_file(load.study_bundle(4, 5, redundancy=3, budget=90), "load.jsonl")
    assert spec.options["collection"] == "adaptive" and spec.options["open_links"]
    assert len(spec.systems) == 4 and len(spec.inputs) == 5
    assert load.study_capacity(4, 5, 3) == 6 * 5 * 3


def test_every_kind_has_work_for_the_whole_run(load):
    """A run at 200+ cycles/s takes some 25,000 annotations: every kind's default study
    holds the pairwise default's 84,000 (Likert and ranking held 24,000 and ran out)."""
    for kind in load.KINDS:
        args = load.parse_args(["--kind", kind])
        capacity = load.study_capacity(args.systems, args.inputs, args.redundancy, kind)
        assert load.CAPACITY <= capacity < load.CAPACITY + load.items_per_input(kind, 8) * 3
    assert load.parse_args(["--kind", "likert"]).inputs == 3500
    # rounds of about 2,520 annotations: 28 pairs × 30 × 3; 8 outputs × 105 × 3; a ranking
    # item serves 3 of the 28 pairs, 28 / 3 × 90 × 3
    assert [load.parse_args(["--kind", k]).batch_size for k in load.KINDS] == [30, 105, 90, 105]
    assert load.parse_args(["--kind", "ranking", "--inputs", "50"]).inputs == 50
