"""What a study will cost before it is launched: annotations × time per item × pay rate.

Pure: no Django. ``annotator.workspace.estimate_inputs`` gathers the inputs from a study.

Worked example (``tests/unit/test_workspace.py`` checks it to the digit): 100 items with
redundancy 3 are 300 annotations; at an expected 45 s per item that is 13,500 s = 3.75
worker-hours, and at 12.00 GBP per hour it costs 45.00 GBP. Once labels arrive with a
median time of 38.5 s, the same study is 11,550 s = 3.21 hours and 38.50 GBP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


@dataclass(frozen=True)
class CostEstimate:
    """Annotations to pay for, seconds per item and where that figure came from
    (``"measured"``, ``"expected"`` or ``None``), worker-hours and money (``None`` when an
    input is missing; ``missing`` names which)."""

    annotations: int
    basis: str
    seconds_per_item: float | None
    time_source: str | None
    worker_hours: float | None
    cost: Decimal | None
    currency: str
    missing: list[str] = field(default_factory=list)


def cost_estimate(
    *,
    item_slots: int,
    adaptive: bool,
    budget: int | None,
    measured_seconds: float | None,
    expected_seconds: float | None,
    pay_per_hour: Decimal | None,
    currency: str = "",
) -> CostEstimate:
    """Money and worker-hours a study will take.

    ``item_slots``: the sum of the items' redundancies (items × redundancy). An adaptive
    study releases items round by round, so its cost is bounded by its ``budget`` (the most
    annotations it may collect) instead; without a budget only the released items count.
    Time per item is the measured median (``measured_seconds``) once labels have arrived,
    else the researcher's ``expected_seconds``. Money is rounded half-up to the cent.

    >>> e = cost_estimate(item_slots=300, adaptive=False, budget=None, measured_seconds=None,
    ...                   expected_seconds=45, pay_per_hour=Decimal("12.00"), currency="GBP")
    >>> (e.annotations, e.worker_hours, e.cost)
    (300, 3.75, Decimal('45.00'))
    """
    missing: list[str] = []
    if adaptive and budget is not None:
        annotations, basis = budget, "budget"
    else:
        annotations, basis = item_slots, "items × redundancy"
        if adaptive:
            missing.append("a budget (an adaptive study's items are released round by round)")
    if measured_seconds is not None:
        seconds, source = float(measured_seconds), "measured"
    elif expected_seconds is not None:
        seconds, source = float(expected_seconds), "expected"
    else:
        seconds, source = None, None
        missing.append("an expected time per item")
    hours = None if seconds is None else annotations * seconds / 3600
    cost = None
    if pay_per_hour is None:
        missing.append("a pay rate")
    elif seconds is not None:
        exact = Decimal(annotations) * Decimal(str(seconds)) * Decimal(pay_per_hour) / 3600
        cost = exact.quantize(CENT, rounding=ROUND_HALF_UP)
    return CostEstimate(
        annotations=annotations,
        basis=basis,
        seconds_per_item=seconds,
        time_source=source,
        worker_hours=hours,
        cost=cost,
        currency=currency,
        missing=missing,
    )
