"""A/B timing of protocol.decision: a git revision against the working tree, in one process.

Run-to-run variation on this machine (up to 1.6x between runs of ``bench/decision.py``) hides
changes of 10-20 %.  This script loads ``protocol/decision.py`` twice, as it is at ``--rev`` and
as it is in the working tree, and times ``_exact_latent_totals`` on the bench cases of
``bench/decision.py`` (seed 0) alternately, A then B, then B then A, so that both see the same
machine.  Prints per case the median of the calls (the first dropped) and the ratio new / old,
and checks that both give the same theta within their error bounds.

    python bench/decision_ab.py [--rev HEAD] [--cases 4,12,24,8,19,11,3,20] [--repeats 21]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision import random_cases  # noqa: E402


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--cases", default="4,12,24,8,19,11,3,20")
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args(argv)
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{args.rev}:protocol/decision.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        old_path = Path(tmp) / "decision_old.py"
        old_path.write_text(source)
        old = _load("decision_old", old_path)
    new = _load("decision_new", ROOT / "protocol" / "decision.py")
    cases = random_cases(24, 0)
    ks = [int(x) for x in args.cases.split(",")]
    times: dict[str, dict[int, list[float]]] = {
        label: {k: [] for k in ks} for label in ("old", "new")
    }
    results: dict[str, dict[int, tuple[float, float]]] = {"old": {}, "new": {}}
    for r in range(args.repeats):
        for k in ks:
            n, conf, m = (np.asarray(x, float) for x in cases[k - 1])
            order = (("old", old), ("new", new)) if r % 2 else (("new", new), ("old", old))
            for label, module in order:
                t0 = time.perf_counter()
                _, theta, _, err = module._exact_latent_totals(n, conf, m, np.random.default_rng(0))
                times[label][k].append(time.perf_counter() - t0)
                results[label][k] = (theta, err)
    total_old = total_new = 0.0
    same = True
    for k in ks:
        a = 1e3 * float(np.median(times["old"][k][1:]))
        b = 1e3 * float(np.median(times["new"][k][1:]))
        total_old, total_new = total_old + a, total_new + b
        (th_a, err_a), (th_b, err_b) = results["old"][k], results["new"][k]
        agree = abs(th_a - th_b) <= err_a + err_b + 1e-12
        same &= agree
        print(
            f"case {k:2d}: {args.rev} {a:6.2f} ms  working tree {b:6.2f} ms  ratio {b / a:.3f}"
            f"  theta {th_a:.6f} / {th_b:.6f}{'' if agree else '  (differ beyond their bounds)'}"
        )
    print(f"sum: {total_old:.2f} -> {total_new:.2f} ms, ratio {total_new / total_old:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
