"""A/B timing of ``build_report``: a git revision against the working tree, alternated.

Writes the data of ``bench/analysis.py`` (100,000 items x 10 Likert labels and a judge),
extracts ``--rev`` with ``git archive``, then runs ``--rounds`` times, old then new, a fresh
process per side that reads the CSVs as pandas does by default and times ``--repeat`` calls
of that tree's ``build_report`` (after one untimed call), each on fresh copies of the frames
and with that tree's memoised bootstrap weights cleared, so no call reuses an earlier one's
draws. Prints each run's fastest wall and CPU seconds and the ratio new / old of the medians
of those fastest times.

    python bench/report_ab.py [--rev c6d744b] [--rounds 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run in a fresh process with the tree to time first on ``sys.path``.
TIMER = """
import importlib, json, sys, time
tree, ann_path, jud_path, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, tree)
import pandas as pd
from analysis.report import Property, build_report
clear = None
for name in ("analysis.estimates", "analysis.aggregation"):
    try:
        module = importlib.import_module(name)
    except ImportError:
        continue
    if module.__file__.startswith(tree) and hasattr(module, "_cached_weights"):
        clear = module._cached_weights.cache_clear
        break
assert clear is not None, "no memoised bootstrap weights in " + tree
ann, jud = pd.read_csv(ann_path), pd.read_csv(jud_path)
prop = Property("overall", "ordinal", (1, 2, 3, 4, 5))
build_report(ann, [prop], judges=jud, n_boot=1000)
wall, cpu = [], []
for _ in range(repeat):
    a, j = ann.copy(deep=True), jud.copy(deep=True)
    clear()
    t, c = time.perf_counter(), time.process_time()
    build_report(a, [prop], judges=j, n_boot=1000)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"wall": min(wall), "cpu": min(cpu)}))
"""


def _generate(directory: Path) -> tuple[Path, Path]:
    """The data of ``bench/analysis.py`` (its name is the package's, so loaded by path)."""
    spec = importlib.util.spec_from_file_location("analysis_bench", ROOT / "bench" / "analysis.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths: tuple[Path, Path] = module.generate(directory, 100_000, 10)
    return paths


def _time(tree: Path, paths: tuple[Path, Path], repeat: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", TIMER, str(tree), *map(str, paths), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="c6d744b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.rev], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
        paths = _generate(Path(tmp))
        runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for side, tree in (("old", old_tree), ("new", ROOT)):
                runs[side].append(_time(tree, paths, args.repeat))
                r = runs[side][-1]
                print(f"{side} ({args.rev if side == 'old' else 'working tree'}): "
                      f"wall {r['wall']:.3f} s, CPU {r['cpu']:.3f} s", flush=True)  # fmt: skip
    wall = {s: statistics.median(r["wall"] for r in rs) for s, rs in runs.items()}
    cpu = {s: statistics.median(r["cpu"] for r in rs) for s, rs in runs.items()}
    print(
        f"build_report, median of the runs' fastest: new {wall['new']:.3f} s against "
        f"{wall['old']:.3f} s (ratio {wall['new'] / wall['old']:.2f}); CPU {cpu['new']:.3f} "
        f"against {cpu['old']:.3f} s (ratio {cpu['new'] / cpu['old']:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
