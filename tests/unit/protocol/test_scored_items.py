"""A Likert round's outputs to itemise (``shapes._scored_items``) are the plain greedy's: each
pair in turn takes its next input in the study's order, one already half itemised first at
equal priority, within the budget. The reference below scans every input at every pick."""

import random
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest

from protocol.shapes import _scored_items


def reference(pairs, unused, give, itemised, rank, affordable):
    have = {system: set(inputs) for system, inputs in itemised.items()}
    for pair in pairs:
        have.setdefault(pair.system_a_id, set())
        have.setdefault(pair.system_b_id, set())
    remaining = [sorted(inputs, key=rank.__getitem__) for inputs in unused]
    left = [set(inputs) for inputs in unused]
    want = [int(n) for n in give]
    chosen = []

    def missing(pair, i):
        return [s for s in (pair.system_a_id, pair.system_b_id) if i not in have[s]]

    def pick(k):
        budget, top = affordable - len(chosen), None
        for i in remaining[k]:
            if i not in left[k]:
                continue
            cost = len(missing(pairs[k], i))
            if cost > budget:
                continue
            if top is not None and rank[i][0] != rank[top][0]:
                break
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
            for j, other in enumerate(pairs):
                if i in left[j] and not missing(other, i):
                    left[j].discard(i)
                    want[j] -= 1
            progress = True
    return chosen


@pytest.mark.parametrize("seed", range(300))
def test_the_round_is_the_plain_greedys(seed):
    rng = random.Random(seed)
    systems = list(range(1, rng.randint(3, 6) + 1))
    every = list(combinations(systems, 2))
    pairs = [
        SimpleNamespace(system_a_id=a, system_b_id=b)
        for a, b in rng.sample(every, rng.randint(1, len(every)))
    ]
    inputs = list(range(rng.randint(0, 60)))
    levels = rng.choice([1, 1, 2, 3])
    order = rng.sample(inputs, len(inputs))
    rank = {i: (float(rng.randrange(levels)), n) for n, i in enumerate(order)}
    itemised = {s: frozenset(i for i in inputs if rng.random() < 0.3) for s in systems}
    unused = [
        [
            i
            for i in inputs
            if not (i in itemised[p.system_a_id] and i in itemised[p.system_b_id])
            and rng.random() < 0.8
        ]
        for p in pairs
    ]
    give = np.array([rng.randint(0, len(u)) for u in unused])
    affordable = rng.choice([0, 1, 2, 3, 7, 25, 10**6])
    args = (pairs, unused, give, itemised, rank, affordable)
    assert _scored_items(*args) == reference(*args)


@pytest.mark.parametrize("seed", range(20))
def test_each_pairs_inputs_are_put_in_the_study_order(seed):
    """``shapes._in_study_order`` (one sort of the study's inputs, which the ranking round
    reads lazily) gives each pair's inputs as sorting them by their place would."""
    from protocol.shapes import _in_study_order

    rng = random.Random(seed)
    inputs = rng.sample(range(10_000), 300)
    rank = {i: (rng.choice([-2.0, 0.0, float("inf")]), n) for n, i in enumerate(inputs)}
    unused = [rng.sample(inputs, rng.randint(0, 300)) for _ in range(6)]
    assert _in_study_order(unused, rank) == [sorted(u, key=rank.__getitem__) for u in unused]
