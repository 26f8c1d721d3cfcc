"""Whether a platform vouches for a worker's entry: another app registers its check for a
platform at start-up (the crowd app asks Prolific whether the session is that
participant's submission in the study), so ``annotator`` imports none of them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Study

log = logging.getLogger(__name__)

#: ``check(study, external_id, session)``: ``False`` when the platform says the entry is not
#: that worker's; ``True`` or ``None`` (no opinion, or the platform cannot be asked) admit it.
EntryCheck = Callable[["Study", str, str], "bool | None"]
_CHECKS: dict[str, EntryCheck] = {}


def register(platform: str, check: EntryCheck) -> None:
    """Ask ``check`` about every entry from ``platform`` (called at start-up)."""
    _CHECKS[platform] = check


def vouched(study: Study, platform: str, external_id: str, session: str) -> bool:
    """Whether the entry may go on: refused only when the platform's check says ``False``;
    a check that fails is logged and admits the entry (no outage turns a worker away)."""
    check = _CHECKS.get(platform)
    if check is None:
        return True
    try:
        return check(study, external_id, session) is not False
    except Exception:
        log.exception("the %s entry check failed; the entry is admitted", platform)
        return True
