"""Every write of the adaptive protocol: start a study, open rounds within the budget,
close a complete round, decide it exactly once and open the next."""

from __future__ import annotations

import functools
import logging
import random
from collections import defaultdict
from dataclasses import replace
from itertools import combinations

import numpy as np
import pandas as pd
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Sum
from django.utils import timezone

from annotator.errors import ConfigRefused
from annotator.models import Input, Item, Output, Study
from annotator.services import items_create, items_resize
from annotator.signals import collection_changed

from . import rounds, selectors
from .correlation import correlation_from_rows
from .models import Decision, ProtocolConfig, Round, SystemPair
from .settings import ProtocolSettings

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


def round_open(study: Study, number: int) -> Round | None:
    """Release the items of round ``number``: for each open pair, as many of its unused
    inputs as the allocation gives it (highest priority first where inputs have one,
    else in a seeded random order), each item with the study's redundancy. The budget
    ledger is locked and charged ``items × redundancy``; nothing is released beyond the
    budget. With nothing left to release the open pairs close as exhausted.

    How items are made is the study's item shape (:func:`_shape`): pairwise studies release
    one item per pair and input; scored studies (Likert, error spans) one item per output
    instead (:func:`_scored_items`), ranking studies items of m outputs chosen for the open
    pairs (:func:`_ranking_items`)."""
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
    shape = _shape(study)
    unused = [sorted(selectors.pair_inputs(study, pair) - shape.given(pair)) for pair in pairs]
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
    outputs = {
        (o.input_id, o.system_id): o
        for o in Output.objects.filter(input__study=study).only("pk", "input_id", "system_id")
    }
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


def _outputs_per_item(study: Study) -> int:
    """How many outputs one item of the study shows (``Kind.outputs_per_item``)."""
    return study.kind_impl.outputs_per_item(study.kind_options(), study.systems.count())


#: A round's new items: ``(input, its outputs in system order)`` each.
NewItems = list[tuple[Input, list[Output]]]


class _PairShape:
    """Item shape ``pair`` (``Kind.item_shape``): an item shows the two outputs of one pair
    on one input and gives that pair a label per annotation."""

    #: One annotation serves several pairs: pool with the correlation of their labels, and
    #: decide at the lone-pair level (docs/protocol.md, "Ranking and Likert studies, live").
    shared = False

    def __init__(self, study: Study) -> None:
        self.study = study

    def given(self, pair: SystemPair) -> set[int]:
        """The inputs the pair has been given."""
        return set(selectors.pair_items(self.study, pair).values_list("input_id", flat=True))

    def release(self, config, number, pairs, unused, give, affordable, priority, outputs):
        """The round's new items, or what ran out (``"budget"``/``"inputs"``) when none can
        be made: each pair's share of its unused inputs, highest priority first, else in a
        seeded random order."""
        study = self.study
        rng = random.Random(f"{config.seed}:{study.pk}:{number}")
        new: NewItems = []
        for pair, inputs, n in zip(pairs, unused, give, strict=True):
            rng.shuffle(inputs)
            inputs.sort(key=lambda i: _priority_key(priority[i]))
            new += [
                (Input(pk=i), [outputs[(i, pair.system_a_id)], outputs[(i, pair.system_b_id)]])
                for i in inputs[: int(n)]
            ]
        return new

    def humans(self, config: ProtocolConfig):
        """The study's human labels as the decision counts them."""
        return selectors.PairLabels(self.study)

    def labels_per_input(self, redundancy: int) -> int:
        """The labels one input gives a pair (an item's annotations)."""
        return redundancy

    def used_and_pool(self, humans, pairs, inputs, redundancy):
        """Per pair, the labels it has been given and the most it could get (``used`` and
        ``pool`` of :func:`protocol.rounds.decide_round`)."""
        # each item at its own redundancy (an edit may have changed it since it was
        # released), the inputs not yet given at the study's current one
        given = [
            selectors.pair_items(self.study, p).aggregate(n=Count("pk"), r=Sum("redundancy"))
            for p in pairs
        ]
        used = np.array([g["r"] or 0 for g in given])
        return used, used + (inputs - np.array([g["n"] for g in given])) * redundancy

    def budget_left(self, humans, pairs, items: int, redundancy: int) -> int:
        """The budget left as the decision reads it (``items``: whole items it pays for)."""
        return items * redundancy


class _ScoredShape(_PairShape):
    """Item shape ``scored``: an item shows one output and serves every pair with its
    system; a pair gets one label per input once both its outputs are rated, by the sign of
    their score difference."""

    shared = True

    @functools.cached_property
    def itemised(self) -> dict[int, frozenset[int]]:
        return selectors.scored_itemised(self.study)

    def given(self, pair: SystemPair) -> set[int]:
        return selectors.itemised_for_both(self.itemised, pair)

    def release(self, config, number, pairs, unused, give, affordable, priority, outputs):
        rank = _study_order(self.study, config, priority)
        chosen = _scored_items(pairs, unused, give, self.itemised, rank, affordable)
        if not chosen:  # one item left in the budget and every input needs two
            return "budget"
        return [(Input(pk=i), [outputs[(i, system)]]) for i, system in chosen]

    def humans(self, config: ProtocolConfig):
        return selectors.ScoredLabels(self.study, config)

    def labels_per_input(self, redundancy: int) -> int:
        return 1

    def used_and_pool(self, humans, pairs, inputs, redundancy):
        return np.array([len(humans.ratings.both(p)) for p in pairs]), inputs

    def budget_left(self, humans, pairs, items: int, redundancy: int) -> int:
        # in inputs (an input costs at most two new items, often one or none)
        return _scored_budget_inputs(self.study, pairs, humans.ratings, items)


class _SeveralShape(_PairShape):
    """Item shape ``several``: an item of m > 2 outputs (a ranking) gives each of its
    m(m−1)/2 pairs a label per annotation."""

    shared = True

    @functools.cached_property
    def shown(self) -> dict[int, list[tuple[frozenset[int], int, int | None]]]:
        return selectors.items_shown(self.study)

    def given(self, pair: SystemPair) -> set[int]:
        return set(selectors.shown_together(self.shown, pair))

    def release(self, config, number, pairs, unused, give, affordable, priority, outputs):
        study = self.study
        rank = _study_order(study, config, priority)
        order = list(study.systems.order_by("name").values_list("pk", flat=True))
        m = _outputs_per_item(study)
        chosen = _ranking_items(pairs, unused, give, self.shown, rank, affordable, m, order)
        if not chosen:  # no input left on which an open pair's systems can be ranked
            return "budget" if affordable == 0 else "inputs"
        return [(Input(pk=i), [outputs[(i, s)] for s in systems]) for i, systems in chosen]

    def used_and_pool(self, humans, pairs, inputs, redundancy):
        # every item showing both systems gives the pair one label per annotation
        given = [selectors.shown_together(self.shown, p) for p in pairs]
        used = np.array([sum(g.values()) for g in given])
        return used, used + (inputs - np.array([len(g) for g in given])) * redundancy

    def budget_left(self, humans, pairs, items: int, redundancy: int) -> int:
        m = _outputs_per_item(self.study)  # a ranking of m gives up to m(m-1)/2 pair labels
        return items * redundancy * (m * (m - 1) // 2)


#: The protocol's strategy for each item shape (``kinds.ITEM_SHAPES``).
SHAPES = {"pair": _PairShape, "scored": _ScoredShape, "several": _SeveralShape}


def _shape(study: Study) -> _PairShape:
    """The strategy of the study's item shape (``Kind.item_shape``)."""
    return SHAPES[selectors.item_shape(study)](study)


def _ranking_items(
    pairs: list[SystemPair],
    unused: list[list[int]],
    give: np.ndarray,
    shown: dict[int, list[tuple[frozenset[int], int, int | None]]],
    rank: dict[int, tuple[float, int]],
    affordable: int,
    m: int,
    order: list[int],
) -> list[tuple[int, list[int]]]:
    """The items of a ranking round: ``(input, m system ids in name order)`` each.

    An item of m outputs gives every pair among them a label. The open pair that still
    wants most labels (``give``, in inputs) asks next: it takes its next input in the
    study's order, and the item adds, one at a time, the system that gives most labels to
    open pairs still short of their share, then most to any open pair, then fewest to
    closed pairs (systems whose pairs are all closed come last), then the first by name.
    An open pair never gets a second item on one input (a system that would give it one is
    left out); an input on which m such systems cannot be found is skipped for that pair.
    Every open pair the item shows counts it towards its share. At most ``affordable``
    items."""
    index = {(p.system_a_id, p.system_b_id): k for k, p in enumerate(pairs)}
    index |= {(b, a): k for (a, b), k in list(index.items())}
    together: dict[int, set[frozenset[int]]] = defaultdict(set)
    for input_id, items in shown.items():
        for systems, _, _ in items:
            together[input_id] |= {frozenset(c) for c in combinations(systems, 2)}
    queue = [sorted(inputs, key=rank.__getitem__) for inputs in unused]
    want = [int(n) for n in give]
    place = {s: n for n, s in enumerate(order)}
    chosen: list[tuple[int, list[int]]] = []
    while len(chosen) < affordable:
        asking = [k for k in range(len(pairs)) if want[k] > 0]
        if not asking:
            break
        k = max(asking, key=lambda j: (want[j], -j))
        a, b = pairs[k].system_a_id, pairs[k].system_b_id
        while queue[k] and frozenset((a, b)) in together[queue[k][0]]:
            queue[k].pop(0)  # given to this pair by another pair's item meanwhile
        if not queue[k]:
            want[k] = 0
            continue
        i = queue[k].pop(0)
        members = [a, b]
        while len(members) < m:
            best, best_key = None, None
            for s in order:
                if s in members:
                    continue
                ks = [index.get((s, t)) for t in members]
                if any(j is not None and frozenset((s, t)) in together[i]
                       for j, t in zip(ks, members, strict=True)):  # fmt: skip
                    continue
                key = (
                    sum(j is not None and want[j] > 0 for j in ks),
                    sum(j is not None for j in ks),
                    -sum(j is None for j in ks),
                )
                if best_key is None or key > best_key:
                    best, best_key = s, key
            if best is None:
                break
            members.append(best)
        if len(members) < m:
            continue  # this input cannot carry a ranking of m for the pair
        for s, t in combinations(members, 2):
            together[i].add(frozenset((s, t)))
            j = index.get((s, t))
            if j is not None:
                want[j] -= 1
        chosen.append((i, sorted(members, key=place.__getitem__)))
    return chosen


def _exhaust(pairs: list[SystemPair], why: str) -> None:
    """Nothing more can be released: the open pairs close as exhausted (``why``: what ran
    out, the budget or the inputs)."""
    for pair in pairs:
        pair.state = SystemPair.State.EXHAUSTED
        pair.evidence = {**pair.evidence, "outcome": why}
    SystemPair.objects.bulk_update(pairs, ["state", "evidence"])
    return None


def _study_order(
    study: Study, config: ProtocolConfig, priority: dict[int, float | None]
) -> dict[int, tuple[float, int]]:
    """Every input's place in the study's order: highest priority first, the rest in one
    seeded random order, the same in every round and for every pair (so pairs that share a
    system ask for the same inputs and share their items)."""
    ids = sorted(priority)
    random.Random(f"{config.seed}:{study.pk}").shuffle(ids)
    return {i: (_priority_key(priority[i]), n) for n, i in enumerate(ids)}


def _priority_key(priority: float | None) -> float:
    """Sort key of an input's priority: highest first, inputs without one last."""
    return -(priority if priority is not None else -np.inf)


def _scored_items(
    pairs: list[SystemPair],
    unused: list[list[int]],
    give: np.ndarray,
    itemised: dict[int, frozenset[int]],
    rank: dict[int, tuple[float, int]],
    affordable: int,
) -> list[tuple[int, int]]:
    """The ``(input, system)`` outputs to itemise in a Likert round.

    Giving pair (a, b) input i means both outputs (i, a) and (i, b) are rated; an output's
    item serves every pair with its system, so only missing items are made, and an input
    costs 0, 1 or 2 new items. Pairs take inputs in turn, one at a time, so a budget that
    runs short is shared out evenly: each takes its next input in the study's order,
    preferring one whose other output has an item already at equal priority, and only one
    whose missing items the budget (``affordable`` items) still pays for. Every pair for
    which an input becomes complete gets it, also a pair that did not ask (at no cost); it
    counts towards that pair's share (``give``, in inputs) of the round."""
    have: dict[int, set[int]] = {system: set(inputs) for system, inputs in itemised.items()}
    for pair in pairs:
        have.setdefault(pair.system_a_id, set())
        have.setdefault(pair.system_b_id, set())
    remaining = [sorted(inputs, key=rank.__getitem__) for inputs in unused]
    left = [set(inputs) for inputs in unused]
    start = [0] * len(pairs)  # remaining[k][:start[k]] are all given already
    want = [int(n) for n in give]
    chosen: list[tuple[int, int]] = []

    def missing(pair: SystemPair, i: int) -> list[int]:
        return [s for s in (pair.system_a_id, pair.system_b_id) if i not in have[s]]

    def pick(k: int) -> int | None:
        while start[k] < len(remaining[k]) and remaining[k][start[k]] not in left[k]:
            start[k] += 1
        budget = affordable - len(chosen)
        top = None
        for i in remaining[k][start[k] :]:
            if i not in left[k]:
                continue
            cost = len(missing(pairs[k], i))
            if cost > budget:
                continue
            if top is not None and rank[i][0] != rank[top][0]:
                break  # cheaper inputs are preferred only at equal priority
            if cost == 1:
                return i
            top = i if top is None else top
        return top

    progress = True
    while progress:
        progress = False
        for k, pair in enumerate(pairs):
            if want[k] <= 0:
                continue
            i = pick(k)
            if i is None:
                want[k] = 0
                continue
            for system in missing(pair, i):
                have[system].add(i)
                chosen.append((i, system))
            for j, other in enumerate(pairs):  # every pair this input completes gets it
                if i in left[j] and not missing(other, i):
                    left[j].discard(i)
                    want[j] -= 1
            progress = True
    return chosen


def round_close_if_complete(study_id: int, number: int) -> bool:
    """Mark the round complete when every item has all its annotations; one conditional
    UPDATE, so only one caller ever sees the transition. Returns whether it closed now
    (the caller then has the decision run after commit)."""
    incomplete = Item.objects.filter(
        study_id=study_id,
        round_number=OuterRef("number"),
        is_active=True,
        is_gold=False,
        n_done__lt=F("redundancy"),
    )
    return bool(
        Round.objects.filter(study_id=study_id, number=number, state=Round.State.OPEN)
        .exclude(Exists(incomplete))
        .update(state=Round.State.CLOSED, closed_at=timezone.now())
    )


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
    if pairs:
        _decide_pairs(study, config, settings, rnd, pairs)
    Round.objects.filter(pk=rnd.pk).update(state=Round.State.DECIDED, decided_at=timezone.now())
    round_open(study, number + 1)
    transaction.on_commit(lambda: collection_changed.send_robust(sender=Study, study_id=study_id))
    return True


def _decide_pairs(study, config, settings, rnd, pairs) -> None:
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
    shape = _shape(study)
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
    pools = [selectors.pair_inputs(study, p) for p in pairs]
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
        correlation = _correlation(study, pairs, pools, closed_pairs, humans.rows, humans.ratings)
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


def _scored_budget_inputs(study, pairs, ratings: selectors.ScoredRatings, affordable: int) -> int:
    """The budget left of a Likert study as the decision reads it, in inputs: the items it
    still pays for, or 0 when that is one item and no open pair has an input that one
    item completes (its last look is then now, not after a round that cannot open)."""
    if affordable != 1:
        return affordable
    empty: frozenset[int] = frozenset()
    for pair in pairs:
        a = ratings.itemised.get(pair.system_a_id, empty)
        b = ratings.itemised.get(pair.system_b_id, empty)
        if (a ^ b) & selectors.pair_inputs(study, pair):
            return 1
    return 0


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
        overall = rows[rows["criterion"] == study.kind_impl.overall_criterion(study.kind_options())]
        prefs = overall.assign(round=overall["item"].map(rounds_of))
    keep = np.ones(len(prefs), dtype=bool)
    for pair in closed:
        mine = prefs["system"].isin([pair.system_a_id, pair.system_b_id]) & prefs[
            "other_system"
        ].isin([pair.system_a_id, pair.system_b_id])
        keep &= ~(mine & (prefs["round"] > pair.decided_in_round)).to_numpy()
    pools = [*pools, *(selectors.pair_inputs(study, p) for p in closed)]
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
