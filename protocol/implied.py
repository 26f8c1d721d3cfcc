"""Pairs whose order the decided pairs imply (transitivity; pure, numpy only).

Once ``A > B`` and ``B > C`` are decided, ``A > C`` follows: the protocol closes such a pair
as *decided by implication* instead of collecting its own labels until they are significant.
The chain that implies it (``A > B > C``) is kept so the dashboard, the JSON and the report
can show why. A pair that the decided pairs order both ways (a cycle of decisions) is left
as it is. Used by :func:`protocol.rounds.decide_round` (live studies and the replay) and by
the study-level calibration (:func:`null_false_decisions`), which counts implied decisions of
null pairs as false decisions.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Implied", "implied_orders", "null_false_decisions", "reachable"]


class Implied:
    """Per queried pair: the implied direction (+1: its first system wins, −1: its second,
    0: not implied) and the chain of system ids from winner to loser (empty if not implied)."""

    __slots__ = ("chains", "direction")

    def __init__(self, direction: NDArray[np.int8], chains: list[tuple[int, ...]]) -> None:
        self.direction = direction
        self.chains = chains


def _beats(edges: ArrayLike, directions: NDArray[np.generic]) -> dict[int, set[int]]:
    """Winner → losers of the decided pairs (direction +1: first system wins)."""
    beats: dict[int, set[int]] = {}
    for (a, b), d in zip(np.asarray(edges, dtype=np.int64).reshape(-1, 2), directions, strict=True):
        if d > 0:
            beats.setdefault(int(a), set()).add(int(b))
        elif d < 0:
            beats.setdefault(int(b), set()).add(int(a))
    return beats


def _path(beats: dict[int, set[int]], start: int, goal: int) -> tuple[int, ...]:
    """The shortest chain ``start > … > goal`` through decided pairs (ties broken by the
    smallest system id, so the chain is reproducible); empty if there is none."""
    prev: dict[int, int] = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            chain = [goal]
            while chain[-1] != start:
                chain.append(prev[chain[-1]])
            return tuple(reversed(chain))
        for nxt in sorted(beats.get(node, ())):
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return ()


def implied_orders(
    pairs: ArrayLike, decided_pairs: ArrayLike, decided_directions: ArrayLike
) -> Implied:
    """For every pair of ``pairs`` (system ids, shape (k, 2)): is its order implied by the
    decided pairs (``decided_pairs`` with ``decided_directions`` +1 / −1) through a chain
    of them (callers pass open pairs, so a chain has at least two steps)?"""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    beats = _beats(decided_pairs, np.asarray(decided_directions).ravel())
    direction = np.zeros(pairs.shape[0], dtype=np.int8)
    chains: list[tuple[int, ...]] = []
    for k, (a, b) in enumerate(pairs):
        forward = _path(beats, int(a), int(b))
        backward = _path(beats, int(b), int(a))
        if forward and not backward:
            direction[k], chain = 1, forward
        elif backward and not forward:
            direction[k], chain = -1, backward
        else:  # not ordered, or ordered both ways by a cycle of decisions
            chain = ()
        chains.append(chain)
    return Implied(direction, chains)


def reachable(adjacency: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Transitive closure of a batch of directed graphs, shape (..., S, S) (Warshall)."""
    r = np.asarray(adjacency, dtype=bool).copy()
    for k in range(r.shape[-1]):
        r |= r[..., :, k, None] & r[..., None, k, :]
    return r


def null_false_decisions(
    first_look: NDArray[np.int64],
    direction: NDArray[np.int8],
    pairs: NDArray[np.int64],
    n_systems: int,
) -> NDArray[np.bool_]:
    """Pairs of simulated null studies decided directly or through an implication.

    ``first_look`` (B, P): the look at which each pair is first decided (−1: never);
    ``direction`` (B, P): that decision; ``pairs`` (P, 2) system ids in ``0..n_systems-1``.
    A pair counts when decided directly, or when the pairs decided by some look order it
    (either way) through a chain; the closure of every direct decision made is a superset of
    every implication at any look (decisions only accumulate), so the count is conservative.
    """
    first_look = np.asarray(first_look)
    b = first_look.shape[0]
    decided = first_look >= 0
    adj = np.zeros((b, n_systems, n_systems), dtype=bool)
    rows = np.arange(b)[:, None]
    win = np.where(np.asarray(direction) > 0, pairs[None, :, 0], pairs[None, :, 1])
    lose = np.where(np.asarray(direction) > 0, pairs[None, :, 1], pairs[None, :, 0])
    adj[np.broadcast_to(rows, decided.shape)[decided], win[decided], lose[decided]] = True
    r = reachable(adj)
    ordered = r[:, pairs[:, 0], pairs[:, 1]] | r[:, pairs[:, 1], pairs[:, 0]]
    return decided | ordered
