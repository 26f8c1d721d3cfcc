"""A ranking round's items (``shapes._ranking_items``) are the plain greedy's: the open pair
that wants most labels takes its next input in the study's order that no item gave it
meanwhile, and the item adds the system that gives most labels to pairs still short, then
to any open pair, then fewest to closed ones. The reference below sorts every pair's
inputs and lists every input's shown pairs before the first pick; the function reads them
only as far as the round gets."""

import random
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest

from protocol.shapes import _ranking_items


def reference(pairs, unused, give, shown, rank, affordable, m, order):
    index = {(p.system_a_id, p.system_b_id): k for k, p in enumerate(pairs)}
    index |= {(b, a): k for (a, b), k in list(index.items())}
    together = {i: set() for i in rank}
    for input_id, items in shown.items():
        for systems, _, _ in items:
            together[input_id] |= {frozenset(c) for c in combinations(systems, 2)}
    queue = [sorted(inputs, key=rank.__getitem__) for inputs in unused]
    want = [int(n) for n in give]
    chosen = []
    while len(chosen) < affordable:
        asking = [k for k in range(len(pairs)) if want[k] > 0]
        if not asking:
            break
        k = max(asking, key=lambda j: (want[j], -j))
        a, b = pairs[k].system_a_id, pairs[k].system_b_id
        while queue[k] and frozenset((a, b)) in together[queue[k][0]]:
            queue[k].pop(0)
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
                if any(
                    j is not None and frozenset((s, t)) in together[i]
                    for j, t in zip(ks, members, strict=True)
                ):
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
            continue
        for s, t in combinations(members, 2):
            together[i].add(frozenset((s, t)))
            j = index.get((s, t))
            if j is not None:
                want[j] -= 1
        chosen.append((i, sorted(members, key=order.index)))
    return chosen


@pytest.mark.parametrize("seed", range(300))
def test_the_round_is_the_plain_greedys(seed):
    rng = random.Random(seed)
    order = rng.sample(range(1, 40), rng.randint(3, 7))  # the systems by name
    m = rng.randint(3, len(order))
    every = list(combinations(order, 2))
    pairs = [
        SimpleNamespace(system_a_id=a, system_b_id=b)
        for a, b in rng.sample(every, rng.randint(1, len(every)))
    ]
    inputs = rng.sample(range(1000), rng.randint(0, 50))
    levels = rng.choice([1, 1, 2, 3])
    rank = {
        i: (float(rng.randrange(levels)), n) for n, i in enumerate(rng.sample(inputs, len(inputs)))
    }
    shown = {
        i: [(frozenset(rng.sample(order, m)), 3, 1) for _ in range(rng.choice([0, 0, 1, 2]))]
        for i in inputs
    }
    unused = [
        frozenset(i for i in inputs if rng.random() < 0.8 and not any(
            {p.system_a_id, p.system_b_id} <= systems for systems, _, _ in shown[i]
        ))
        for p in pairs
    ]  # fmt: skip
    give = np.array([rng.randint(0, len(u)) for u in unused])
    affordable = rng.choice([0, 1, 2, 5, 20, 10**6])
    args = (pairs, unused, give, shown, rank, affordable, m, order)
    assert _ranking_items(*args) == reference(*args)
