"""The text report and the HTML report show the same tables (``analysis.tables``): for every
kind (pairwise, Likert, ranking, error spans) and for reports with judges, the same titles,
columns and row counts in the same order; the names that once drifted apart ("Cohen's
kappa" vs "Cohen's kappa vs human majority") and the stratified rows the text once dropped."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from analysis.render import render_html, render_text
from analysis.report import Property, build_report
from analysis.tables import report_tables
from tests.unit.analysis.test_report_peers import study as likert_study
from tests.unit.test_report_cli import PREF, pairwise_frames

RULE = re.compile(r"^  -+(  -+)*$")


class _Tables(HTMLParser):
    """(title, columns, row count) of every ``<table>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[str], int]] = []
        self._in_th = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.found.append((dict(attrs).get("aria-label") or "", [], 0))
        elif tag == "th":
            self._in_th = True
            self.found[-1][1].append("")
        elif tag == "tr" and self._body:
            title, cols, n = self.found[-1]
            self.found[-1] = (title, cols, n + 1)
        elif tag == "tbody":
            self._body = True
        elif tag == "thead":
            self._body = False

    def handle_endtag(self, tag):
        if tag == "th":
            self._in_th = False

    def handle_data(self, data):
        if self._in_th:
            self.found[-1][1][-1] += data


def html_tables(page: str) -> list[tuple[str, list[str], int]]:
    body = page.split('class="hv-report"', 1)[1]
    parser = _Tables()
    parser._body = False
    parser.feed(body)
    return [(html.unescape(t), [c.strip() for c in cols], n) for t, cols, n in parser.found]


def text_tables(text: str) -> list[tuple[str, list[str], int]]:
    """Every table of the text report: the title line above its header (past its notes),
    the header split on runs of spaces, and the rows down to its source or a blank line."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not RULE.match(line):
            continue
        widths = [len(w) for w in line.strip().split("  ")]
        header, pos, cols = lines[i - 1], 2, []
        for w in widths:
            cols.append(header[pos : pos + w].strip())
            pos += w + 2
        j = i - 2
        while lines[j].startswith("  Note: "):
            j -= 1
        assert lines[j].endswith(":"), lines[j]
        n = 0
        for row in lines[i + 1 :]:
            if not row.startswith("  ") or row.startswith("  Source: "):
                break
            n += 1
        out.append((lines[j][:-1], cols, n))
    return out


def assert_same_tables(report: dict) -> list[tuple[str, list[str], int]]:
    text, page = render_text(report), render_html(report)
    in_text, in_html = text_tables(text), html_tables(page)
    assert in_text == in_html
    expected = [(t.title, t.columns, len(t.rows)) for t in report_tables(report)]
    it = iter(in_text)  # every table of the model, in order (the kinds' extras in between)
    assert all(e in it for e in expected), [e for e in expected if e not in in_text]
    assert len(expected) >= 3
    return in_text


def test_pairwise_with_a_judge_same_tables_and_every_stratified_row():
    ann, items, judges = pairwise_frames()
    report = build_report(ann, [PREF], judges=judges, items=items, n_boot=20, seed=1)
    tables = assert_same_tables(report)
    titles = [t for t, _, _ in tables]
    for want in ("Inter-rater reliability", "Win rates per system pair", "Human vs judge"):
        assert want in titles
    assert "Ranking (Bradley-Terry)" in titles and "Position bias per annotator" in titles
    strat_rows = report["properties"][0]["judges"][0]["stratified"]["rows"]
    strat = next(t for t in tables if t[0].startswith("Stratified agreement for llm"))
    assert strat[2] == len(strat_rows) > 3  # the text once kept 3 of its metrics
    text, page = render_text(report), html.unescape(render_html(report))
    assert "Cohen's kappa vs human majority" in text
    assert "Cohen's kappa vs human majority" in page


def test_likert_with_a_judge_and_worker_models_same_tables():
    ann, jud = likert_study()
    prop = Property("q", "ordinal", (1, 2, 3, 4, 5))
    report = build_report(ann, [prop], judges=jud, n_boot=20, worker_models=True)
    titles = [t for t, _, _ in assert_same_tables(report)]
    assert "Random-labeller baseline" in titles
    assert "Agreement among a judge's samples" in titles
    assert any(t.startswith("Reliability of each of the 4 workers") for t in titles)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["pairwise", "likert", "ranking", "error_spans"])
def test_every_kind_same_tables_in_text_and_html(make_study, kind):
    from analysis import selectors
    from tests.unit.test_exports_by_kind import _study

    study = _study(make_study, kind)
    report = selectors.study_report(study, n_boot=20)
    titles = [t for t, _, _ in assert_same_tables(report)]
    assert "Inter-rater reliability" in titles
    if kind == "error_spans":
        assert report["sections"] and report["sections"][0]["tables"]
        assert report["sections"][0]["tables"][0]["title"] in titles
