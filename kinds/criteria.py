"""Pairwise criteria, graded strength and written reasons (the pairwise kind's options).

A pairwise study may ask several questions about the same two outputs, each a *criterion*:

* ``"criteria": [{"name": "helpful", "label": "Which response is more helpful?"}, …]`` —
  1 to 8 criteria with unique slug names. Without ``criteria`` the study has one *implicit*
  criterion named ``preference`` (the pairwise kind's overall criterion; its question is the
  study's question) and behaves exactly as a pairwise study always did: one answer
  ``left``/``right``/``tie`` (+ ``both_good``, ``both_bad`` where the study allows them)
  submitted as the form field ``answer``, stored as ``{"raw": …, "value": …}``.
* ``"strength": true`` — each criterion is a five-point answer instead:
  ``left>>`` (left much better), ``left>``, ``=``, ``right>``, ``right>>`` in display order,
  stored raw and in system order as ``value`` (``A``/``B``/``tie``) plus ``strength``,
  an integer on −2..2 (+2: A ≫ B, +1: A > B, 0: A = B, −1: B > A, −2: B ≫ A).
* ``"rationale": "none" | "optional" | "required"`` — a text box for the worker's reason,
  at most :data:`RATIONALE_MAX` characters; ``required`` needs one non-space character.

The answer in system order (what :func:`parse_answer` returns, stored as
``Annotation.answer``) of a study with criteria or strength::

    {"criteria": {"helpful": {"raw": "left>>", "value": "B", "strength": -2}, …},
     "raw": "left>>", "value": "B",            # the summary criterion (see below)
     "rationale": "…"}                          # only when the study asks for one

``raw``/``value`` at the top level repeat the *summary criterion* — ``overall`` when the
study declares a criterion of that name, else its first — so ``Annotation.raw_answer``/
``value`` keep meaning "the overall preference" and the adaptive protocol follows it
(:func:`overall_criterion`). ``strength`` is present only when the study asks for it. Both
strong and weak wins count as a win in :func:`pair_preferences`; the strength is kept for
analysis (:func:`report_labels`, ``<name>_strength``) and the export. An answer without
``criteria`` (a study with neither, an imported label ``{"value": "A"}``) counts for the
summary criterion everywhere.

Pure: standard library only; :mod:`kinds.pairwise` calls these functions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from formats import vocab
from formats.labels import LABEL_FIELDS
from kinds.base import AnswerError, OptionError, PairPreference, once, shown

__all__ = [
    "EXPORT_COLUMNS",
    "IMPLICIT",
    "MAX_CRITERIA",
    "PAIRWISE_VALUES",
    "RATIONALE_FIELD",
    "RATIONALE_MAX",
    "RATIONALE_MODES",
    "STRENGTH_ANSWERS",
    "STRENGTH_LABELS",
    "answer_choices",
    "criteria_of",
    "criterion_labels",
    "export_fields",
    "export_row",
    "export_types",
    "field_name",
    "form_rows",
    "gold_correct",
    "normalise",
    "overall_criterion",
    "pair_preferences",
    "parse_answer",
    "parse_expected",
    "report_labels",
    "report_labels_with_raw",
    "report_properties",
    "simulate_form",
    "strength_property",
    "summary_criterion",
    "template_context",
    "uses_form",
    "validate_options",
]

#: The implicit criterion of a study without ``criteria`` (the pairwise kind's overall one).
IMPLICIT = "preference"
#: A declared criterion of this name is the summary criterion.
SUMMARY_NAME = "overall"
MAX_CRITERIA = 8
RATIONALE_MODES = ("none", "optional", "required")
RATIONALE_MAX = 2000
RATIONALE_FIELD = "rationale"
LABEL_MAX = 200
NAME_MAX = 40

#: The five-point answers in display order, left to right, with their signed strength for
#: the *left* output (+2: left much better).
STRENGTH_ANSWERS: tuple[tuple[str, int, str], ...] = (
    ("left>>", 2, "Left is much better"),
    ("left>", 1, "Left is better"),
    ("=", 0, "About the same"),
    ("right>", -1, "Right is better"),
    ("right>>", -2, "Right is much better"),
)
_STRENGTH = {raw: s for raw, s, _ in STRENGTH_ANSWERS}
#: Labels when the two responses are stacked (narrow screens): "Response 1" is the left one.
_NARROW = {
    "left>>": "Response 1 is much better",
    "left>": "Response 1 is better",
    "right>": "Response 2 is better",
    "right>>": "Response 2 is much better",
    "left": "Response 1 is better",
    "right": "Response 2 is better",
}

#: Three-way answers in display order (the study's allow_* flags pick among the last three).
_SIMPLE = (
    ("left", "Left is better"),
    ("right", "Right is better"),
    ("tie", "Tie"),
    ("both_good", "Both good"),
    ("both_bad", "Both bad"),
)
_SIDE_NEUTRAL = frozenset(vocab.SIDE_NEUTRAL)

_SLUG = re.compile(r"^[a-z][a-z0-9_]*$")
#: Names a criterion may not take: the label export's own columns (LABEL_FIELDS and those
#: the kinds add) — a criterion's ``<name>`` column would clash.
EXPORT_COLUMNS = frozenset(
    {*LABEL_FIELDS, "answer", RATIONALE_FIELD}
    | {"systems", "display_order", "ranking"}  # ranking
    | {"score", "spans", "minor_errors", "major_errors", "mqm_errors"}  # error spans
    | {"input", "input_messages", "outputs"}  # the Hugging Face export's texts
)


# --- options -------------------------------------------------------------------------------
def validate_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """``criteria``, ``strength`` and ``rationale`` of a pairwise study line validated and
    normalised; raise :class:`OptionError` listing every problem.

    Absent (or empty) ``criteria`` normalises to ``[]`` (the implicit ``preference`` criterion, see
    :func:`criteria_of`); labels default to the name.

    >>> validate_options({"criteria": [{"name": "helpful", "label": "Helpful?"}], "strength": True})
    {'criteria': [{'name': 'helpful', 'label': 'Helpful?'}], 'strength': True, 'rationale': 'none'}
    """
    errors: list[str] = []
    criteria = _criteria(opts.get("criteria"), errors)
    strength = opts.get("strength", False)
    if not isinstance(strength, bool):
        errors.append(f"strength must be true or false, got {strength!r}")
    rationale = opts.get("rationale", "none")
    if rationale not in RATIONALE_MODES:
        errors.append(f"rationale must be one of {', '.join(RATIONALE_MODES)}, got {rationale!r}")
    if errors:
        raise OptionError(errors)
    return {"criteria": criteria, "strength": strength, "rationale": rationale}


def _criteria(value: Any, errors: list[str]) -> list[dict[str, str]]:
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        errors.append(f"criteria must be a list of objects with name and label, got {value!r}")
        return []
    if len(value) > MAX_CRITERIA:
        errors.append(f"criteria: at most {MAX_CRITERIA} criteria, got {len(value)}")
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for k, c in enumerate(value, 1):
        where = f"criteria[{k}]"
        if not isinstance(c, dict):
            errors.append(f"{where} must be an object with name and label, got {c!r}")
            continue
        extra = sorted(set(c) - {"name", "label"})
        if extra:
            errors.append(f"{where}: unknown keys {', '.join(extra)} (allowed: name, label)")
        name, label = c.get("name"), c.get("label", c.get("name"))
        if not isinstance(name, str) or not _SLUG.match(name) or len(name) > NAME_MAX:
            errors.append(
                f"{where}: name must be lower-case letters, digits and _ starting with a letter, "
                f"at most {NAME_MAX} characters, got {name!r}"
            )
            continue
        if name in EXPORT_COLUMNS or name.startswith("score_"):
            errors.append(f"{where}: name {name!r} is reserved (an export column); choose another")
        if name in seen:
            errors.append(f"{where}: name {name!r} appears twice")
        if not isinstance(label, str) or not label.strip() or len(label) > LABEL_MAX:
            errors.append(
                f"{where}: label must be a text of 1 to {LABEL_MAX} characters, got {label!r}"
            )
            continue
        seen.add(name)
        out.append({"name": name, "label": label.strip()})
    names = {c["name"] for c in out}
    clashes = sorted(
        n for n in names if n.endswith("_strength") and n[: -len("_strength")] in names
    )
    if clashes:
        errors.append(
            f"criteria: {', '.join(clashes)} would clash with another criterion's strength column"
        )
    return out


def criteria_of(opts: Mapping[str, Any]) -> list[dict[str, str]]:
    """The study's criteria: its declared ones, or the implicit ``preference`` criterion
    (label empty: the page shows the study's question instead)."""
    return list(opts.get("criteria") or [{"name": IMPLICIT, "label": ""}])


def summary_criterion(opts: Mapping[str, Any]) -> str:
    """The criterion whose answer fills ``Annotation.raw_answer``/``value``: ``overall`` if
    the study declares one, else its first criterion (``preference`` without criteria)."""
    names = [c["name"] for c in criteria_of(opts)]
    return SUMMARY_NAME if SUMMARY_NAME in names else names[0]


def overall_criterion(opts: Mapping[str, Any]) -> str:
    """The criterion of :func:`pair_preferences` the adaptive protocol counts: the summary
    criterion (``preference`` for a study without criteria, as for every pairwise study)."""
    return summary_criterion(opts)


def uses_form(opts: Mapping[str, Any]) -> bool:
    """Whether the page needs the criteria form (radio rows, a submit button) rather than
    today's one row of answer buttons: declared criteria, strength or a rationale."""
    return bool(opts.get("criteria")) or bool(opts.get("strength")) or _mode(opts) != "none"


def field_name(opts: Mapping[str, Any], criterion: str) -> str:
    """The form field of one criterion's answer: ``answer`` for the implicit criterion (as
    today), else ``answer-<name>``."""
    return "answer" if not opts.get("criteria") else f"answer-{criterion}"


def answer_choices(opts: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The display-order answers of one criterion, ``(value, label)`` in button order.

    ``opts`` may carry the study's ``allow_tie`` (default true), ``allow_both_good`` and
    ``allow_both_bad`` (default false). With ``strength`` the five points (``=`` only when
    ties are allowed), then both_good/both_bad where allowed."""
    allowed = {
        "tie": opts.get("allow_tie", True),
        "both_good": opts.get("allow_both_good", False),
        "both_bad": opts.get("allow_both_bad", False),
    }
    if opts.get("strength"):
        points = [
            (raw, label) for raw, _, label in STRENGTH_ANSWERS if raw != "=" or allowed["tie"]
        ]
        return points + [
            (v, lab) for v, lab in _SIMPLE if v in ("both_good", "both_bad") and allowed[v]
        ]
    return [(v, lab) for v, lab in _SIMPLE if allowed.get(v, True)]


# --- answers -------------------------------------------------------------------------------
class PairChoice(TypedDict, total=False):
    """One criterion's answer: the display-order ``raw``, the preference in system order
    (``value``: ``A``, ``B``, ``tie`` …) and, with ``strength`` on, its signed strength."""

    raw: str
    value: str
    strength: int


class PairwiseAnswer(TypedDict, total=False):
    """A pairwise answer (:func:`parse_answer`): the summary criterion's ``raw`` and ``value``,
    each criterion's :class:`PairChoice` when the study asks several or a strength, the
    written ``rationale``; an imported label may carry ``scores``."""

    raw: str
    value: str
    criteria: dict[str, PairChoice]
    rationale: str
    scores: dict[str, Any]


def normalise(raw: str, display_order: Sequence[int], strength: bool) -> PairChoice:
    """One criterion's display-order answer in system order.

    >>> normalise("left", [1, 0], strength=False)
    {'raw': 'left', 'value': 'B'}
    >>> normalise("right>>", [1, 0], strength=True)
    {'raw': 'right>>', 'value': 'A', 'strength': 2}
    """
    left_is_a = _left_is_a(display_order)
    if raw in _SIDE_NEUTRAL:
        out: PairChoice = {"raw": raw, "value": raw}
        if strength:
            out["strength"] = 0
        return out
    if strength:
        s = _STRENGTH[raw] if left_is_a else -_STRENGTH[raw]
        return {"raw": raw, "value": "A" if s > 0 else "B" if s < 0 else "tie", "strength": s}
    shown_left, shown_right = ("A", "B") if left_is_a else ("B", "A")
    return {"raw": raw, "value": shown_left if raw == "left" else shown_right}


def parse_answer(
    opts: Mapping[str, Any], display_order: Sequence[int], data: Mapping[str, Any]
) -> PairwiseAnswer:
    """The submitted form or JSON (display order) as the answer in system order; raise
    :class:`AnswerError` on anything missing or not offered. ``opts`` holds the study's
    validated options plus ``allow_tie``/``allow_both_good``/``allow_both_bad``.

    >>> opts = {"criteria": [{"name": "helpful", "label": "?"}, {"name": "safe", "label": "?"}],
    ...         "strength": True, "rationale": "optional"}
    >>> form = {"answer-helpful": "left>", "answer-safe": "=", "rationale": " ok "}
    >>> parse_answer(opts, [1, 0], form)  # doctest: +NORMALIZE_WHITESPACE
    {'criteria': {'helpful': {'raw': 'left>', 'value': 'B', 'strength': -1},
                  'safe': {'raw': '=', 'value': 'tie', 'strength': 0}},
     'raw': 'left>', 'value': 'B', 'rationale': 'ok'}
    """
    _left_is_a(display_order)  # a bad display order is a server bug: ValueError, not 400
    strength = bool(opts.get("strength"))
    offered = {v for v, _ in answer_choices(opts)}
    answers: dict[str, PairChoice] = {}
    for c in criteria_of(opts):
        field = field_name(opts, c["name"])
        what = f"“{c['label']}”" if c["label"] else "which response is better"
        raw = _one(data, field, what)
        if raw is None or raw == "":
            raise AnswerError(f"Please answer {what}.")
        if raw not in offered:
            raise AnswerError(f"Unknown answer {shown(raw)} for {field}.")
        answers[c["name"]] = normalise(raw, display_order, strength)
    summary = answers[summary_criterion(opts)]
    out: PairwiseAnswer = {"raw": summary["raw"], "value": summary["value"]}
    if opts.get("criteria") or strength:
        out = {"criteria": answers} | out
    mode = _mode(opts)
    text = _one(data, RATIONALE_FIELD, "the reason")
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if mode == "none":
        if text:
            raise AnswerError("This study takes no written reason.")
        return out
    if len(text) > RATIONALE_MAX:
        raise AnswerError(f"The reason is {len(text)} characters long; at most {RATIONALE_MAX}.")
    if "\x00" in text:  # no text column (PostgreSQL's jsonb included) stores a NUL
        raise AnswerError("The reason holds a NUL character; remove it.")
    if mode == "required" and not text:
        raise AnswerError("Please write a short reason for your answer.")
    out["rationale"] = text
    return out


def pair_preferences(opts: Mapping[str, Any], answer: Mapping[str, Any]) -> list[PairPreference]:
    """One pair preference per criterion, positions 0 (A) and 1 (B): 1.0 when A won (weakly
    or strongly), 0.0 when B won, 0.5 for tie/both_good/both_bad.

    An answer without ``criteria`` counts for the summary criterion."""
    per = _per_criterion(opts, answer)
    out: list[PairPreference] = []
    for c in criteria_of(opts):
        value = (per.get(c["name"]) or {}).get("value")
        if value in ("A", "B") or value in _SIDE_NEUTRAL:
            out.append((c["name"], 0, 1, 1.0 if value == "A" else 0.0 if value == "B" else 0.5))
    return out


def criterion_labels(opts: Mapping[str, Any], answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per answered criterion for analysis: ``criterion``, ``label`` (system order:
    A/B/tie/both_good/both_bad), ``raw`` (display order, ``None`` for an imported label),
    ``strength`` (−2..2 in system order, ``None`` without strength).

    An answer without ``criteria`` (an imported label) counts for the summary criterion.

    >>> criterion_labels({"strength": True}, {"criteria": {"preference": {"raw": "left>",
    ...     "value": "B", "strength": -1}}, "raw": "left>", "value": "B"})
    [{'criterion': 'preference', 'label': 'B', 'raw': 'left>', 'strength': -1}]
    """
    per = _per_criterion(opts, answer)
    out = []
    for c in criteria_of(opts):
        got = per.get(c["name"]) or {}
        if got.get("value") in ("A", "B") or got.get("value") in _SIDE_NEUTRAL:
            out.append(
                {
                    "criterion": c["name"],
                    "label": got["value"],
                    "raw": got.get("raw") or None,
                    "strength": got.get("strength"),
                }
            )
    return out


#: A study's pairwise labels in report order (``analysis.counts.PAIRWISE_LABELS``).
PAIRWISE_VALUES = vocab.PAIRWISE_LABELS
#: The ordinal labels of a ``<name>_strength`` report property.
STRENGTH_LABELS = (-2, -1, 0, 1, 2)
_VALUE_OF_RAW = {"left": "A", "right": "B", "left>>": "A", "left>": "A", "=": "tie"}
_VALUE_OF_RAW |= {"right>": "B", "right>>": "B"}


def strength_property(criterion: str) -> str:
    """The report property (and export column) of a criterion's strength."""
    return f"{criterion}_strength"


def report_properties(
    opts: Mapping[str, Any], question: str, observed: Mapping[str, set[Any]]
) -> list[tuple[str, str, tuple[Any, ...], str]]:
    """The report's properties (``Kind.report_properties``): per criterion ``(name,
    "pairwise", labels, title)`` — labels the ones a worker can give plus any observed, in
    report order — then, with strength, ``(<name>_strength, "ordinal", −2..2, title)``.

    >>> report_properties({"strength": True}, "Better?", {})  # doctest: +NORMALIZE_WHITESPACE
    [('preference', 'pairwise', ('A', 'B', 'tie'), 'Better?'),
     ('preference_strength', 'ordinal', (-2, -1, 0, 1, 2),
      'Better? (strength: +2 A much better … −2 B much better)')]
    """
    allowed = {_VALUE_OF_RAW.get(v, v) for v, _ in answer_choices(opts)}
    props: list[tuple[str, str, tuple[Any, ...], str]] = []
    for c in criteria_of(opts):
        seen = allowed | {str(x) for x in observed.get(c["name"], ())}
        title = c["label"] or question
        props.append((c["name"], "pairwise", tuple(x for x in PAIRWISE_VALUES if x in seen), title))
        if opts.get("strength"):
            note = "strength: +2 A much better … −2 B much better"
            title_s = f"{title} ({note})" if title else f"{c['name']} ({note})"
            props.append((strength_property(c["name"]), "ordinal", STRENGTH_LABELS, title_s))
    return props


def report_labels(opts: Mapping[str, Any], answer: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The answer as ``(property, label)`` rows of the report (``Kind.report_labels``): each
    criterion's value (system order) and, where given, its strength."""
    return [(prop, label) for prop, label, _ in report_labels_with_raw(opts, answer)]


def report_labels_with_raw(
    opts: Mapping[str, Any], answer: Mapping[str, Any]
) -> list[tuple[str, Any, str | None]]:
    """:func:`report_labels` with each criterion's own display-order answer (``None`` for a
    strength, whose position bias is its criterion's), so that the report's position-bias
    test reads every criterion's side rather than the summary's ``raw_answer``.

    >>> report_labels_with_raw({"criteria": [{"name": "a", "label": "A?"}], "strength": True},
    ...     {"criteria": {"a": {"raw": "right>>", "value": "B", "strength": -2}}})
    [('a', 'B', 'right>>'), ('a_strength', -2, None)]
    """
    out: list[tuple[str, Any, str | None]] = []
    for row in criterion_labels(opts, answer):
        out.append((row["criterion"], row["label"], row["raw"]))
        if row["strength"] is not None:
            out.append((strength_property(row["criterion"]), int(row["strength"]), None))
    return out


def gold_correct(
    opts: Mapping[str, Any], expected: Mapping[str, Any], answer: Mapping[str, Any]
) -> bool:
    """Whether an answer matches a known one (both system order). ``{"value": "A"}`` checks
    the summary criterion, as gold items always did; ``{"criteria": {"safe": "B", …}}``
    checks each criterion named. A strong and a weak win are the same side.

    >>> gold_correct({}, {"value": "A"}, {"raw": "left", "value": "A"})
    True
    """
    per = answer.get("criteria") or {}
    wanted = expected.get("criteria")
    if wanted:
        return all((per.get(name) or {}).get("value") == value for name, value in wanted.items())
    return bool(expected.get("value")) and answer.get("value") == expected.get("value")


def parse_expected(opts: Mapping[str, Any], gold: Any, systems: Sequence[str]) -> dict[str, Any]:
    """A known answer as written in the import format, in system order (``systems``: the
    item's two system names in system order); raise :class:`AnswerError`.

    ``gold`` names the better system (or ``"tie"``) for the summary criterion, as gold items
    always did, or maps criteria to such names: ``{"helpful": "sys-b", "safe": "tie"}``
    (every name a declared criterion; naming the summary criterion also sets ``value``).

    >>> two = {"criteria": [{"name": "helpful", "label": "?"}, {"name": "safe", "label": "?"}]}
    >>> parse_expected(two, {"safe": "m2"}, ["m1", "m2"])
    {'criteria': {'safe': 'B'}}
    >>> parse_expected(two, "m1", ["m1", "m2"])
    {'value': 'A'}
    """
    names = list(systems)
    if len(names) != 2:
        raise AnswerError("a pairwise known answer needs exactly two outputs")
    side = {names[0]: "A", names[1]: "B", "tie": "tie"}

    def one(value: Any, what: str) -> str:
        if not isinstance(value, str) or value not in side:
            raise AnswerError(
                f"{what} names the better output ({names[0]!r}, {names[1]!r}) or 'tie'"
            )
        return side[value]

    if not isinstance(gold, dict):
        return {"value": one(gold, "'gold'")}
    declared = [c["name"] for c in criteria_of(opts)]
    unknown = sorted(set(gold) - set(declared))
    if unknown or not gold:
        raise AnswerError(
            f"'gold' maps criteria ({', '.join(declared)}) to the better output; "
            f"unknown: {', '.join(map(str, unknown)) or 'none given'}"
        )
    per = {name: one(gold[name], f"'gold' of {name!r}") for name in declared if name in gold}
    out: dict[str, Any] = {"criteria": per}
    if summary_criterion(opts) in per:
        out["value"] = per[summary_criterion(opts)]
    return out


def simulate_form(
    opts: Mapping[str, Any],
    display_order: Sequence[int],
    known: str | None,
    rng: random.Random,
    accuracy: float,
) -> dict[str, str]:
    """A simulated worker's form (display order) for every criterion, for ``simulate_crowd``
    and the demo: the side of ``known`` (system order ``A``/``B``/``tie``; ``None``: answer
    at random) with chance ``accuracy``, strong or weak at random with strength, and a reason
    when the study requires one. Every criterion follows the same truth."""
    left_is_a = _left_is_a(display_order)
    offered = [v for v, _ in answer_choices(opts)]
    strength = bool(opts.get("strength"))
    form: dict[str, str] = {}
    for c in criteria_of(opts):
        if known is None:
            raw = rng.choice(offered)
        elif known == "tie" and ("=" if strength else "tie") in offered:
            raw = "=" if strength else "tie"
        else:
            a_better = known == "A" if known in ("A", "B") else rng.random() < 0.5
            if rng.random() > accuracy:
                a_better = not a_better
            side = "left" if a_better == left_is_a else "right"
            raw = side + (">>" if rng.random() < 0.5 else ">") if strength else side
        form[field_name(opts, c["name"])] = raw
    if _mode(opts) == "required":
        form[RATIONALE_FIELD] = "Simulated reason."
    return form


# --- export --------------------------------------------------------------------------------
def export_fields(opts: Mapping[str, Any]) -> list[str]:
    """The criteria's export columns: ``<name>`` (A/B/tie/… in system order) and, with
    strength, ``<name>_strength`` (−2..2, +2: A ≫ B) per *declared* criterion, then
    ``rationale`` when the study asks for one. The implicit criterion adds no column of its
    own (it is the export's ``label``) except its strength (``preference_strength``)."""
    fields: list[str] = []
    for c in criteria_of(opts):
        if opts.get("criteria"):
            fields.append(c["name"])
        if opts.get("strength"):
            fields.append(f"{c['name']}_strength")
    if _mode(opts) != "none":
        fields.append(RATIONALE_FIELD)
    return fields


def export_types(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The type of each of :func:`export_fields` (see ``Kind.export_types``): a criterion's
    label is text, its strength a whole number, the rationale text."""
    types: dict[str, Any] = {}
    for c in criteria_of(opts):
        if opts.get("criteria"):
            types[c["name"]] = "string"
        if opts.get("strength"):
            types[f"{c['name']}_strength"] = "int64"
    if _mode(opts) != "none":
        types[RATIONALE_FIELD] = "string"
    return types


def export_row(opts: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """The values of :func:`export_fields` for one answer (``None`` where it has none, e.g.
    an imported label)."""
    per = _per_criterion(opts, answer)
    row: dict[str, Any] = {}
    for c in criteria_of(opts):
        got = per.get(c["name"]) or {}
        if opts.get("criteria"):
            row[c["name"]] = got.get("value")
        if opts.get("strength"):
            row[f"{c['name']}_strength"] = got.get("strength")
    if _mode(opts) != "none":
        row[RATIONALE_FIELD] = answer.get(RATIONALE_FIELD)
    return row


# --- the page ------------------------------------------------------------------------------
def form_rows(opts: Mapping[str, Any], question: str = "") -> list[dict[str, Any]]:
    """Context for ``kinds/_criteria.html``: per criterion its field, label (the study's
    question for the implicit one) and choices ``{"value", "label", "narrow", "key"}`` (``narrow``:
    the label when the responses are stacked; ``key``: the number key choosing it)."""
    choices = [
        {"value": v, "label": lab, "narrow": _NARROW.get(v, lab), "key": str(k)}
        for k, (v, lab) in enumerate(answer_choices(opts), 1)
    ]
    return [
        {
            "name": c["name"],
            "field": field_name(opts, c["name"]),
            "label": c["label"] or question or "Which response is better?",
            "implicit": not c["label"],
            "choices": choices,
        }
        for c in criteria_of(opts)
    ]


def template_context(
    opts: Mapping[str, Any], question: str = "", disabled: bool = False
) -> dict[str, Any]:
    """The context of ``kinds/_criteria.html`` (``disabled``: the preview's inert form)."""
    return {
        "rows": form_rows(opts, question),
        "strength": bool(opts.get("strength")),
        "rationale": _mode(opts),
        "rationale_max": RATIONALE_MAX,
        "disabled": disabled,
    }


def _per_criterion(opts: Mapping[str, Any], answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """Criterion → its answer; an answer without ``criteria`` is the summary criterion's."""
    per: Mapping[str, Any] | None = answer.get("criteria")
    if per:
        return per
    return {summary_criterion(opts): {"raw": answer.get("raw"), "value": answer.get("value")}}


def _mode(opts: Mapping[str, Any]) -> str:
    return str(opts.get("rationale") or "none")


def _left_is_a(display_order: Sequence[int]) -> bool:
    order = list(display_order)
    if order not in ([0, 1], [1, 0]):
        raise ValueError(f"a pairwise display order is [0, 1] or [1, 0], got {order!r}")
    return order == [0, 1]


def _one(data: Mapping[str, Any], key: str, what: str = "") -> Any:
    """One submitted value: a form field given once or a JSON value; a field sent more
    than once (``what`` names it for the worker) and a non-string JSON value are refused."""
    value = once(data.get(key), what or key)
    if value is not None and not isinstance(value, str):
        raise AnswerError(f"{key} must be text.")
    return value
