"""The Bradley–Terry fit's connectivity test takes a shortcut when every pair of systems
was compared both ways (always so with a prior): it must answer as the graph search does."""

import importlib

import numpy as np
from scipy.sparse.csgraph import connected_components

#: the module (the package's name ``bradley_terry`` is its function)
bradley_terry = importlib.import_module("ranking.bradley_terry")


def test_the_connectivity_shortcut_answers_as_the_graph_search():
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(400):
        k = int(rng.integers(2, 6))
        wins = rng.integers(0, 3, size=(k, k)).astype(float) * (1 - np.eye(k))
        if rng.random() < 0.3:
            wins = bradley_terry.with_prior(wins, 0.5)
        n, _ = connected_components(wins > 0, directed=True, connection="strong")
        assert bradley_terry._connected(wins) is (n == 1), wins
        seen.add(n == 1)
    assert seen == {True, False}  # both answers were tried
