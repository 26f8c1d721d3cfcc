"""Every write of the adaptive protocol: start a study, open rounds within the budget,
close a complete round, decide it exactly once and open the next."""

from __future__ import annotations

import logging
from dataclasses import replace
from itertools import combinations

import numpy as np
import pandas as pd
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotator.errors import ConfigRefused
from annotator.models import Item, Study
from annotator.services import items_create, items_resize
from annotator.signals import collection_changed

from . import rounds, selectors
from .correlation import correlation_from_rows
from .models import Decision, ProtocolConfig, Round, SystemPair
from .settings import ProtocolSettings
from .shapes import shape_of

log = logging.getLogger(__name__)
BIG = 10**12


def protocol_settings(study: Study, config: ProtocolConfig) -> ProtocolSettings:
    """The replay's settings for a live study: N = the study's batch size (inputs per
    pair per round), γ = its significance level."""
    base = ProtocolSettings(gamma=study.gamma, batch=study.batch_size)
    if config.paper:
        return ProtocolSettings.paper_protocol(gamma=study.gamma, batch=study.batch_size)
    return replace(
        base, allocation=config.allocation, rope_delta=config.rope_delta, futility=config.futility
    )


@transaction.atomic
def protocol_start(study: Study) -> Round | None:
    """Create the system pairs of an adaptive study and open round 1 (idempotent)."""
    config, _ = ProtocolConfig.objects.get_or_create(study=study)
    if Round.objects.filter(study=study).exists():
        return Round.objects.filter(study=study).order_by("number").last()
    systems = list(study.systems.order_by("name"))
    SystemPair.objects.bulk_create(
        SystemPair(study=study, system_a=a, system_b=b) for a, b in combinations(systems, 2)
    )
    return round_open(study, 1)


def _budget_left(study: Study, config: ProtocolConfig) -> int:
    return BIG if study.budget is None else max(study.budget - config.committed, 0)


def round_open(
    study: Study, number: int, outputs: selectors.StudyOutputs | None = None
) -> Round | None:
    """Release the items of round ``number``: for each open pair, as many of its unused
    inputs as the allocation gives it (highest priority first where inputs have one,
    else in a seeded random order), each item with the study's redundancy. The budget
    ledger is locked and charged ``items × redundancy``; nothing is released beyond the
    budget. With nothing left to release the open pairs close as exhausted.

    How items are made is the study's item shape (:func:`protocol.shapes.shape_of`):
    pairwise studies release one item per pair and input; scored studies (Likert, error
    spans) one item per output instead, ranking studies items of m outputs chosen for the
    open pairs. ``outputs``: the study's, when the caller has read them."""
    config = ProtocolConfig.objects.select_for_update().get(study=study)
    settings = protocol_settings(study, config)
    pairs = list(
        SystemPair.objects.filter(study=study, state=SystemPair.State.OPEN).select_related(
            "system_a", "system_b"
        )
    )
    if not pairs:
        return None
    redundancy = study.redundancy
    shape = shape_of(study)
    if outputs is None:
        outputs = selectors.StudyOutputs(study)
    pools = outputs.pools(pairs)
    unused = [pool - shape.given(pair) for pair, pool in zip(pairs, pools, strict=True)]
    weights = np.array([pair.evidence.get("weight", 1.0) for pair in pairs], dtype=float)
    affordable = _budget_left(study, config) // redundancy  # items the budget still pays for
    give = rounds.round_allocation(
        weights,
        np.array([len(u) for u in unused]),
        affordable,
        settings,
        first=number == 1,
    )
    if give.sum() == 0:
        return _exhaust(pairs, "budget" if affordable == 0 else "inputs")
    priority = dict(study.inputs.values_list("pk", "priority"))
    new = shape.release(config, number, pairs, unused, give, affordable, priority, outputs)
    if isinstance(new, str):  # nothing could be made: what ran out
        return _exhaust(pairs, new)
    rnd = Round.objects.create(study=study, number=number)
    items_create(study, new, round_number=number)
    charge = len(new) * redundancy
    ProtocolConfig.objects.filter(pk=config.pk).update(committed=F("committed") + charge)
    Round.objects.filter(pk=rnd.pk).update(items=len(new), committed=charge)
    rnd.refresh_from_db()
    return rnd


def _exhaust(pairs: list[SystemPair], why: str) -> None:
    """Nothing more can be released: the open pairs close as exhausted (``why``: what ran
    out, the budget or the inputs)."""
    for pair in pairs:
        pair.state = SystemPair.State.EXHAUSTED
        pair.evidence = {**pair.evidence, "outcome": why}
    SystemPair.objects.bulk_update(pairs, ["state", "evidence"])
    return None


def round_close_if_complete(study_id: int, number: int) -> bool:
    """Mark the round complete when every item has all its annotations; one conditional
    UPDATE, so only one caller ever sees the transition. Returns whether it closed now
    (the caller then has the decision run after commit). Written out: a third of all
    answers (each that completes an item) runs it, and building it through the ORM cost
    more than running it. The round's items are read newest first (``item_round_idx``):
    items are leased fullest and oldest first, so while the round collects its newest item
    is unfinished."""
    q = connection.ops.quote_name
    rounds_table, items = q(Round._meta.db_table), q(Item._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {rounds_table} SET state = %s, closed_at = %s"  # noqa: S608
            " WHERE study_id = %s AND number = %s AND state = %s AND ("
            f"SELECT i.id FROM {items} i WHERE i.study_id = %s AND i.round_number = %s"
            " AND i.is_active AND NOT i.is_gold AND i.n_done < i.redundancy"
            " ORDER BY i.id DESC LIMIT 1) IS NULL",
            [
                Round.State.CLOSED.value,
                connection.ops.adapt_datetimefield_value(timezone.now()),
                study_id,
                number,
                Round.State.OPEN.value,
                study_id,
                number,
            ],
        )
        return cursor.rowcount > 0


@transaction.atomic
def round_decide(study_id: int, number: int) -> bool:
    """Decide every open pair after a complete round (Algorithm 1 inside Algorithm 2),
    retire the decided, equivalent, futile and exhausted pairs, and open the next round.

    Idempotent: the round row is locked and only a ``closed`` round is decided, in one
    transaction, so a repeated or redelivered task, or one whose worker died mid-way,
    decides it exactly once. Returns whether this call decided it.
    """
    try:
        rnd = Round.objects.select_for_update().get(study_id=study_id, number=number)
    except Round.DoesNotExist:
        return False
    if rnd.state != Round.State.CLOSED:
        return False
    study = Study.objects.get(pk=study_id)
    config = ProtocolConfig.objects.select_for_update().get(study=study)
    settings = protocol_settings(study, config)
    pairs = list(SystemPair.objects.filter(study=study, state=SystemPair.State.OPEN))
    outputs = None  # with no open pair the next round opens nothing: no need to read them
    if pairs:
        outputs = selectors.StudyOutputs(study)
        _decide_pairs(study, config, settings, rnd, pairs, outputs)
    Round.objects.filter(pk=rnd.pk).update(state=Round.State.DECIDED, decided_at=timezone.now())
    round_open(study, number + 1, outputs)
    transaction.on_commit(lambda: collection_changed.send_robust(sender=Study, study_id=study_id))
    return True


def _decide_pairs(study, config, settings, rnd, pairs, outputs) -> None:
    """Algorithm 1 on every open pair, then retire pairs as ``rounds.decide_round`` says.

    Units: a pairwise study counts every human label, so ``used``/``pool`` are in
    annotations (inputs × redundancy) like the budget. A Likert study has one derived label
    per input (the sign of the two outputs' mean-rating difference), so ``used``/``pool``
    are in inputs, and the budget left is passed as the items it still pays for (an input
    costs at most two new items and often one or none, since items are shared by pairs).
    A ranking study counts every label like a pairwise one (each ranking showing both
    systems gives one per annotation); the budget left is passed in pair labels (annotations
    × m(m−1)/2), as the replay counts it. Ranking and Likert studies pool with the
    correlation of pairs that share inputs (:func:`_correlation`)."""
    r = study.redundancy
    shape = shape_of(study)
    humans = shape.humans(config)
    per_input = shape.labels_per_input(r)  # labels an input gives the pair
    evidence = [
        selectors.pair_evidence(
            study, p, config.metric_judge, config.metric_dead_zone, humans=humans
        )
        for p in pairs
    ]
    human = np.array([e["human"] for e in evidence])
    confusion = metric = None
    if config.metric_judge:
        confusion = np.array([e["confusion"] for e in evidence])
        metric = np.array([e["metric"] for e in evidence])
    pools = outputs.pools(pairs)
    inputs = np.array([len(pool) for pool in pools])
    used, pool = shape.used_and_pool(humans, pairs, inputs, r)
    rng = np.random.default_rng([config.seed, study.pk, rnd.number])
    post = rounds.posterior(human, confusion, metric, settings, rng)
    system_ids = {pk: i for i, pk in enumerate(study.systems.values_list("pk", flat=True))}
    systems = np.array([[system_ids[p.system_a_id], system_ids[p.system_b_id]] for p in pairs])
    level, lone = config.decision_level, config.lone_decision_level
    futility = config.futility_threshold
    if not settings.paper and level is None:
        look, n_max = settings.batch * per_input, int(pool.max())
        lone = rounds.decision_level(settings, n_max, look, human)
        if shape.shared:
            # one annotation serves several pairs: the lone-pair level, checked with
            # correlated labels; the study-level and futility calibrations simulate one
            # label per pair (docs/protocol.md, "Ranking and Likert studies, live")
            level, lone = lone, None
        else:
            futility = rounds.futility_threshold(settings, n_max, look, human)
            level = rounds.study_level(settings, systems, n_max, look, human, lone)
        ProtocolConfig.objects.filter(pk=config.pk).update(
            decision_level=level, lone_decision_level=lone, futility_threshold=futility
        )
    # what the budget can still buy: whole items (r annotations each); less than an item's
    # worth left means this is every open pair's last look
    budget_left = _budget_left(study, ProtocolConfig.objects.get(pk=config.pk)) // r
    budget_left = shape.budget_left(humans, pairs, budget_left, r)
    closed, closed_pairs = _closed_pairs(study, system_ids)
    correlation = None
    if shape.shared and settings.pooling and not settings.paper:
        # one annotation serves several pairs: pool with the correlation of their labels
        correlation = _correlation(
            study, pairs, pools, closed_pairs, humans.rows, humans.ratings, outputs
        )
    result = rounds.decide_round(
        post,
        used,
        pool,
        budget_left,
        settings,
        level=level,
        systems=systems,
        closed=closed,
        redundancy=per_input,
        correlation=correlation,
        lone_level=lone,
        futility=futility,
    )
    state_of = {
        rounds.OPEN: SystemPair.State.OPEN,
        rounds.DECIDED: SystemPair.State.DECIDED,
        rounds.IMPLIED: SystemPair.State.DECIDED,
        rounds.EQUIVALENT: SystemPair.State.EQUIVALENT,
        rounds.FUTILE: SystemPair.State.EXHAUSTED,
        rounds.EXHAUSTED: SystemPair.State.EXHAUSTED,
        rounds.BUDGET: SystemPair.State.EXHAUSTED,
    }
    name_of = dict(study.systems.values_list("pk", "name"))
    pk_of = {i: pk for pk, i in system_ids.items()}
    decisions = []
    for k, pair in enumerate(pairs):
        outcome = str(result.outcome[k])
        pair.state = state_of[outcome]
        pair.theta = float(result.theta[k])
        if pair.state == SystemPair.State.DECIDED:
            pair.winner_id = pair.system_a_id if result.decision[k] > 0 else pair.system_b_id
        if pair.state != SystemPair.State.OPEN:
            pair.decided_in_round = rnd.number
        metric_k = metric[k].tolist() if metric is not None else []
        pair.evidence = {
            "human": human[k].tolist(),
            "metric": metric_k,
            "confusion": confusion[k].tolist() if confusion is not None else [],
            "mean_p": result.mean_p[k].round(6).tolist(),
            "weight": float(result.weight[k]),
            "effect": [float(result.effect_mean[k]), float(result.effect_var[k])],
            "predicted": {
                "a": round(float(result.p_a[k]), 4),
                "b": round(float(result.p_b[k]), 4),
                "undecided": round(float(result.p_u[k]), 4),
            },
            "outcome": outcome,
            # decided by implication: the systems of the decided pairs implying it, winner first
            **(
                {"implied_by": [name_of[pk_of[i]] for i in result.chains[k]]}
                if result.chains and result.chains[k]
                else {}
            ),
            "round": rnd.number,
            "used": int(used[k]),
            "pool": int(pool[k]),
        }
        decisions.append(
            Decision(
                round=rnd,
                pair=pair,
                theta=pair.theta,
                outcome=pair.state,
                human_counts=human[k].tolist(),
                metric_counts=metric_k,
            )
        )
    SystemPair.objects.bulk_update(
        pairs, ["state", "theta", "winner", "decided_in_round", "evidence"]
    )
    Decision.objects.bulk_create(decisions)


def _closed_pairs(
    study: Study, system_ids: dict[int, int]
) -> tuple[rounds.ClosedPairs, list[SystemPair]]:
    """The closed pairs' own evidence about their effect (kept in ``evidence["effect"]``
    when they were last decided), which still informs the pooling model; and those pairs,
    in the same order."""
    closed = [
        p
        for p in SystemPair.objects.filter(study=study)
        .exclude(state=SystemPair.State.OPEN)
        .only("system_a_id", "system_b_id", "winner_id", "evidence", "decided_in_round")
        .order_by("pk")
        if "effect" in p.evidence
    ]
    if not closed:
        return rounds.ClosedPairs.empty(), []
    arr = np.array(
        [
            (system_ids[p.system_a_id], system_ids[p.system_b_id], *p.evidence["effect"])
            for p in closed
        ],
        dtype=float,
    )
    decided = np.array(
        [(p.winner_id == p.system_a_id) - (p.winner_id == p.system_b_id) for p in closed],
        dtype=np.int8,
    )
    return rounds.ClosedPairs(arr[:, 2], arr[:, 3], arr[:, :2].astype(np.int64), decided), closed


def _correlation(
    study: Study,
    pairs: list[SystemPair],
    pools: list[set[int]],
    closed: list[SystemPair],
    rows: pd.DataFrame | None,
    ratings: selectors.ScoredRatings | None,
    outputs: selectors.StudyOutputs,
) -> np.ndarray:
    """The correlation of the pairs' effect estimates (open pairs, then ``closed``) when
    one annotation serves several pairs (:func:`protocol.correlation.correlation_from_rows`):
    from the per-input pair preferences of a ranking study's labels, or of a scored study's
    outputs (the sign of the score difference). A closed pair counts the labels it had when
    it closed (its kept effect is of those), not those later rankings gave it."""
    every = [*pairs, *closed]
    if ratings is not None:
        prefs = selectors.score_preference_rows(study, every, ratings)
    else:
        rounds_of = dict(
            Item.objects.filter(study=study, round_number__isnull=False).values_list(
                "pk", "round_number"
            )
        )
        overall = rows[rows["criterion"] == study.bound_kind().overall_criterion()]
        prefs = overall.assign(round=overall["item"].map(rounds_of))
    keep = np.ones(len(prefs), dtype=bool)
    for pair in closed:
        mine = prefs["system"].isin([pair.system_a_id, pair.system_b_id]) & prefs[
            "other_system"
        ].isin([pair.system_a_id, pair.system_b_id])
        keep &= ~(mine & (prefs["round"] > pair.decided_in_round)).to_numpy()
    pools = [*pools, *outputs.pools(closed)]
    return correlation_from_rows(
        prefs[keep], [(p.system_a_id, p.system_b_id) for p in every], pools
    )


def protocol_reconfigure(study: Study, edited: Study, *, apply: bool) -> list[str]:
    """Carry an edit of an adaptive study (``study`` as saved, ``edited`` with the new
    values) to its open round and budget ledger; returns notes for the researcher.

    A new redundancy reaches the active items of the round now collecting (never below an
    item's ``n_taken``; decided rounds keep theirs) and every later round; the ledger and
    the round are charged the difference, so ``committed`` stays the items released ×
    their redundancy. Raises :class:`~annotator.errors.ConfigRefused` when the charge would
    exceed the budget, or when a new budget is below what was already released. With
    ``apply`` false it only checks."""
    if study.collection != "adaptive" or edited.collection != "adaptive":
        return []
    configs = ProtocolConfig.objects if not apply else ProtocolConfig.objects.select_for_update()
    config = configs.filter(study=study).first()
    if config is None:
        return []
    redundancy_changed = edited.redundancy != study.redundancy
    if not redundancy_changed and edited.budget == study.budget:
        return []
    rnd = Round.objects.filter(study=study, state=Round.State.OPEN).first()
    items = Item.objects.none()
    if rnd is not None:
        items = Item.objects.filter(
            study=study, round_number=rnd.number, is_active=True, is_gold=False
        )
    resize = items_resize(items, edited.redundancy, apply=False) if redundancy_changed else None
    delta = resize.delta if resize else 0
    budget = edited.budget
    if budget is not None and budget < config.committed:
        raise ConfigRefused(
            [
                f"The budget {budget} is below the {config.committed} annotations already "
                "released to workers."
            ]
        )
    if budget is not None and config.committed + delta > budget:
        raise ConfigRefused(
            [
                f"Budget would be exceeded: needs {delta}, remaining "
                f"{budget - config.committed} (redundancy {study.redundancy} → "
                f"{edited.redundancy} for the {resize.items} open items of round {rnd.number})."
            ]
        )
    if apply and resize is not None and rnd is not None:
        resize = items_resize(items, edited.redundancy, apply=True)  # exact under the locks
        ProtocolConfig.objects.filter(pk=config.pk).update(committed=F("committed") + resize.delta)
        Round.objects.filter(pk=rnd.pk).update(committed=F("committed") + resize.delta)
    committed = config.committed + (resize.delta if resize else 0)
    notes = []
    if redundancy_changed:
        where = (
            f"the {resize.items} open items of round {rnd.number} and every later round"
            if rnd is not None
            else "every later round (no round is collecting now)"
        )
        notes.append(
            f"Redundancy {study.redundancy} → {edited.redundancy} for {where}; "
            f"{resize.delta:+d} annotations charged to the ledger."
        )
        if resize.clamped:
            notes.append(
                f"{resize.clamped} items keep more than {edited.redundancy}: more workers "
                "have already answered or hold them."
            )
    left = "no budget limit" if budget is None else f"{budget - committed} of {budget} left"
    notes.append(f"Ledger: {committed} annotations released, {left}.")
    return notes
