"""The worker's next task in tests, leased as the task page leases it."""

from __future__ import annotations

import random
from datetime import datetime

from annotator import services
from annotator.models import Assignment, Participation


def next_lease(
    *, participation: Participation, now: datetime | None = None, rng: random.Random | None = None
) -> Assignment | None:
    """The assignment of :func:`annotator.services.task_next` (what the task page calls), or
    ``None`` when the worker has nothing left."""
    task = services.task_next(participation=participation, now=now, rng=rng)
    return task.assignment if task else None
