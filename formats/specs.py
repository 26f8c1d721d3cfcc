"""What an imported study file becomes: plain records (:class:`StudySpec` with its
:class:`InputSpec`, :class:`CriterionSpec` and :class:`AnnotationSpec`), the compact index a
first pass keeps of its inputs, and the errors found, each with where it is. Pure (no
Django); the readers in :mod:`formats.bundle` and :mod:`formats.judgebench_study` fill them,
``annotator/importers.py`` checks them against the kinds and the database's limits.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from formats.stream import Rejected

#: The most error messages kept (``Errors.total`` counts every fault).
MAX_ERRORS = 200


@dataclass
class CriterionSpec:
    name: str
    label: str
    scale_min: int = 1
    scale_max: int = 5
    anchors: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)


@dataclass
class InputSpec:
    external_id: str
    text: str
    outputs: dict[str, str]
    where: str
    reference: str = ""
    priority: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The known answer in system order, as the kind reads it (``Item.expected``).
    expected: dict[str, Any] = field(default_factory=dict)
    is_gold: bool = False
    #: The record's ``"gold"`` as written; the study's kind turns it into ``expected``
    #: (``Kind.parse_expected``, see :func:`expected_of`).
    gold: Any = None
    #: Conversation outputs as imported: system name → messages (``outputs`` holds their text).
    messages: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class AnnotationSpec:
    """A label that already exists in the imported dataset."""

    input_id: str
    annotator_key: str
    value: str = ""
    scores: dict[str, Any] = field(default_factory=dict)


@dataclass
class StudySpec:
    options: dict[str, Any]
    systems: list[str]
    #: a list, or :class:`Inputs` that read the file again on each iteration
    inputs: list[InputSpec] | Inputs
    criteria: list[CriterionSpec] = field(default_factory=list)
    annotations: list[AnnotationSpec] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.options["kind"])


class Errors(list[str]):
    """Messages, at most ``MAX_ERRORS``; ``total`` counts every fault found."""

    total = 0

    def __init__(self) -> None:
        super().__init__()
        #: study options refused already (not checked again as a whole)
        self.bad_options: set[str] = set()

    def add(self, message: str) -> None:
        self.total += 1
        if len(self) < MAX_ERRORS:
            self.append(message)

    def raise_if_any(self) -> None:
        if self:
            raise Rejected(list(self))


class Inputs:
    """A file's inputs, read again from the file each time they are iterated."""

    def __init__(self, read: Callable[[], Iterator[InputSpec]], count: int) -> None:
        self._read = read
        self._count = count

    def __iter__(self) -> Iterator[InputSpec]:
        return self._read()

    def __len__(self) -> int:
        return self._count


class Index:
    """What the first pass keeps of each input, compactly: its id, its place (a line, or an
    instance of a Judge-Bench file) and the systems it has outputs for (``-1``: the record
    has a fault already named)."""

    def __init__(self, place: str = "line {}", where: str = "line {} (input '{}')") -> None:
        self.place, self.where = place, where
        self.ids: list[str] = []
        self.places = array("q")
        self.shape_of = array("l")
        self.shapes: dict[tuple[str, ...], int] = {}
        self.gold = False
        #: (where, record) of every record with a ``"gold"`` (checked by the kind later)
        self.golds: list[tuple[str, InputSpec]] = []
        #: (where, systems) of every record with outputs given as conversations
        self.conversations: list[tuple[str, list[str]]] = []
        self.valid = 0
        #: False when the study options could not be read (a broken first line)
        self.options_known = True

    def add(
        self, ident: str, place: int, systems: Iterable[str] | None, gold: bool = False
    ) -> None:
        shape = -1
        if systems is not None:
            shape = self.shapes.setdefault(tuple(systems), len(self.shapes))
            self.valid += 1
        self.ids.append(ident)
        self.places.append(place)
        self.shape_of.append(shape)
        self.gold = self.gold or gold

    def systems(self) -> list[str]:
        """Every system named, in the order of first appearance."""
        return list(dict.fromkeys(name for shape in self.shapes for name in shape))


def line_of(where: str) -> int:
    return int(where.split()[1])


def systems_of(inputs: Iterable[InputSpec]) -> list[str]:
    return list(dict.fromkeys(name for record in inputs for name in record.outputs))


@dataclass
class Config:
    """Study options given beside the file (``--config``, ``--name``, the API's fields)."""

    options: dict[str, Any]
    #: the criteria given beside the file, as given (also among ``options["options"]``,
    #: where the kind validates them); ``None`` when none were
    criteria: list[Any] | None = None
    systems: list[str] | None = None


def assemble(
    options: dict[str, Any],
    criteria: list[CriterionSpec],
    declared: list[str],
    inputs: list[InputSpec] | Inputs,
    annotations: list[AnnotationSpec] | None = None,
    index: Index | None = None,
) -> StudySpec:
    systems = list(declared) or (index.systems() if index else systems_of(inputs))
    return StudySpec(dict(options), systems, inputs, criteria, annotations or [])
