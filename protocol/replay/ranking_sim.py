"""Rankings, Likert and error-span scores in the adaptive loop, replayed on fully scored data.

The pairwise replay (:mod:`protocol.replay.simulation`) gives each pair its own labels. Here one
annotation serves several pairs on the same input:

- **rankings** (``mode="rank"``): an annotation ranks the outputs of several systems on one
  input (ties allowed) and gives every pair among them a preference, k(k−1)/2 for k outputs.
  From a ranking file each line is one annotation (an annotator's ranking of one input), and
  the loop picks, round by round, the unused ranking that serves the most pairs still short
  of their allocation. From scores (MQM) with ``k``: each annotation ranks ``k`` systems of
  one input by their score, chosen greedily for the open pairs that want labels most, on the
  input (in the repeat's random order) that gives them most new labels; a pair never gets two
  labels from one input.
- **scores** (``mode="likert"``; Likert ratings or error-span scores): an item rates one
  output; a pair gets an input once both its outputs are rated, so pairs gain inputs at
  irregular times (items are shared, as in the live Likert study, :mod:`protocol.services`):
  pairs take turns, each its next input in the study order, preferring one whose other output
  is rated already; every pair an item completes gets the input.

A pair's label on an input is the sign of its two systems' score difference (Definition 5;
for a ranking, the positions). Every round runs :func:`protocol.rounds.decide_round` with
the correlation of pairs that share inputs (:mod:`protocol.correlation`). The budget counts
annotations: one per ranking, one per Likert item; for the comparison with pairwise studies
a ranking of k outputs is reported as k − 1 comparisons' worth (``cost``). Pure (numpy /
pandas). ``docs/protocol.md``, "Rankings and scores in the loop".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from protocol import rounds
from protocol.correlation import label_correlation, shared_input_correlation
from protocol.decision import decide, human_posterior, preferences_from_scores, theta_human
from protocol.replay.simulation import OUTCOMES, classify_outcomes, load_mqm
from protocol.settings import ProtocolSettings

__all__ = [
    "ScoreData",
    "LoopResult",
    "build_parser",
    "decide_step",
    "load_rankings",
    "loop_once",
    "loop_replay",
    "null_likert_scores",
    "null_mqm_scores",
    "render_table",
    "run_from_args",
    "score_data_from_wide",
]

BIG = 10**12


@dataclass(frozen=True)
class ScoreData:
    """Units (an input, or one annotator's ranking of an input) × systems: ``scores`` ``(U,
    S)``, higher is better, NaN where the unit lacks the system; ``inputs`` the input id of
    each unit. A pair's pool is every unit holding both its systems."""

    systems: tuple[str, ...]
    scores: NDArray[np.float64]
    inputs: NDArray[Any]
    dead_zone: float = 0.0

    def pair_table(self) -> tuple[NDArray[np.int64], NDArray[np.int8], NDArray[np.bool_]]:
        """``(pairs (P, 2), labels (P, U), pool (P, U))`` of every pair with a shared unit."""
        s = len(self.systems)
        rated = ~np.isnan(self.scores)
        pairs, labels, pool = [], [], []
        for a in range(s):
            for b in range(a + 1, s):
                both = rated[:, a] & rated[:, b]
                if not both.any():
                    continue
                pairs.append((a, b))
                lab = preferences_from_scores(
                    np.nan_to_num(self.scores[:, a]), np.nan_to_num(self.scores[:, b]),
                    self.dead_zone,
                )  # fmt: skip
                labels.append(np.where(both, lab, 0).astype(np.int8))
                pool.append(both)
        return np.array(pairs, dtype=np.int64), np.array(labels), np.array(pool)


def score_data_from_wide(wide: pd.DataFrame, dead_zone: float = 0.0) -> ScoreData:
    """A wide ``input × system`` score frame (e.g. :func:`protocol.replay.simulation.load_mqm`)."""
    return ScoreData(
        tuple(str(c) for c in wide.columns),
        wide.to_numpy(dtype=float),
        wide.index.to_numpy(),
        dead_zone,
    )


def load_rankings(path: str | Path) -> ScoreData:
    """A ranking file: JSON lines ``{"input": "s1", "annotator": "w7", "ranking": [["sysA"],
    ["sysB", "sysC"], ["sysD"]]}``, best first, a tie group as a list (a bare name is a group
    of one); ``annotator`` is optional. Each line is one annotation; a system appears at most
    once in it, and it ranks at least two systems."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            groups = [[g] if isinstance(g, str) else list(g) for g in row["ranking"]]
            entry = {"input": row["input"], "groups": groups}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a ranking line ({exc})") from None
        names = [str(s) for g in groups for s in g]
        if len(names) != len(set(names)) or len(names) < 2:
            raise ValueError(f"{path}:{number}: a ranking names two or more systems, each once")
        rows.append(entry)
    if not rows:
        raise ValueError(f"{path}: no rankings")
    systems = tuple(sorted({str(s) for r in rows for g in r["groups"] for s in g}))
    col = {s: i for i, s in enumerate(systems)}
    scores = np.full((len(rows), len(systems)), np.nan)
    for u, r in enumerate(rows):
        for position, group in enumerate(r["groups"]):
            for s in group:
                scores[u, col[str(s)]] = -float(position)
    return ScoreData(systems, scores, np.array([r["input"] for r in rows], dtype=object))


def null_mqm_scores(
    n_systems: int, n_inputs: int, rng: np.random.Generator, *, spread: float = 0.0
) -> ScoreData:
    """MQM-like scores: per segment 0 with probability ``0.30 + spread · i`` for system ``i``,
    otherwise minus a penalty from ``{1, 1, 1, 5, 5, 10, 25}`` (issue 20's synthetic files;
    ``spread = 0``: every system equal, the null)."""
    p_zero = 0.30 + spread * np.arange(n_systems)
    penalty = rng.choice([1, 1, 1, 5, 5, 10, 25], size=(n_inputs, n_systems)).astype(float)
    zero = rng.random((n_inputs, n_systems)) < p_zero[None, :]
    scores = np.where(zero, 0.0, -penalty)
    return ScoreData(tuple(f"s{i}" for i in range(n_systems)), scores, np.arange(n_inputs))


def null_likert_scores(
    n_systems: int, n_inputs: int, rng: np.random.Generator, *, raters: int = 3
) -> ScoreData:
    """Mean 1–5 ratings of ``raters`` annotators per output, every system rated alike."""
    p = np.array([0.10, 0.20, 0.30, 0.25, 0.15])
    ratings = rng.choice(np.arange(1, 6), size=(n_inputs, n_systems, raters), p=p)
    return ScoreData(
        tuple(f"s{i}" for i in range(n_systems)), ratings.mean(axis=2), np.arange(n_inputs)
    )


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


@dataclass
class LoopResult:
    """One run: final decisions and their outcome classes, annotations (rankings or items),
    ``cost`` in comparisons' worth (a ranking of k: k − 1; an item: 1/2), pair labels
    collected, the pools' pair labels, rounds, why pairs closed, and ``off_allocation``: the
    looks at which a pair gained another number of labels than its allocation (irregular
    arrival; pairwise studies have none) out of ``looks`` (open pairs summed over rounds)."""

    decisions: NDArray[np.int8]
    outcomes: NDArray[Any]
    annotations: int
    cost: float
    labels: int
    pool: int
    rounds: int
    retired: dict[str, int]
    off_allocation: int = 0
    looks: int = 0


class _State:
    """What the loop has collected: ``seen`` (P, U) pair labels, Likert ``rated`` outputs."""

    def __init__(self, data: ScoreData, rng: np.random.Generator) -> None:
        self.pairs, self.labels, self.pool = data.pair_table()
        n_sys = len(data.systems)
        self.n_sys = n_sys
        self.seen = np.zeros_like(self.pool)
        self.unit_rank = np.empty(self.pool.shape[1], dtype=np.int64)
        self.unit_rank[rng.permutation(self.pool.shape[1])] = np.arange(self.pool.shape[1])
        self.pair_id = np.full((n_sys, n_sys), -1, dtype=np.int64)
        for j, (a, b) in enumerate(self.pairs):
            self.pair_id[a, b] = self.pair_id[b, a] = j
        self.unit_used = np.zeros(self.pool.shape[1], dtype=bool)
        self.rated = ~np.isnan(data.scores)
        self.itemised = np.zeros((self.pool.shape[1], n_sys), dtype=bool)
        self.rng = rng
        self.cost = 0.0

    def best_unit(
        self,
        rows: NDArray[np.int64],
        want: NDArray[np.float64],
        mask: NDArray[np.bool_] | None = None,
    ) -> int:
        """The unit giving most new labels to ``rows`` that still want some, then most new
        labels, then earliest in the repeat's order; −1 if it gives none."""
        avail = self.pool[rows] & ~self.seen[rows]
        first = (avail & (want[rows] > 0)[:, None]).sum(axis=0)
        second = avail.sum(axis=0)
        u_count = avail.shape[1]
        key = (first * (len(rows) + 1) + second) * u_count + (u_count - 1 - self.unit_rank)
        key = np.where(first > 0, key, -1)
        if mask is not None:
            key = np.where(mask, key, -1)
        u = int(np.argmax(key))
        return u if key[u] >= 0 else -1

    def collect_ranking(
        self, want: NDArray[np.float64], open_: NDArray[np.bool_], k: int | None, budget: int
    ) -> int:
        """Rankings until every open pair has its allocation or the budget is spent."""
        spent = 0
        while spent < budget:
            cand = np.flatnonzero((want > 0) & open_)
            if cand.size == 0:
                break
            if k is None:  # fixed rankings: the unused one serving most pairs
                u = self.best_unit(cand, want, mask=~self.unit_used)
                if u < 0:
                    break
                self.unit_used[u] = True
                members = np.flatnonzero(self.rated[u])
            else:
                j = cand[np.argmax(want[cand] + self.rng.random(cand.size) * 1e-6)]
                members = self._members(j, want, open_, k)
                rows = self._rows(members, open_)
                u = self.best_unit(rows, want, mask=self.pool[j] & ~self.seen[j])
                if u < 0:
                    want[j] = 0
                    continue
            rows = self._rows(members, open_)
            new = rows[self.pool[rows, u] & ~self.seen[rows, u]]
            self.seen[new, u] = True
            want[new] -= 1
            spent += 1
            self.cost += len(members) - 1
        return spent

    def _rows(self, members: NDArray[np.int64], open_: NDArray[np.bool_]) -> NDArray[np.int64]:
        ids = self.pair_id[np.ix_(members, members)]
        ids = np.unique(ids[ids >= 0])
        return ids[open_[ids]]

    def _members(
        self, j: int, want: NDArray[np.float64], open_: NDArray[np.bool_], k: int
    ) -> NDArray[np.int64]:
        """Systems of one ranking: pair ``j``'s two, then greedily the system adding most
        wanted labels (random among the rest when none adds any)."""
        members = [int(self.pairs[j, 0]), int(self.pairs[j, 1])]
        need = np.where(open_, np.maximum(want, 0.0), 0.0)
        while len(members) < min(k, self.n_sys):
            ids = self.pair_id[:, members]  # (S, m)
            gain = np.where(ids >= 0, need[np.maximum(ids, 0)], 0.0).sum(axis=1)
            gain[members] = -1.0
            gain += self.rng.random(gain.size) * 1e-6
            members.append(int(np.argmax(gain)))
        return np.array(members, dtype=np.int64)

    def collect_likert(
        self, want: NDArray[np.float64], open_: NDArray[np.bool_], budget: int
    ) -> int:
        """Items (one output each) as the live Likert study releases them."""
        spent = 0
        progress = True
        order = np.argsort(self.unit_rank)
        while progress:
            progress = False
            for j in np.flatnonzero(open_ & (want > 0)):
                if want[j] <= 0:
                    continue
                a, b = self.pairs[j]
                avail = self.pool[j, order] & ~self.seen[j, order]
                cost = 2 - self.itemised[order, a].astype(int) - self.itemised[order, b]
                ok = avail & (cost <= budget - spent)
                if not ok.any():
                    want[j] = 0
                    continue
                cheap = ok & (cost == 1)
                u = int(order[np.argmax(cheap) if cheap.any() else np.argmax(ok)])
                for s in (a, b):
                    if not self.itemised[u, s]:
                        self.itemised[u, s] = True
                        spent += 1
                        self.cost += 0.5
                done = (
                    open_ & self.pool[:, u] & ~self.seen[:, u]
                    & self.itemised[u, self.pairs[:, 0]] & self.itemised[u, self.pairs[:, 1]]
                )  # fmt: skip
                self.seen[done, u] = True
                want[done] -= 1
                progress = True
        return spent


def loop_once(
    data: ScoreData,
    settings: ProtocolSettings,
    rng: np.random.Generator,
    *,
    mode: str = "rank",
    k: int | None = None,
    correlated: bool = True,
    reference: NDArray[np.int8] | None = None,
) -> LoopResult:
    """One run of the protocol in which annotations are rankings (``mode="rank"``; ``k``
    systems per ranking from scores, or the file's rankings with ``k=None``) or Likert items
    (``mode="likert"``). ``settings.budget``: annotations (> 1) or None; ``correlated``: pool
    with the shared-input correlation (False: as if pairs were independent)."""
    if mode not in ("rank", "likert"):
        raise ValueError("mode must be 'rank' or 'likert'")
    if settings.budget is not None and settings.budget <= 1:
        raise ValueError("a ranking or Likert replay takes a budget in annotations (> 1)")
    st = _State(data, rng)
    n_pairs = len(st.pairs)
    pool_sizes = st.pool.sum(axis=1)
    ref = reference if reference is not None else _reference(st, settings.gamma)
    budget = BIG if settings.budget is None else int(settings.budget)
    is_open = np.ones(n_pairs, dtype=bool)
    final = np.zeros(n_pairs, dtype=np.int8)
    weights = np.ones(n_pairs)
    effect_mean, effect_var = np.zeros(n_pairs), np.ones(n_pairs)
    retired = {"decided": 0, "equivalent": 0, "futile": 0, "exhausted": 0, "budget": 0}
    level = settings.decision_level
    spent = n_rounds = off = looks = 0
    per_annotation = 1 if mode == "likert" else (k or 2) * ((k or 2) - 1) // 2
    while is_open.any() and spent < budget:
        idx = np.flatnonzero(is_open)
        capacity = (st.pool[idx] & ~st.seen[idx]).sum(axis=1)
        give = rounds.round_allocation(weights[idx], capacity, BIG, settings, first=n_rounds == 0)
        want = np.zeros(n_pairs)
        want[idx] = give
        before = int(st.seen.sum())
        had = st.seen[idx].sum(axis=1)
        if mode == "rank":
            spent += st.collect_ranking(want, is_open, k, budget - spent)
        else:
            spent += st.collect_likert(want, is_open, budget - spent)
        if int(st.seen.sum()) == before:
            break
        n_rounds += 1
        human = _counts(st, idx)
        used = st.seen[idx].sum(axis=1)
        off += int(np.sum(used - had != give))
        looks += idx.size
        if not settings.paper and level is None:
            level = rounds.decision_level(settings, int(pool_sizes.max()), settings.batch, human)
        step = decide_step(
            st.labels,
            st.seen,
            st.pool,
            st.pairs,
            is_open,
            rounds.ClosedPairs(effect_mean, effect_var, st.pairs, final),
            max(budget - spent, 0) * per_annotation,
            settings,
            level=level,
            correlated=correlated,
        )
        final[idx] = step.decision
        weights[idx] = step.weight
        effect_mean[idx], effect_var[idx] = step.effect_mean, step.effect_var
        for outcome in (rounds.DECIDED, rounds.EQUIVALENT, rounds.FUTILE, rounds.EXHAUSTED):
            retired[outcome] += int(np.sum(step.outcome == outcome))
        retired["decided"] += int(np.sum(step.outcome == rounds.IMPLIED))
        retired["budget"] += int(np.sum(step.outcome == rounds.BUDGET))
        is_open[idx[step.outcome != rounds.OPEN]] = False
    if is_open.any():  # budget spent or nothing more to collect: the last look
        idx = np.flatnonzero(is_open)
        final[idx] = decide(theta_human(_counts(st, idx)), settings.gamma)
        retired["budget"] += int(idx.size)
    return LoopResult(
        final,
        classify_outcomes(ref, final),
        int(spent),
        float(st.cost),
        int(st.seen.sum()),
        int(pool_sizes.sum()),
        n_rounds,
        retired,
        off,
        looks,
    )


def decide_step(
    labels: NDArray[np.int8],
    seen: NDArray[np.bool_],
    pool: NDArray[np.bool_],
    pairs: NDArray[np.int64],
    is_open: NDArray[np.bool_],
    effects: rounds.ClosedPairs,
    budget_left: int,
    settings: ProtocolSettings,
    *,
    level: float | None,
    correlated: bool = True,
) -> rounds.RoundDecision:
    """One look of the loop at what it has collected: Algorithm 1 and the retirement rules
    (:func:`protocol.rounds.decide_round`) for the open pairs (``is_open``), the closed ones'
    kept effects pooled with them (``effects``: every pair's last effect estimate), with the
    correlation of pairs that share inputs (``correlated``). ``labels``, ``seen``, ``pool``:
    ``(P, U)`` labels in {+1, 0, −1}, what was collected, what may be; ``pairs``: ``(P, 2)``
    system indices; ``budget_left`` in pair labels. The live ranking study's decisions
    equal this step's on the same labels (``tests/unit/test_protocol_ranking.py``)."""
    idx = np.flatnonzero(is_open)
    shut = np.flatnonzero(~is_open)
    lab, got = labels[idx], seen[idx]
    human = np.stack([(got & (lab == c)).sum(axis=1) for c in (1, 0, -1)], axis=1)
    order = np.concatenate([idx, shut])
    corr = None
    if correlated and settings.pooling and not settings.paper:
        rho = label_correlation(labels[order], seen[order], pairs[order])
        corr = shared_input_correlation(seen[order], pool[order], pairs[order], rho)
    return rounds.decide_round(
        human_posterior(human),
        got.sum(axis=1),
        pool[idx].sum(axis=1),
        budget_left,
        settings,
        level=level,
        systems=pairs[idx],
        closed=rounds.ClosedPairs(
            effects.effect_mean[shut],
            effects.effect_var[shut],
            effects.systems[shut],
            None if effects.decision is None else effects.decision[shut],
        ),
        correlation=corr,
    )


def _counts(st: _State, idx: NDArray[np.int64]) -> NDArray[np.int64]:
    lab, seen = st.labels[idx], st.seen[idx]
    return np.stack([(seen & (lab == c)).sum(axis=1) for c in (1, 0, -1)], axis=1)


def _reference(st: _State, gamma: float) -> NDArray[np.int8]:
    """Algorithm 1 on every label of each pair's pool."""
    lab, pool = st.labels, st.pool
    counts = np.stack([(pool & (lab == c)).sum(axis=1) for c in (1, 0, -1)], axis=1)
    return decide(theta_human(counts), gamma)


def loop_replay(
    data: ScoreData,
    settings: ProtocolSettings,
    *,
    mode: str = "rank",
    k: int | None = None,
    repeats: int = 10,
    seed: int = 0,
    correlated: bool = True,
) -> dict[str, Any]:
    """``repeats`` runs of :func:`loop_once` in random input orders, averaged: the fraction of
    pairs per outcome class, annotations, comparisons' worth per pairwise pool (``cost``),
    pair labels per pool (``labels``) and the share of pairs decided (``decided``)."""
    root = np.random.default_rng(seed)
    t0 = time.perf_counter()
    runs = [
        loop_once(data, settings, child, mode=mode, k=k, correlated=correlated)
        for child in root.spawn(repeats)
    ]
    summary = {o: float(np.mean([np.mean(r.outcomes == o) for r in runs])) for o in OUTCOMES}
    summary["decided"] = float(np.mean([np.mean(r.decisions != 0) for r in runs]))
    summary["annotations"] = float(np.mean([r.annotations for r in runs]))
    summary["cost"] = float(np.mean([r.cost / r.pool for r in runs]))
    summary["labels"] = float(np.mean([r.labels / r.pool for r in runs]))
    return {
        "protocol": "paper" if settings.paper else "default",
        "mode": mode if mode == "likert" else f"rank {k or 'file'}",
        "settings": asdict(settings),
        "correlated": correlated,
        "systems": list(data.systems),
        "pool": runs[0].pool if runs else 0,
        "repeats": repeats,
        "seed": seed,
        "summary": summary,
        "runs": [
            {
                "decided": float(np.mean(r.decisions != 0)),
                "annotations": r.annotations,
                "cost": r.cost,
                "rounds": r.rounds,
                "off_allocation": r.off_allocation,
                "looks": r.looks,
                "retired": r.retired,
            }
            for r in runs
        ],
        "seconds": time.perf_counter() - t0,
    }


def render_table(results: Sequence[dict[str, Any]]) -> str:
    """Correct / Inversion / Omission / Insertion, annotations, comparisons' worth (Ann.)."""
    head = f"{'protocol':<9} {'mode':>9} {'batch':>5} {'Corr.':>6} {'Inv.':>6} {'Omi.':>6} "
    head += f"{'Ins.':>6} {'annot.':>8} {'labels':>6} {'Ann.':>6}"
    lines = [head, "-" * len(head)]
    for r in results:
        s = r["summary"]
        lines.append(
            f"{r['protocol']:<9} {r['mode']:>9} {r['settings']['batch']:>5} "
            f"{s['correct']:>6.2f} {s['inversion']:>6.2f} {s['omission']:>6.2f} "
            f"{s['insertion']:>6.2f} {s['annotations']:>8.0f} {s['labels']:>6.2f} "
            f"{s['cost']:>6.2f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line (also reached from ``python manage.py replay --rankings/--rank/--likert``)
# --------------------------------------------------------------------------------------------


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ranking / score replay's arguments."""
    p = parser or argparse.ArgumentParser(
        prog="python -m protocol.replay.ranking_sim",
        description="Replay the adaptive protocol with rankings or Likert-style scores.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--mqm", help="MQM TSV (system mqm_avg_score seg_id)")
    src.add_argument("--rankings", help="JSONL of rankings: {input, annotator?, ranking}")
    src.add_argument("--null", type=int, metavar="SYSTEMS", help="synthetic equal systems")
    p.add_argument("--null-inputs", type=int, default=300, help="inputs of --null studies")
    p.add_argument(
        "--systems", nargs="+", default=None, help="MQM systems (default: as replay --mqm)"
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument("--rank", type=int, default=None, metavar="K", help="rank K systems")
    how.add_argument("--likert", action="store_true", help="score one output per item")
    p.add_argument("--raters", type=int, default=3, help="raters per output of --null --likert")
    p.add_argument("--batch", type=int, nargs="+", default=[10])
    p.add_argument("--gamma", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=None, help="annotations (> 1)")
    p.add_argument("--dead-zone", type=float, default=0.0)
    p.add_argument("--paper", action="store_true", help="Algorithm 2 exactly as published")
    p.add_argument("--no-pooling", action="store_true")
    p.add_argument("--independent", action="store_true", help="pool as if pairs were independent")
    p.add_argument("--json", action="store_true")
    return p


class _LoopOptions(TypedDict):
    """What ``--rank``/``--likert``/``--independent`` pass on to :func:`loop_once`."""

    mode: str
    k: int | None
    correlated: bool


def run_from_args(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One loop replay per ``--batch``; a ``--null`` study is drawn anew for every repeat."""
    if args.rankings and (args.rank or args.likert):
        raise ValueError("--rankings replays the file's rankings: no --rank or --likert")
    mode = "likert" if args.likert else "rank"
    out = []
    for batch in args.batch:
        settings = ProtocolSettings(gamma=args.gamma, batch=batch, paper=args.paper,
                                    budget=args.budget)  # fmt: skip
        if args.no_pooling:
            settings = replace(settings, pooling=False)
        kw: _LoopOptions = {"mode": mode, "k": args.rank, "correlated": not args.independent}
        if args.null:
            out.append(_null_replay(args, settings, kw))
            continue
        if args.mqm:
            wide = load_mqm(args.mqm, args.systems)
            data = score_data_from_wide(wide, args.dead_zone)
            if mode == "rank" and not args.rank:
                raise ValueError("--mqm needs --rank K or --likert")
        else:
            data = load_rankings(args.rankings)
        out.append(loop_replay(data, settings, repeats=args.repeats, seed=args.seed, **kw))
    return out


def _null_replay(
    args: argparse.Namespace, settings: ProtocolSettings, kw: _LoopOptions
) -> dict[str, Any]:
    root = np.random.default_rng(args.seed)
    results = []
    for child in root.spawn(args.repeats):
        if args.likert:
            data = null_likert_scores(args.null, args.null_inputs, child, raters=args.raters)
        else:
            data = null_mqm_scores(args.null, args.null_inputs, child)
        results.append(loop_once(data, settings, child, **kw))
    decided = np.array([np.mean(r.decisions != 0) for r in results])
    n = decided.size * len(results[0].decisions)
    rate = float(decided.mean())
    return {
        "protocol": "paper" if settings.paper else "default",
        "mode": "likert" if args.likert else f"rank {args.rank}",
        "settings": asdict(settings),
        "correlated": kw["correlated"],
        "null": {"systems": args.null, "inputs": args.null_inputs, "pairs": n},
        "repeats": args.repeats,
        "seed": args.seed,
        "summary": {
            **{o: float(np.mean([np.mean(r.outcomes == o) for r in results])) for o in OUTCOMES},
            "decided": rate,
            "decided_se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / n)),
            "annotations": float(np.mean([r.annotations for r in results])),
            "cost": float(np.mean([r.cost / r.pool for r in results])),
            "labels": float(np.mean([r.labels / r.pool for r in results])),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = run_from_args(args)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    elif args.null:
        for r in results:
            s = r["summary"]
            print(
                f"{r['protocol']} {r['mode']} batch {r['settings']['batch']}: "
                f"{r['null']['pairs']} null pairs, decided {s['decided']:.3f} "
                f"(SE {s['decided_se']:.3f}), annotations {s['annotations']:.0f}"
            )
    else:
        print(render_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
