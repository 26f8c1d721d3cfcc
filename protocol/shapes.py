"""The adaptive protocol's item shapes (``Kind.item_shape``): how a round releases the
items of a study of each shape, and how a decision counts the labels they give a pair.
Chosen by :func:`shape_of`; used by :mod:`protocol.services`."""

from __future__ import annotations

import functools
import heapq
import random
from collections import defaultdict
from collections.abc import Collection, Iterator
from itertools import combinations

import numpy as np

from annotator.models import Study

from . import selectors
from .models import ProtocolConfig, SystemPair


def _outputs_per_item(study: Study) -> int:
    """How many outputs one item of the study shows (``Kind.outputs_per_item``)."""
    return study.bound_kind().outputs_per_item(study.systems.count())


#: A round's new items: ``(input id, its output ids in system order)`` each.
NewItems = list[tuple[int, list[int]]]


class _PairShape:
    """Item shape ``pair`` (``Kind.item_shape``): an item shows the two outputs of one pair
    on one input and gives that pair a label per annotation."""

    #: One annotation serves several pairs: pool with the correlation of their labels, and
    #: decide at the lone-pair level (docs/protocol.md, "Ranking and Likert studies, live").
    shared = False

    def __init__(self, study: Study) -> None:
        self.study = study

    @functools.cached_property
    def items(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        """Per pair (its systems' ids), its items' ``(input, redundancy)``."""
        return selectors.items_by_pair(self.study)

    def given(self, pair: SystemPair) -> set[int]:
        """The inputs the pair has been given."""
        return {i for i, _ in self.items.get((pair.system_a_id, pair.system_b_id), [])}

    def release(self, config, number, pairs, unused, give, affordable, priority, outputs):
        """The round's new items, or what ran out (``"budget"``/``"inputs"``) when none can
        be made: each pair's share of its unused inputs, highest priority first, else in a
        seeded random order."""
        study = self.study
        rng = random.Random(f"{config.seed}:{study.pk}:{number}")
        new: NewItems = []
        for pair, mine, n in zip(pairs, unused, give, strict=True):
            inputs = sorted(mine)
            rng.shuffle(inputs)
            inputs.sort(key=lambda i: _priority_key(priority[i]))
            new += [
                (i, [outputs[(i, pair.system_a_id)], outputs[(i, pair.system_b_id)]])
                for i in inputs[: int(n)]
            ]
        return new

    def humans(self, config: ProtocolConfig):
        """The study's human labels as the decision counts them."""
        return selectors.PairLabels(self.study, items=self.items)

    def labels_per_input(self, redundancy: int) -> int:
        """The labels one input gives a pair (an item's annotations)."""
        return redundancy

    def used_and_pool(self, humans, pairs, inputs, redundancy):
        """Per pair, the labels it has been given and the most it could get (``used`` and
        ``pool`` of :func:`protocol.rounds.decide_round`)."""
        # each item at its own redundancy (an edit may have changed it since it was
        # released), the inputs not yet given at the study's current one
        given = [self.items.get((p.system_a_id, p.system_b_id), []) for p in pairs]
        used = np.array([sum(r for _, r in g) for g in given], dtype=np.int64)
        return used, used + (inputs - np.array([len(g) for g in given])) * redundancy

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
        return [(i, [outputs[(i, system)]]) for i, system in chosen]

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
        return [(i, [outputs[(i, s)] for s in systems]) for i, systems in chosen]

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


def shape_of(study: Study) -> _PairShape:
    """The strategy of the study's item shape (``Kind.item_shape``)."""
    return SHAPES[selectors.item_shape(study)](study)


def _ranking_items(
    pairs: list[SystemPair],
    unused: list[Collection[int]],
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
    together: dict[int, set[frozenset[int]]] = {}  # per input reached: its pairs shown

    def shown_on(i: int) -> set[frozenset[int]]:
        if i not in together:
            on_input = [systems for systems, _, _ in shown.get(i, ())]
            together[i] = {frozenset(c) for systems in on_input for c in combinations(systems, 2)}
        return together[i]

    queue = _in_study_order_lazily(unused, rank)  # read only as far as each pair gets
    want = [int(n) for n in give]
    place = {s: n for n, s in enumerate(order)}
    chosen: list[tuple[int, list[int]]] = []
    while len(chosen) < affordable:
        asking = [k for k in range(len(pairs)) if want[k] > 0]
        if not asking:
            break
        k = max(asking, key=lambda j: (want[j], -j))
        a, b = pairs[k].system_a_id, pairs[k].system_b_id
        # skipping inputs given to this pair by another pair's item meanwhile
        i = next((i for i in queue[k] if frozenset((a, b)) not in shown_on(i)), None)
        if i is None:
            want[k] = 0
            continue
        members = [a, b]
        while len(members) < m:
            best, best_key = None, None
            for s in order:
                if s in members:
                    continue
                ks = [index.get((s, t)) for t in members]
                if any(j is not None and frozenset((s, t)) in shown_on(i)
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
            shown_on(i).add(frozenset((s, t)))
            j = index.get((s, t))
            if j is not None:
                want[j] -= 1
        chosen.append((i, sorted(members, key=place.__getitem__)))
    return chosen


def _study_order(
    study: Study, config: ProtocolConfig, priority: dict[int, float | None]
) -> dict[int, tuple[float, int]]:
    """Every input's place in the study's order: highest priority first, the rest in one
    seeded random order, the same in every round and for every pair (so pairs that share a
    system ask for the same inputs and share their items)."""
    ids = sorted(priority)
    random.Random(f"{config.seed}:{study.pk}").shuffle(ids)
    return {i: (_priority_key(priority[i]), n) for n, i in enumerate(ids)}


def _in_study_order_lazily(
    unused: list[Collection[int]], rank: dict[int, tuple[float, int]]
) -> list[Iterator[int]]:
    """Each pair's inputs in the study's order (``rank``), read as far as asked: the study's
    inputs sorted once, each pair's taken from them (a sort per pair took 0.3 s at 28 pairs
    of 27,000)."""
    order = sorted(rank, key=rank.__getitem__)
    return [filter(mine.__contains__, order) for mine in unused]


def _in_study_order(
    unused: list[Collection[int]], rank: dict[int, tuple[float, int]]
) -> list[list[int]]:
    """:func:`_in_study_order_lazily`, each pair's inputs read whole."""
    return [list(inputs) for inputs in _in_study_order_lazily(unused, rank)]


def _priority_key(priority: float | None) -> float:
    """Sort key of an input's priority: highest first, inputs without one last."""
    return -(priority if priority is not None else -np.inf)


def _scored_items(
    pairs: list[SystemPair],
    unused: list[Collection[int]],
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
    remaining = _in_study_order(unused, rank)
    left = [set(inputs) for inputs in unused]
    start = [0] * len(pairs)  # remaining[k][:start[k]] are all given already
    want = [int(n) for n in give]
    chosen: list[tuple[int, int]] = []

    def missing(pair: SystemPair, i: int) -> list[int]:
        return [s for s in (pair.system_a_id, pair.system_b_id) if i not in have[s]]

    # per pair, the inputs that cost it one item, in the study's order (entries that are
    # no longer so are dropped when they come up): a pick is then no scan of every input
    half = [
        [(rank[i], i) for i in inputs if len(missing(pair, i)) == 1]
        for pair, inputs in zip(pairs, remaining, strict=True)
    ]
    for heap in half:
        heapq.heapify(heap)
    of_system: dict[int, list[int]] = defaultdict(list)
    for k, pair in enumerate(pairs):
        of_system[pair.system_a_id].append(k)
        of_system[pair.system_b_id].append(k)

    def pick(k: int) -> int | None:
        while start[k] < len(remaining[k]) and remaining[k][start[k]] not in left[k]:
            start[k] += 1
        budget = affordable - len(chosen)
        if budget >= 2 and start[k] < len(remaining[k]):
            first, heap = remaining[k][start[k]], half[k]
            while heap and (heap[0][1] not in left[k] or len(missing(pairs[k], heap[0][1])) != 1):
                heapq.heappop(heap)
            if heap and rank[heap[0][1]][0] == rank[first][0]:
                return heap[0][1]
            return first
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
            added = missing(pair, i)
            for system in added:
                have[system].add(i)
                chosen.append((i, system))
            for j, other in enumerate(pairs):  # every pair this input completes gets it
                if i in left[j] and not missing(other, i):
                    left[j].discard(i)
                    want[j] -= 1
            for j in {j for system in added for j in of_system[system]}:
                if i in left[j]:  # now one item short for pair j
                    heapq.heappush(half[j], (rank[i], i))
            progress = True
    return chosen


def _scored_budget_inputs(study, pairs, ratings: selectors.ScoredRatings, affordable: int) -> int:
    """The budget left of a Likert study as the decision reads it, in inputs: the items it
    still pays for, or 0 when that is one item and no open pair has an input that one
    item completes (its last look is then now, not after a round that cannot open)."""
    if affordable != 1:
        return affordable
    empty: frozenset[int] = frozenset()
    for pair, pool in zip(pairs, selectors.pair_pools(study, pairs), strict=True):
        a = ratings.itemised.get(pair.system_a_id, empty)
        b = ratings.itemised.get(pair.system_b_id, empty)
        if (a ^ b) & pool:
            return 1
    return 0
