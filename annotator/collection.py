"""How a study's work is released, asked by the worker cycle and the workspace.

A :class:`Collection` answers the questions about work still to come. A study of
``collection="all"`` has all its items from the start (:data:`ALL_AT_ONCE`); another app
registers the implementation of its own mode at start-up (the protocol app registers
``"adaptive"`` in its ``AppConfig.ready``), so ``annotator`` imports none of them. Callers
ask ``collection_for(study)``.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .models import Study


class Outlook(enum.Enum):
    """What a worker with nothing to do now can expect of the study."""

    #: no more work will come
    NONE = "none"
    #: more may come (a round still collecting, whose leases may come back)
    LATER = "later"
    #: new work is being made right now (a complete round awaiting its decision)
    IMMINENT = "imminent"


class Collection(Protocol):
    def outlook(self, study: Study) -> Outlook:
        """Whether a worker with nothing to do now should wait for more, and whether it is
        being made right now (the waiting page then looks again soon)."""

    def round_summary(self, study: Study) -> dict[str, Any] | None:
        """The study's rounds for the researcher's workspace (``rounds``, ``current``,
        ``current_state``, ``committed``, ``open_pairs``, ``settled_pairs``), or ``None``."""

    def reconfigure(self, study: Study, edited: Study, *, apply: bool) -> list[str]:
        """Carry an edit (``study`` as saved, ``edited`` with the new values) to the work
        released (when ``apply``; else only check): notes for the researcher, or
        :class:`~annotator.errors.ConfigRefused` and nothing is saved."""


class AllAtOnce:
    """Every item exists from the start: no more work comes, there are no rounds."""

    def outlook(self, study: Study) -> Outlook:
        return Outlook.NONE

    def round_summary(self, study: Study) -> dict[str, Any] | None:
        return None

    def reconfigure(self, study: Study, edited: Study, *, apply: bool) -> list[str]:
        from .services.studies import static_reconfigure

        return static_reconfigure(study, edited, apply=apply)


ALL_AT_ONCE: Collection = AllAtOnce()
_REGISTERED: dict[str, Collection] = {}


def register(mode: str, collection: Collection) -> None:
    """Answer for the studies whose ``collection`` is ``mode`` (called at start-up)."""
    _REGISTERED[mode] = collection


def collection_for(study: Study) -> Collection:
    """The implementation answering for ``study``: the registered one of its mode, else
    :data:`ALL_AT_ONCE`."""
    return _REGISTERED.get(study.collection, ALL_AT_ONCE)
