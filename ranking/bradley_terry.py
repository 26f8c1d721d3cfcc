"""Bradley–Terry scores of systems with percentile bootstrap intervals over inputs.

Bradley & Terry (1952): system ``i`` beats ``j`` with probability
``P(i > j) = p_i / (p_i + p_j) = 1 / (1 + exp(-(θ_i - θ_j)))``, ``θ = log p``. The maximum-
likelihood ``θ`` solves ``Σ_j w_ij = Σ_j n_ij · σ(θ_i - θ_j)`` for every ``i`` (wins of ``i``
equal its expected wins), where ``w_ij`` counts ``i``'s wins over ``j`` — a tie counts half a
win to each side — and ``n_ij = w_ij + w_ji``. It exists, unique up to a constant, exactly when
the win graph is strongly connected (Ford 1957). It is computed by choix (Maystre &
Grossglauser 2015, iterative Luce spectral ranking) and checked against evalica in the tests.

When the maximum-likelihood estimate does not exist (some system never lost, or never won),
the scores come from a small regularising prior instead: every pair of systems gets
``prior`` virtual wins each way (:data:`PRIOR`, ½: one virtual tie per pair, the
Haldane–Anscombe correction of a zero count), which is the maximum-likelihood estimate of the
win matrix ``W + prior · (1 − I)``; ``attrs["prior"]`` says which was used.
Users' view: ``docs/analysis.md`` ("Ranking").
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd

__all__ = [
    "ELO_BASE",
    "ELO_SCALE",
    "PRIOR",
    "bradley_terry",
    "fit_log_strengths",
    "refit_batch",
    "win_matrix",
]

#: Scores on the Elo-like scale of Chatbot Arena: ``ELO_BASE + ELO_SCALE · θ`` with ``θ``
#: centred at 0, so 400 points are a factor of 10 in the odds of winning.
ELO_SCALE = 400 / math.log(10)
ELO_BASE = 1000.0
#: Virtual wins each way per pair of systems when the maximum-likelihood estimate does not
#: exist: ½ each way is one virtual tie per pair (the Haldane–Anscombe ½).
PRIOR = 0.5

_TOL = 1e-10
_MAX_ITER = 10_000
#: Input indices drawn at once for the bootstrap's resamples.
_DRAWS = 1_000_000
_OUTCOMES = ("A", "B", "tie")


def win_matrix(
    a: np.ndarray, b: np.ndarray, outcome: np.ndarray, k: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """``W[i, j]``: wins of system ``i`` over ``j``; a tie adds ½ to both ``W[i, j]`` and
    ``W[j, i]``. ``a``, ``b``: system indices; ``outcome``: "A", "B" or "tie"."""
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=np.float64)
    out = np.zeros((k, k))
    tie = outcome == "tie"
    np.add.at(out, (a, b), np.where(outcome == "A", w, 0.0) + np.where(tie, w / 2, 0.0))
    np.add.at(out, (b, a), np.where(outcome == "B", w, 0.0) + np.where(tie, w / 2, 0.0))
    return out


def _connected(wins: np.ndarray) -> np.ndarray:
    """Per win matrix (one, or a stack ``B × k × k``): whether every system reaches every
    other through wins, so that the maximum-likelihood estimate exists (the win graph is
    strongly connected): the reachability matrix squared until it spans ``k - 1`` steps."""
    k = wins.shape[-1]
    reach = ((wins > 0) | np.eye(k, dtype=bool)).astype(np.float64)
    for _ in range(max(1, math.ceil(math.log2(k)))):
        reach = (reach @ reach > 0).astype(np.float64)
    return np.asarray(reach.all(axis=(-2, -1)))


def with_prior(wins: np.ndarray, prior: float) -> np.ndarray:
    """``wins`` (one win matrix or a stack of them) plus ``prior`` virtual wins each way for
    every pair of systems."""
    k = wins.shape[-1]
    return wins + prior * (np.ones((k, k)) - np.eye(k))


def fit_log_strengths(
    wins: np.ndarray, initial: np.ndarray | None = None, prior: float = 0.0
) -> np.ndarray | None:
    """The maximum-likelihood ``θ`` (centred at 0) for a win matrix, or ``None`` when it does
    not exist (the win graph is not strongly connected) or the iteration does not converge.
    ``prior`` > 0: the estimate of ``wins`` with ``prior`` virtual wins each way per pair
    (:func:`with_prior`), which always exists."""
    try:
        import choix
    except ImportError as exc:  # pragma: no cover - choix is a dependency
        raise ImportError("the Bradley-Terry ranking needs choix: pip install choix") from exc
    if prior > 0:
        wins = with_prior(wins, prior)
    if len(wins) < 2 or not _connected(wins):
        return None
    try:
        theta = choix.ilsr_pairwise_dense(
            wins, alpha=0.0, initial_params=initial, max_iter=_MAX_ITER, tol=_TOL
        )
    except RuntimeError:
        return None
    if not np.all(np.isfinite(theta)):
        return None
    centred: np.ndarray = theta - theta.mean()
    return centred


def refit_batch(wins: np.ndarray, initial: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """The maximum-likelihood ``θ`` (centred at 0) of each win matrix in ``wins`` (``B × k ×
    k``) by Newton's method from ``initial``; ``NaN`` rows where it does not exist (the win
    graph is not strongly connected) or the iteration does not converge.

    The log-likelihood ``Σ_ij w_ij log σ(θ_i - θ_j)`` is concave with gradient
    ``g_i = Σ_j w_ij - n_ij σ(θ_i - θ_j)`` and negative Hessian the Laplacian ``L`` of the
    weights ``n_ij σ(1 - σ)``; each step solves ``(L + 1 1ᵀ) δ = g`` (``1ᵀ g = 0``, so
    ``1ᵀ δ = 0``), shortened to at most 1 in any ``θ_i`` so that a far start does not
    overshoot. Agrees with :func:`fit_log_strengths` to 1e-8 (the tests).
    """
    b, k, _ = wins.shape
    ok = _connected(wins)
    w = wins[ok]
    n = w + w.transpose(0, 2, 1)
    theta = np.broadcast_to(initial - initial.mean(), (len(w), k)).copy()
    done = np.zeros(len(w), dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(max_iter):
            p = 1.0 / (1.0 + np.exp(theta[:, None, :] - theta[:, :, None]))
            grad = (w - n * p).sum(axis=2)
            lap = -n * p * (1.0 - p)
            lap[:, np.arange(k), np.arange(k)] = -lap.sum(axis=2)
            try:
                step = np.linalg.solve(lap + 1.0, grad[:, :, None])[:, :, 0]
            except np.linalg.LinAlgError:  # weights underflowed: leave the rest to choix
                break
            step /= np.maximum(1.0, np.abs(step).max(axis=1, keepdims=True))
            theta += np.where(done[:, None], 0.0, step)
            done |= (np.abs(step).max(axis=1) < _TOL) | ~np.isfinite(step).all(axis=1)
            if done.all():
                break
    out = np.full((b, k), np.nan)
    out[np.flatnonzero(ok)[done]] = theta[done] - theta[done].mean(axis=1, keepdims=True)
    return out


def _no_mle_reason(wins: np.ndarray, systems: list[str]) -> str:
    if len(systems) < 2:
        return "a ranking needs comparisons between at least two systems"
    never_lost = [s for s, col in zip(systems, wins.sum(axis=0), strict=True) if col == 0]
    never_won = [s for s, row in zip(systems, wins.sum(axis=1), strict=True) if row == 0]
    why = "no finite maximum-likelihood estimate"
    if never_lost:
        return f"{why}: {', '.join(never_lost)} never lost a comparison"
    if never_won:
        return f"{why}: {', '.join(never_won)} never won a comparison"
    return (
        f"{why}: the systems fall into groups of which one never lost to another "
        "(the win graph is not strongly connected)"
    )


def bradley_terry(
    frame: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
    scale: Literal["elo", "log"] = "elo",
    prior: float = PRIOR,
) -> pd.DataFrame:
    """Bradley–Terry scores of the systems in ``frame`` with bootstrap intervals over inputs.

    ``frame``: one comparison per row, ``system_a``, ``system_b``, ``outcome`` in {"A", "B",
    "tie"} and optionally ``input`` (comparisons of one input are resampled together; without
    it each row is its own input). A tie is half a win to each side. ``scale``: ``"elo"``
    (``1000 + 400/ln 10 · θ``) or ``"log"`` (``θ``), ``θ`` centred at 0. Interval: percentile
    bootstrap, ``n_boot`` resamples of the inputs with replacement, each refitted (resamples
    without a finite estimate are left out and counted). ``rank`` = 1 + the number of systems
    whose interval lies entirely above this one's (without intervals: above its score).
    ``prior``: when the maximum-likelihood estimate does not exist (a system never lost or
    never won), the fit and every resample use ``prior`` virtual wins each way per pair of
    systems (0: the scores stay undefined); the reason says so.

    Returns one row per system, best first: ``system``, ``score``, ``low``, ``high``, ``rank``,
    ``wins``, ``losses``, ``ties``, ``n``; ``attrs`` holds ``n_inputs``, ``n_comparisons``,
    ``n_boot``, ``n_boot_failed``, ``prior`` (the virtual wins used, 0 for the maximum-
    likelihood estimate) and ``reason`` (why scores or intervals are undefined or regularised,
    or "").
    """
    if n_boot < 0:
        raise ValueError("n_boot must be 0 or more")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be within (0, 1)")
    if not (prior >= 0 and math.isfinite(prior)):
        raise ValueError("prior must be 0 or more")
    if scale not in ("elo", "log"):
        raise ValueError("scale must be 'elo' or 'log'")
    for col in ("system_a", "system_b", "outcome"):
        if col not in frame.columns:
            raise ValueError(f"comparisons need a {col!r} column")
    outcome = frame["outcome"].astype(str).to_numpy()
    bad = ~np.isin(outcome, _OUTCOMES)
    if bad.any():
        raise ValueError(f"outcomes must be 'A', 'B' or 'tie', got {pd.unique(outcome[bad])[:5]}")
    sa = frame["system_a"].astype(str).to_numpy()
    sb = frame["system_b"].astype(str).to_numpy()
    if (sa == sb).any():
        raise ValueError("a comparison needs two different systems")
    systems = sorted(set(sa) | set(sb))
    k = len(systems)
    index = {s: i for i, s in enumerate(systems)}
    a = np.array([index[s] for s in sa], dtype=np.int64)
    b = np.array([index[s] for s in sb], dtype=np.int64)
    if "input" in frame.columns:
        inp, _ = pd.factorize(frame["input"], use_na_sentinel=False)
    else:
        inp = np.arange(len(frame))
    n_inputs = int(inp.max()) + 1 if len(inp) else 0

    wins = win_matrix(a, b, outcome, k)
    theta = fit_log_strengths(wins)
    reason = "" if theta is not None else _no_mle_reason(wins, systems)
    used = 0.0
    if theta is None and k >= 2 and prior > 0:
        used = prior
        theta = fit_log_strengths(wins, prior=used)
        reason = (
            f"{reason}; the scores use a small regularising prior instead: {used:g} virtual "
            f"win each way for every pair of systems ({2 * used:g} virtual tie per pair)"
        )
    boot: np.ndarray | None = None
    failed = 0
    if theta is not None and n_boot > 0:
        # the comparisons of each input as one win matrix; a resample sums them with weights
        per_input = np.zeros((n_inputs, k * k))
        np.add.at(per_input, (inp, a * k + b), (outcome == "A") + 0.5 * (outcome == "tie"))
        np.add.at(per_input, (inp, b * k + a), (outcome == "B") + 0.5 * (outcome == "tie"))
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        resampled = np.empty((n_boot, k, k))
        rows = max(1, _DRAWS // max(1, n_inputs))  # resamples drawn at once (bounded memory)
        for start in range(0, n_boot, rows):  # the same draws as one resample at a time
            m = min(rows, n_boot - start)
            picks = rng.integers(0, n_inputs, (m, n_inputs))
            cells = (np.arange(m)[:, None] * n_inputs + picks).ravel()
            counts = np.bincount(cells, minlength=m * n_inputs).reshape(m, n_inputs)
            resampled[start : start + m] = (counts @ per_input).reshape(m, k, k)
        refits = refit_batch(with_prior(resampled, used), theta)
        fits = []
        for wins_r, fit in zip(resampled, refits, strict=True):
            if np.isnan(fit).any():  # no estimate, or Newton did not converge: choix decides
                fit = fit_log_strengths(wins_r, initial=theta, prior=used)
            if fit is None:
                failed += 1
            else:
                fits.append(fit)
        if len(fits) >= 2:
            q = 100 * (1 - confidence) / 2
            boot = np.percentile(np.array(fits), [q, 100 - q], axis=0)
            if failed:
                reason = (reason + "; " if reason else "") + (
                    f"{failed} of {n_boot} resamples had no finite estimate (a system won or "
                    "lost all its comparisons) and were left out of the interval"
                )
        else:
            reason = (reason + "; " if reason else "") + (
                f"no interval: {failed} of {n_boot} resamples had no finite estimate"
            )

    def to_scale(x: np.ndarray) -> np.ndarray:
        return ELO_BASE + ELO_SCALE * x if scale == "elo" else x

    played = wins + wins.T
    tie_counts = np.zeros((k, k))
    tie = outcome == "tie"
    np.add.at(tie_counts, (a[tie], b[tie]), 1)
    np.add.at(tie_counts, (b[tie], a[tie]), 1)
    ties = tie_counts.sum(axis=1)
    out = pd.DataFrame(
        {
            "system": systems,
            "score": to_scale(theta) if theta is not None else np.nan,
            "low": to_scale(boot[0]) if boot is not None else np.nan,
            "high": to_scale(boot[1]) if boot is not None else np.nan,
            "wins": wins.sum(axis=1) - ties / 2,
            "losses": wins.sum(axis=0) - ties / 2,
            "ties": ties,
            "n": played.sum(axis=1),
        }
    )
    out[["wins", "losses", "ties", "n"]] = out[["wins", "losses", "ties", "n"]].round().astype(int)
    if theta is None:
        out["rank"] = pd.array([pd.NA] * k, dtype="Int64")
    elif boot is not None:
        low, high = out["low"].to_numpy(), out["high"].to_numpy()
        out["rank"] = 1 + (low[None, :] > high[:, None]).sum(axis=1)
    else:
        score = out["score"].to_numpy()
        out["rank"] = 1 + (score[None, :] > score[:, None]).sum(axis=1)
    order = np.lexsort((out["system"].to_numpy(), -out["score"].fillna(-np.inf).to_numpy()))
    out = out.iloc[order].reset_index(drop=True)
    out = out[["system", "score", "low", "high", "rank", "wins", "losses", "ties", "n"]]
    out.attrs = {
        "n_inputs": n_inputs,
        "n_comparisons": int(len(frame)),
        "n_boot": int(n_boot),
        "n_boot_failed": int(failed),
        "prior": used,
        "scale": scale,
        "reason": reason,
    }
    return out
