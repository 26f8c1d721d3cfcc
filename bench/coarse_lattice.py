"""Accuracy of the coarse lattices of protocol.decision against the lattice of every total.

Wide posteriors of the latent totals (hundreds of metric-only inputs) are computed on lattices
of step h and 2h and Richardson-extrapolated (``_exact_latent_totals``, docs/protocol.md).  This
script draws random pairs with 250-1,200 metric-only inputs (few to many human labels, some
human-only, sharp to vague metrics), computes theta both ways and prints how many pairs took
the coarse path, the largest |delta theta| and how often it exceeded the returned error
estimate (plus the exact path's bound).  Not a test (minutes of CPU); the unit tests run a
small version.

    python bench/coarse_lattice.py [--pairs 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol import decision  # noqa: E402


def random_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_h = int(rng.choice([rng.integers(0, 15), rng.integers(15, 60), rng.integers(60, 400)]))
    n_m = int(rng.integers(250, 1200))
    draw, share = rng.uniform(0.02, 0.6), rng.uniform(0.2, 0.8)
    p = np.array([(1 - draw) * share, draw, (1 - draw) * (1 - share)])
    conc = rng.choice([2.0, 8.0, 30.0])
    mu = np.stack([rng.dirichlet(np.where(np.arange(3) == c, conc, 1.5)) for c in range(3)], 1)
    true = rng.choice(3, size=n_h + n_m, p=p)
    cum = np.cumsum(mu, axis=0)
    met = (rng.random(true.size)[:, None] > cum[:, true].T).sum(axis=1).clip(0, 2)
    n = np.bincount(true[:n_h], minlength=3).astype(float)
    conf = np.zeros((3, 3))
    np.add.at(conf, (met[:n_h], true[:n_h]), 1.0)
    m = np.bincount(met[n_h:], minlength=3).astype(float)
    if rng.random() < 0.3:  # human-only labels as well (not metric-rated)
        n = n + rng.multinomial(int(rng.integers(1, 200)), p)
    return n, conf, m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    coarse, over, deltas, worst = 0, 0, [], (0.0, 0.0)
    default_min = decision._COARSE_MIN_CELLS
    for _ in range(args.pairs):
        n, conf, m = random_pair(rng)
        decision._COARSE_MIN_CELLS = default_min
        _, th, _, err = decision._exact_latent_totals(n, conf, m, np.random.default_rng(0))
        decision._COARSE_MIN_CELLS = 10**12  # every latent total
        _, th_x, _, err_x = decision._exact_latent_totals(n, conf, m, np.random.default_rng(0))
        if err <= 1e-6:  # the exact path (its bounds are ~1e-8)
            continue
        coarse += 1
        delta = abs(th - th_x)
        deltas.append(delta)
        over += delta > err + err_x
        worst = max(worst, (delta, err))
    decision._COARSE_MIN_CELLS = default_min
    print(f"pairs {args.pairs} (seed {args.seed}), on coarse lattices {coarse}")
    if deltas:
        print(
            f"|delta theta| on coarse lattices: max {worst[0]:.1e} (estimate {worst[1]:.1e}), "
            f"median {np.median(deltas):.1e}; above the estimate: {over}"
        )
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
