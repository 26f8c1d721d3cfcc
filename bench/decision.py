"""Bench: protocol.decision against a NumPyro NUTS reference of the same model.

The reference is the paper's own approach (Deriu et al. 2023, Appendix B): NUTS with 5 chains,
2,000 warm-up and 10,000 kept draws per chain, theta = fraction of draws with p> > p<
(Algorithm 1, line 17).  The model (Sections 3.1-3.3): p ~ Dir(1, 1, 1); every column of the
mixture matrix mu[:, c'] ~ Dir(1, 1, 1); human counts ~ Mult(p); confusion column c' ~
Mult(mu[:, c']); metric-only counts ~ Mult(mu @ p).

Run (never part of the test suite; needs the optional ``bench`` dependencies)::

    pip install .[bench]          # numpyro + jax
    python bench/decision.py [--cases 24] [--seed 0] [--quick]

Prints per case the two thetas, |delta theta|, both decisions and the per-pair times, then the
bars: |delta theta| <= 0.01 everywhere, equal decisions unless the reference theta is within 0.01
of a threshold, speed-up >= 1000x, a round of 136 pairs with metric data in < 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol.decision import decide, sample_posterior  # noqa: E402

PRECISE = {"chains": 16, "burn_in": 100, "tol": 0.0025, "max_samples": 2000}
"""A slower, more precise setting of the sampler, reported next to the defaults."""
MU_SIM = np.array([[0.8, 0.25, 0.1], [0.1, 0.5, 0.1], [0.1, 0.25, 0.8]])
GAMMA = 0.05


def make_case(rng: np.random.Generator, n_human: int, n_metric: int, p: np.ndarray, mu: np.ndarray):
    """Simulate one pair: true labels ~ p, metric label of each input ~ mu[:, true] (Appendix E);
    the first ``n_human`` inputs are rated by humans and the metric (confusion counts), the next
    ``n_metric`` by the metric only."""
    true = rng.choice(3, size=n_human + n_metric, p=p)
    cum = np.cumsum(mu, axis=0)
    met = (rng.random(true.size)[:, None] > cum[:, true].T).sum(axis=1).clip(0, 2)
    n = np.bincount(true[:n_human], minlength=3)
    conf = np.zeros((3, 3), dtype=np.int64)
    np.add.at(conf, (met[:n_human], true[:n_human]), 1)
    m = np.bincount(met[n_human:], minlength=3)
    return n, conf, m


def random_cases(n_cases: int, seed: int):
    """Small and large counts, balanced and lopsided preference distributions, varied metrics."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(n_cases):
        small_h = k % 2 == 0
        small_m = (k // 2) % 2 == 0
        lopsided = (k // 4) % 2 == 1
        n_h = int(rng.integers(5, 40)) if small_h else int(rng.integers(100, 500))
        n_m = int(rng.integers(10, 80)) if small_m else int(rng.integers(200, 1000))
        draw = rng.uniform(0.1, 0.5)
        if lopsided:
            share = rng.uniform(0.62, 0.8)
        else:
            share = rng.uniform(0.45, 0.55)
        if rng.random() < 0.5:
            share = 1 - share
        p = np.array([(1 - draw) * share, draw, (1 - draw) * (1 - share)])
        if k % 3 == 0:
            mu = MU_SIM
        else:  # a random, diagonally dominant metric
            mu = np.stack(
                [rng.dirichlet(np.where(np.arange(3) == c, 8.0, 1.5)) for c in range(3)], 1
            )
        cases.append(make_case(rng, n_h, n_m, p, mu))
    return cases


def nuts_thetas(cases, chains: int, warmup: int, samples: int, seed: int):
    try:
        import jax
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS
    except ImportError:  # pragma: no cover - depends on the environment
        sys.exit(
            "bench/decision.py needs the optional bench dependencies (numpyro, jax):\n"
            "    pip install .[bench]\n"
            "(or: pip install numpyro jax jaxlib)"
        )
    jax.config.update("jax_enable_x64", True)

    def model(n, conf, m):
        p = numpyro.sample("p", dist.Dirichlet(jnp.ones(3)))
        with numpyro.plate("true_label", 3):
            mu_t = numpyro.sample("mu_t", dist.Dirichlet(jnp.ones(3)))  # row c' = mu[:, c']
        numpyro.sample("human", dist.Multinomial(total_count=n.sum(), probs=p), obs=n)
        numpyro.sample(
            "confusion", dist.Multinomial(total_count=conf.sum(axis=0), probs=mu_t), obs=conf.T
        )
        q = mu_t.T @ p
        numpyro.sample("metric", dist.Multinomial(total_count=m.sum(), probs=q), obs=m)

    mcmc = MCMC(
        NUTS(model),
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        chain_method="vectorized",
        progress_bar=False,
        jit_model_args=True,
    )
    key = jax.random.PRNGKey(seed)
    out = []
    for k, (n, conf, m) in enumerate(cases):
        key, sub = jax.random.split(key)
        t0 = time.perf_counter()
        mcmc.run(sub, jnp.asarray(n, float), jnp.asarray(conf, float), jnp.asarray(m, float))
        p = np.asarray(mcmc.get_samples()["p"])
        out.append((float(np.mean(p[:, 0] > p[:, 2])), time.perf_counter() - t0))
        print(f"  NUTS case {k + 1}/{len(cases)}: {out[-1][1]:.1f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", help="write the NUTS thetas and times to this JSON file")
    ap.add_argument("--load", help="reuse NUTS thetas and times from a --save file")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="reduced NUTS settings (2 chains, 500 + 2,000 draws) for a smoke run",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")

    t_start = time.perf_counter()
    cases = random_cases(args.cases, args.seed)
    chains, warmup, samples = (2, 500, 2000) if args.quick else (5, 2000, 10000)
    if args.quick:
        print("NOTE: --quick: NUTS reduced to 2 chains x (500 warm-up + 2,000 draws)")
    if args.load:
        saved = json.loads(Path(args.load).read_text())
        ref = [tuple(r) for r in saved["nuts"]]
        print(f"NUTS reference loaded from {args.load} ({saved['settings']})")
    else:
        print(f"NUTS reference: {chains} chains, {warmup} warm-up + {samples} draws per chain")
        ref = nuts_thetas(cases, chains, warmup, samples, args.seed)
        if args.save:
            Path(args.save).write_text(
                json.dumps({"settings": [chains, warmup, samples], "nuts": ref})
            )

    n = np.array([c[0] for c in cases])
    conf = np.array([c[1] for c in cases])
    m = np.array([c[2] for c in cases])
    # ours, one pair per call (the per-pair speed-up) and all cases in one vectorised call
    ours_single, t_single, mcse = [], [], []
    for k in range(len(cases)):
        t0 = time.perf_counter()
        post = sample_posterior(n[k : k + 1], conf[k : k + 1], m[k : k + 1], seed=args.seed + k)
        t_single.append(time.perf_counter() - t0)
        ours_single.append(float(post.theta()[0]))
        mcse.append(float(post.mcse[0]))
    t0 = time.perf_counter()
    post_all = sample_posterior(n, conf, m, seed=args.seed)
    t_vec = (time.perf_counter() - t0) / len(cases)
    t0 = time.perf_counter()
    post_precise = sample_posterior(n, conf, m, seed=args.seed + 1, **PRECISE)
    t_precise = (time.perf_counter() - t0) / len(cases)
    theta_ours = np.array(ours_single)
    theta_ref = np.array([r[0] for r in ref])
    t_ref = np.array([r[1] for r in ref])

    dec_ref = decide(theta_ref, GAMMA)
    dec_ours = decide(theta_ours, GAMMA)
    near = (np.abs(theta_ref - GAMMA / 2) <= 0.01) | (np.abs(theta_ref - (1 - GAMMA / 2)) <= 0.01)
    print()
    hdr = (
        f"{'case':>4} {'human n':>15} {'metric-only m':>15} {'theta NUTS':>10} {'theta ours':>10} "
        f"{'|d|':>7} {'mcse':>6} {'|d| prec':>8} {'dec':>7} {'NUTS s':>7} {'ours ms':>8} "
        f"{'speed-up':>9}"
    )
    print(hdr)
    print("-" * len(hdr))
    for k in range(len(cases)):
        print(
            f"{k + 1:>4} {str(n[k].tolist()):>15} {str(m[k].tolist()):>15} {theta_ref[k]:>10.4f} "
            f"{theta_ours[k]:>10.4f} {abs(theta_ref[k] - theta_ours[k]):>7.4f} {mcse[k]:>6.4f} "
            f"{abs(theta_ref[k] - post_precise.theta()[k]):>8.4f} "
            f"{dec_ref[k]:>3d}/{dec_ours[k]:>3d} {t_ref[k]:>7.1f} {t_single[k] * 1e3:>8.1f} "
            f"{t_ref[k] / t_single[k]:>8.0f}x"
        )
    delta = np.abs(theta_ref - theta_ours)
    mismatch = (dec_ref != dec_ours) & ~near
    speed_single = t_ref / np.array(t_single)
    print()
    print(f"max |delta theta|            : {delta.max():.4f} (mean {delta.mean():.4f})")
    print(f"max |delta theta| vectorised : {np.abs(theta_ref - post_all.theta()).max():.4f}")
    d_prec = np.abs(theta_ref - post_precise.theta())
    print(
        f"max |delta theta| precise    : {d_prec.max():.4f} (mean {d_prec.mean():.4f}; "
        f"settings {PRECISE}, {t_precise * 1e3:.0f} ms per pair vectorised, speed-up median "
        f"{np.median(t_ref / t_precise):.0f}x)"
    )
    print(f"decision mismatches (not within 0.01 of a threshold): {int(mismatch.sum())}")
    print(
        f"speed-up per pair, single call: min {speed_single.min():.0f}x, "
        f"median {np.median(speed_single):.0f}x"
    )
    print(
        f"speed-up per pair, vectorised ({len(cases)} pairs in one call): "
        f"min {(t_ref / t_vec).min():.0f}x, median {np.median(t_ref / t_vec):.0f}x"
    )

    # a whole round: 136 pairs (17 systems), protocol-like counts (metric rates every input)
    rng = np.random.default_rng(args.seed + 1)
    round_cases = []
    for _ in range(136):
        share = rng.uniform(0.3, 0.7)
        draw = rng.uniform(0.2, 0.5)
        p = np.array([(1 - draw) * share, draw, (1 - draw) * (1 - share)])
        n_h = int(rng.integers(5, 400))
        round_cases.append(make_case(rng, n_h, 527 - n_h, p, MU_SIM))
    rn = np.array([c[0] for c in round_cases])
    rc = np.array([c[1] for c in round_cases])
    rm = np.array([c[2] for c in round_cases])
    t0 = time.perf_counter()
    theta_round = sample_posterior(rn, rc, rm, seed=args.seed).theta()
    decide(theta_round, GAMMA)
    t_round = time.perf_counter() - t0
    print(f"round of 136 pairs with metric data: {t_round:.2f} s")

    speed_vec = t_ref / t_vec
    bars = {
        "max |delta theta| <= 0.01 (default settings)": delta.max() <= 0.01,
        "max |delta theta| <= 0.01 (precise settings)": d_prec.max() <= 0.01,
        "same decisions unless theta within 0.01 of a threshold": not mismatch.any(),
        "speed-up >= 1000x per pair (vectorised call, median)": np.median(speed_vec) >= 1000,
        "speed-up >= 1000x per pair (vectorised call, every case)": speed_vec.min() >= 1000,
        "speed-up >= 1000x per pair (one pair per call, every case)": speed_single.min() >= 1000,
        "round of 136 pairs < 2 s": t_round < 2.0,
    }
    for name, met in bars.items():
        print(f"BAR {'met    ' if met else 'NOT met'}  {name}")
    print(f"bench wall time: {(time.perf_counter() - t_start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
