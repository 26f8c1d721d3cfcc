"""Worker-weighted labels on one study of a database: crowd-kit's MACE and Dawid-Skene against
the report's (``analysis.aggregation.mace``: the same algorithm, its E-step in NumPy;
``dawid_skene``: the same EM in NumPy), and the report with and without worker-weighted
labels.

    HUMEVAL_VAR_DIR=$(mktemp -d) python manage.py demo
    python manage.py simulate_crowd 1
    python bench/worker_models.py 1
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def main(pk: int) -> None:
    import django

    django.setup()
    warnings.simplefilter("ignore")  # crowd-kit's pandas deprecations
    from crowdkit.aggregation import MACE, DawidSkene

    from analysis import aggregation, selectors
    from annotator.models import Study

    study = Study.objects.get(pk=pk)
    ann = selectors.study_dataset(study).annotations
    ann = ann[~ann["is_gold"]]
    for prop, group in ann.groupby("property"):
        frame = aggregation._crowd_frame(group, "annotator")
        start = time.perf_counter()
        MACE(n_restarts=10, random_state=0).fit(frame)
        theirs = time.perf_counter() - start
        start = time.perf_counter()
        aggregation.mace(group, seed=0)
        ours = time.perf_counter() - start
        start = time.perf_counter()
        DawidSkene(n_iter=100).fit(frame)
        their_ds = time.perf_counter() - start
        start = time.perf_counter()
        aggregation.dawid_skene(group)
        ds = time.perf_counter() - start
        print(
            f"study {pk} {prop} ({len(group)} labels): crowd-kit MACE {theirs:.2f} s, "
            f"ours {ours:.2f} s; crowd-kit Dawid-Skene {their_ds:.2f} s, ours {ds:.3f} s"
        )
    start = time.perf_counter()
    selectors.study_report(study, n_boot=0)
    plain = time.perf_counter() - start
    start = time.perf_counter()
    selectors.study_report(study, n_boot=0, worker_models=True)
    print(
        f"study {pk} report (n_boot=0): {plain:.2f} s; with worker-weighted labels "
        f"{time.perf_counter() - start:.2f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]))
