"""Task kinds: one module per kind, each a :class:`~kinds.base.Kind` (see ``kinds/base.py``
and docs/architecture.md, "Task kinds"). Pure: no Django imports.

>>> get("pairwise").name
'pairwise'
"""

from __future__ import annotations

from typing import Any

from .base import (
    ANSWER_SWITCHES,
    ITEM_SHAPES,
    AnswerError,
    Bound,
    CommonOptions,
    Kind,
    OptionError,
    position_names,
    preferences_from_scores,
)
from .error_spans import KIND as _ERROR_SPANS
from .likert import KIND as _LIKERT
from .pairwise import KIND as _PAIRWISE
from .ranking import KIND as _RANKING

__all__ = [
    "ANSWER_SWITCHES",
    "ITEM_SHAPES",
    "NAMES",
    "AnswerError",
    "Bound",
    "CommonOptions",
    "Kind",
    "OptionError",
    "choices",
    "get",
    "judgebench_kinds",
    "position_names",
    "preferences_from_scores",
    "register",
    "unregister",
]

_REGISTRY: dict[str, Kind[Any, Any]] = {
    k.name: k for k in (_PAIRWISE, _LIKERT, _RANKING, _ERROR_SPANS)
}

#: Every registered kind's name, in registration order.
NAMES: tuple[str, ...] = tuple(_REGISTRY)


def register(kind: Kind[Any, Any]) -> None:
    """Add ``kind`` to the registry (a kind defined outside this package, e.g. a test's);
    ``ValueError`` when its name is taken or blank. Studies, tests, imports and exports
    then take it like the built-in kinds."""
    global NAMES
    if not kind.name or kind.name in _REGISTRY:
        raise ValueError(f"a kind must have a name of its own, not {kind.name!r}")
    _REGISTRY[kind.name] = kind
    NAMES = tuple(_REGISTRY)


def unregister(name: str) -> None:
    """Remove the kind called ``name`` (one :func:`register` added)."""
    global NAMES
    del _REGISTRY[name]
    NAMES = tuple(_REGISTRY)


def get(name: str) -> Kind[Any, Any]:
    """The kind called ``name``; ``KeyError`` when there is none (callers list :data:`NAMES`)."""
    return _REGISTRY[name]


def choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every kind, for ``Study.kind``'s choices."""
    return [(k.name, k.label) for k in _REGISTRY.values()]


def judgebench_kinds() -> list[str]:
    """The names of the kinds whose labels have a Judge-Bench form (``Kind.judgebench_form``)."""
    return [k.name for k in _REGISTRY.values() if k.judgebench_form]
