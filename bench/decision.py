"""Bench: protocol.decision against a NumPyro NUTS reference of the same model.

The reference is the paper's own approach (Deriu et al. 2023, Appendix B): NUTS with 5 chains,
2,000 warm-up and 10,000 kept draws per chain, theta = fraction of draws with p> > p<
(Algorithm 1, line 17).  The model (Sections 3.1-3.3): p ~ Dir(1, 1, 1); every column of the
mixture matrix mu[:, c'] ~ Dir(1, 1, 1); human counts ~ Mult(p); confusion column c' ~
Mult(mu[:, c']); metric-only counts ~ Mult(mu @ p).

The reference is itself a Monte Carlo estimate: the bench prints its standard error (from the
effective sample size of the indicator over the chains) and a Rao-Blackwellised estimate of the
same theta from the same draws (see ``reference_summary``), with its SE.  |delta theta| is
reported against both; ``z`` is |delta theta| / SE of the reference.

Run (never part of the test suite; needs the optional ``bench`` dependencies)::

    pip install .[bench]          # numpyro + jax
    python bench/decision.py [--cases 24] [--seed 0] [--quick] [--save F | --load F]

Prints per case the thetas, |delta theta|, both decisions and the per-pair times (NUTS measured
in the same run; ours one pair per call, median of ``--repeats`` runs), then the bars:
|delta theta| <= 0.01 everywhere, equal decisions unless the reference theta is within 0.01 of
a threshold, speed-up >= 1000x, a round of 136 pairs with metric data in < 2 s.
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
        samples = mcmc.get_samples(group_by_chain=True)
        elapsed = time.perf_counter() - t0
        p = np.asarray(samples["p"])  # (chains, draws, 3)
        mu_t = np.asarray(samples["mu_t"])  # (chains, draws, true label, metric label)
        out.append(reference_summary(p, mu_t, n, m, seed + k) + (elapsed,))
        print(f"  NUTS case {k + 1}/{len(cases)}: {elapsed:.1f} s", flush=True)
    return out


def _ess(x: np.ndarray) -> float:
    """Effective sample size of a (chains, draws) array (NumPyro's estimator, as in Stan)."""
    from numpyro.diagnostics import effective_sample_size

    if np.ptp(x) == 0:
        return float(x.size)
    return float(effective_sample_size(np.asarray(x, dtype=float)))


def reference_summary(p: np.ndarray, mu_t: np.ndarray, n, m, seed: int):
    """theta from the NUTS draws, raw and Rao-Blackwellised, each with its Monte Carlo SE.

    Raw (Algorithm 1, line 17): the fraction of draws with p> > p<; SE = sqrt(theta (1 - theta)
    / ESS) with ESS the effective sample size of the indicator over the chains.

    Rao-Blackwellised (the same quantity, lower variance): for every draw (p, mu) of the joint
    posterior, draw the latent true labels of the metric-only inputs from their exact conditional
    z[c, :] ~ Mult(m_c, mu[c, :] * p / sum) - (p, mu, z) is then a draw of the joint posterior of
    the augmented model - and replace the indicator by its conditional expectation given z,
    P(p> > p< | z) = 1 - I_1/2(n> + t> + 1, n< + t< + 1) with t = z.sum(axis=0) (p | z, mu is
    Dir(n + t + 1) whatever mu is).  By the tower rule its mean is theta; its variance is
    smaller.  SE from the ESS of that sequence.
    """
    from scipy.special import betainc

    ind = (p[..., 0] > p[..., 2]).astype(float)
    theta_raw = float(ind.mean())
    se_raw = float(np.sqrt(theta_raw * (1 - theta_raw) / _ess(ind)))
    rng = np.random.default_rng(seed)
    resp = np.swapaxes(mu_t, -1, -2) * p[..., None, :]  # (chains, draws, metric c, true c')
    resp /= resp.sum(axis=-1, keepdims=True)
    z = rng.multinomial(np.broadcast_to(np.asarray(m, np.int64), resp.shape[:-1]), resp)
    t = z.sum(axis=-2)
    rb = betainc(n[2] + t[..., 2] + 1.0, n[0] + t[..., 0] + 1.0, 0.5)
    theta_rb = float(rb.mean())
    se_rb = float(rb.std() / np.sqrt(_ess(rb))) if rb.std() > 0 else 0.0
    return theta_raw, se_raw, theta_rb, se_rb


def _timed(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls (the machine is shared, single runs are noisy)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", help="write the NUTS summaries and times to this JSON file")
    ap.add_argument("--load", help="reuse NUTS summaries and times from a --save file")
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats of ours (median)")
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
        print(f"NUTS reference loaded from {args.load} (settings {saved['settings']})")
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
    theta_ours, t_single, err = [], [], []
    for k in range(len(cases)):
        dt, post = _timed(
            lambda k=k: sample_posterior(n[k : k + 1], conf[k : k + 1], m[k : k + 1], seed=k),
            args.repeats,
        )
        t_single.append(dt)
        theta_ours.append(float(post.theta()[0]))
        err.append(float(post.mcse[0]))
    dt_vec, post_all = _timed(lambda: sample_posterior(n, conf, m, seed=args.seed), args.repeats)
    t_vec = dt_vec / len(cases)
    theta_ours = np.array(theta_ours)
    theta_ref = np.array([r[0] for r in ref])
    se_ref = np.array([r[1] for r in ref])
    theta_rb = np.array([r[2] for r in ref])
    se_rb = np.array([r[3] for r in ref])
    t_ref = np.array([r[4] for r in ref])
    t_single = np.array(t_single)

    dec_ref = decide(theta_ref, GAMMA)
    dec_ours = decide(theta_ours, GAMMA)
    near = (np.abs(theta_ref - GAMMA / 2) <= 0.01) | (np.abs(theta_ref - (1 - GAMMA / 2)) <= 0.01)
    delta = np.abs(theta_ref - theta_ours)
    delta_rb = np.abs(theta_rb - theta_ours)
    print()
    hdr = (
        f"{'case':>4} {'human n':>15} {'metric-only m':>15} {'NUTS raw':>8} {'SE':>6} "
        f"{'NUTS RB':>8} {'SE':>6} {'ours':>8} {'|d| raw':>7} {'z raw':>5} {'|d| RB':>7} "
        f"{'z RB':>5} {'dec':>7} {'NUTS s':>7} {'ours ms':>8} {'speed-up':>9}"
    )
    print(hdr)
    print("-" * len(hdr))

    def z(d: float, se: float) -> str:
        # no z where the reference SE is negligible (theta within ~1e-6 of 0 or 1)
        return f"{d / se:>5.1f}" if se > 1e-6 else f"{'-':>5}"

    for k in range(len(cases)):
        print(
            f"{k + 1:>4} {str(n[k].tolist()):>15} {str(m[k].tolist()):>15} "
            f"{theta_ref[k]:>8.4f} {se_ref[k]:>6.4f} {theta_rb[k]:>8.4f} {se_rb[k]:>6.4f} "
            f"{theta_ours[k]:>8.4f} {delta[k]:>7.4f} {z(delta[k], se_ref[k])} "
            f"{delta_rb[k]:>7.4f} {z(delta_rb[k], se_rb[k])} "
            f"{dec_ref[k]:>3d}/{dec_ours[k]:>3d} {t_ref[k]:>7.1f} {t_single[k] * 1e3:>8.1f} "
            f"{t_ref[k] / t_single[k]:>8.0f}x"
        )
    mismatch = (dec_ref != dec_ours) & ~near
    speed_single = t_ref / t_single
    speed_vec = t_ref / t_vec
    print()
    print(
        "theta ours: exact (latent-total convolution); largest a-posteriori error bound "
        f"{max(err):.1e}; one pair per call, median of {args.repeats} runs"
    )
    print(
        f"reference Monte Carlo SE (raw indicator, ESS over {chains} chains): "
        f"max {se_ref.max():.4f}, median {np.median(se_ref):.4f}; Rao-Blackwellised: max "
        f"{se_rb.max():.4f}"
    )
    print(
        f"max |delta theta| vs raw NUTS : {delta.max():.4f} (mean {delta.mean():.4f}); "
        f"within 0.01 on {(delta <= 0.01).sum()}/{len(cases)}; max |delta|/SE "
        f"{np.max(delta / np.where(se_ref > 1e-6, se_ref, np.inf)):.1f}"
    )
    print(
        f"max |delta theta| vs RB NUTS  : {delta_rb.max():.4f} (mean {delta_rb.mean():.4f}); "
        f"within 0.01 on {(delta_rb <= 0.01).sum()}/{len(cases)}; max |delta|/SE "
        f"{np.max(delta_rb / np.where(se_rb > 1e-6, se_rb, np.inf)):.1f}"
    )
    print(
        "max |delta theta| vectorised : "
        f"{np.abs(theta_ref - post_all.theta()).max():.4f} (vs raw NUTS)"
    )
    print(f"decision mismatches (not within 0.01 of a threshold): {int(mismatch.sum())}")
    print(
        f"speed-up per pair, one pair per call: min {speed_single.min():.0f}x, "
        f"median {np.median(speed_single):.0f}x ({(speed_single >= 1000).sum()}/{len(cases)} "
        ">= 1000x)"
    )
    print(
        f"speed-up per pair, vectorised ({len(cases)} pairs in one call, "
        f"{t_vec * 1e3:.1f} ms per pair): min {speed_vec.min():.0f}x, "
        f"median {np.median(speed_vec):.0f}x"
    )
    slow = np.argsort(t_single)[::-1][:3]
    print(
        "slowest pairs (ours): "
        + ", ".join(f"case {k + 1} |M|={int(m[k].sum())} {t_single[k] * 1e3:.0f} ms" for k in slow)
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
    t_round, _unused = _timed(
        lambda: decide(sample_posterior(rn, rc, rm, seed=args.seed).theta(), GAMMA), args.repeats
    )
    print(f"round of 136 pairs with metric data: {t_round:.2f} s (median of {args.repeats})")

    bars = {
        "max |delta theta| <= 0.01 vs raw NUTS (every case)": delta.max() <= 0.01,
        "max |delta theta| <= 0.01 vs Rao-Blackwellised NUTS (every case)": delta_rb.max() <= 0.01,
        "same decisions unless theta within 0.01 of a threshold": not mismatch.any(),
        "speed-up >= 1000x per pair (one pair per call, every case)": speed_single.min() >= 1000,
        "speed-up >= 1000x per pair (one pair per call, median)": np.median(speed_single) >= 1000,
        "speed-up >= 1000x per pair (vectorised call, every case)": speed_vec.min() >= 1000,
        "round of 136 pairs < 2 s": t_round < 2.0,
    }
    for name, met in bars.items():
        print(f"BAR {'met    ' if met else 'NOT met'}  {name}")
    wall = (time.perf_counter() - t_start) / 60
    print(f"bench wall time: {wall:.1f} min{' (NUTS loaded from file)' if args.load else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
