"""Settings of the budgeted protocol (Deriu et al. 2023, Algorithm 2) and of its corrections.

Pure (no Django): the live protocol (:mod:`protocol.services`, :mod:`protocol.rounds`) and the
replay (:mod:`protocol.replay.simulation`) read the same :class:`ProtocolSettings`;
``docs/protocol.md`` ("Settings") explains every field for users.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ProtocolSettings"]


@dataclass(frozen=True)
class ProtocolSettings:
    """Settings of Algorithm 2 and of the corrections beyond the paper (its Limitations).

    With ``paper=True`` only ``gamma``, ``batch``, ``budget`` and ``sampler`` are used and the
    loop is exactly Algorithm 2; otherwise every look also predicts each open pair's decision
    on all its inputs (:mod:`protocol.predictive`) and the fields below apply.
    """

    #: Significance level γ of Algorithm 1 (two-sided: decide when θ > 1 − γ/2 or θ < γ/2).
    gamma: float = 0.05
    #: N: new human annotations per open pair per round (the paper's batch).
    batch: int = 10
    #: Run Algorithm 2 exactly as published (fixed thresholds, uniform allocation).
    paper: bool = False
    #: None: the whole pool (the paper's setting); <= 1 a fraction of it; > 1 annotations.
    budget: float | None = None
    #: Probability that all data decide the same way, required for an early decision;
    #: None: the smallest level that keeps a lone null pair's false decisions at γ.
    decision_level: float | None = None
    #: Exponent ρ of the level over a pair's looks: ``1 − (1 − level)·(used / pool)^ρ``;
    #: 0: the same level at every look.
    spending: float = 1.0
    #: Draw rate of the calibration's null; None: share of draws in round 1, rounded to 0.05.
    null_draw_rate: float | None = None
    #: Simulated null sequences of one pair in the calibration of ``decision_level``.
    calibration_sims: int = 20000
    #: Also calibrate a study level on null studies of the study's own shape (pooling on); a
    #: pair needs the lone-pair level where pooling adds nothing, the study level where the
    #: other pairs pin it down, in between by how much pooling informs it. False: the
    #: lone-pair level for every pair.
    pooled_calibration: bool = True
    #: Simulated null studies in that calibration.
    calibration_studies: int = 100
    #: Retire a pair as undecided when the chance that all data decide it is below this.
    futility: float = 0.2
    #: A rate β (default 0.1): the futility threshold is calibrated so that at
    #: most β of lone pairs near the decision boundary that all data decide are retired
    #: (:func:`protocol.predictive.calibrate_futility`; ``futility`` is then its ceiling);
    #: None: ``futility`` as given.
    futility_error: float | None = 0.1
    #: No early decision or retirement before this many annotations (or a quarter of the pool).
    min_annotations: int = 30
    #: Predict from all pairs through δ_ab = q_a − q_b + e_ab; False: each pair on its own.
    pooling: bool = True
    #: An early decision needs Algorithm 1 significant on the pair's own labels now; False:
    #: only the outcome predicted on all data (pooled evidence included) at the calibrated
    #: level, the calibrations run the same rule (replay; measured, not adopted).
    own_significance: bool = True
    #: Close a pair whose order the decided pairs imply (A > B and B > C decided: A > C) as
    #: decided by implication, with the chain; the study-level calibration counts such
    #: decisions of null pairs as false ones. False: every pair needs its own labels.
    implied: bool = True
    #: Retire as equivalent when P(|p> − p<| < rope_delta) > 1 − γ (0 disables).
    rope_delta: float = 0.05
    #: "adaptive": a round's batch × open pairs goes where outcomes are least settled;
    #: "uniform": ``batch`` for every open pair (the paper).
    allocation: str = "adaptive"
    #: Adaptive allocation gives one pair at most ``max_chunk × batch`` per round.
    max_chunk: int = 3
    #: Keyword arguments of :func:`protocol.decision.sample_posterior` (metric data only).
    sampler: dict[str, Any] = field(
        default_factory=lambda: {"tol": 0.01, "max_samples": 200, "n_samples": 100}
    )

    def __post_init__(self) -> None:
        if not 0 < self.gamma < 1:
            raise ValueError("gamma must be in (0, 1)")
        if self.batch < 1:
            raise ValueError("batch must be >= 1")
        if self.allocation not in ("uniform", "adaptive"):
            raise ValueError("allocation must be 'uniform' or 'adaptive'")

    def __hash__(self) -> int:  # sampler is a dict; hash on the rest
        return hash(tuple((k, v) for k, v in asdict(self).items() if k != "sampler"))

    @classmethod
    def paper_protocol(cls, gamma: float = 0.05, batch: int = 10, **kw: Any) -> ProtocolSettings:
        """Algorithm 2 exactly as published."""
        return cls(gamma=gamma, batch=batch, paper=True, **kw)
