"""``manage.py replay --mqm`` on a file without the paper's systems, and ``--null``."""

import json

import numpy as np
from django.core.management import call_command

from protocol.replay.simulation import PAPER_SYSTEMS, load_mqm, mqm_systems


def _mqm(path, seed=0):
    """A small MQM file: A, B, C rated on 80 segments, D on 10; A clearly best."""
    rng = np.random.default_rng(seed)
    lines = ["system mqm_avg_score seg_id"]
    shift = {"A": 0.0, "B": -1.0, "C": -1.2, "D": 0.0}
    for seg in range(80):
        for system, s in shift.items():
            score = "None" if system == "D" and seg >= 10 else f"{s - rng.exponential(1.0):.3f}"
            lines.append(f"{system} {score} {seg}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_without_systems_every_system_rated_on_enough_segments_is_taken(tmp_path):
    path = _mqm(tmp_path / "x.tsv")
    chosen, rated = mqm_systems(path)
    assert chosen == ["A", "B", "C"] and rated == {"A": 80, "B": 80, "C": 80, "D": 10}
    wide = load_mqm(path)
    assert list(wide.columns) == ["A", "B", "C"] and len(wide) == 80


def test_the_command_says_which_systems_it_took_and_reports_null_decisions(tmp_path, capsys):
    path = _mqm(tmp_path / "x.tsv")
    call_command("replay", "--mqm", str(path), "--repeats", "2", "--null")
    out = capsys.readouterr().out
    assert "Systems (3): A, B, C; left out, rated on too few segments: D (10 segments)" in out
    assert "Impl." in out and "Null" in out
    call_command("replay", "--mqm", str(path), "--repeats", "2", "--null", "--json")
    result = json.loads(capsys.readouterr().out)
    assert result["systems"] == ["A", "B", "C"]
    assert 0 <= result["null"]["decided"] <= 1 and result["null"]["repeats"] == 2
    assert "implied" in result["summary"]


def test_a_file_with_the_paper_systems_says_the_others_are_left_out_as_not_the_papers(
    tmp_path, capsys
):
    """WMT21 en-de also rates metric systems on every segment: they are left out because the
    paper's eleven are taken, not for too few segments."""
    rng = np.random.default_rng(0)
    lines = ["system mqm_avg_score seg_id"]
    for seg in range(20):
        for system in (*PAPER_SYSTEMS, "metricsystem1"):
            lines.append(f"{system} {-rng.exponential(1.0):.3f} {seg}")
    path = tmp_path / "ende.tsv"
    path.write_text("\n".join(lines) + "\n")
    call_command("replay", "--mqm", str(path), "--repeats", "1")
    out = capsys.readouterr().out
    assert "left out, not among the paper's eleven: metricsystem1 (20 segments)" in out
    assert "too few segments" not in out
