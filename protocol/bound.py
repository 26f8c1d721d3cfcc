"""How few annotations any error-controlled rule can spend on one pair: an exact lower bound.

A study of two systems, one pair, all of whose data decide it: its share of pairs significant
on all data is 100 %. H1: the pair's pool of ``N`` labels is drawn i.i.d. from an effect whose
expected z on all data is ``z`` and all of it decides for A (Algorithm 1 at γ); the protocol
sees it in a random order, ``batch`` labels per look. H0: a null pair (``p> = p<``, the same
draw rate). A rule may, at every look, decide A, decide B, retire the pair or go on; at ``N``
it stops. Among **all** such rules — even one told the effect in advance — with false
decisions ``P0(decide) ≤ γ`` and Correct ``P1(decide A) ≥ a``, the expected annotations
``E1[N]`` are at least the Lagrangian dual

    max over λ, μ ≥ 0 of  min over rules (E1[N] − μ P1(A) + λ P0(decide)) + μ a − λ γ

(weak duality: every rule meeting both constraints spends at least this; any λ, μ give a valid
bound). The inner minimum is exact: backward induction over the label counts (a Bayes
sequential test with those costs). With ``a`` the paper's own P1(A), a bound above the paper's
E1[N] means no rule that keeps null pairs at γ matches the paper's Correct at its cost.

The rule above is told which system is better, so it may spend all of γ in that direction.
A rule that is not told — the paper's, the default, any real protocol — must keep null pairs
at γ whichever system wins: :func:`direction_agnostic_bound` is the bound with γ/2 per
direction, and :func:`prior_bound` the bound for a rule told only a prior over the effect
(:class:`PriorPair`, H1 a mixture of effects), also at γ/2 per direction.

``bench/protocol_sweep.py --only bound`` prints them for the paper's protocol and the
default (docs/validation.md, "Sweep"). Pure: numpy and scipy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import betainc, gammaln

__all__ = [
    "GO_ON",
    "Pair",
    "PriorPair",
    "direction_agnostic_bound",
    "dual_bound",
    "evaluate",
    "lagrangian",
    "optimal_rule",
    "paper_rule",
    "prior_bound",
]

#: Over (W, L) at one look: two arrays of floats (per hypothesis) and whether counts are possible.
_Paths = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]


class _PathsMemo:
    """:meth:`log_paths` of a pair or a prior (its ``_log_paths``) and their exponentials
    (:func:`_path_probs`), computed once per look: the dual search evaluates hundreds of
    rules on the same looks."""

    @cached_property
    def _memo(self) -> dict[tuple[str, int], _Paths]:
        return {}

    def _log_paths(
        self, k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        raise NotImplementedError

    def log_paths(
        self, k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Over (W, L) after ``k`` labels: log of one label sequence's probability under H0
        and under H1, and whether the counts are possible (read-only arrays)."""
        if ("log", k) not in self._memo:
            self._memo["log", k] = _read_only(self._log_paths(k))
        lp0, lp1, ok = self._memo["log", k]
        return lp0, lp1, ok


@dataclass(frozen=True)
class Pair(_PathsMemo):
    """A pair with label probabilities ``probs`` = (p>, p=, p<) and a pool of ``n`` labels,
    looked at every ``batch``. H1: the pool is drawn from ``probs`` and all of it decides for
    A (Algorithm 1 at γ: the pair is significant on all data, as in a study with 100 % of its
    pairs significant); H0: labels i.i.d. with the same draw rate and ``p> = p<``. Sequence
    probabilities are plain floats: pools up to about 600 labels."""

    n: int
    probs: tuple[float, float, float]
    batch: int = 10
    gamma: float = 0.05

    @classmethod
    def with_z(cls, n: int, z: float, draw: float = 0.45, batch: int = 10) -> Pair:
        """The effect whose expected z on all ``n`` labels is ``z``: ``p> − p< = z √((1 −
        draw) / n)``."""
        q = (1.0 - draw) / 2.0
        d = min(z * np.sqrt((1.0 - draw) / n), 2.0 * q - 1e-9)
        return cls(n, (q + d / 2.0, draw, q - d / 2.0), batch)

    @property
    def looks(self) -> NDArray[np.int64]:
        return np.unique(np.minimum(np.arange(self.batch, self.n + self.batch, self.batch), self.n))

    @cached_property
    def _decides_a(self) -> dict[int, NDArray[np.float64]]:
        """Per look, over (W, L): the probability under ``probs`` that all ``n`` labels decide
        for A (backward from Algorithm 1 on the whole pool)."""
        looks = [0, *(int(k) for k in self.looks)]
        w, l = np.meshgrid(np.arange(self.n + 1), np.arange(self.n + 1), indexing="ij")
        theta = betainc(l + 1.0, w + 1.0, 0.5)
        out = {self.n: np.where((w + l <= self.n) & (theta > 1 - self.gamma / 2), 1.0, 0.0)}
        for j in range(len(looks) - 2, -1, -1):
            k, step = looks[j], looks[j + 1] - looks[j]
            nxt = out[looks[j + 1]]
            out[k] = _gather(_step_probs(self.probs, step), nxt, k)
        return out

    def _log_paths(
        self, k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        w, l = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        d = k - w - l
        ok = d >= 0
        d = np.maximum(d, 0)
        p, draw = np.log(self.probs), self.probs[1]
        lp0 = (w + l) * np.log((1.0 - draw) / 2.0) + d * np.log(draw)
        with np.errstate(divide="ignore"):
            lp1 = w * p[0] + d * p[1] + l * p[2] + np.log(self._decides_a[k])
            lp1 -= np.log(self._decides_a[0][0, 0])
        return np.where(ok, lp0, -np.inf), np.where(ok, lp1, -np.inf), ok


def _read_only(paths: _Paths) -> _Paths:
    for a in paths:
        a.setflags(write=False)
    return paths


def _path_probs(
    pair: Pair | PriorPair, k: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """``exp`` of :meth:`Pair.log_paths` (one label sequence's probability under H0, H1) and
    whether the counts are possible, computed once per pair and look."""
    if ("exp", k) not in pair._memo:
        lp0, lp1, ok = pair.log_paths(k)
        pair._memo["exp", k] = _read_only((np.exp(lp0), np.exp(lp1), ok))
    p0, p1, ok = pair._memo["exp", k]
    return p0, p1, ok


def _step_probs(probs: tuple[float, float, float], k: int) -> NDArray[np.float64]:
    """(k+1, k+1): probability of w wins and l losses among ``k`` i.i.d. labels."""
    out: NDArray[np.float64] = _sequences(k) * np.exp(
        np.add.outer(np.arange(k + 1) * np.log(probs[0]), np.arange(k + 1) * np.log(probs[2]))
        + np.maximum(k - np.add.outer(np.arange(k + 1), np.arange(k + 1)), 0) * np.log(probs[1])
    )
    return out


@cache
def _sequences(step: int) -> NDArray[np.float64]:
    """(step+1, step+1): how many label sequences of length ``step`` have w wins, l losses
    (computed once per step; read-only)."""
    w, l = np.meshgrid(np.arange(step + 1), np.arange(step + 1), indexing="ij")
    ok = w + l <= step
    d = np.where(ok, step - w - l, 0)
    count = np.exp(gammaln(step + 1) - gammaln(w + 1) - gammaln(l + 1) - gammaln(d + 1))
    out: NDArray[np.float64] = np.where(ok, count, 0.0)
    out.setflags(write=False)
    return out


def _gather(kernel: NDArray[np.float64], after: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Over (W, L) after ``k`` labels: ``Σ kernel[w, l] · after[W + w, L + l]``."""
    out = np.zeros((k + 1, k + 1))
    for w, l in zip(*np.nonzero(kernel), strict=True):
        out += kernel[w, l] * after[w : w + k + 1, l : l + k + 1]
    return out


GO_ON = 2
"""Action code: look again after the next batch (1: decide A, −1: decide B, 0: retire)."""


def optimal_rule(pair: Pair | PriorPair, lam: float, mu: float) -> list[NDArray[np.int8]]:
    """Per look, the action over (W, L) of the rule minimising ``E1[N] − μ P1(A) + λ
    P0(decide)`` (backward induction; values per label sequence, which carry both
    hypotheses' probabilities, so a continuation sums its sequences' values)."""
    looks = pair.looks
    rule: list[NDArray[np.int8]] = []
    nxt: NDArray[np.float64] | None = None
    for j in range(len(looks) - 1, -1, -1):
        k = int(looks[j])
        p0, p1, ok = _path_probs(pair, k)
        options = [np.zeros_like(p0), lam * p0 - mu * p1, lam * p0]
        codes = [0, 1, -1]
        if nxt is not None:
            step = int(looks[j + 1] - k)
            options.append(step * p1 + _gather(_sequences(step), nxt, k))
            codes.append(GO_ON)
        stack = np.stack(options)
        best = np.argmin(stack, axis=0)
        nxt = np.where(ok, np.take_along_axis(stack, best[None], 0)[0], 0.0)
        rule.append(np.where(ok, np.array(codes, dtype=np.int8)[best], 0).astype(np.int8))
    return rule[::-1]


def evaluate(pair: Pair | PriorPair, rule: list[NDArray[np.int8]]) -> dict[str, float]:
    """Exact P0(decide), P1(A), P1(B) and E1[N] of a rule: the number of label sequences that
    reach each (W, L) at each look still open, times each hypothesis' sequence probability."""
    alive = np.ones((1, 1))
    prev = 0
    p0_decide = p1_a = p1_b = e1_n = 0.0
    for j, k in enumerate(pair.looks):
        k = int(k)
        step = k - prev
        count = _sequences(step)
        grown = np.zeros((k + 1, k + 1))
        # only the box of counts still open grows (elsewhere it would add +0.0: no change)
        rows, cols = np.flatnonzero(alive.any(axis=1)), np.flatnonzero(alive.any(axis=0))
        if rows.size:
            w0, w1, l0, l1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
            box = alive[w0:w1, l0:l1]
            for w, l in zip(*np.nonzero(count), strict=True):
                grown[w + w0 : w + w1, l + l0 : l + l1] += count[w, l] * box
        p0, p1, _ = _path_probs(pair, k)
        e1_n += step * float((alive * _path_probs(pair, prev)[1]).sum())
        act = rule[j]
        p0_decide += float((grown * p0)[np.abs(act) == 1].sum())
        p1_a += float((grown * p1)[act == 1].sum())
        p1_b += float((grown * p1)[act == -1].sum())
        alive = np.where(act == GO_ON, grown, 0.0)
        prev = k
    return {"p0_decide": p0_decide, "p1_a": p1_a, "p1_b": p1_b, "e1_n": e1_n}


def paper_rule(pair: Pair, gamma: float = 0.05) -> list[NDArray[np.int8]]:
    """Algorithm 2 on one pair: decided at the first look where Algorithm 1's θ leaves
    [γ/2, 1 − γ/2]; undecided at the pool's end otherwise."""
    rule = []
    for k in pair.looks:
        w, l = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        theta = betainc(l + 1.0, w + 1.0, 0.5)  # P(p> > p<) under Dir(n + 1)
        act = np.where(theta > 1 - gamma / 2, 1, np.where(theta < gamma / 2, -1, GO_ON))
        if k == pair.n:
            act = np.where(act == GO_ON, 0, act)
        rule.append(np.where(w + l <= k, act, 0).astype(np.int8))
    return rule


def lagrangian(result: dict[str, float], lam: float, mu: float) -> float:
    """``E1[N] − μ P1(A) + λ P0(decide)`` of an evaluated rule."""
    return result["e1_n"] - mu * result["p1_a"] + lam * result["p0_decide"]


def dual_bound(pair: Pair | PriorPair, a: float, gamma: float = 0.05) -> tuple[float, float, float]:
    """The largest dual bound on E1[N] found, with its λ, μ: Nelder-Mead over log λ, log μ
    from two starts (μ must grow very large when ``a`` is near 1)."""

    def neg(x: NDArray[np.float64]) -> float:
        lam, mu = np.exp(np.clip(x, -8.0, 25.0))
        res = evaluate(pair, optimal_rule(pair, lam, mu))
        return -float(lagrangian(res, lam, mu) + mu * a - lam * gamma)

    runs = [
        minimize(neg, np.log(start), method="Nelder-Mead", options={"xatol": 0.02, "fatol": 0.01})
        for start in ([pair.n / 2.0, float(pair.n)], [pair.n / 2.0, 1e3 * pair.n])
    ]
    best = min(runs, key=lambda r: r.fun)
    lam, mu = np.exp(np.clip(best.x, -8.0, 25.0))
    return -float(best.fun), float(lam), float(mu)


def direction_agnostic_bound(pair: Pair | PriorPair, a: float, gamma: float = 0.05) -> float:
    """The least ``E1[N]`` of a rule that is not told which system is better, keeps null pairs
    at γ and reaches Correct ``a`` whichever system wins (each equally likely).

    Such a rule decides a null pair for A with some ``γ_A`` and for B with ``γ_B``, ``γ_A +
    γ_B ≤ γ``; by symmetry its cost averaged over the two directions is at least
    ``(B(γ_A) + B(γ_B)) / 2`` with ``B`` the one-sided bound (:func:`dual_bound`), and ``B`` is
    convex in the level (randomising between two rules mixes their costs and errors), so at
    least ``B(γ/2)``: the dual bound with γ/2 per direction."""
    return dual_bound(pair, a, gamma / 2.0)[0]


@dataclass(frozen=True)
class PriorPair(_PathsMemo):
    """H1 a mixture: the effect is one of ``pairs`` (same ``n``, draw rate, ``batch``) with
    probabilities ``weights``; a rule sees the labels only, so it is told only this prior.
    Has the interface :func:`optimal_rule`, :func:`evaluate` and :func:`dual_bound` use."""

    pairs: tuple[Pair, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        first = self.pairs[0]
        if any((p.n, p.batch, p.probs[1]) != (first.n, first.batch, first.probs[1]) for p in
               self.pairs):  # fmt: skip
            raise ValueError("the effects of a prior need the same pool, batch and draw rate")
        if len(self.weights) != len(self.pairs) or abs(sum(self.weights) - 1.0) > 1e-9:
            raise ValueError("one weight per effect, summing to 1")

    @classmethod
    def over_z(
        cls, n: int, zs: tuple[float, ...], draw: float = 0.45, batch: int = 10
    ) -> PriorPair:
        """Effects with expected z on all data ``zs``, equally likely."""
        return cls(tuple(Pair.with_z(n, z, draw, batch) for z in zs), (1.0 / len(zs),) * len(zs))

    @property
    def n(self) -> int:
        return self.pairs[0].n

    @property
    def looks(self) -> NDArray[np.int64]:
        return self.pairs[0].looks

    def _log_paths(
        self, k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        lp0, _, ok = self.pairs[0].log_paths(k)
        parts = [np.log(w) + p.log_paths(k)[1] for p, w in zip(self.pairs, self.weights,
                                                               strict=True)]  # fmt: skip
        with np.errstate(divide="ignore"):
            lp1 = np.logaddexp.reduce(np.stack(parts), axis=0)
        return lp0, np.where(ok, lp1, -np.inf), ok


def prior_bound(prior: PriorPair, a: float, gamma: float = 0.05) -> float:
    """The least ``E1[N]`` averaged over ``prior`` of a rule told only the prior (not the
    effect, not the direction) that keeps null pairs at γ and reaches Correct ``a`` averaged
    over the prior: :func:`direction_agnostic_bound` with H1 the prior's mixture."""
    return direction_agnostic_bound(prior, a, gamma)
