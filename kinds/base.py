"""The interface every task kind implements, and what kinds share.

A *kind* (pairwise, Likert, ranking, error spans …) owns everything that differs between
tasks: the study-line options it accepts, which outputs an item shows and in what order a
worker sees them, how a submitted answer is validated and brought to *system order*, its
worker template, its export columns, how it scores a gold answer, and how its labels become
per-input pair preferences and scores (the one interface through which :mod:`protocol` and
:mod:`analysis` read labels, via ``annotator.selectors.label_rows`` / ``score_rows``).

This package is pure: standard library (plus NumPy/pandas and :mod:`formats`), no Django.
The annotator app calls it with plain data:

* ``opts`` — the study's validated options: every kind setting lives in ``Study.options``
  (answer switches such as ``allow_tie``, criteria, strength …; see
  ``annotator.models.Study.kind_options``);
* ``display_order`` — a permutation of the item's output positions: ``display_order[k]``
  is the position (in system order) of the output shown k-th (left first);
* ``answer`` — what :meth:`Kind.parse_answer` returned, stored as ``Annotation.answer``.

Positions are 0-based indices into the item's outputs in system order (``ItemOutput.position``).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, cast

from formats.judgebench_export import JudgeBenchProperty

__all__ = [
    "ANSWER_SWITCHES",
    "ITEM_SHAPES",
    "AnswerError",
    "Bound",
    "Kind",
    "OptionError",
    "PairPreference",
    "answer_json",
    "once",
    "position_names",
    "preferences_from_scores",
    "shown",
    "switch",
]

#: The study's answer switches a kind may take (:attr:`Kind.answer_switches`).
ANSWER_SWITCHES = ("allow_tie", "allow_both_good", "allow_both_bad")

#: How the adaptive protocol releases and counts a kind's items (:meth:`Kind.item_shape`).
ITEM_SHAPES = ("pair", "scored", "several")

#: (criterion, position i, position j, preference of i over j: 1.0, 0.5 or 0.0), i < j.
PairPreference = tuple[str, int, int, float]


class CommonOptions(TypedDict, total=False):
    """What every kind's ``opts`` may carry beside its own options: the study's
    ``collection`` (``all`` or ``adaptive``) and, while a file is imported, whether it has
    ``gold`` inputs."""

    collection: str
    gold: bool


#: A kind's options type: a :class:`CommonOptions` TypedDict of its own settings.
O = TypeVar("O", bound=CommonOptions)
#: A kind's answer type: a TypedDict of what :meth:`Kind.parse_answer` returns (stored as
#: ``Annotation.answer``), what every method's ``answer`` holds.
A = TypeVar("A", bound=Mapping[str, object])


class OptionError(ValueError):
    """A study's kind options are invalid; ``messages`` lists every problem."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


class AnswerError(ValueError):
    """A worker's answer is invalid; the message is shown to the worker (HTTP 400)."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else "Invalid answer."


def once(value: Any, what: str) -> Any:
    """``value`` as submitted, refused when it was given more than once: a form field sent
    twice reaches a kind as the list of its texts (``annotator.views._posted``), which no
    kind takes as one answer (a list from JSON holds numbers, lists or objects, never
    several texts). ``what`` names the field for the worker ("the ranking", "'Fluency'")."""
    if isinstance(value, list) and len(value) > 1 and all(isinstance(v, str) for v in value):
        raise AnswerError(f"Give one answer for {what}: it was sent {len(value)} times.")
    return value


def shown(value: object, limit: int = 40) -> str:
    """A worker's value quoted in a message, cut to ``limit`` characters: a refusal names
    what was sent without echoing a megabyte of it back."""
    text = str(value)
    return repr(text if len(text) <= limit else text[:limit] + "…")


def answer_json(text: str | bytes, message: str) -> Any:
    """JSON text submitted by a worker, parsed; :class:`AnswerError` with ``message`` when
    it is not JSON, or nests deeper than the parser can follow (``[`` × 1000: a
    ``RecursionError`` is an answer error like any other malformed text, never a 500)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise AnswerError(message) from None


class Kind(Generic[O, A]):
    """Base class of a task kind; one instance per kind module, registered in :mod:`kinds`.
    ``O`` is the kind's options type (a TypedDict), what every method's ``opts`` holds;
    ``A`` its answer type.

    Subclasses set ``name``, ``label``, ``template`` and override what differs. The
    defaults suit a kind whose items show ``outputs_per_item`` outputs of every combination
    of systems and whose answers carry no pair preferences.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    template: ClassVar[str] = ""
    #: What a study of this kind is called in a sentence ("a Likert study").
    noun: ClassVar[str] = ""
    #: Study-line keys this kind accepts beyond the common study options (the importer
    #: passes them to :meth:`validate_options`; they end up in ``Study.options``).
    extra_options: ClassVar[frozenset[str]] = frozenset()
    #: The answer switches (of :data:`ANSWER_SWITCHES`) that mean something for this kind,
    #: each with its default: options of the study (``allow_tie`` …) that the admin shows
    #: as boxes; the others turned on are refused (the kind ignores them). Default: none.
    answer_switches: ClassVar[Mapping[str, bool]] = {}
    #: The kind shows outputs that may be conversations (lists of turns); a kind whose
    #: answers point into an output's text (error spans) sets ``False`` and the importer
    #: refuses conversation outputs for it.
    conversation_outputs: ClassVar[bool] = True
    #: The study report's sections of this kind beyond its properties (names of
    #: ``analysis.sections.BUILDERS``, built from the stored answers).
    report_sections: ClassVar[tuple[str, ...]] = ()
    #: The kind's labels are compared across items by score (Likert, error spans): the
    #: protocol derives a pair's preference from the sign of two outputs' scores.
    scored: ClassVar[bool] = False
    #: How readers outside the platform see an item of this kind: ``"pair"`` (two outputs
    #: and a preference: Judge-Bench pairwise, LLM judges comparing), ``"rating"`` (one
    #: output rated on criteria), or None (no such form yet: those readers refuse it).
    shape: ClassVar[str | None] = None
    #: The adaptive protocol can collect this kind in rounds (``collection: adaptive``):
    #: its labels give per-input pair preferences (or, when :attr:`scored`, scores).
    adaptive: ClassVar[bool] = False
    #: The report reads each item of m outputs as its m(m−1)/2 pairs, each a pairwise item
    #: (``"<item>:<i>-<j>"``) labelled ``A``/``B``/``tie`` from :meth:`pair_preferences`
    #: (ranking), instead of :meth:`report_labels` per item.
    report_by_pair: ClassVar[bool] = False
    #: :meth:`parse_answer` reads the item's output texts (``outputs``: error spans checks
    #: its spans against the text). The server reads them with the answered item only for
    #: such a kind; any other kind is passed ``outputs=()``.
    answer_reads_outputs: ClassVar[bool] = False
    #: The form a Judge-Bench dataset gives the kind's items and labels: ``"pair"`` (two
    #: outputs and a categorical preference) or ``"rating"`` (one output, one property per
    #: criterion); None: the kind has no Judge-Bench form and that export is refused with
    #: the kinds that have one (:func:`kinds.judgebench_kinds`).
    judgebench_form: ClassVar[str | None] = None
    #: An LLM judge rates the kind's items by proposing error spans in the one output
    #: (``annotator.judging``: the judge's spans, also a prefill for workers).
    judge_proposes_spans: ClassVar[bool] = False
    #: The label export's ``scores`` column carries the annotation's scores (Likert: criterion
    #: → value); False when the kind's own columns hold them (error spans: ``score``), so the
    #: export names each value once.
    export_scores: ClassVar[bool] = True

    @property
    def a_noun(self) -> str:
        """The kind's noun with its article, for a sentence ("a ranking", "an error-span")."""
        noun = self.noun or self.name
        return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun

    @property
    def instructions_template(self) -> str:
        """The default instructions' sentence about the task (when the study has none)."""
        return f"kinds/{self.name}_instructions.html"

    def overall_criterion(self, opts: O) -> str:
        """The criterion of the overall preference (the one the protocol counts) of a study
        with options ``opts``. Default: ``preference``."""
        return "preference"

    def item_shape(self, opts: O, n_systems: int) -> str:
        """How the adaptive protocol releases and counts this kind's items (one of
        :data:`ITEM_SHAPES`): ``"scored"`` (:attr:`scored`: an item shows one output; a pair
        of systems gets one label per input, from its two outputs' scores), ``"pair"`` (an
        item shows two outputs and gives their pair a label per annotation) or ``"several"``
        (an item of m > 2 outputs gives each of its m(m−1)/2 pairs a label per annotation)."""
        if self.scored:
            return "scored"
        return "pair" if self.outputs_per_item(opts, n_systems) <= 2 else "several"

    # --- options and items -------------------------------------------------------------
    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> O:
        """The kind's options validated and normalised; raise :class:`OptionError`.
        ``n_systems`` is ``None`` when the number of systems is not known (checks that
        count systems are then left out). Default: a kind without options of its own."""
        return cast(O, {})

    def unknown_options(self, keys: Iterable[str]) -> list[str]:
        """Why each of ``keys`` (a study's option names) that this kind takes no option
        for is refused; answer switches are left to :meth:`unused_switches`."""
        unknown = sorted(set(keys) - self.extra_options - set(ANSWER_SWITCHES))
        return [f"{self.noun or self.name} studies take no '{key}' option" for key in unknown]

    def unused_switches(self, options: Mapping[str, Any]) -> list[str]:
        """The answer switches turned on in ``options`` that this kind has no answer for."""
        return [k for k in ANSWER_SWITCHES if options.get(k) and k not in self.answer_switches]

    def outputs_per_item(self, opts: O, n_systems: int) -> int:
        """How many outputs one item shows."""
        raise NotImplementedError

    def item_groups(self, opts: O, n_systems: int, rng: random.Random) -> list[tuple[int, ...]]:
        """The items of one input: each a tuple of system indices (into the study's system
        order), in the item's system order; ``rng`` draws them where the kind draws. Default:
        every combination."""
        return list(
            itertools.combinations(range(n_systems), self.outputs_per_item(opts, n_systems))
        )

    def display_order(self, n: int, rng: random.Random) -> list[int]:
        """A permutation of ``range(n)``, drawn per assignment."""
        order = list(range(n))
        rng.shuffle(order)
        return order

    # --- the worker's page and answer ----------------------------------------------------
    def context(self, opts: O) -> dict[str, Any]:
        """Extra template context for :attr:`template`, which also gets ``study``,
        ``outputs`` (texts in display order), ``preview`` (controls disabled)."""
        return {}

    def parse_answer(
        self,
        opts: O,
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[str] = (),
    ) -> A:
        """The submitted form/JSON (in display order) validated, as the answer in system
        order (JSON-serialisable, keeping the raw answer); raise :class:`AnswerError`.
        ``outputs``: the item's stored output texts in system order (the server passes them;
        a kind whose answer points into the text, as error spans do, checks it against them)."""
        raise NotImplementedError

    def summary(self, opts: O, answer: A) -> dict[str, Any]:
        """The derived columns of ``Annotation``: ``raw_answer`` (display order), ``value``
        (an overall preference in system order: ``A``/``B``/``tie``/…) and ``scores``
        (criterion → value). Default: the answer's ``raw``, ``value`` and ``scores``."""
        scores = answer.get("scores")
        return {
            "raw_answer": str(answer.get("raw", "") or ""),
            "value": str(answer.get("value", "") or ""),
            "scores": dict(scores) if isinstance(scores, Mapping) else {},
        }

    def answer_from_summary(self, opts: O, value: str, scores: Mapping[str, Any]) -> A:
        """An imported label (``value``/``scores`` in system order, no display order) as an
        answer. Default: ``{"value": …, "scores": …}``."""
        answer: dict[str, Any] = {}
        if value:
            answer["value"] = value
        if scores:
            answer["scores"] = dict(scores)
        return cast(A, answer)

    def simulate_answer(
        self,
        opts: O,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        """A simulated worker's submitted data (display order, as :meth:`parse_answer`
        reads it) and whether it was drawn at random (no truth known). ``qualities``: the
        true quality of each output in system order (``None`` unknown); ``known_range``:
        the lowest and highest true quality of the input's outputs; ``expected``: the
        item's known answer; ``accuracy``: the chance a worker answers a pair right."""
        raise NotImplementedError

    # --- what the labels mean ------------------------------------------------------------
    def pair_preferences(self, opts: O, answer: A) -> list[PairPreference]:
        """The answer's pair preferences, positions in system order with i < j."""
        return []

    def scores(self, opts: O, answer: A) -> dict[str, dict[int, float]]:
        """Criterion → position → numeric score."""
        return {}

    def report_properties(
        self, opts: O, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        """The properties the study report analyses: ``(name, scale, labels, title)`` with
        scale ``pairwise`` (a preference in system order, labels ``A``/``B``/``tie``/…),
        ``ordinal`` or ``categorical``; ``observed``: property → labels present in the data."""
        return []

    def report_labels(self, opts: O, answer: A) -> list[tuple[Any, ...]]:
        """The answer as ``(property, label)`` rows of the report (see
        :meth:`report_properties`), or ``(property, label, raw)`` when a property has its
        own display-order answer (the position-bias test reads it; default: the
        annotation's ``raw_answer``)."""
        return []

    def score_scales(self, opts: O) -> list[tuple[str, float, float]]:
        """``(criterion, lowest, highest)`` of every criterion :meth:`scores` gives, in
        order (the protocol maps them onto the first one's scale). Default: none."""
        return []

    # --- known answers (gold items, qualification questions) ---------------------------
    def parse_expected(
        self, opts: O, gold: Any, *, systems: list[str], outputs: list[str]
    ) -> dict[str, Any]:
        """A known answer as written in the import format (a JSONL record's ``"gold"``, a
        qualification question's ``expected`` in the admin) as the stored expected answer
        in system order, the form :meth:`gold_correct` reads; raise :class:`AnswerError`
        with a readable message on bad input. ``systems``: the names of the item's outputs
        in system order (a qualification question's outputs are named ``A``, ``B``, ``C`` …
        by position, see :func:`position_names`); ``outputs``: their texts. A kind's
        stored form must parse to itself, so a stored answer can be edited and saved again.
        Default: the kind takes no known answers."""
        raise AnswerError(f"a {self.noun or self.name} study takes no known answers")

    def gold_groups(self, opts: O, n_outputs: int) -> list[tuple[int, ...]]:
        """The items of a gold input (its outputs in the order given). Default: as
        :meth:`item_groups` groups them, which must not draw for gold."""
        return self.item_groups(opts, n_outputs, random.Random(0))

    def gold_correct(self, opts: O, expected: Mapping[str, Any], answer: A) -> bool:
        """Whether ``answer`` (what :meth:`parse_answer` returned) matches the known answer
        ``expected`` (what :meth:`parse_expected` returned); both in system order."""
        raise NotImplementedError

    # --- export --------------------------------------------------------------------------
    def judgebench_properties(self, opts: O, question: str) -> list[JudgeBenchProperty]:
        """The properties a Judge-Bench dataset of the kind's labels declares (its
        :attr:`judgebench_form`): ``"pair"``, the preference with the labels the study allows
        in system order; ``"rating"``, one per criterion. ``question``: the study's question.
        Default: none (a kind without a Judge-Bench form)."""
        return []

    def card_settings(self, opts: O) -> dict[str, Any]:
        """What a dataset card of the study's labels states of the kind's options."""
        return {}

    def export_fields(self, opts: O) -> list[str]:
        """The kind's own export columns."""
        return []

    def score_columns(self, opts: O) -> list[str]:
        """The criteria whose scores a CSV export spreads over ``score_<name>`` columns, in
        order. Default: none."""
        return []

    def export_types(self, opts: O) -> dict[str, Any]:
        """The type of each of :meth:`export_fields`, for typed exports (a Hugging Face
        dataset): ``"string"``, ``"int64"``, ``"float64"`` or ``"bool"``; ``[T]`` a list of
        ``T``; ``{key: T, …}`` an object. Default: every column text."""
        return dict.fromkeys(self.export_fields(opts), "string")

    def export_row(
        self,
        opts: O,
        answer: A,
        systems: Sequence[str],
        display_order: Sequence[int],
    ) -> dict[str, Any]:
        """The values of :meth:`export_fields` for one annotation (``systems``: names of
        the item's outputs in system order)."""
        return {}

    def bind(self, opts: O) -> Bound[O, A]:
        """The kind with one study's (or qualification test's) options, as stored (they are
        validated when the study is saved): what the apps call (:class:`Bound`)."""
        return Bound(self, opts)

    def __repr__(self) -> str:
        return f"<kind {self.name}>"


class Bound(Generic[O, A]):
    """A kind bound to one study's options (:meth:`Kind.bind`): each method of the kind
    that reads the options, without them; the kind itself (its flags, ``noun`` …) is
    :attr:`kind`.

    >>> from kinds import get
    >>> get("ranking").bind({"per_item": 3}).outputs_per_item(5)
    3
    """

    def __init__(self, kind: Kind[O, A], opts: O) -> None:
        self.kind = kind
        self.opts = opts

    def overall_criterion(self) -> str:
        return self.kind.overall_criterion(self.opts)

    def item_shape(self, n_systems: int) -> str:
        return self.kind.item_shape(self.opts, n_systems)

    def outputs_per_item(self, n_systems: int) -> int:
        return self.kind.outputs_per_item(self.opts, n_systems)

    def item_groups(self, n_systems: int, rng: random.Random) -> list[tuple[int, ...]]:
        return self.kind.item_groups(self.opts, n_systems, rng)

    def context(self) -> dict[str, Any]:
        return self.kind.context(self.opts)

    def parse_answer(
        self, display_order: Sequence[int], data: Mapping[str, Any], *, outputs: Sequence[str] = ()
    ) -> A:
        return self.kind.parse_answer(self.opts, display_order, data, outputs=outputs)

    def summary(self, answer: A) -> dict[str, Any]:
        return self.kind.summary(self.opts, answer)

    def answer_from_summary(self, value: str, scores: Mapping[str, Any]) -> A:
        return self.kind.answer_from_summary(self.opts, value, scores)

    def simulate_answer(
        self,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        return self.kind.simulate_answer(
            self.opts, display_order, qualities, known_range, expected, rng, accuracy
        )

    def pair_preferences(self, answer: A) -> list[PairPreference]:
        return self.kind.pair_preferences(self.opts, answer)

    def scores(self, answer: A) -> dict[str, dict[int, float]]:
        return self.kind.scores(self.opts, answer)

    def report_properties(
        self, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        return self.kind.report_properties(self.opts, question, observed)

    def report_labels(self, answer: A) -> list[tuple[Any, ...]]:
        return self.kind.report_labels(self.opts, answer)

    def score_scales(self) -> list[tuple[str, float, float]]:
        return self.kind.score_scales(self.opts)

    def parse_expected(
        self, gold: Any, *, systems: list[str], outputs: list[str]
    ) -> dict[str, Any]:
        return self.kind.parse_expected(self.opts, gold, systems=systems, outputs=outputs)

    def gold_groups(self, n_outputs: int) -> list[tuple[int, ...]]:
        return self.kind.gold_groups(self.opts, n_outputs)

    def gold_correct(self, expected: Mapping[str, Any], answer: A) -> bool:
        return self.kind.gold_correct(self.opts, expected, answer)

    def judgebench_properties(self, question: str) -> list[JudgeBenchProperty]:
        return self.kind.judgebench_properties(self.opts, question)

    def card_settings(self) -> dict[str, Any]:
        return self.kind.card_settings(self.opts)

    def export_fields(self) -> list[str]:
        return self.kind.export_fields(self.opts)

    def score_columns(self) -> list[str]:
        return self.kind.score_columns(self.opts)

    def export_types(self) -> dict[str, Any]:
        return self.kind.export_types(self.opts)

    def export_row(
        self, answer: A, systems: Sequence[str], display_order: Sequence[int]
    ) -> dict[str, Any]:
        return self.kind.export_row(self.opts, answer, systems, display_order)

    def __repr__(self) -> str:
        return f"<kind {self.kind.name} bound to {self.opts!r}>"


def switch(kind: Kind[Any, Any], opts: Mapping[str, Any], name: str, errors: list[str]) -> bool:
    """The answer switch ``name`` of ``kind`` as ``opts`` sets it, its default
    (:attr:`Kind.answer_switches`) where it does not; a value other than true or false is
    added to ``errors``."""
    default = kind.answer_switches[name]
    value = opts.get(name, default)
    if isinstance(value, bool):
        return value
    errors.append(f"'{name}' must be true or false")
    return default


def position_names(n: int) -> list[str]:
    """The names of ``n`` outputs that have no system (a qualification question's):
    ``A``, ``B``, ``C`` … by position, then ``A1``, ``B1`` … past 26."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [letters[i % 26] + (str(i // 26) if i >= 26 else "") for i in range(n)]


def preferences_from_scores(a: float, b: float, dead_zone: float = 0.0) -> float:
    """One pair preference from two outputs' scores: 1.0 when ``a`` is higher by more than
    ``dead_zone``, 0.0 when ``b`` is, 0.5 (a draw) otherwise."""
    diff = a - b
    if abs(diff) <= dead_zone:
        return 0.5
    return 1.0 if diff > 0 else 0.0
