"""Synthetic MQM-like studies for the protocol sweep (``bench/protocol_sweep.py``).

System ``i`` of ``S`` scores a segment 0 (no error) with probability ``p_i = 0.30 + s·i``
(capped at 1), otherwise minus a penalty drawn uniformly from ``{1, 1, 1, 5, 5, 10, 25}``
(MQM's minor / major weights); a pair's label is the sign of the score difference, as for the
WMT21 file. ``s = 0`` is a null study (every system equal). Pure (numpy / pandas).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PENALTIES", "synthetic_mqm"]

#: Penalties of a segment with errors (MQM-like: minor 1, major 5, 10, 25).
PENALTIES = np.array([1, 1, 1, 5, 5, 10, 25], dtype=float)


def synthetic_mqm(n_systems: int, n_segments: int, spread: float, seed: int) -> pd.DataFrame:
    """A wide frame ``segment × system`` of MQM-like scores (higher is better, 0 the best).

    ``spread`` is ``s`` in ``p_i = 0.30 + s·i``; the same ``seed`` gives the same frame.
    """
    rng = np.random.default_rng(seed)
    p_clean = np.minimum(0.30 + spread * np.arange(n_systems), 1.0)
    clean = rng.random((n_segments, n_systems)) < p_clean[None, :]
    penalty = rng.choice(PENALTIES, size=(n_segments, n_systems))
    scores = np.where(clean, 0.0, -penalty)
    return pd.DataFrame(scores, columns=[f"sys{i}" for i in range(n_systems)]).rename_axis("seg_id")
