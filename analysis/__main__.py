"""Standalone study report, without Django or a database.

    python -m analysis report PATH [--judge PATH ...] [--json] [--html OUT]
                              [--threshold T] [--include-flagged] [--n-boot N] [--seed S]
                              [--interval] [--labels NAME=l1,l2,... ...]

PATH is a label export of the platform (JSON Lines, CSV, a JSON array, as written by
``manage.py export_labels``, or the API's ``?format=json`` page) or a Judge-Bench ``.json``
file; ``--judge`` adds judge labels (format in :func:`analysis.loaders_judges.read_judges`). Prints
the report as text (or JSON with ``--json``) and writes a standalone HTML page with
``--html``. Exit status 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis import loaders, loaders_judges
from analysis.render import render_html, render_text
from analysis.report import build_report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="Report on an exported label file or a Judge-Bench file.")
    rep.add_argument(
        "path", help="label export (JSONL, CSV, JSON rows or API page) or Judge-Bench .json"
    )
    rep.add_argument(
        "--judge",
        action="append",
        default=[],
        metavar="PATH",
        help="judge labels (JSONL/CSV/JSON: judge, item or input_id+system[+system_b], "
        "criterion, label or score); repeatable",
    )
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    rep.add_argument("--html", metavar="OUT", help="also write a standalone HTML report")
    rep.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        help="soft-vote tie threshold on |p_A - p_B| (default 0.1)",
    )
    rep.add_argument(
        "--include-flagged",
        action="store_true",
        help="keep labels of workers blocked after gold checks (excluded by default)",
    )
    rep.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    rep.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rep.add_argument(
        "--confidence", type=float, default=0.95, help="interval coverage (default 0.95)"
    )
    rep.add_argument(
        "--interval",
        action="store_true",
        help="also report Krippendorff's alpha at the interval level for numeric properties",
    )
    rep.add_argument(
        "--worker-models",
        action="store_true",
        help="also report Dawid-Skene and MACE labels with each worker's reliability",
    )
    rep.add_argument(
        "--labels",
        action="append",
        default=[],
        metavar="NAME=L1,L2,...",
        help="declare a property's label set (an export does not carry the scale), "
        "e.g. fluency=1:5 or preference=A,B,tie; repeatable",
    )
    return parser


def report_for_file(
    path: str | Path,
    *,
    judges: Sequence[str | Path] = (),
    labels: Sequence[str] = (),
    threshold: float = 0.1,
    include_flagged: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    interval: bool = False,
    worker_models: bool = False,
) -> dict:
    """Load a label file (and judge files) and build its report."""
    dataset = loaders.load_dataset(path)
    if labels:
        dataset = loaders.with_labels(dataset, dict(loaders.parse_labels_option(x) for x in labels))
    judge_frame, judge_notes = loaders_judges.load_judges(judges, dataset)
    return build_report(
        dataset.annotations,
        dataset.properties,
        judges=judge_frame if len(judge_frame) else None,
        items=dataset.items,
        threshold=threshold,
        include_flagged=include_flagged,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        interval=interval,
        worker_models=worker_models,
        title=dataset.title,
        source=dataset.source,
        notes=[*dataset.notes, *judge_notes],
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        report = report_for_file(
            args.path,
            judges=args.judge,
            labels=args.labels,
            threshold=args.threshold,
            include_flagged=args.include_flagged,
            n_boot=args.n_boot,
            seed=args.seed,
            confidence=args.confidence,
            interval=args.interval,
            worker_models=args.worker_models,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.html:
        Path(args.html).write_text(render_html(report), encoding="utf-8")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
