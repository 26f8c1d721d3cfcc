"""Benchmark of the analysis core on a large synthetic Likert study.

Writes 100,000 items x 10 human labels on a 1..5 scale plus one judge label per item, times
the pinned reference (:data:`REFERENCE`: ``pandas.read_csv`` with the C engine and its text
columns as Python objects: the same work on every machine, whether or not pyarrow is
installed, which pandas 3 otherwise uses for text columns), the core analyses (one-off
imports of scipy, statsmodels and krippendorff reported apart) and
:func:`analysis.report.build_report` on the frames as pandas reads them by default, each the
fastest of ``--repeat`` runs with the bootstrap cache cleared, and prints the times, their
ratios to the reference (also by CPU seconds, which other processes' load moves less) and the
peak resident memory: of the whole bench, and of ``build_report`` alone in a fresh process
that only read the CSVs (with the peak of its Python allocations). Exits 1 if a ratio exceeds
10 or the peak 4 GiB.

    python bench/analysis.py [--items 100000] [--annotators 10] [--n-boot 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import agreement, judges, perception  # noqa: E402
from analysis.aggregation import likert_summary, majority_vote  # noqa: E402
from analysis.counts import LabelCounts  # noqa: E402
from analysis.estimates import clear_bootstrap_cache  # noqa: E402
from analysis.report import Property, build_report  # noqa: E402

LABELS = [1, 2, 3, 4, 5]
MAX_RATIO = 10.0
MAX_PEAK_BYTES = 4 * 1024**3
#: The reference every ratio divides by, named in the output.
REFERENCE = "pandas.read_csv(engine='c', text columns dtype=object)"
TEXT_COLUMNS = {"item": object, "annotator": object, "judge": object}


def read_reference(path: Path) -> pd.DataFrame:
    """:data:`REFERENCE`: the C parser, text columns as Python objects (no pyarrow)."""
    return pd.read_csv(path, engine="c", dtype=TEXT_COLUMNS)


def generate(directory: Path, n_items: int, per_item: int, seed: int = 7) -> tuple[Path, Path]:
    """Write annotations.csv (item, annotator, label) and judges.csv (item, judge, label).

    Each item has a latent quality; a human label is the rounded quality plus annotator noise,
    the judge's label the rounded quality plus a bias and less noise, both clipped to 1..5.
    Each item gets ``per_item`` distinct annotators from a pool of 300.
    """
    rng = np.random.default_rng(seed)
    quality = rng.normal(3.0, 1.0, size=n_items)
    ids = np.char.add("item-", np.char.zfill(np.arange(n_items).astype(str), 6))
    item = np.repeat(ids, per_item)
    pool = 300
    start = rng.integers(0, pool, size=n_items)
    annotator = (np.repeat(start, per_item) + np.tile(np.arange(per_item), n_items)) % pool
    noise = rng.normal(0.0, 0.9, size=n_items * per_item)
    label = np.clip(np.rint(np.repeat(quality, per_item) + noise), 1, 5).astype(int)
    ann = pd.DataFrame(
        {
            "item": item,
            "annotator": np.char.add("ann-", np.char.zfill(annotator.astype(str), 3)),
            "label": label,
        }
    )
    judge_label = np.clip(np.rint(quality + 0.3 + rng.normal(0.0, 0.7, size=n_items)), 1, 5)
    jud = pd.DataFrame({"item": ids, "judge": "llm-judge", "label": judge_label.astype(int)})
    ann_path, jud_path = directory / "annotations.csv", directory / "judges.csv"
    ann.to_csv(ann_path, index=False)
    jud.to_csv(jud_path, index=False)
    return ann_path, jud_path


def run_report(ann: pd.DataFrame, jud: pd.DataFrame, n_boot: int) -> dict[str, float]:
    """The core analyses a study report runs; returns seconds per step."""
    steps: dict[str, float] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        out = fn()
        steps[name] = time.perf_counter() - t0
        return out

    kw = {"n_boot": n_boot, "seed": 0}
    lc = timed("encode", lambda: LabelCounts.from_frames(ann, jud, labels=LABELS))
    timed("majority_vote", lambda: majority_vote(lc))
    timed("likert_summary", lambda: likert_summary(lc))
    timed("loo_inner", lambda: agreement.loo_agreement_inner(lc, **kw))
    timed("loo_outer", lambda: agreement.loo_agreement_outer(lc, **kw))
    timed("percentage_agreement", lambda: agreement.percentage_agreement(lc, **kw))
    timed("alpha_ordinal", lambda: agreement.krippendorff_alpha(lc, level="ordinal", **kw))
    timed("alpha_interval", lambda: agreement.krippendorff_alpha(lc, level="interval", **kw))
    timed("fleiss", lambda: agreement.fleiss_kappa(lc, **kw))
    timed("randolph", lambda: agreement.randolph_kappa(lc, **kw))
    timed("judge_vs_majority", lambda: judges.judge_vs_majority(lc, **kw))
    timed("judge_correlations", lambda: judges.judge_correlations(lc, **kw))
    timed("binned_jsd", lambda: perception.binned_jsd(lc, **kw))
    timed(
        "stratified_pa",
        lambda: judges.stratified_agreement(lc, level="ordinal", **kw),
    )
    timed(
        "stratified_unique",
        lambda: judges.stratified_agreement(lc, level="ordinal", by="n_unique", **kw),
    )
    timed("perception_chart", lambda: perception.ordinal_perception_chart(lc))
    return steps


def import_libraries() -> float:
    """Import the libraries the analysis functions load lazily; returns the seconds it took.

    pandas is imported before ``read_csv`` is timed, and likewise these one-off imports are
    done before the analysis is timed (a worker process pays them once, not per report).
    """
    t0 = time.perf_counter()
    import krippendorff  # noqa: F401
    import scipy.spatial.distance  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401
    import statsmodels.stats.inter_rater  # noqa: F401
    import statsmodels.stats.multitest  # noqa: F401

    return time.perf_counter() - t0


def time_build_report(
    ann: pd.DataFrame, jud: pd.DataFrame, n_boot: int, repeat: int
) -> tuple[list[float], list[float], dict]:
    """Wall and CPU seconds of each of ``repeat`` runs of :func:`build_report`, and the last
    report."""
    prop = Property("overall", "ordinal", tuple(LABELS), title="synthetic 1..5 scale")
    times, cpu, report = [], [], {}
    for _ in range(repeat):
        clear_bootstrap_cache()
        t0, c0 = time.perf_counter(), time.process_time()
        report = build_report(ann, [prop], judges=jud, n_boot=n_boot)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu, report


def _peak_rss() -> int:
    """Peak resident bytes of this process (since the last :func:`_reset_peak` on Linux)."""
    try:
        with open("/proc/self/status") as status:
            return next(int(x.split()[1]) * 1024 for x in status if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # Linux: the high-water mark restarts at the current RSS
    except OSError:
        pass


def report_memory(ann_path: str, jud_path: str, n_boot: int) -> tuple[int, int, int]:
    """In a fresh process (no generator or timing runs before it): read the frames, run
    :func:`build_report` once; returns the resident bytes before it, its peak and the peak of
    Python allocations during it (tracemalloc, a second run)."""
    import tracemalloc

    ann, jud = pd.read_csv(ann_path), pd.read_csv(jud_path)
    import_libraries()
    prop = Property("overall", "ordinal", tuple(LABELS))
    _reset_peak()
    before = _peak_rss()
    build_report(ann, [prop], judges=jud, n_boot=n_boot)
    peak = _peak_rss()
    clear_bootstrap_cache()
    tracemalloc.start()
    build_report(ann, [prop], judges=jud, n_boot=n_boot)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return before, peak, traced


def _fmt(times: list[float]) -> str:
    return ", ".join(f"{t:.3f}" for t in times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="time each part this often and keep the fastest"
    )
    args = parser.parse_args(argv)
    read_times, read_cpu, analysis_times, runs = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        ann_path, jud_path = generate(Path(tmp), args.items, args.annotators)
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            read_reference(ann_path)
            read_reference(jud_path)
            read_times.append(time.perf_counter() - t0)
            read_cpu.append(time.process_time() - c0)
        # the frames the analyses get: as the platform reads them (pandas' defaults)
        ann, jud = pd.read_csv(ann_path), pd.read_csv(jud_path)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            before, report_peak, traced = pool.apply(
                report_memory, (str(ann_path), str(jud_path), args.n_boot)
            )
    import_s = import_libraries()
    for _ in range(args.repeat):
        clear_bootstrap_cache()  # no resample weights carried over between runs
        t0 = time.perf_counter()
        runs.append(run_report(ann, jud, args.n_boot))
        analysis_times.append(time.perf_counter() - t0)
    report_times, report_cpu, report = time_build_report(ann, jud, args.n_boot, args.repeat)
    read_s, analysis_s, report_s = min(read_times), min(analysis_times), min(report_times)
    steps = runs[int(np.argmin(analysis_times))]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    ratio = analysis_s / read_s
    report_ratio = report_s / read_s
    print(f"rows: {len(ann):,} annotations + {len(jud):,} judge labels, n_boot={args.n_boot}")
    for name, sec in steps.items():
        print(f"  {name:<22} {sec:8.3f} s")
    print(
        f"reference: {read_s:.3f} s (fastest of {args.repeat}: {_fmt(read_times)}) = {REFERENCE}, "
        f"pandas {pd.__version__}"
    )
    print(f"analysis:  {analysis_s:.3f} s (fastest of {args.repeat}: {_fmt(analysis_times)})")
    print(f"ratio:     {ratio:.2f} (limit {MAX_RATIO:g})")
    print(
        f"one-off library imports (not timed above): {import_s:.3f} s; "
        f"ratio if they were counted: {(analysis_s + import_s) / read_s:.2f}"
    )
    print(
        f"build_report: {report_s:.3f} s (fastest of {args.repeat}: {_fmt(report_times)}); "
        f"alpha (ordinal) = {report['properties'][0]['reliability'][0]['value']:.4f}"
    )
    print(f"report ratio: {report_ratio:.2f} (limit {MAX_RATIO:g})")
    print(
        f"CPU seconds (less moved by other processes' load): reference {min(read_cpu):.3f}, "
        f"build_report {min(report_cpu):.3f}, ratio {min(report_cpu) / min(read_cpu):.2f}"
    )
    print(f"peak RSS:  {peak / 1024**3:.2f} GiB (limit 4 GiB; the whole bench, generation too)")
    print(
        f"build_report alone, in a fresh process that read the two CSVs: peak RSS "
        f"{report_peak / 1024**3:.3f} GiB ({before / 1024**3:.3f} GiB before it), "
        f"Python allocations (tracemalloc) {traced / 1024**3:.3f} GiB"
    )
    ok = ratio <= MAX_RATIO and report_ratio <= MAX_RATIO and peak <= MAX_PEAK_BYTES
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
