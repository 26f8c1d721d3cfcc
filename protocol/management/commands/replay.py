"""``python manage.py replay``: the budgeted protocol replayed on fully rated data."""

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd
from django.core.management.base import BaseCommand, CommandError

from formats import vocab
from protocol.replay import ranking_sim, simulation

#: The platform's labels (system order) in the replay's vocabulary.
EXPORT_LABELS = {vocab.A: "a", vocab.B: "b", **dict.fromkeys(vocab.SIDE_NEUTRAL, "tie")}


def read_export(path: Path) -> pd.DataFrame:
    """A label export (``export_labels`` CSV or JSONL) as ``input, system_a, system_b, label``;
    flagged labels and gold items left out."""
    if path.suffix == ".csv":
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        rows = pd.read_json(path, lines=True, dtype=False)
    need = {"input_id", "system_a", "system_b", "label"}
    if not need <= set(rows.columns):
        raise ValueError(f"{path}: an export needs columns {sorted(need)}")
    for column in ("flagged", "is_gold"):
        if column in rows:
            rows = rows[~rows[column].astype(str).str.lower().isin(["true", "1"])]
    rows = rows[rows["label"].isin(list(EXPORT_LABELS)) & (rows["system_b"].astype(str) != "")]
    return pd.DataFrame({
        "input": rows["input_id"], "system_a": rows["system_a"], "system_b": rows["system_b"],
        "label": rows["label"].map(EXPORT_LABELS),
    })  # fmt: skip


class Command(BaseCommand):
    help = (
        "Replay the budgeted protocol (Deriu et al. 2023, Algorithm 2; --paper for the exact "
        "algorithm) on fully rated data and print Correct / Inversion / Omission / Insertion, "
        "mean KL divergence and the fraction of annotations used, averaged over random orders."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--mqm", help="WMT21 MQM scores (system mqm_avg_score seg_id)")
        source.add_argument("--judgebench", help="Judge-Bench JSON with a pairwise property")
        source.add_argument("--export", help="this platform's label export (CSV or JSONL)")
        source.add_argument("--frame", help="CSV with columns input,system_a,system_b,label")
        source.add_argument("--rankings", help="JSONL of rankings {input, annotator?, ranking}")
        parser.add_argument("--rank", type=int, default=None, metavar="K",
                            help="MQM: each annotation ranks K systems of an input")  # fmt: skip
        parser.add_argument("--likert", action="store_true",
                            help="MQM: each annotation scores one output")  # fmt: skip
        parser.add_argument("--systems", help="comma-separated systems (MQM; default: the "
                            "paper's eleven if the file has them, else every system rated "
                            "on at least half the segments of the most-rated one, "
                            "printed)")  # fmt: skip
        parser.add_argument("--inputs", type=int, default=None,
                            help="replay on N inputs drawn with --seed")  # fmt: skip
        parser.add_argument("--batch", type=int, nargs="+", default=[10], help="N per round")
        parser.add_argument("--gamma", type=float, default=0.05)
        parser.add_argument("--repeats", type=int, default=20)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--budget", type=float, default=None,
                            help="<=1: fraction of the pool; >1: annotations")  # fmt: skip
        parser.add_argument("--metric-mu", dest="mu", default=None,
                            help="simulate a metric with this mixture matrix (Appendix E), "
                            f"rows ';', e.g. {simulation.PAPER_MU!r}")  # fmt: skip
        parser.add_argument("--dead-zone", type=float, default=0.0)
        parser.add_argument("--paper", action="store_true", help="Algorithm 2 exactly")
        parser.add_argument("--null", action="store_true",
                            help="also replay null studies of the data's shape: the share of "
                            "null pairs decided (false decisions, implied too)")  # fmt: skip
        parser.add_argument("--no-implied", action="store_true",
                            help="do not close pairs that decided pairs order")  # fmt: skip
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        if options["mqm"] and not options["systems"] and not options["json"]:
            self._say_systems(options["mqm"])
        if options["rankings"] or options["rank"] or options["likert"]:
            return self._loop(options)
        frame_path = options["frame"]
        with tempfile.TemporaryDirectory() as tmp:
            if options["export"]:
                try:
                    frame = read_export(Path(options["export"]))
                except (OSError, ValueError) as exc:
                    raise CommandError(str(exc)) from None
                frame_path = str(Path(tmp) / "frame.csv")
                frame.to_csv(frame_path, index=False)
            argv = self._argv(options, frame_path)
            parsed = simulation.build_parser().parse_args(argv)
            try:
                results = simulation.run_from_args(parsed)
            except (OSError, ValueError) as exc:
                raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(results if len(results) > 1 else results[0], indent=2))
        else:
            self.stdout.write(simulation.render_table(results))

    def _say_systems(self, path: str) -> None:
        """Which systems a replay of an MQM file takes when none are named, and which not."""
        try:
            chosen, rated = simulation.mqm_systems(path)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        left = [f"{s} ({n} segments)" for s, n in sorted(rated.items()) if s not in chosen]
        why = (
            "not among the paper's eleven"
            if chosen == list(simulation.PAPER_SYSTEMS)
            else "rated on too few segments"
        )
        self.stdout.write(
            f"Systems ({len(chosen)}): {', '.join(chosen)}"
            + (f"; left out, {why}: {', '.join(left)}" if left else "")
        )

    def _loop(self, options: dict) -> None:
        """Rankings or scores, one annotation serving several pairs
        (protocol.replay.ranking_sim)."""
        if not (options["rankings"] or options["mqm"]):
            raise CommandError("--rank and --likert simulate from --mqm scores")
        argv = ["--rankings", options["rankings"]] if options["rankings"] else [
            "--mqm", options["mqm"]]  # fmt: skip
        if options["rank"]:
            argv += ["--rank", str(options["rank"])]
        if options["likert"]:
            argv.append("--likert")
        if options["systems"]:
            argv += ["--systems", *[s.strip() for s in options["systems"].split(",") if s.strip()]]
        argv += ["--batch", *map(str, options["batch"]), "--gamma", str(options["gamma"]),
                 "--repeats", str(options["repeats"]), "--seed", str(options["seed"]),
                 "--dead-zone", str(options["dead_zone"])]  # fmt: skip
        if options["budget"] is not None:
            argv += ["--budget", str(options["budget"])]
        if options["paper"]:
            argv.append("--paper")
        try:
            results = ranking_sim.run_from_args(ranking_sim.build_parser().parse_args(argv))
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(results, indent=2, default=str))
        else:
            self.stdout.write(ranking_sim.render_table(results))

    @staticmethod
    def _argv(options: dict, frame_path: str | None) -> list[str]:
        argv: list[str] = []
        if options["mqm"]:
            argv += ["--mqm", options["mqm"]]
        elif options["judgebench"]:
            argv += ["--judgebench", options["judgebench"]]
        else:
            argv += ["--frame", frame_path]
        if options["systems"]:
            argv += ["--systems", *[s.strip() for s in options["systems"].split(",") if s.strip()]]
        argv += ["--batch", *map(str, options["batch"]), "--gamma", str(options["gamma"]),
                 "--repeats", str(options["repeats"]), "--seed", str(options["seed"]),
                 "--dead-zone", str(options["dead_zone"])]  # fmt: skip
        if options["inputs"] is not None:
            argv += ["--inputs", str(options["inputs"])]
        if options["budget"] is not None:
            argv += ["--budget", str(options["budget"])]
        if options["mu"]:
            argv += ["--mu", options["mu"]]
        if options["paper"]:
            argv.append("--paper")
        if options["null"]:
            argv.append("--null")
        if options["no_implied"]:
            argv.append("--no-implied")
        return argv
