"""The pure report layer: loaders, build_report, renderers and ``python -m analysis``
(no database)."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis import agreement, loaders, loaders_judges
from analysis.__main__ import main as cli_main
from analysis.aggregation import soft_vote
from analysis.judges import judge_vs_majority
from analysis.pairwise import pairwise_win_rates
from analysis.render import render_html, render_text
from analysis.report import Property, agreement_blocks, build_report, json_safe
from tests.conftest import JUDGEBENCH_EXAMPLE, LLMBAR, ROOT, active_markup, boss_client
from tests.unit.test_report import comparable

HOSTILE = "<script>alert(1)</script>"
PREF = Property("preference", "pairwise", ("A", "B", "tie"))


def pairwise_frames(n_items: int = 40, seed: int = 3, systems=("s1", "s2", "s3")):
    """Random pairwise labels: 3 per item, display sides, one judge; items over system pairs."""
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1 :]]
    items, rows = [], []
    for i in range(n_items):
        a, b = pairs[i % len(pairs)]
        items.append({"item": i, "input_id": f"in{i}", "system_a": a, "system_b": b})
        for j in range(3):
            rows.append(
                {
                    "item": i,
                    "annotator": f"w{(i + j) % 5}",
                    "label": str(rng.choice(["A", "B", "tie"], p=[0.5, 0.3, 0.2])),
                    "property": "preference",
                    "raw": str(rng.choice(["left", "right"])),
                    "source": "platform",
                }
            )
    judges = pd.DataFrame(
        {
            "item": range(n_items),
            "judge": "llm",
            "label": rng.choice(["A", "B", "tie"], size=n_items),
            "property": "preference",
        }
    )
    return pd.DataFrame(rows), pd.DataFrame(items), judges


def walk(obj, path=""):
    """Yield (path, dict) for every dict in a nested structure."""
    if isinstance(obj, dict):
        yield path, obj
        for k, v in obj.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}[{i}]")


def assert_undefined_explained(report: dict) -> None:
    json.dumps(report, allow_nan=False)  # no NaN or infinity anywhere
    for path, d in walk(report):
        if "value" in d and d["value"] is None:
            assert d.get("reason"), f"{path}: undefined value without a reason"
        for key in ("win_rate", "expected_win_rate", "share_left", "p_value", "tie_rate"):
            if key in d and d[key] is None:
                assert d.get("reason"), f"{path}.{key}: undefined without a reason"


# --------------------------------------------------------------------------------------------


def test_figures_equal_the_core():
    ann, items, judges = pairwise_frames()
    report = build_report(ann, [PREF], judges=judges, items=items, n_boot=300, seed=1)
    prop = report["properties"][0]
    core_kw = {"labels": list(PREF.labels), "n_boot": 300, "seed": 1}
    rel = {r["metric"]: r for r in prop["reliability"]}
    alpha = agreement.krippendorff_alpha(ann, level="nominal", **core_kw)
    assert rel["krippendorff_alpha"]["level"] == "nominal"
    assert rel["krippendorff_alpha"]["value"] == pytest.approx(alpha.value, abs=1e-12)
    assert rel["krippendorff_alpha"]["low"] == pytest.approx(alpha.low, abs=1e-12)
    assert rel["fleiss_kappa"]["value"] == pytest.approx(
        agreement.fleiss_kappa(ann, **core_kw).value
    )
    assert rel["loo_inner"]["value"] == pytest.approx(
        agreement.loo_agreement_inner(ann, **core_kw).value
    )
    outcomes = soft_vote(ann, threshold=0.1)
    rates = pairwise_win_rates(outcomes, items, n_boot=300, seed=1)
    got = {(r["system_1"], r["system_2"]): r for r in prop["pairwise"]["pairs"]}
    for row in rates.itertuples():
        r = got[(row.system_1, row.system_2)]
        assert r["expected_win_rate"] == pytest.approx(row.expected_win_rate)
        assert r["expected_win_rate_low"] == pytest.approx(row.expected_win_rate_low)
        assert (r["wins_1"], r["ties"], r["wins_2"]) == (row.wins_1, row.ties, row.wins_2)
    judge = prop["judges"][0]
    outer = agreement.loo_agreement_outer(ann, judges, judge="llm", **core_kw)
    assert judge["loo_outer"]["value"] == pytest.approx(outer.value)
    kappa = judge_vs_majority(ann, judges, judge="llm", **core_kw)
    got_kappa = next(r for r in judge["vs_majority"] if r["metric"] == "cohen_kappa")
    assert got_kappa["value"] == pytest.approx(
        kappa.set_index("metric").loc["cohen_kappa", "value"]
    )
    assert prop["position_bias"]["overall"]["n"] == len(ann)
    assert_undefined_explained(report)


def test_threshold_changes_soft_voted_ties():
    ann = pd.DataFrame(
        {"item": [1, 1, 1, 1, 1], "annotator": list("abcde"), "label": ["A", "A", "A", "B", "B"]}
    )
    loose = build_report(ann, [PREF], threshold=0.2, n_boot=0)
    tight = build_report(ann, [PREF], threshold=0.1, n_boot=0)
    # p_A - p_B = 0.2: a tie at threshold 0.2, a win for A at 0.1 (ORA soft voting)
    assert loose["properties"][0]["pairwise"]["outcomes"] == {"A": 0, "B": 0, "tie": 1}
    assert tight["properties"][0]["pairwise"]["outcomes"] == {"A": 1, "B": 0, "tie": 0}
    assert tight["properties"][0]["pairwise"]["pairs_reason"].startswith("no system names")


def test_likert_interval_and_ordinal_levels():
    rng = np.random.default_rng(0)
    ann = pd.DataFrame(
        {
            "item": np.repeat(np.arange(30), 3),
            "annotator": np.tile(["a", "b", "c"], 30),
            "label": np.clip(np.repeat(rng.integers(1, 6, 30), 3) + rng.integers(-1, 2, 90), 1, 5),
        }
    )
    items = pd.DataFrame({"item": range(30), "system_a": ["m1", "m2"] * 15})
    judges = pd.DataFrame({"item": range(30), "judge": "j", "label": rng.integers(1, 6, 30)})
    prop = Property("fluency", "ordinal", (1, 2, 3, 4, 5))
    report = build_report(ann, [prop], judges=judges, items=items, n_boot=200, interval=True)
    sec = report["properties"][0]
    alphas = {
        r["level"]: r["value"] for r in sec["reliability"] if r["metric"] == "krippendorff_alpha"
    }
    for level in ("ordinal", "interval"):
        core = agreement.krippendorff_alpha(ann, level=level, labels=[1, 2, 3, 4, 5], n_boot=0)
        assert alphas[level] == pytest.approx(core.value)
    systems = {r["system"]: r for r in sec["likert"]["systems"]}
    assert set(systems) == {"all", "m1", "m2"}
    m1 = ann[ann["item"] % 2 == 0]["label"]
    assert systems["m1"]["mean_rating"] == pytest.approx(m1.mean())
    corr = {r["metric"] for r in sec["judges"][0]["correlations"]}
    assert corr == {"spearman", "kendall", "pearson"}
    assert [b["bin"] for b in sec["perception"]["bins"]] == [1, 2, 3, 4, 5]
    assert_undefined_explained(report)


def test_judge_preference_is_flipped_to_the_items_orientation():
    items = pd.DataFrame(
        {"item": [7, 8], "input_id": ["q1", "q2"], "system_a": ["alpha", "beta"]}
        | {"system_b": ["beta", "alpha"]}
    )
    records = pd.DataFrame(
        [
            # stored in the order (beta, alpha): "A" means beta is better -> item 7's B
            {"judge": "j", "input_id": "q1", "system": "beta", "system_b": "alpha", "label": "A"},
            # item 8 shows beta as A: same orientation, kept
            {"judge": "j", "input_id": "q2", "system": "beta", "system_b": "alpha", "label": "A"},
            # the preferred system by name, reverse orientation again
            {
                "judge": "k",
                "input_id": "q1",
                "system": "beta",
                "system_b": "alpha",
                "label": "beta",
            },
            {"judge": "k", "input_id": "q2", "system": "alpha", "system_b": "beta", "label": "tie"},
            # per-output metric scores: alpha lower than beta -> B on item 7, A on item 8
            {"judge": "m", "input_id": "q1", "system": "alpha", "score": 0.2},
            {"judge": "m", "input_id": "q1", "system": "beta", "score": 0.5},
            {"judge": "m", "input_id": "q2", "system": "alpha", "score": 0.2},
            {"judge": "m", "input_id": "q2", "system": "beta", "score": 0.5},
            # an unknown pair is reported, not guessed
            {"judge": "j", "input_id": "q9", "system": "alpha", "system_b": "beta", "label": "A"},
        ]
    ).reindex(columns=[*loaders_judges.JUDGE_COLUMNS, "where"])
    frame, notes = loaders_judges.attach_judges(records, items, [PREF])
    got = {(r.judge, r.item): r.label for r in frame.itertuples()}
    assert got == {
        ("j", 7): "B",
        ("j", 8): "A",
        ("k", 7): "B",
        ("k", 8): "tie",
        ("m", 7): "B",
        ("m", 8): "A",
    }
    assert len(notes) == 1 and "no item shows this input with these two systems" in notes[0]


def test_loader_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"item_id": 1, "annotator": "a", "label": "A"}\n{"item_id": 2,\n')
    with pytest.raises(ValueError, match=r"labels\.jsonl: line 2: not valid JSON"):
        loaders.load_dataset(bad)
    wrong = tmp_path / "labels2.jsonl"
    wrong.write_text('{"item_id": 1, "annotator": "a", "label": "better"}\n')
    with pytest.raises(ValueError, match=r"line 1: label 'better' is not one of"):
        loaders.load_dataset(wrong)
    csv_file = tmp_path / "labels.csv"
    csv_file.write_text("item,who\n1,a\n")
    with pytest.raises(ValueError, match="not a label export: missing item_id, annotator"):
        loaders.load_dataset(csv_file)
    jb = tmp_path / "jb.json"
    jb.write_text(
        json.dumps(
            {
                "annotations": [{"metric": "g", "category": "graded", "worst": 1, "best": 5}],
                "instances": [
                    {
                        "id": 1,
                        "instance": "x",
                        "annotations": {"g": {"individual_human_scores": [9]}},
                    }
                ],
            }
        )
    )
    with pytest.raises(ValueError, match=r"instances\[0\] \(id '1'\): 'g' score 9 is outside"):
        loaders.load_dataset(jb)
    judge = tmp_path / "judge.jsonl"
    judge.write_text(
        '{"input_id": "q", "system": "a", "label": "A"}\n{"judge": "j", "score": "x"}\n'
    )
    with pytest.raises(ValueError) as exc:
        loaders_judges.read_judges(judge)
    assert "judge.jsonl: line 1: no 'judge'" in str(exc.value)
    assert "judge.jsonl: line 2: give 'item', or 'input_id' and 'system'" in str(exc.value)
    assert cli_main(["report", str(bad)]) == 2


def test_csv_export_cells_are_restored(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(
        "annotation_id,item_id,input_id,is_gold,system_a,system_b,raw_answer,label,annotator,"
        "source,flagged\n"
        "1,5,q,False,'=evil,'-minus,left,A,w1,platform,False\n"
        "2,5,q,False,'=evil,'-minus,right,B,w2,platform,True\n"
    )
    data = loaders.load_dataset(path)
    assert data.items.loc[0, ["system_a", "system_b"]].tolist() == ["=evil", "-minus"]
    assert data.annotations["flagged"].tolist() == [False, True]
    report = build_report(data.annotations, data.properties, items=data.items, n_boot=0)
    assert report["counts"]["flagged_excluded"] == 1
    assert report["properties"][0]["pairwise"]["pairs"][0]["system_1"] == "-minus"


def test_html_escapes_untrusted_names_and_explains_undefined():
    ann, items, judges = pairwise_frames(n_items=12)
    items["system_a"] = items["system_a"].replace("s1", HOSTILE)
    judges["judge"] = '<img src=x onerror="alert(1)">'
    single = ann.drop_duplicates("item")  # one label per item: reliability undefined
    report = build_report(single, [PREF], judges=judges, items=items, n_boot=50)
    page = render_html(report)
    assert "<svg" in page and active_markup(page) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "no item has two or more labels" in page
    text = render_text(report)
    assert "undefined -- no item has two or more labels" in text
    assert "nan" not in text.lower().replace("annotat", "")
    assert_undefined_explained(report)


def test_text_strips_terminal_escapes():
    ann, items, _ = pairwise_frames(n_items=6)
    items["system_a"] = items["system_a"].replace("s1", "evil\x1b[2Jname")
    text = render_text(build_report(ann, [PREF], items=items, n_boot=0))
    assert "\x1b" not in text and "evil?[2Jname" in text


def test_cli_on_judgebench_example_prints_alpha_with_level(tmp_path):
    out = tmp_path / "report.html"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "analysis", "report", str(JUDGEBENCH_EXAMPLE)]
        + ["--html", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()]
    # only Django's template engine is loaded for the HTML file: no project, models or DRF
    project = ("rest_framework", "config", "annotator", "protocol")
    assert not [m for m in imported if m.split(".")[0] in project]
    assert not [m for m in imported if m.startswith(("django.db.models", "django.contrib"))]
    assert "analysis.report" in imported and "django.template" in imported  # the log is there
    data = loaders.load_dataset(JUDGEBENCH_EXAMPLE)
    g = data.annotations[data.annotations["property"] == "grammaticality"]
    alpha = agreement.krippendorff_alpha(g, level="ordinal", labels=list(range(1, 8)), n_boot=0)
    assert f"Krippendorff's alpha (ordinal)   {alpha.value:.3f}" in run.stdout
    assert "== fluency (ordinal scale" in run.stdout
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and active_markup(page) == []


def test_cli_on_llmbar_with_a_judge(tmp_path, capsys):
    judge = tmp_path / "judge.csv"
    doc = json.loads(LLMBAR.read_text())
    rows = ["judge,item,label"] + [
        f"gpt,{inst['id']},{'model_a' if i % 3 else 'model_b'}"
        for i, inst in enumerate(doc["instances"])
    ]
    judge.write_text("\n".join(rows) + "\n")
    # in this process: the test above runs the command itself
    code = cli_main(["report", str(LLMBAR), "--judge", str(judge), "--json", "--n-boot", "100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    prop = report["properties"][0]
    assert (prop["scale"], prop["labels"]) == ("pairwise", ["A", "B"])
    alpha = prop["reliability"][0]
    assert (alpha["metric"], alpha["level"], alpha["value"]) == (
        "krippendorff_alpha",
        "nominal",
        None,
    )
    assert alpha["reason"].startswith("no item has two or more labels")
    judge_sec = prop["judges"][0]
    assert judge_sec["judge"] == "gpt" and judge_sec["n_items"] == 100
    acc = next(r for r in judge_sec["vs_majority"] if r["metric"] == "accuracy")
    data = loaders.load_dataset(LLMBAR)
    human = data.annotations.set_index("item")["label"]
    expected = np.mean(
        [human[inst["id"]] == ("A" if i % 3 else "B") for i, inst in enumerate(doc["instances"])]
    )
    assert acc["value"] == pytest.approx(expected)
    assert_undefined_explained(report)


def test_labels_option():
    assert loaders.parse_labels_option("fluency=1:5") == ("fluency", (1, 2, 3, 4, 5))
    assert loaders.parse_labels_option("preference=A,B,tie") == ("preference", ("A", "B", "tie"))
    with pytest.raises(ValueError, match="NAME="):
        loaders.parse_labels_option("fluency")
    assert math.isclose(float(loaders.parse_labels_option("x=0.5,1.5")[1][0]), 0.5)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["pairwise", "likert", "ranking", "error_spans"])
def test_every_export_gives_the_same_report(tmp_path, make_study, kind):
    """A study's labels of every kind exported by the API (``?format=json``, ``jsonl``,
    ``csv``) and by ``export_labels`` (``json``, ``jsonl``, ``csv``) give one and the same
    report, which reads the kind's labels as ``manage.py analyze`` does on the database."""
    from django.core.management import call_command

    from annotator.simulated_crowd import crowd_run
    from tests.conftest import pairwise_bundle

    systems = ("=SUM(1)", "beta", "gamma")  # a name the CSV export guards against formulas
    extra = {"criteria": [{"name": "fluency", "scale": [1, 5]}]} if kind == "likert" else {}
    study = make_study(
        pairwise_bundle(n_inputs=6, systems=systems, kind=kind, **extra), redundancy=3
    )
    assert crowd_run(study, workers=4, seed=2, until_done=True).answers > 0
    client = boss_client()
    files = {}
    for fmt in ("json", "jsonl", "csv"):
        response = client.get(
            f"/api/studies/{study.pk}/annotations/", {"format": fmt, "page_size": 10000}
        )
        assert response.status_code == 200
        files[f"api.{fmt}"] = response.content
        out = tmp_path / f"cli.{fmt}"
        call_command("export_labels", str(study.pk), "--format", fmt, "-o", str(out))
        files[out.name] = out.read_bytes()
    assert json.loads(files["api.json"]).keys() == {"next", "previous", "results"}
    reports = {}
    for name, body in files.items():
        path = tmp_path / "in" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(body)
        report = loaders_report(path)
        assert report["counts"]["annotations"] > 0, name
        reports[name] = report
        assert cli_main(["report", str(path), "--n-boot", "0"]) == 0
    first = reports.pop("api.json")
    for name, report in reports.items():
        assert report == first, name
    out = io.StringIO()  # and the report of the database, ``manage.py analyze``
    call_command("analyze", str(study.pk), "--json", "--n-boot", "50", stdout=out)
    from_db = json.loads(out.getvalue())
    assert comparable(first) == comparable(from_db)
    assert first["counts"] == from_db["counts"]
    prop = first["properties"][0]
    if kind in ("pairwise", "ranking"):  # a ranking read as its pairs of outputs
        assert prop["name"] == "preference"
        names = {r["system_1"] for r in prop["pairwise"]["pairs"]}
        assert "=SUM(1)" in names | {r["system_2"] for r in prop["pairwise"]["pairs"]}
    elif kind == "likert":
        assert prop["name"] == "fluency" and prop["likert"]["systems"]
    else:  # the 0-100 score: interval level, in ten bins, per system
        assert (prop["name"], prop["level"], len(prop["bins"])) == ("score", "interval", 10)
        by_system = {r["system"]: r["n_ratings"] for r in prop["likert"]["systems"]}
        assert by_system == {"all": 54, "=SUM(1)": 18, "beta": 18, "gamma": 18}


def loaders_report(path) -> dict:
    from analysis.__main__ import report_for_file

    report = report_for_file(path, n_boot=50)
    for key in ("title", "source", "elapsed_seconds"):  # the file's name, the time taken
        report.pop(key, None)
    return json.loads(json.dumps(report))


def test_api_json_page_names_the_next_page(tmp_path):
    row = {"item_id": 1, "annotator": "w1", "label": "A", "system_a": "x", "system_b": "y"}
    page = {"next": "http://h/api/studies/1/annotations/?cursor=abc", "previous": None}
    path = tmp_path / "page.json"
    path.write_text(json.dumps({**page, "results": [row, {**row, "annotator": "w2"}]}))
    data = loaders.load_dataset(path)
    assert len(data.annotations) == 2
    assert "?cursor=abc" in data.notes[0] and "one page of the export" in data.notes[0]
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"next": None, "previous": None, "results": []}))
    with pytest.raises(ValueError, match="the file holds no labels"):
        loaders.load_dataset(empty)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="neither a label export .* nor a Judge-Bench file"):
        loaders.load_dataset(other)


def test_report_ranks_systems_by_bradley_terry_from_soft_voted_items():
    """The report's ``ranking`` equals the core function on the items' soft-voted outcomes,
    resampled over inputs with the report's seed and n_boot; text and HTML show it."""
    from ranking import bradley_terry

    ann, items, judges = pairwise_frames(n_items=60)
    items["input_id"] = [f"in{i // 3}" for i in range(60)]  # three items (pairs) per input
    report = build_report(ann, [PREF], judges=judges, items=items, n_boot=200, seed=4)
    prop = report["properties"][0]
    outcomes = soft_vote(ann, threshold=0.1)
    frame = items.set_index("item").loc[outcomes["item"], ["input_id", "system_a", "system_b"]]
    frame = frame.rename(columns={"input_id": "input"}).assign(
        outcome=outcomes["outcome"].to_numpy()
    )
    core = bradley_terry(frame.reset_index(drop=True), n_boot=200, seed=4)
    ranking = prop["ranking"]
    assert [r["system"] for r in ranking] == core["system"].tolist()
    assert [r["score"] for r in ranking] == pytest.approx(core["score"].tolist(), abs=1e-9)
    assert [r["low"] for r in ranking] == pytest.approx(core["low"].tolist(), abs=1e-9)
    assert [r["rank"] for r in ranking] == core["rank"].tolist()
    assert set(ranking[0]) >= {"system", "score", "low", "high", "rank"}
    method = prop["ranking_method"]
    assert method["n_inputs"] == 20 and method["n_comparisons"] == 60
    assert method["ties"] == "a tie counts as half a win to each side"
    assert sum(r["wins"] + r["ties"] + r["losses"] for r in ranking) == 2 * 60
    text = render_text(report)
    assert "Ranking: Bradley-Terry scores (Elo-like" in text
    first = ranking[0]
    line = next(x for x in text.splitlines() if x.strip().startswith(f"{first['rank']}  "))
    assert first["system"] in line and f"{first['score']:.1f}" in line
    html = render_html(report)
    assert "Ranking (Bradley–Terry)" in html
    assert f"[{first['low']:.1f}, {first['high']:.1f}]" in html
    assert "Bradley-Terry scores with bootstrap intervals" in html  # the chart's label
    assert_undefined_explained(report)


def test_ranking_without_system_names_or_intervals_says_why():
    ann, items, _ = pairwise_frames(n_items=12)
    no_names = build_report(ann, [PREF], n_boot=0)["properties"][0]
    assert no_names["ranking"] == []
    assert no_names["ranking_method"]["reason"].startswith("no system names")
    assert "undefined -- no system names" in render_text(build_report(ann, [PREF], n_boot=0))
    plain_rank = build_report(ann, [PREF], items=items, n_boot=0)["properties"][0]["ranking"]
    assert all(r["low"] is None and r["reason"] == "no bootstrap interval: n_boot=0"
               for r in plain_rank)  # fmt: skip
    scores = [r["score"] for r in plain_rank]
    assert [r["rank"] for r in plain_rank] == [1 + sum(s > x for s in scores) for x in scores]


def test_ranking_chart_of_equal_scores_has_an_axis():
    """Systems that only tied score 1000 each with no spread; the chart still has two ticks."""
    from charts.ranking import ranking_chart, score_ticks

    assert score_ticks(1000.0, 1000.0) == [999.0, 999.5, 1000.0, 1000.5, 1001.0]
    assert score_ticks(938.1, 1044.8) == [920, 940, 960, 980, 1000, 1020, 1040, 1060]
    rows = [{"system": s, "score": 1000.0, "low": 1000.0, "high": 1000.0, "rank": 1} for s in "ab"]
    svg = ranking_chart(rows)
    assert svg is not None and any(
        s.get("text") == "1000.00 [1000.00, 1000.00]" for s in svg["shapes"]
    )
    assert ranking_chart([]) is None


def test_agreement_blocks_are_the_reports_own_without_a_bootstrap():
    """What the report by guideline revision shows (``agreement_blocks``) is what the whole
    report says at ``n_boot=0``: a pairwise property, an ordinal one with a label outside
    its set and a flagged worker, and a property nobody labelled."""
    ann, items, _ = pairwise_frames(n_items=12)
    rng = np.random.default_rng(5)
    likert = pd.DataFrame(
        {
            "item": np.repeat(np.arange(12), 3),
            "annotator": [f"w{k % 4}" for k in range(36)],
            "label": rng.integers(1, 6, size=36),
            "property": "fluency",
        }
    )
    likert.loc[3, "label"] = 9  # outside 1..5
    ann = pd.concat([ann, likert], ignore_index=True)
    ann["flagged"] = ann["annotator"] == "w3"
    props = [
        PREF,
        Property("fluency", "ordinal", (1, 2, 3, 4, 5)),
        Property("unused", "categorical", ("x", "y")),
    ]
    for include_flagged in (False, True):
        report = build_report(
            ann, props, items=items, n_boot=0, seed=4, include_flagged=include_flagged
        )
        expected = [
            {
                "name": s["name"],
                "reliability": s.get("reliability"),
                "position_bias": s.get("position_bias"),
            }
            for s in report["properties"]
        ]
        got = agreement_blocks(ann, props, include_flagged=include_flagged, seed=4)
        assert json_safe(got) == json_safe(expected)
        assert got[0]["position_bias"] and got[1]["reliability"] and got[2]["reliability"] is None
