"""What a study will cost before it is launched: annotations × time per item × pay rate,
plus the recruiting platform's service fee.

Pure: no Django. ``annotator.workspace.estimate`` gathers the inputs from a study.

Worked example (``tests/unit/test_workspace.py`` checks it to the digit): 100 items with
redundancy 3 are 300 annotations; at an expected 45 s per item that is 13,500 s = 3.75
worker-hours, and at 12.00 GBP per hour it pays workers 45.00 GBP; a platform fee of 30 %
of the pay adds 13.50 GBP, 58.50 GBP in all. Once 40 labels arrive with a median time of
38.5 s, the same study is 11,550 s = 3.21 hours and 38.50 GBP of pay.

A measured median replaces the expected time only when it can be trusted: at least
``MIN_MEASURED_LABELS`` labels, and at least ``MIN_PLAUSIBLE_SECONDS`` per item (faster is
not a person reading; e.g. answers posted by a script). Otherwise the expected time is used
and ``measured_note`` says why the median was not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
#: Labels needed before their median time replaces the researcher's expected time.
MIN_MEASURED_LABELS = 10
#: A median below this many seconds per item is not people reading and answering.
MIN_PLAUSIBLE_SECONDS = 2.0


@dataclass(frozen=True)
class CostEstimate:
    """Annotations to pay for, seconds per item and where that figure came from
    (``"measured"``, ``"expected"`` or ``None``), both candidate times (the measured median
    over ``measured_n`` labels and the expected time) with ``measured_note`` saying why a
    median was not used, worker-hours, the workers' pay (``cost``), the platform's fee
    (``fee``, at ``fee_percent`` of the pay) and ``total`` (pay + fee); money is ``None``
    when an input is missing (``missing`` names which)."""

    annotations: int
    basis: str
    seconds_per_item: float | None
    time_source: str | None
    worker_hours: float | None
    cost: Decimal | None
    currency: str
    missing: list[str] = field(default_factory=list)
    measured_seconds: float | None = None
    measured_n: int | None = None
    expected_seconds: float | None = None
    measured_note: str = ""
    fee_percent: Decimal | None = None
    fee: Decimal | None = None
    total: Decimal | None = None


def _measured_note(seconds: float | None, n: int | None) -> str:
    """Why a measured median is not to be used ('' when it is)."""
    if seconds is None:
        return ""
    if n is not None and n < MIN_MEASURED_LABELS:
        return f"only {n} label{'s' if n != 1 else ''} so far ({MIN_MEASURED_LABELS} needed)"
    if seconds < MIN_PLAUSIBLE_SECONDS:
        return f"under {MIN_PLAUSIBLE_SECONDS:g} s per item is too fast for a person"
    return ""


def cost_estimate(
    *,
    item_slots: int,
    adaptive: bool,
    budget: int | None,
    measured_seconds: float | None,
    expected_seconds: float | None,
    pay_per_hour: Decimal | None,
    currency: str = "",
    measured_n: int | None = None,
    fee_percent: Decimal | None = None,
) -> CostEstimate:
    """Money and worker-hours a study will take.

    ``item_slots``: the sum of the work items' redundancies (items × redundancy; gold
    checks are not counted, as in the workspace's progress). An adaptive study releases
    items round by round, so its cost is bounded by its ``budget`` (the most annotations it
    may collect) instead; without a budget only the released items count. Time per item is
    the measured median (``measured_seconds`` over ``measured_n`` labels; ``None``: enough)
    when it can be trusted (see the module), else the researcher's ``expected_seconds``.
    ``fee_percent``: the recruiting platform's service fee as a percentage of the pay.
    Money is rounded half-up to the cent.

    >>> e = cost_estimate(item_slots=300, adaptive=False, budget=None, measured_seconds=None,
    ...                   expected_seconds=45, pay_per_hour=Decimal("12.00"), currency="GBP",
    ...                   fee_percent=Decimal("30"))
    >>> (e.annotations, e.worker_hours, e.cost, e.fee, e.total)
    (300, 3.75, Decimal('45.00'), Decimal('13.50'), Decimal('58.50'))
    """
    missing: list[str] = []
    if adaptive and budget is not None:
        annotations, basis = budget, "budget"
    else:
        annotations, basis = item_slots, "work items × redundancy; gold checks not counted"
        if adaptive:
            missing.append("a budget (an adaptive study's items are released round by round)")
    note = _measured_note(measured_seconds, measured_n)
    if measured_seconds is not None and not note:
        seconds, source = float(measured_seconds), "measured"
    elif expected_seconds is not None:
        seconds, source = float(expected_seconds), "expected"
    else:
        seconds, source = None, None
        missing.append("an expected time per item")
    hours = None if seconds is None else annotations * seconds / 3600
    cost = fee = total = None
    if pay_per_hour is None:
        missing.append("a pay rate")
    elif seconds is not None:
        exact = Decimal(annotations) * Decimal(str(seconds)) * Decimal(pay_per_hour) / 3600
        cost = exact.quantize(CENT, rounding=ROUND_HALF_UP)
        if fee_percent is not None:
            fee = (cost * Decimal(fee_percent) / 100).quantize(CENT, rounding=ROUND_HALF_UP)
        total = cost + (fee or 0)
    return CostEstimate(
        annotations=annotations,
        basis=basis,
        seconds_per_item=seconds,
        time_source=source,
        worker_hours=hours,
        cost=cost,
        currency=currency,
        missing=missing,
        measured_seconds=None if measured_seconds is None else float(measured_seconds),
        measured_n=measured_n,
        expected_seconds=None if expected_seconds is None else float(expected_seconds),
        measured_note=note,
        fee_percent=fee_percent,
        fee=fee,
        total=total,
    )
