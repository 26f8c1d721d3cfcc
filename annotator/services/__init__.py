"""Every write of the annotator app: imports, assignments, submissions, configuration.

Callers use the package (``from annotator import services; services.task_next(...)``);
the modules are its seams:

- :mod:`.studies`: study import, create, items, checks, configure, resize;
- :mod:`.judge_ratings`: judge ratings imported or recorded;
- :mod:`.participation`: a worker enters, claims, is swept, reviewed, finishes, stops, is blocked;
- :mod:`.qualification`: the qualification test;
- :mod:`.leasing`: the lease engine (all the worker cycle's raw SQL): lease, release, reclaim,
  renew, ``task_next``;
- :mod:`.submission`: ``annotation_submit``, ``task_answer``, gold scoring.
"""

from .judge_ratings import (
    judge_rating_record,
    judge_ratings_import,
)
from .leasing import (
    Task,
    assignment_reclaim_idle,
    assignment_release_expired,
    assignment_renew,
    check_may_work,
    task_next,
)
from .participation import (
    annotator_enter,
    participation_claim,
    participation_enter,
    participation_finish,
    participation_review,
    participation_set_blocked,
    participation_stop,
    participations_sweep_unused,
)
from .qualification import (
    qualification_answer,
    qualification_next,
)
from .studies import (
    Resize,
    items_create,
    items_create_static,
    items_resize,
    study_configure,
    study_configure_check,
    study_create,
    study_import,
    study_prepare_checks,
    study_researcher_add,
)
from .submission import (
    annotation_submit,
    task_answer,
)

__all__ = [
    "Resize",
    "Task",
    "annotation_submit",
    "annotator_enter",
    "assignment_reclaim_idle",
    "assignment_release_expired",
    "assignment_renew",
    "check_may_work",
    "items_create",
    "items_create_static",
    "items_resize",
    "judge_rating_record",
    "judge_ratings_import",
    "participation_claim",
    "participation_enter",
    "participation_finish",
    "participation_review",
    "participation_set_blocked",
    "participation_stop",
    "participations_sweep_unused",
    "qualification_answer",
    "qualification_next",
    "study_configure",
    "study_configure_check",
    "study_create",
    "study_import",
    "study_prepare_checks",
    "study_researcher_add",
    "task_answer",
    "task_next",
]
