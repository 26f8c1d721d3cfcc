"""The Bradley–Terry fit's connectivity test (the reachability matrix squared, one win
matrix or a stack of them at once) answers as scipy's strongly-connected components do."""

import importlib

import numpy as np
from scipy.sparse.csgraph import connected_components

#: the module (the package's name ``bradley_terry`` is its function)
bradley_terry = importlib.import_module("ranking.bradley_terry")


def test_the_reachability_test_answers_as_the_graph_search():
    rng = np.random.default_rng(7)
    seen = set()
    for k in range(1, 10):  # 2**i around k: paths of every length up to k - 1
        stack = rng.integers(0, 2, size=(60, k, k)).astype(float) * (1 - np.eye(k))
        stack[::4] = bradley_terry.with_prior(stack[::4], 0.5)  # compared both ways
        stack[1::4] *= np.triu(np.ones((k, k)))  # an order: never connected (k > 1)
        expected = np.array(
            [connected_components(w > 0, directed=True, connection="strong")[0] == 1 for w in stack]
        )
        assert np.array_equal(bradley_terry._connected(stack), expected), k
        one_at_a_time = [bool(bradley_terry._connected(w)) for w in stack]
        assert one_at_a_time == expected.tolist(), k
        seen |= set(expected.tolist())
    assert seen == {True, False}  # both answers were tried
