"""Replay of the budgeted protocol on fully rated data (Deriu et al. 2023, Sections 4-6).

Every input of a data set rated for every pair is the pool a live study *could* collect. Each
repeat draws a random order of every pair's inputs; the protocol (``paper=True``: Algorithm 2
as published; default: the corrections of :class:`protocol.settings.ProtocolSettings`)
collects in that order and never sees the rest. Its decisions are classified against
Algorithm 1 on the whole pool as Correct / Inversion / Omission / Insertion (Tables 2-5);
the KLD of Section 6 compares its posterior mean with the mode of Eq. 3 on all data.
``budget`` < 1 is a fraction of the pool, > 1 annotations; an optional simulated metric with
mixture matrix ``mu`` (Appendix E) labels every input from column ``mu[:, true label]``.

Pure (numpy / pandas); :func:`build_parser` and :func:`run_from_args` are shared with the
``replay`` management command (``docs/protocol.md``, "Replay").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from formats import judgebench
from protocol import rounds
from protocol.decision import (
    LABELS,
    PosteriorDraws,
    decide,
    human_posterior,
    kl_divergence,
    posterior_mode_p,
    preferences_from_scores,
    sample_posterior,
    theta_human,
)
from protocol.settings import ProtocolSettings

__all__ = [
    "PAPER_SYSTEMS",
    "PreferenceData",
    "ReplayResult",
    "build_parser",
    "classify_outcomes",
    "frame_from_judgebench",
    "load_mqm",
    "mqm_systems",
    "null_decisions",
    "null_like",
    "parse_mixture_matrix",
    "preference_data_from_frame",
    "preference_data_from_scores",
    "reference_decisions",
    "render_table",
    "subset_inputs",
    "replay",
    "replay_once",
    "run_from_args",
]

PAPER_SYSTEMS: tuple[str, ...] = (
    "Facebook-AI",
    "HuaweiTSC",
    "Nemo",
    "Online-W",
    "UEdin",
    "VolcTrans-AT",
    "VolcTrans-GLAT",
    "eTranslation",
    "ref-A",
    "ref-B",
    "ref-C",
)
"""The eleven WMT21 en-de systems of the paper's case study (Section 5): 8 MT systems, 3 refs."""

PAPER_MU = "0.8,0.25,0.1;0.1,0.5,0.1;0.1,0.25,0.8"
"""The simulated metric of Appendix E (rows: metric label ``>,=,<``; columns: true label)."""

OUTCOMES = ("correct", "inversion", "omission", "insertion")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreferenceData:
    """Per-pair pools of human preference labels (``+1`` a better, ``0`` draw, ``-1`` b better).

    ``labels[k]`` is the 1-D label array of pair ``pairs[k] = (system_a, system_b)``, one entry
    per rated input (``inputs[k]`` holds the input ids in the same order).
    """

    systems: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    labels: tuple[NDArray[np.int8], ...]
    inputs: tuple[NDArray[Any], ...]

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @property
    def pool_sizes(self) -> NDArray[np.int64]:
        return np.array([len(x) for x in self.labels], dtype=np.int64)

    def counts(self) -> NDArray[np.int64]:
        """Full-data human counts ``(n>, n=, n<)`` per pair."""
        return np.array([[np.sum(lab == c) for c in LABELS] for lab in self.labels])


#: ``mqm_systems``: a system is kept when rated on at least this share of the segments of the
#: most-rated system (systems rated on a few segments would shrink the common pool).
ENOUGH_SEGMENTS = 0.5


def _read_mqm(path: str | Path) -> pd.DataFrame:
    df = pd.read_csv(path, sep=r"\s+", na_values=["None"], dtype={"system": str})
    return df.pivot_table(index="seg_id", columns="system", values="mqm_avg_score", aggfunc="mean")


def mqm_systems(
    path: str | Path, share: float = ENOUGH_SEGMENTS
) -> tuple[list[str], dict[str, int]]:
    """The systems a replay of an MQM file takes when none are named: the paper's eleven if
    the file has them all (WMT21 en-de), else every system rated on at least ``share`` of
    the segments of the most-rated one. Also the segments rated per system, every system."""
    wide = _read_mqm(path)
    rated = {str(k): int(v) for k, v in wide.notna().sum().items()}
    if all(s in rated for s in PAPER_SYSTEMS):
        return list(PAPER_SYSTEMS), rated
    most = max(rated.values(), default=0)
    chosen = sorted(s for s, n in rated.items() if n > 0 and n >= share * most)
    if len(chosen) < 2:
        raise ValueError(f"fewer than two systems rated on enough segments: {rated}")
    return chosen, rated


def load_mqm(path: str | Path, systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Read the WMT21 MQM TSV (``system mqm_avg_score seg_id``, whitespace separated, ``None`` =
    not rated) into a wide frame ``seg_id x system`` holding only segments rated for every chosen
    system (Appendix C.3); ``systems`` None: :func:`mqm_systems`."""
    wide = _read_mqm(path)
    if not systems:
        systems = mqm_systems(path)[0]
    missing = [s for s in systems if s not in wide.columns]
    if missing:
        raise ValueError(f"systems not in the data: {missing}; have {sorted(wide.columns)}")
    wide = wide[list(systems)]
    return wide.dropna(axis=0, how="any").sort_index()


def preference_data_from_scores(wide: pd.DataFrame, dead_zone: float = 0.0) -> PreferenceData:
    """Preferences per input and system pair from a wide score frame (Definition 5).

    Pairs follow the column order: ``(s_i, s_j)`` for ``i < j``; higher score = better.
    """
    systems = tuple(str(c) for c in wide.columns)
    pairs, labels, inputs = [], [], []
    idx = wide.index.to_numpy()
    for i in range(len(systems)):
        for j in range(i + 1, len(systems)):
            pairs.append((systems[i], systems[j]))
            labels.append(
                preferences_from_scores(
                    wide.iloc[:, i].to_numpy(), wide.iloc[:, j].to_numpy(), dead_zone
                )
            )
            inputs.append(idx)
    return PreferenceData(systems, tuple(pairs), tuple(labels), tuple(inputs))


_LABEL_MAP: dict[Any, int] = {
    1: 1,
    0: 0,
    -1: -1,
    ">": 1,
    "=": 0,
    "<": -1,
    "a": 1,
    "b": -1,
    "tie": 0,
    "draw": 0,
    "model_a": 1,
    "model_b": -1,
    "win": 1,
    "loss": -1,
    "A": 1,
    "B": -1,
}


def preference_data_from_frame(frame: pd.DataFrame) -> PreferenceData:
    """Pools from a long frame with columns ``input, system_a, system_b, label``.

    ``label`` is ``+1/0/-1``, ``>/=/<``, ``a/b/tie`` or ``model_a/model_b``, always from the
    point of view of ``system_a``.  Every row is one annotation (several annotators of the same
    input give several rows).  Rows of the same unordered pair are oriented alphabetically
    (labels of flipped rows are negated).  Judge-Bench files (:func:`frame_from_judgebench`) and
    the platform's exports use this shape.
    """
    need = {"input", "system_a", "system_b", "label"}
    if not need.issubset(frame.columns):
        raise ValueError(f"frame needs columns {sorted(need)}, has {list(frame.columns)}")
    df = frame.copy()
    lab = df["label"].map(lambda v: _LABEL_MAP.get(v, _LABEL_MAP.get(str(v).strip(), None)))
    if lab.isna().any():
        bad = df.loc[lab.isna(), "label"].unique()[:5]
        raise ValueError(f"unknown labels: {list(bad)}")
    df["label"] = lab.astype(int)
    a, b = df["system_a"].astype(str), df["system_b"].astype(str)
    flip = a > b
    df["sa"] = np.where(flip, b, a)
    df["sb"] = np.where(flip, a, b)
    df.loc[flip, "label"] = -df.loc[flip, "label"]
    systems = tuple(sorted(set(df["sa"]) | set(df["sb"])))
    pairs, labels, inputs = [], [], []
    for (sa, sb), grp in df.groupby(["sa", "sb"], sort=True):
        pairs.append((str(sa), str(sb)))
        labels.append(grp["label"].to_numpy(dtype=np.int8))
        inputs.append(grp["input"].to_numpy())
    return PreferenceData(systems, tuple(pairs), tuple(labels), tuple(inputs))


def frame_from_judgebench(path: str | Path, metric: str | None = None) -> pd.DataFrame:
    """Long preference frame from a Judge-Bench JSON file with a categorical pairwise annotation
    (labels such as ``model_a`` / ``model_b`` / ``tie``): one row per individual human score."""
    data = judgebench.load(Path(path).read_bytes())
    anns = [a for a in data["annotations"] if a.get("category") == "categorical"]
    if metric is not None:
        anns = [a for a in anns if a["metric"] == metric]
    if not anns:
        raise ValueError("no categorical annotation found")
    name = anns[0]["metric"]
    rows: list[dict[str, Any]] = []
    faults: list[str] = []
    for index, inst in enumerate(data["instances"]):
        majority, scores = judgebench.human_scores(inst, f"instances[{index}]", faults.append).get(
            name, (None, [])
        )
        for s in scores or [majority]:
            if s is not None:
                rows.append(
                    {"input": inst["id"], "system_a": "model_a", "system_b": "model_b", "label": s}
                )
    if faults:
        raise ValueError(f"{path}: {faults[0]}")
    return pd.DataFrame(rows)


def parse_mixture_matrix(text: str) -> NDArray[np.float64]:
    """Parse ``"r1c1,r1c2,r1c3;r2...;r3..."`` (rows = metric label ``>,=,<``, columns = true
    label, paper Eq. 2) and check that every column sums to one."""
    rows = [[float(x) for x in r.split(",")] for r in text.strip().split(";")]
    mu = np.array(rows, dtype=float)
    if mu.shape != (3, 3) or np.any(mu < 0):
        raise ValueError("mixture matrix must be 3x3 and non-negative")
    if not np.allclose(mu.sum(axis=0), 1.0, atol=1e-6):
        raise ValueError(f"columns of the mixture matrix must sum to 1, got {mu.sum(axis=0)}")
    return mu


# --------------------------------------------------------------------------------------------
# Reference and scoring
# --------------------------------------------------------------------------------------------


def reference_decisions(data: PreferenceData, gamma: float = 0.05) -> NDArray[np.int8]:
    """ "Decision on all data": Algorithm 1 on every human label of each pair (no metric)."""
    return decide(theta_human(data.counts()), gamma)


def classify_outcomes(
    reference: NDArray[np.int8], decisions: NDArray[np.int8]
) -> NDArray[np.object_]:
    """Per-pair outcome against the reference (Section 1, Tables 2-5):

    * Correct - both say the same (significant in the same direction, or both undecided);
    * Inversion - both significant, opposite directions;
    * Omission - reference significant, protocol undecided;
    * Insertion - reference undecided, protocol significant.
    """
    ref = np.asarray(reference)
    dec = np.asarray(decisions)
    out = np.full(ref.shape, "correct", dtype=object)
    out[(ref != 0) & (dec == -ref)] = "inversion"
    out[(ref != 0) & (dec == 0)] = "omission"
    out[(ref == 0) & (dec != 0)] = "insertion"
    return out


# --------------------------------------------------------------------------------------------
# The replay
# --------------------------------------------------------------------------------------------


def _simulate_metric(
    labels: Sequence[NDArray[np.int8]], mu: NDArray[np.float64], rng: np.random.Generator
) -> list[NDArray[np.int8]]:
    """Appendix E: metric label of each input drawn from column ``mu[:, true label]``."""
    out = []
    code = np.array(LABELS, dtype=np.int8)
    cum = mu.cumsum(axis=0)  # (metric label, true label)
    for lab in labels:
        col = 1 - lab.astype(np.int64)  # +1 -> 0, 0 -> 1, -1 -> 2
        u = rng.random((lab.shape[0],))
        idx = (u[:, None] > cum[:, col].T).sum(axis=1)
        out.append(code[np.minimum(idx, 2)])
    return out


def _counts_of(lab: NDArray[np.int8]) -> NDArray[np.int64]:
    return np.array([np.sum(lab == LABELS[0]), np.sum(lab == LABELS[1]), np.sum(lab == LABELS[2])])


def _posterior(
    ordered: list[NDArray[np.int8]],
    metric: list[NDArray[np.int8]] | None,
    used: NDArray[np.int64],
    idx: NDArray[np.int64],
    settings: ProtocolSettings,
    rng: np.random.Generator,
) -> PosteriorDraws:
    human = np.array([_counts_of(ordered[k][: used[k]]) for k in idx]).reshape(-1, 3)
    if metric is None:
        return human_posterior(human)
    conf = np.zeros((idx.size, 3, 3))
    mcount = np.zeros((idx.size, 3))
    for r, k in enumerate(idx):
        h = 1 - ordered[k][: used[k]].astype(np.int64)
        mm = 1 - metric[k].astype(np.int64)
        np.add.at(conf[r], (mm[: used[k]], h), 1)
        mcount[r] = np.bincount(mm[used[k] :], minlength=3)
    return sample_posterior(human, conf, mcount, seed=rng, **settings.sampler)


@dataclass
class ReplayResult:
    """One replay: final decisions, their outcome classes, KLD and annotations used."""

    decisions: NDArray[np.int8]
    outcomes: NDArray[Any]
    kld: float
    annotations: int
    pool: int
    rounds: int
    retired: dict[str, int]
    used: NDArray[np.int64] | None = None
    #: Pairs decided by implication: pair index → chain of system indices, winner first.
    implied: dict[int, tuple[int, ...]] | None = None

    @property
    def fraction_used(self) -> float:
        return self.annotations / self.pool if self.pool else 0.0


def replay_once(
    data: PreferenceData,
    settings: ProtocolSettings,
    rng: np.random.Generator,
    *,
    mu: NDArray[np.float64] | None = None,
    reference: NDArray[np.int8] | None = None,
) -> ReplayResult:
    """One run of Algorithm 2 (``settings.paper``) or of the corrected protocol on a random
    annotation order of every pair's pool.  The protocol only ever sees the labels it has
    "collected" (a prefix of each pair's shuffled pool) and, with ``mu``, the simulated metric
    labels of the whole pool."""
    ref = reference if reference is not None else reference_decisions(data, settings.gamma)
    pools = data.pool_sizes
    total_pool = int(pools.sum())
    orders = [rng.permutation(len(lab)) for lab in data.labels]
    ordered = [lab[o] for lab, o in zip(data.labels, orders, strict=True)]
    metric = _simulate_metric(ordered, mu, rng) if mu is not None else None
    if settings.budget is None:
        budget = total_pool
    elif settings.budget <= 1:
        budget = int(round(settings.budget * total_pool))
    else:
        budget = int(settings.budget)

    n_pairs = data.n_pairs
    used = np.zeros(n_pairs, dtype=np.int64)
    final = np.zeros(n_pairs, dtype=np.int8)
    p_prot = np.full((n_pairs, 3), 1.0 / 3.0)
    is_open = np.ones(n_pairs, dtype=bool)
    retired = {
        "decided": 0, "implied": 0, "equivalent": 0, "futile": 0, "exhausted": 0, "budget": 0
    }  # fmt: skip
    implied: dict[int, tuple[int, ...]] = {}
    level = settings.decision_level
    lone = None
    futility = None
    weights = np.ones(n_pairs)
    effect_mean = np.zeros(n_pairs)
    effect_var = np.ones(n_pairs)
    sys_id = {s: i for i, s in enumerate(data.systems)}
    systems = np.array([[sys_id[a], sys_id[b]] for a, b in data.pairs], dtype=np.int64)
    n_rounds = 0

    while budget > 0 and is_open.any():
        idx = np.flatnonzero(is_open)
        give = rounds.round_allocation(
            weights[idx], pools[idx] - used[idx], budget, settings, first=n_rounds == 0
        )
        used[idx] += give
        budget -= int(give.sum())
        n_rounds += 1

        post = _posterior(ordered, metric, used, idx, settings, rng)
        if not settings.paper and futility is None:
            futility = rounds.futility_threshold(
                settings, int(pools.max()), settings.batch, post.human_counts
            )
        if not settings.paper and level is None:
            lone = rounds.decision_level(
                settings, int(pools.max()), settings.batch, post.human_counts
            )
            level = rounds.study_level(
                settings, systems, int(pools.max()), settings.batch, post.human_counts, lone
            )
        shut = np.flatnonzero(~is_open)
        closed = rounds.ClosedPairs(effect_mean[shut], effect_var[shut], systems[shut], final[shut])
        step = rounds.decide_round(
            post,
            used[idx],
            pools[idx],
            budget,
            settings,
            level=level,
            systems=systems[idx],
            closed=closed,
            futility=futility,
            lone_level=lone,
        )
        final[idx] = step.decision
        p_prot[idx] = step.mean_p
        weights[idx] = step.weight
        effect_mean[idx] = step.effect_mean
        effect_var[idx] = step.effect_var
        for outcome in (
            rounds.DECIDED, rounds.IMPLIED, rounds.EQUIVALENT, rounds.FUTILE, rounds.EXHAUSTED
        ):  # fmt: skip
            retired[outcome] += int(np.sum(step.outcome == outcome))
        for j, chain in enumerate(step.chains):
            if chain:
                implied[int(idx[j])] = chain
        is_open[idx[step.outcome != rounds.OPEN]] = False
        retired["budget"] += int(np.sum(step.outcome == rounds.BUDGET))

    retired["budget"] += int(is_open.sum())
    outcomes = classify_outcomes(ref, final)
    p_hum = posterior_mode_p(data.counts())
    kld = float(np.mean(kl_divergence(p_prot, p_hum)))
    return ReplayResult(
        final, outcomes, kld, int(used.sum()), total_pool, n_rounds, retired, used, implied
    )


def replay(
    data: PreferenceData,
    settings: ProtocolSettings,
    *,
    repeats: int = 20,
    seed: int = 0,
    mu: NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Replay ``repeats`` random annotation orders and average the paper's table columns.

    Returns a JSON-serialisable dict: settings, reference summary, the mean fraction of pairs in
    each outcome class (Correct / Inversion / Omission / Insertion), mean KLD, mean fraction of
    annotations used, per-repeat rows and per-pair outcome counts.
    """
    ref = reference_decisions(data, settings.gamma)
    root = np.random.default_rng(seed)
    runs = []
    per_pair = {o: np.zeros(data.n_pairs, dtype=int) for o in OUTCOMES}
    t0 = time.perf_counter()
    for child in root.spawn(repeats):
        res = replay_once(data, settings, child, mu=mu, reference=ref)
        runs.append(res)
        for o in OUTCOMES:
            per_pair[o] += res.outcomes == o
    elapsed = time.perf_counter() - t0

    def frac(o: str) -> float:
        return float(np.mean([np.mean(r.outcomes == o) for r in runs]))

    summary = {o: frac(o) for o in OUTCOMES}
    summary["kld"] = float(np.mean([r.kld for r in runs]))
    summary["annotations"] = float(np.mean([r.fraction_used for r in runs]))
    summary["annotations_sd"] = float(np.std([r.fraction_used for r in runs]))
    summary["correct_sd"] = float(np.std([np.mean(r.outcomes == "correct") for r in runs]))
    # pairs decided by implication (decided pairs ordered them), a share of all pairs
    summary["implied"] = float(np.mean([r.retired.get("implied", 0) / data.n_pairs for r in runs]))
    s = asdict(settings)
    return {
        "protocol": "paper" if settings.paper else "default",
        "settings": s,
        "metric_mu": None if mu is None else mu.tolist(),
        "systems": list(data.systems),
        "n_pairs": data.n_pairs,
        "pool": int(data.pool_sizes.sum()),
        "reference": {
            "significant": int(np.sum(ref != 0)),
            "undecided": int(np.sum(ref == 0)),
        },
        "repeats": repeats,
        "seed": seed,
        "summary": summary,
        "runs": [
            {
                **{o: float(np.mean(r.outcomes == o)) for o in OUTCOMES},
                "kld": r.kld,
                "annotations": r.fraction_used,
                "rounds": r.rounds,
                "retired": r.retired,
                "implied": [
                    [data.systems[i] for i in chain] for chain in (r.implied or {}).values()
                ],
            }
            for r in runs
        ],
        "pairs": [
            {
                "system_a": a,
                "system_b": b,
                "reference": int(ref[k]),
                **{o: int(per_pair[o][k]) for o in OUTCOMES},
            }
            for k, (a, b) in enumerate(data.pairs)
        ],
        "seconds": elapsed,
    }


def null_like(data: PreferenceData, seed: int) -> PreferenceData:
    """A null study of the same shape: every pair's pool the same size, its labels drawn
    with ``p> = p<`` and the data's share of draws (every system equal)."""
    rng = np.random.default_rng(seed)
    counts = data.counts()
    draw = float(counts[:, 1].sum() / max(counts.sum(), 1))
    p = [(1 - draw) / 2, draw, (1 - draw) / 2]
    labels = tuple(
        rng.choice(np.array(LABELS, dtype=np.int8), size=len(lab), p=p) for lab in data.labels
    )
    return PreferenceData(data.systems, data.pairs, labels, data.inputs)


def null_decisions(
    data: PreferenceData, settings: ProtocolSettings, *, repeats: int = 20, seed: int = 0
) -> dict[str, float]:
    """The protocol on ``repeats`` null studies of the data's shape (:func:`null_like`): the
    share of null pairs it decides (every such decision is false; implied ones included),
    with its standard error, and the share decided by implication."""
    decided, implied = [], []
    for r, child in enumerate(np.random.default_rng(seed).spawn(repeats)):
        res = replay_once(null_like(data, seed * 1000 + r), settings, child)
        decided.append(np.mean(res.decisions != 0))
        implied.append(res.retired.get("implied", 0) / data.n_pairs)
    rate = float(np.mean(decided))
    n = repeats * data.n_pairs
    return {
        "decided": rate,
        "decided_se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / n)),
        "implied": float(np.mean(implied)),
        "repeats": repeats,
    }


def render_table(results: Sequence[dict[str, Any]] | dict[str, Any]) -> str:
    """The paper's table (Tables 3 and 5): Corr. Inv. Omi. Ins. KLD Ann., one row per result."""
    rows = [results] if isinstance(results, dict) else list(results)
    head = f"{'protocol':<10} {'batch':>5} {'metric':>6} {'Corr.':>6} {'Inv.':>6} {'Omi.':>6} "
    head += f"{'Ins.':>6} {'KLD':>6} {'Ann.':>6} {'Impl.':>6}"
    if any("null" in r for r in rows):
        head += f" {'Null':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        s = r["summary"]
        lines.append(
            f"{r['protocol']:<10} {r['settings']['batch']:>5} "
            f"{'yes' if r['metric_mu'] else 'no':>6} {s['correct']:>6.2f} "
            f"{s['inversion']:>6.2f} {s['omission']:>6.2f} {s['insertion']:>6.2f} "
            f"{s['kld']:>6.3f} {s['annotations']:>6.2f} {s.get('implied', 0.0):>6.2f}"
            + (f" {r['null']['decided']:>6.3f}" if "null" in r else "")
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line (shared with the Django ``replay`` management command)
# --------------------------------------------------------------------------------------------


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the replay arguments to ``parser`` (or a new one) and return it."""
    p = parser or argparse.ArgumentParser(
        prog="python -m protocol.replay.simulation",
        description="Replay the budgeted protocol of Deriu et al. (2023) on fully rated data.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--mqm", help="WMT21 MQM TSV (system mqm_avg_score seg_id)")
    src.add_argument("--frame", help="long CSV with columns input,system_a,system_b,label")
    src.add_argument("--judgebench", help="Judge-Bench JSON with a categorical pairwise label")
    p.add_argument(
        "--systems",
        nargs="+",
        default=None,
        help="systems to compare (MQM; default: the paper's eleven if the file has them, "
        "else every system rated on at least half the segments of the most-rated one)",
    )
    p.add_argument(
        "--inputs",
        type=int,
        default=None,
        help="replay on N inputs drawn at random (seeded by --seed) instead of all",
    )
    p.add_argument("--batch", type=int, nargs="+", default=[10], help="annotations per round N")
    p.add_argument("--gamma", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--paper", action="store_true", help="Algorithm 2 exactly as published")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="<=1: fraction of the pool, >1: annotations (default: whole pool)",
    )
    p.add_argument(
        "--mu", default=None, help=f"simulated metric mixture matrix, rows ';' e.g. {PAPER_MU!r}"
    )
    p.add_argument("--dead-zone", type=float, default=0.0, help="score difference counted as draw")
    p.add_argument("--rope-delta", type=float, default=None)
    p.add_argument("--futility", type=float, default=None)
    p.add_argument(
        "--futility-error",
        type=_rate_or_off,
        default=None,
        help="futility calibrated to retire at most this share of near-boundary pairs that "
        "all data decide (default 0.1); 'off': the fixed --futility threshold",
    )
    p.add_argument("--allocation", choices=["uniform", "adaptive"], default=None)
    p.add_argument("--level", type=float, default=None, help="decision level (default: calibrate)")
    p.add_argument(
        "--no-pooling", action="store_true", help="predict each pair from its own labels only"
    )
    p.add_argument(
        "--null",
        action="store_true",
        help="also run the protocol on --repeats null studies of the data's shape and report "
        "the share of null pairs it decides (false decisions, implied ones included)",
    )
    p.add_argument(
        "--no-implied", action="store_true", help="do not close pairs the decided pairs order"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return p


def _rate_or_off(value: str) -> float | str:
    """A rate in (0, 1) or the word ``off``."""
    if value == "off":
        return value
    rate = float(value)
    if not 0 < rate < 1:
        raise argparse.ArgumentTypeError("a rate in (0, 1) or 'off'")
    return rate


def _load_from_args(args: argparse.Namespace) -> PreferenceData:
    if args.mqm:
        wide = load_mqm(args.mqm, args.systems)
        data = preference_data_from_scores(wide, args.dead_zone)
    elif args.frame:
        data = preference_data_from_frame(pd.read_csv(args.frame))
    else:
        data = preference_data_from_frame(frame_from_judgebench(args.judgebench))
    return data if args.inputs is None else subset_inputs(data, args.inputs, args.seed)


def subset_inputs(data: PreferenceData, n_inputs: int, seed: int) -> PreferenceData:
    """The same study on ``n_inputs`` of its inputs, drawn at random with ``seed`` (one draw
    for the whole study: every pair keeps its labels of the chosen inputs)."""
    every = np.unique(np.concatenate([np.asarray(x) for x in data.inputs]))
    if not 0 < n_inputs <= every.size:
        raise ValueError(f"--inputs must be in 1..{every.size}, got {n_inputs}")
    chosen = np.random.default_rng(seed).choice(every, size=n_inputs, replace=False)
    keep = [np.isin(x, chosen) for x in data.inputs]
    return PreferenceData(
        data.systems,
        data.pairs,
        tuple(lab[k] for lab, k in zip(data.labels, keep, strict=True)),
        tuple(np.asarray(x)[k] for x, k in zip(data.inputs, keep, strict=True)),
    )


def run_from_args(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the replays described by parsed arguments (one per ``--batch`` value)."""
    data = _load_from_args(args)
    mu = parse_mixture_matrix(args.mu) if args.mu else None
    out = []
    for batch in args.batch:
        base = ProtocolSettings(gamma=args.gamma, batch=batch, paper=args.paper, budget=args.budget)
        overrides: dict[str, Any] = {}
        if args.rope_delta is not None:
            overrides["rope_delta"] = args.rope_delta
        if args.futility is not None:
            overrides["futility"] = args.futility
        if args.futility_error is not None:
            overrides["futility_error"] = (
                None if args.futility_error == "off" else args.futility_error
            )
        if args.allocation is not None:
            overrides["allocation"] = args.allocation
        if args.level is not None:
            overrides["decision_level"] = args.level
        if args.no_pooling:
            overrides["pooling"] = False
        if args.no_implied:
            overrides["implied"] = False
        settings = replace(base, **overrides)
        result = replay(data, settings, repeats=args.repeats, seed=args.seed, mu=mu)
        if args.null:
            result["null"] = null_decisions(data, settings, repeats=args.repeats, seed=args.seed)
        out.append(result)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = run_from_args(args)
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print(render_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
