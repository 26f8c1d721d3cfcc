"""Bench: protocol.decision against a NumPyro NUTS reference of the same model.

The reference is the paper's approach (Deriu et al. 2023, Appendix B; Sections 3.1-3.3): NUTS,
5 chains, 2,000 warm-up + 10,000 draws each, theta = share of draws with p> > p< (Algorithm 1,
line 17), vectorised in one single-threaded process compiled before any timing. Ours runs side
by side on the other core for as long as NUTS runs (median per case); both are timed by the
smaller of wall and CPU time. docs/benchmarks.md says more.

Bars: |delta theta| <= 0.01 against NUTS on every case; equal decisions unless theta is
within 0.01 of a threshold; every pair >= 200x faster than NUTS; a round of 136 pairs with
metric data < 1 s.

    pip install .[bench]          # numpyro + jax
    python bench/decision.py [--cases 24] [--seed 0] [--quick] [--save F | --load F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    # ours runs single-threaded, like each NUTS process (and the busy meter below then sees
    # every other core's use as somebody else's)
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

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


_SINGLE_THREAD_ENV = {
    # one thread per NUTS process, so that the worker processes do not fight over the cores
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
_WORKER: dict = {}


def _import_numpyro():
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
    return jax, jnp, numpyro, dist, MCMC, NUTS


def _model(n, conf, m):
    """Algorithm 1's model: p ~ Dir(1); mu[:, c'] ~ Dir(1); human ~ Mult(p); confusion column c'
    ~ Mult(mu[:, c']); metric-only ~ Mult(mu @ p)."""
    _jax, jnp, numpyro, dist, _mcmc, _nuts = _import_numpyro()
    p = numpyro.sample("p", dist.Dirichlet(jnp.ones(3)))
    with numpyro.plate("true_label", 3):
        mu_t = numpyro.sample("mu_t", dist.Dirichlet(jnp.ones(3)))  # row c' = mu[:, c']
    numpyro.sample("human", dist.Multinomial(total_count=n.sum(), probs=p), obs=n)
    numpyro.sample(
        "confusion", dist.Multinomial(total_count=conf.sum(axis=0), probs=mu_t), obs=conf.T
    )
    q = mu_t.T @ p
    numpyro.sample("metric", dist.Multinomial(total_count=m.sum(), probs=q), obs=m)


def _nuts_worker_init(
    chains: int, warmup: int, samples: int, chain_method: str, cache_dir: str
) -> None:
    """Worker process: one NUTS sampler, compiled once on a dummy pair before any timing.

    ``MCMC.run`` traces and compiles NumPyro's sampler again for every pair, even with
    ``jit_model_args=True`` (about 10 s here, more than the sampling of a small pair); JAX's
    persistent compilation cache (``cache_dir``) turns every compilation after the first into a
    cache hit, so the timed runs are sampling (and tracing), not compiling.
    """
    os.environ.update(_SINGLE_THREAD_ENV)
    jax, jnp, _numpyro, _dist, MCMC, NUTS = _import_numpyro()
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    mcmc = MCMC(
        NUTS(_model),
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        chain_method=chain_method,
        progress_bar=False,
        jit_model_args=True,
    )
    n, conf, m = np.array([5.0, 5, 5]), np.diag([2.0, 2, 2]), np.array([10.0, 10, 10])
    mcmc.run(jax.random.PRNGKey(0), jnp.asarray(n), jnp.asarray(conf), jnp.asarray(m))
    _WORKER.update(mcmc=mcmc, jax=jax, jnp=jnp)


def _nuts_case(task):
    """One pair through the worker's sampler: its summaries and its wall and CPU time."""
    k, n, conf, m, seed = task
    jax, jnp, mcmc = _WORKER["jax"], _WORKER["jnp"], _WORKER["mcmc"]
    t0, c0 = time.perf_counter(), time.process_time()
    mcmc.run(
        jax.random.PRNGKey(seed),
        jnp.asarray(n, float),
        jnp.asarray(conf, float),
        jnp.asarray(m, float),
    )
    samples = mcmc.get_samples(group_by_chain=True)
    p = np.asarray(samples["p"])  # (chains, draws, 3)
    mu_t = np.asarray(samples["mu_t"])  # (chains, draws, true label, metric label)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return (k,) + reference_summary(p, mu_t, n, m, seed) + (elapsed, cpu)


def nuts_thetas(
    cases, chains: int, warmup: int, samples: int, seed: int, workers: int, during=None
):
    """The reference for every case, in ``workers`` single-threaded processes (vectorized chains,
    each process compiled once before timing).  ``during``, if given, is called over and over in
    this process until the last case is done (ours timed side by side).  Returns per case (theta
    raw, SE, theta RB, SE, wall s, CPU s)."""
    import multiprocessing as mp

    _import_numpyro()  # fail early, in this process, if the bench dependencies are missing
    saved = {key: os.environ.get(key) for key in _SINGLE_THREAD_ENV}
    os.environ.update(_SINGLE_THREAD_ENV)  # inherited by the spawned workers
    tasks = [(k, n, conf, m, seed * 1000 + k) for k, (n, conf, m) in enumerate(cases)]
    out: list = [None] * len(cases)
    cache_dir = tempfile.mkdtemp(prefix="humeval-nuts-xla-")
    try:
        ctx = mp.get_context("spawn")
        init_args = (chains, warmup, samples, "vectorized", cache_dir)
        with ctx.Pool(workers, _nuts_worker_init, init_args) as pool:
            results = pool.imap_unordered(_nuts_case, tasks)
            while any(r is None for r in out):
                if during is None:
                    res = results.next()
                else:
                    try:
                        res = results.next(timeout=0.0)
                    except mp.TimeoutError:
                        during()
                        continue
                out[res[0]] = res[1:]
                done = sum(r is not None for r in out)
                print(
                    f"  NUTS case {res[0] + 1} ({done}/{len(cases)}): {res[5]:.1f} s "
                    f"(CPU {res[6]:.1f} s)",
                    flush=True,
                )
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        for key, val in saved.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
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


def _call_time(fn) -> tuple[float, float, object]:
    """Wall and CPU time of ``fn()`` and its result.  A pair's time is the smaller of the two,
    the rule NUTS is timed by: other processes may keep either waiting for a core."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def _time_each_pair(n: np.ndarray, conf: np.ndarray, m: np.ndarray) -> tuple[list, list]:
    """Ours on every case once, one pair per call (seed = the case's index): wall and CPU time
    of each call."""
    wall, cpu = [], []
    for k in range(len(n)):
        dt, dc, _ = _call_time(
            lambda k=k: sample_posterior(n[k : k + 1], conf[k : k + 1], m[k : k + 1], seed=k)
        )
        wall.append(dt)
        cpu.append(dc)
    return wall, cpu


class _SideBySide:
    """Ours timed in this process while the NUTS process samples on the other core: one pair per
    call on every case, then all cases in one vectorised call, round after round, for as long as
    the reference runs (the first round, which fills ours's caches, is dropped)."""

    def __init__(self, n: np.ndarray, conf: np.ndarray, m: np.ndarray, seed: int) -> None:
        self.n, self.conf, self.m, self.seed = n, conf, m, seed
        self.wall: list[list[float]] = []
        self.cpu: list[list[float]] = []
        self.vec: list[float] = []
        self.rounds = 0

    def round(self) -> None:
        wall, cpu = _time_each_pair(self.n, self.conf, self.m)
        dt, dc, _ = _call_time(lambda: sample_posterior(self.n, self.conf, self.m, seed=self.seed))
        self.rounds += 1
        if self.rounds > 1:
            self.wall.append(wall)
            self.cpu.append(cpu)
            self.vec.append(min(dt, dc))

    def medians(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Per case the median time of one pair per call (min of wall and CPU time) and the
        median wall time; the median time of the vectorised call."""
        wall = np.array(self.wall)
        return (
            np.median(np.fmin(wall, self.cpu), axis=0),
            np.median(wall, axis=0),
            float(np.median(self.vec)),
        )


def _timed(fn, repeats: int) -> float:
    """Median time (min of wall and CPU time) of ``repeats`` calls."""
    return float(np.median([min(_call_time(fn)[:2]) for _ in range(repeats)]))


def _load() -> str:
    one, five, _fifteen = os.getloadavg()
    return f"load average {one:.2f} (1 min) / {five:.2f} (5 min) on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", help="write the NUTS summaries and times to this JSON file")
    ap.add_argument("--load", help="reuse NUTS summaries and times from a --save file")
    ap.add_argument("--repeats", type=int, default=7, help="timing repeats of ours (median)")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="reduced NUTS settings (2 chains, 500 + 2,000 draws) for a smoke run",
    )
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    print(f"start: {_load()}")
    cases = random_cases(args.cases, args.seed)
    chains, warmup, samples = (2, 500, 2000) if args.quick else (5, 2000, 10000)
    if args.quick:
        print("NOTE: --quick: NUTS reduced to 2 chains x (500 warm-up + 2,000 draws)")
    n = np.array([c[0] for c in cases])
    conf = np.array([c[1] for c in cases])
    m = np.array([c[2] for c in cases])
    side = _SideBySide(n, conf, m, args.seed)
    if args.load:
        saved = json.loads(Path(args.load).read_text())
        ref = [tuple(r) for r in saved["nuts"]]
        print(f"NUTS reference loaded from {args.load} (settings {saved['settings']})")
    else:
        print(
            f"NUTS reference: {chains} chains (vectorized), {warmup} warm-up + {samples} draws "
            "per chain, one single-threaded process; ours timed side by side in this process"
        )
        ref = nuts_thetas(cases, chains, warmup, samples, args.seed, 1, side.round)
        if args.save:
            Path(args.save).write_text(
                json.dumps({"settings": [chains, warmup, samples], "nuts": ref})
            )
    while side.rounds < args.repeats + 1:  # (with --load, or NUTS quicker than the rounds)
        side.round()
    print(f"after NUTS: {_load()}; ours: {side.rounds - 1} rounds of every case timed")
    t_single, t_wall, dt_vec = side.medians()
    t_vec = dt_vec / len(cases)
    theta_ours, err = np.zeros(len(cases)), np.zeros(len(cases))
    for k in range(len(cases)):
        post = sample_posterior(n[k : k + 1], conf[k : k + 1], m[k : k + 1], seed=k)
        theta_ours[k], err[k] = post.theta()[0], post.mcse[0]
    theta_vec = sample_posterior(n, conf, m, seed=args.seed).theta()
    theta_ref = np.array([r[0] for r in ref])
    se_ref = np.array([r[1] for r in ref])
    theta_rb = np.array([r[2] for r in ref])
    se_rb = np.array([r[3] for r in ref])
    # the NUTS time of a pair: its wall time, or its CPU time where other processes kept the
    # (single-threaded) sampler waiting for a core - never more than either
    t_ref = np.fmin([r[4] for r in ref], [r[5] for r in ref])

    dec_ref = decide(theta_ref, GAMMA)
    dec_ours = decide(theta_ours, GAMMA)
    near = (np.abs(theta_ref - GAMMA / 2) <= 0.01) | (np.abs(theta_ref - (1 - GAMMA / 2)) <= 0.01)
    delta = np.abs(theta_ref - theta_ours)
    delta_rb = np.abs(theta_rb - theta_ours)
    print()
    hdr = (
        f"{'case':>4} {'human n':>15} {'metric-only m':>15} {'NUTS raw':>8} {'SE':>6} "
        f"{'NUTS RB':>8} {'SE':>6} {'ours':>8} {'|d| raw':>7} {'|d| RB':>7} {'dec':>7} "
        f"{'NUTS s':>7} {'ours ms':>8} {'speed-up':>9}"
    )
    print(hdr)
    print("-" * len(hdr))
    for k in range(len(cases)):
        print(
            f"{k + 1:>4} {str(n[k].tolist()):>15} {str(m[k].tolist()):>15} "
            f"{theta_ref[k]:>8.4f} {se_ref[k]:>6.4f} {theta_rb[k]:>8.4f} {se_rb[k]:>6.4f} "
            f"{theta_ours[k]:>8.4f} {delta[k]:>7.4f} {delta_rb[k]:>7.4f} "
            f"{dec_ref[k]:>3d}/{dec_ours[k]:>3d} {t_ref[k]:>7.1f} {t_single[k] * 1e3:>8.2f} "
            f"{t_ref[k] / t_single[k]:>8.0f}x"
        )
    mismatch = (dec_ref != dec_ours) & ~near
    speed = t_ref / t_single
    speed_vec = t_ref / t_vec
    print()
    print(
        "theta ours: exact sum over the latent totals (FFT convolution); largest a-posteriori "
        f"error bound {err.max():.1e}"
    )
    print(
        f"reference Monte Carlo SE (raw indicator, ESS over {chains} chains): "
        f"max {se_ref.max():.4f}, median {np.median(se_ref):.4f}; Rao-Blackwellised: max "
        f"{se_rb.max():.4f}"
    )
    print(
        f"NUTS per pair (vectorized chains, one thread; min of wall and CPU time): "
        f"{t_ref.min():.1f}-{t_ref.max():.1f} s, median {np.median(t_ref):.1f} s"
    )
    print(
        f"max |delta theta| vs raw NUTS: {delta.max():.4f} (mean {delta.mean():.4f}); vs "
        f"Rao-Blackwellised NUTS: {delta_rb.max():.4f}; vectorised call: "
        f"{np.abs(theta_ref - theta_vec).max():.4f}"
    )
    print(
        f"decisions equal: {int((dec_ref == dec_ours).sum())}/{len(cases)}; mismatches not within "
        f"0.01 of a threshold: {int(mismatch.sum())}"
    )
    print(
        f"ours: {1e3 * t_single.sum():.0f} ms for the {len(cases)} pairs one per call, "
        f"{1e3 * dt_vec:.0f} ms in one vectorised call"
    )
    print(
        f"speed-up per pair, one pair per call (side by side with NUTS, median of "
        f"{side.rounds - 1} rounds; min of wall and CPU time, like NUTS): min "
        f"{speed.min():.0f}x, median {np.median(speed):.0f}x "
        f"({(speed >= 200).sum()}/{len(cases)} >= 200x); vectorised: min "
        f"{speed_vec.min():.0f}x, median {np.median(speed_vec):.0f}x"
    )
    print(
        f"the same by wall time alone: min {(t_ref / t_wall).min():.0f}x, median "
        f"{np.median(t_ref / t_wall):.0f}x"
    )
    slow = np.argsort(t_single)[::-1][:3]
    print(
        "slowest pairs (ours): "
        + ", ".join(
            f"case {k + 1} |M|={int(m[k].sum())} {t_single[k] * 1e3:.1f} ms ({speed[k]:.0f}x)"
            for k in slow
        )
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
    t_round = _timed(
        lambda: decide(sample_posterior(rn, rc, rm, seed=args.seed).theta(), GAMMA), args.repeats
    )
    print(f"round of 136 pairs with metric data: {t_round:.3f} s (median of {args.repeats})")
    print(f"end: {_load()}")

    bars = {
        "max |delta theta| <= 0.01 vs raw NUTS (every case)": delta.max() <= 0.01,
        "same decisions unless theta within 0.01 of a threshold": not mismatch.any(),
        "speed-up >= 200x per pair (one pair per call, every case)": speed.min() >= 200,
        "round of 136 pairs < 1 s": t_round < 1.0,
    }
    for name, met in bars.items():
        print(f"BAR {'met    ' if met else 'NOT met'}  {name}")
    wall = (time.perf_counter() - t_start) / 60
    print(f"bench wall time: {wall:.1f} min{' (NUTS loaded from file)' if args.load else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
