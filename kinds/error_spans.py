"""Error span annotation (ESA; Kocmi et al. 2024, "Error Span Annotation: A Balanced Approach for
Human Evaluation of Machine Translation", WMT 2024): the worker marks the error spans of one
output, each minor or major (and, when the study lists categories, optionally one category),
then scores the output 0-100.

Study line options: ``"categories": [str, …]`` (optional, at most 20, each 1-50 characters,
distinct) and ``"max_spans"`` (1-100, default 100).

Offsets are Python string indexes (Unicode code points) into the output text: a span is
``output[start:end]``, ``0 <= start < end <= len(output)``, and carries that text as ``text``
(checked), so an export can be read without the outputs. Spans may touch but not overlap.

Answer stored (system order; one output, so display order ``[0]`` is also system order)::

    {"spans": [{"start": 4, "end": 9, "severity": "major", "category": None, "text": "…"}],
     "score": 70}

spans sorted by ``start``; an imported label (a score only) has ``"spans": None``.
``parse_answer`` needs the output text, passed by the server as the keyword argument
``outputs`` (the item's output texts in system order), never taken from the worker's data.
The form posts ``spans`` (JSON text) and ``score``.

A known answer (gold item, qualification question) is ``{"spans": [...], "score": 70}`` with
optional ``"score_tolerance"`` (default 10), ``"char_tolerance"`` (default 2: how far each
boundary may be off) and ``"extra"`` (``"none"``, ``"minor"`` (default) or ``"any"``: which
spans the worker may mark beyond the known ones); ``parse_expected`` validates it against the
output, :meth:`ErrorSpans.gold_correct` scores an answer against it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, TypeGuard

from kinds import span_prefill
from kinds.base import (
    AnswerError,
    CommonOptions,
    Kind,
    OptionError,
    answer_json,
    once,
    shown,
)

__all__ = [
    "CATEGORY_MAX_CHARS",
    "EXTRA_RULES",
    "KIND",
    "MAX_CATEGORIES",
    "MAX_SPANS",
    "MQM_WEIGHTS",
    "SEVERITIES",
    "ErrorSpans",
    "mqm_weighted_errors",
    "parse_expected",
]

SEVERITIES = ("minor", "major")
#: MQM weights of a span's severity (Freitag et al. 2021, "Experts, Errors, and Context",
#: as ESA weighs its spans: minor 1, major 5).
MQM_WEIGHTS = {"minor": 1.0, "major": 5.0}
MAX_SPANS = 100
MAX_CATEGORIES = 20
CATEGORY_MAX_CHARS = 50
SCORE_MIN, SCORE_MAX = 0, 100
OPTION_KEYS = ("categories", "max_spans", *span_prefill.OPTION_KEYS)
SPAN_KEYS = ("start", "end", "severity", "category", "text")
EXTRA_RULES = ("none", "minor", "any")
DEFAULT_SCORE_TOLERANCE = 10
#: Standard deviation (score points) of a simulated worker's score around the true quality.
SIMULATED_NOISE = 10.0
#: The report's property of the score and its title.
SCORE_PROPERTY = "score"
DEFAULT_CHAR_TOLERANCE = 2


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _validate_categories(raw: object, errors: list[str]) -> list[str]:
    if not isinstance(raw, list) or not raw:
        errors.append("categories must be a non-empty list of strings")
        return []
    if len(raw) > MAX_CATEGORIES:
        errors.append(f"categories: at most {MAX_CATEGORIES}, got {len(raw)}")
    out: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(raw):
        if not isinstance(c, str) or not c.strip():
            errors.append(f"categories[{i}] must be a non-empty string")
            continue
        c = c.strip()
        if len(c) > CATEGORY_MAX_CHARS:
            errors.append(f"categories[{i}] is longer than {CATEGORY_MAX_CHARS} characters")
        if c.casefold() in seen:
            errors.append(f"categories[{i}] {c!r} is listed twice")
        seen.add(c.casefold())
        out.append(c)
    return out


def _prefilled(opts: Mapping[str, Any]) -> bool:
    return opts.get("prefill_spans") == "on"


def output_text(output: object) -> str:
    """The text spans index into: error spans need a plain-text output (not a conversation)."""
    if not isinstance(output, str):
        raise ValueError("an error_spans study needs text outputs, not conversations")
    return output


def _load_spans(raw: object, limit: int) -> list[Any]:
    raw = once(raw, "the error spans")
    if isinstance(raw, str):
        if len(raw) > limit:
            raise AnswerError("the spans are too long")
        raw = answer_json(raw, "spans must be a JSON list")
    if not isinstance(raw, list):
        raise AnswerError("spans must be a list")
    return raw


def _parse_spans(
    raw: object, text: str, categories: Sequence[str], max_spans: int
) -> list[dict[str, Any]]:
    """Validated spans sorted by start (see the module docstring); ``AnswerError`` otherwise."""
    spans = _load_spans(raw, 12 * len(text) + 300 * MAX_SPANS)
    if len(spans) > max_spans:
        raise AnswerError(f"at most {max_spans} error spans, got {len(spans)}")
    out = []
    for n, span in enumerate(spans, 1):
        if not isinstance(span, Mapping):
            raise AnswerError(f"span {n} must be an object")
        extra = sorted(set(span) - set(SPAN_KEYS))
        if extra:
            raise AnswerError(f"span {n}: unknown field {shown(extra[0])}")
        start, end = span.get("start"), span.get("end")
        if not (_is_int(start) and _is_int(end)):
            raise AnswerError(f"span {n}: start and end must be integers")
        if not 0 <= start < end <= len(text):
            raise AnswerError(
                f"span {n}: needs 0 <= start < end <= {len(text)}, got {start} and {end}"
            )
        severity = span.get("severity")
        if severity not in SEVERITIES:
            raise AnswerError(f"span {n}: severity must be minor or major")
        category = span.get("category")
        if category in (None, ""):
            category = None
        elif not categories:
            raise AnswerError(f"span {n}: this study has no categories")
        elif category not in categories:
            raise AnswerError(f"span {n}: unknown category {shown(category, 50)}")
        if span.get("text") != text[start:end]:
            raise AnswerError(f"span {n}: text does not match the output at {start}-{end}")
        out.append(
            {
                "start": start,
                "end": end,
                "severity": severity,
                "category": category,
                "text": text[start:end],
            }
        )
    out.sort(key=lambda s: s["start"])
    for a, b in zip(out, out[1:], strict=False):
        if b["start"] < a["end"]:
            raise AnswerError(f"spans {a['start']}-{a['end']} and {b['start']}-{b['end']} overlap")
    return out


def _parse_score(raw: object) -> int:
    raw = once(raw, "the score")
    if isinstance(raw, str):
        raw = raw.strip()
        if not raw:
            raise AnswerError("give the response a score from 0 to 100")
        if not raw.isascii() or not raw.isdigit():
            raise AnswerError("the score must be a whole number from 0 to 100")
        if len(raw.lstrip("0")) > 3:  # past 100, and past what int() reads (4300 digits)
            raise AnswerError(f"the score must be between 0 and 100, got {raw[:10]}…")
        raw = int(raw)
    if not _is_int(raw):
        raise AnswerError("the score must be a whole number from 0 to 100")
    if not SCORE_MIN <= raw <= SCORE_MAX:
        raise AnswerError(f"the score must be between 0 and 100, got {raw}")
    return raw


def mqm_weighted_errors(spans: Sequence[Mapping[str, Any]]) -> float:
    """Sum of the spans' MQM weights, minor 1 and major 5 (Freitag et al. 2021)."""
    return float(sum(MQM_WEIGHTS[s["severity"]] for s in spans))


def parse_expected(
    opts: Mapping[str, Any],
    gold: object,
    *,
    systems: Sequence[str] = (),
    outputs: Sequence[object],
) -> dict[str, Any]:
    """A known answer validated against the item's output (:class:`AnswerError` with the
    problem): ``spans`` as in an answer, ``score`` 0-100 (optional), ``score_tolerance``
    (0-100), ``char_tolerance`` (0-1000), ``extra`` (``none``/``minor``/``any``). The stored
    form parses to itself."""
    if not isinstance(gold, Mapping):
        raise AnswerError("the known answer must be an object")
    allowed = {"spans", "score", "score_tolerance", "char_tolerance", "extra"}
    unknown = sorted(set(gold) - allowed)
    if unknown:
        raise AnswerError(f"known answer: unknown field {unknown[0]!r}")
    if len(outputs) != 1 or not isinstance(outputs[0], str):
        raise AnswerError("an error_spans known answer is for one text output")
    text = outputs[0]
    spans = _parse_spans(
        gold.get("spans", []), text, opts.get("categories", []), opts.get("max_spans", 100)
    )
    score = gold.get("score")
    out: dict[str, Any] = {
        "spans": spans,
        "score": None if score is None else _parse_score(score),
        "score_tolerance": gold.get("score_tolerance", DEFAULT_SCORE_TOLERANCE),
        "char_tolerance": gold.get("char_tolerance", DEFAULT_CHAR_TOLERANCE),
        "extra": gold.get("extra", "minor"),
    }
    if not (_is_int(out["score_tolerance"]) and 0 <= out["score_tolerance"] <= 100):
        raise AnswerError("score_tolerance must be an integer from 0 to 100")
    if not (_is_int(out["char_tolerance"]) and 0 <= out["char_tolerance"] <= 1000):
        raise AnswerError("char_tolerance must be an integer from 0 to 1000")
    if out["extra"] not in EXTRA_RULES:
        raise AnswerError(f"extra must be one of {', '.join(EXTRA_RULES)}")
    return out


def _match(
    known: Sequence[Mapping[str, Any]], given: Sequence[Mapping[str, Any]], tol: int
) -> list[int | None]:
    """Maximum one-to-one matching of known to given spans (same severity, each boundary within
    ``tol`` characters; ``scipy.sparse.csgraph.maximum_bipartite_matching``); ``result[i]`` is
    the given span matched to known span ``i`` or None."""

    def fits(k: Mapping[str, Any], g: Mapping[str, Any]) -> bool:
        return bool(
            k["severity"] == g["severity"]
            and abs(k["start"] - g["start"]) <= tol
            and abs(k["end"] - g["end"]) <= tol
        )

    edges = [(i, j) for i, k in enumerate(known) for j, g in enumerate(given) if fits(k, g)]
    if not edges:
        return [None] * len(known)
    from scipy.sparse import csr_array  # imported here: only gold answers need it
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rows, cols = zip(*edges, strict=True)
    graph = csr_array(([1] * len(edges), (rows, cols)), shape=(len(known), len(given)))
    columns = maximum_bipartite_matching(graph, perm_type="column")
    return [int(j) if j >= 0 else None for j in columns]


class ErrorSpanOptions(CommonOptions, span_prefill.PrefillOptions, total=False):
    """An error-span study's settings (``Study.options``; the prefill ones are
    :mod:`kinds.span_prefill`'s)."""

    categories: list[str]
    max_spans: int


class ErrorSpanAnswer(TypedDict, total=False):
    """An error-span answer: the ``score`` (0–100) and the marked ``spans`` (``None``: an
    imported score whose spans were not recorded); with prefill, the suggestions the worker
    ``deleted`` and the ``prefill`` state the item showed (:mod:`kinds.span_prefill`)."""

    score: int
    spans: list[dict[str, Any]] | None
    deleted: list[dict[str, Any]]
    prefill: str


class ErrorSpans(Kind[ErrorSpanOptions, ErrorSpanAnswer]):
    """The error-span kind (see the module docstring)."""

    name = "error_spans"
    label = "Error spans (ESA)"
    conversation_outputs = False
    report_sections = ("error_spans",)
    noun = "error-span"
    template = "kinds/error_spans.html"
    extra_options = frozenset(OPTION_KEYS)
    scored = True
    adaptive = True
    answer_reads_outputs = True
    #: ``run_judge`` asks a judge for proposed error spans (annotator.judging).
    judge_proposes_spans = True
    export_scores = False  # the score is the export's own ``score`` column

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> ErrorSpanOptions:
        """``categories`` and ``max_spans`` checked (the study's common options pass through
        untouched); every problem in one ``OptionError``."""
        errors: list[str] = []
        out: ErrorSpanOptions = {"categories": [], "max_spans": MAX_SPANS}
        if opts.get("categories") not in (None, []):  # [] is the validated "no categories"
            out["categories"] = _validate_categories(opts["categories"], errors)
        if "max_spans" in opts:
            m = opts["max_spans"]
            if not (_is_int(m) and 1 <= m <= MAX_SPANS):
                errors.append(f"max_spans must be an integer from 1 to {MAX_SPANS}")
            else:
                out["max_spans"] = m
        out = {**span_prefill.validate_options(opts, errors), **out}
        if opts.get("criteria"):
            errors.append(
                "an error_spans study has no criteria: its one rating is the 0-100 score "
                "(use categories to label spans)"
            )
        if n_systems is not None and n_systems < 1:
            errors.append("an error_spans study needs at least one system")
        if opts.get("collection") == "adaptive" and n_systems is not None and n_systems < 2:
            # pairs compare the two outputs' mean scores, as for Likert
            errors.append("study: adaptive collection compares systems: give at least two")
        if errors:
            raise OptionError(errors)
        return out

    def outputs_per_item(self, opts: ErrorSpanOptions, n_systems: int) -> int:
        return 1

    def context(self, opts: ErrorSpanOptions) -> dict[str, Any]:
        """The categories offered for a span and the span limit (template context)."""
        return {
            "categories": list(opts.get("categories") or []),
            "max_spans": opts.get("max_spans", MAX_SPANS),
        }

    def display_order(self, n: int, rng: random.Random) -> list[int]:
        """One output: nothing to shuffle."""
        if n != 1:
            raise ValueError(f"an error_spans item shows one output, not {n}")
        return [0]

    def parse_answer(
        self,
        opts: ErrorSpanOptions,
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[object] = (),
    ) -> ErrorSpanAnswer:
        """``data["spans"]`` (a JSON list, as text from the form or already parsed) and
        ``data["score"]`` checked against ``outputs[0]``, the stored output text the server
        passes (a missing ``outputs`` is a programming error: ``ValueError``)."""
        if list(display_order) != [0] or len(outputs) != 1:
            raise ValueError("error_spans.parse_answer needs outputs=[the item's output text]")
        text = output_text(outputs[0])
        if "spans" not in data:
            raise AnswerError("the error spans are missing")
        shown_ = opts.get(span_prefill.SHOWN)
        if shown_ is None:  # no prefill: the answer as always
            spans = _parse_spans(
                data["spans"],
                text,
                opts.get("categories", []),
                opts.get("max_spans", MAX_SPANS),
            )
            return {"spans": spans, "score": _parse_score(data.get("score", ""))}
        return self._parse_prefilled(opts, shown_, text, data)

    def _parse_prefilled(
        self, opts: ErrorSpanOptions, shown_: Mapping[str, Any], text: str, data: Mapping[str, Any]
    ) -> ErrorSpanAnswer:
        """Spans with their origin and action checked against the suggestions the item
        showed (:mod:`kinds.span_prefill`); deleted suggestions kept apart."""
        raw = _load_spans(data["spans"], 14 * len(text) + 400 * MAX_SPANS)
        kept, meta, deleted, index = span_prefill.split(raw, shown_)
        cats, limit = opts.get("categories", []), opts.get("max_spans", MAX_SPANS)
        spans = _parse_spans(kept, text, cats, limit)
        gone = _parse_spans(deleted, text, cats, MAX_SPANS)
        # checked: spans do not overlap, so a start names one span (kept; deleted apart)
        meta_at = {span["start"]: m for span, m in zip(kept, meta, strict=True)}
        gone_at = {span["start"]: k for span, k in zip(deleted, index, strict=True)}
        return {
            "spans": [s | meta_at[s["start"]] for s in spans],
            "deleted": [g | {"suggestion": gone_at[g["start"]]} for g in gone],
            "prefill": shown_.get("state", "none"),
            "score": _parse_score(data.get("score", "")),
        }

    def simulate_answer(
        self,
        opts: ErrorSpanOptions,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        """A simulated worker's form: the true quality mapped linearly onto 0-100 (the middle
        when every output of the input is equally good) plus Gaussian noise of
        ``SIMULATED_NOISE`` points, or the known score; the known spans marked with
        probability ``accuracy`` (none otherwise). No truth: a uniform score (at random)."""
        quality = qualities[0] if qualities else None
        if quality is not None and known_range is not None:
            low, high = known_range
            centre = 50.0 if high <= low else 100.0 * (quality - low) / (high - low)
        elif expected.get("score") is not None:
            centre = float(expected["score"])
        else:
            centre = None
        spans = expected.get("spans") or []
        marked = spans if spans and rng.random() < accuracy else []
        data = {"spans": json.dumps([dict(s) for s in marked], ensure_ascii=False)}
        if centre is None:
            return data | {"score": str(rng.randint(SCORE_MIN, SCORE_MAX))}, True
        score = round(min(SCORE_MAX, max(SCORE_MIN, rng.gauss(centre, SIMULATED_NOISE))))
        return data | {"score": str(score)}, False

    def pair_preferences(
        self, opts: ErrorSpanOptions, answer: ErrorSpanAnswer
    ) -> list[tuple[str, int, int, float]]:
        """None within an item: scores are compared across items (sign of the difference)."""
        return []

    def scores(
        self, opts: ErrorSpanOptions, answer: ErrorSpanAnswer
    ) -> dict[str, dict[int, float]]:
        return {SCORE_PROPERTY: {0: float(answer["score"])}}

    def score_scales(self, opts: ErrorSpanOptions) -> list[tuple[str, float, float]]:
        """The one score, 0-100 (the protocol compares two outputs by it)."""
        return [(SCORE_PROPERTY, SCORE_MIN, SCORE_MAX)]

    def report_properties(
        self, opts: ErrorSpanOptions, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        """The score, an ordinal property 0-100 (alpha as for a Likert criterion)."""
        return [
            (SCORE_PROPERTY, "ordinal", tuple(range(SCORE_MIN, SCORE_MAX + 1)), "Score (0-100)")
        ]

    def report_labels(
        self, opts: ErrorSpanOptions, answer: ErrorSpanAnswer
    ) -> list[tuple[str, Any]]:
        return [(SCORE_PROPERTY, answer["score"])]

    def card_settings(self, opts: ErrorSpanOptions) -> dict[str, Any]:
        """What a dataset card states of the options."""
        return {
            "categories": list(opts.get("categories") or []),
            "max_spans": opts.get("max_spans", MAX_SPANS),
            "severities": list(SEVERITIES),
            "offsets": "Unicode code points of the output text, end exclusive",
        }

    def summary(self, opts: ErrorSpanOptions, answer: ErrorSpanAnswer) -> dict[str, Any]:
        """No preference; ``scores`` holds the score (the Likert-like summary column)."""
        return {"raw_answer": "", "value": "", "scores": {"score": answer["score"]}}

    def answer_from_summary(
        self, opts: ErrorSpanOptions, value: str, scores: Mapping[str, Any]
    ) -> ErrorSpanAnswer:
        """An imported score without spans: ``spans`` is ``None`` (not recorded, which is not
        the same as no errors); exports leave the span columns empty."""
        return {"spans": None, "score": _parse_score(scores.get("score", ""))}

    def export_fields(self, opts: ErrorSpanOptions) -> list[str]:
        """With ``prefill_spans`` on, also ``prefill`` (shown, control, none) and
        ``deleted_spans`` (the suggestions the worker deleted)."""
        fields = ["score", "spans", "minor_errors", "major_errors", "mqm_errors"]
        return fields + (["prefill", "deleted_spans"] if _prefilled(opts) else [])

    def export_types(self, opts: ErrorSpanOptions) -> dict[str, Any]:
        span = {"start": "int64", "end": "int64", "severity": "string", "category": "string"}
        out = {
            "score": "int64",
            "spans": [span | {"text": "string"}],
            "minor_errors": "int64",
            "major_errors": "int64",
            "mqm_errors": "float64",
        }
        if _prefilled(opts):
            marked = {"text": "string", "origin": "string", "action": "string"}
            moved = {"resized": "bool", "suggested_start": "int64", "suggested_end": "int64"}
            out["spans"] = [span | marked | {"suggestion": "int64"} | moved]
            out["prefill"] = "string"
            out["deleted_spans"] = [span | {"text": "string", "suggestion": "int64"}]
        return out

    def export_row(
        self,
        opts: ErrorSpanOptions,
        answer: ErrorSpanAnswer,
        systems: Sequence[str],
        display_order: Sequence[int],
    ) -> dict[str, Any]:
        """Score, the spans as stored (a list; a CSV writer writes it as JSON), the count of
        each severity and the MQM-weighted count (minor 1, major 5); span columns ``None`` for
        an imported score without spans."""
        stored = answer.get("spans")
        if stored is None:
            return {"score": answer["score"]} | dict.fromkeys(self.export_fields(opts)[1:])
        spans = [dict(s) for s in stored]
        row = {
            "score": answer["score"],
            "spans": spans,
            "minor_errors": sum(s["severity"] == "minor" for s in spans),
            "major_errors": sum(s["severity"] == "major" for s in spans),
            "mqm_errors": mqm_weighted_errors(spans),
        }
        if _prefilled(opts):
            row["prefill"] = answer.get("prefill")
            row["deleted_spans"] = [dict(s) for s in answer.get("deleted") or []]
        return row

    def parse_expected(
        self,
        opts: ErrorSpanOptions,
        gold: Any,
        *,
        systems: list[str],
        outputs: list[str],
    ) -> dict[str, Any]:
        """The import format's known answer as stored (see :func:`parse_expected`)."""
        return parse_expected(opts, gold, systems=systems, outputs=outputs)

    def gold_correct(
        self, opts: ErrorSpanOptions, expected: Mapping[str, Any], answer: ErrorSpanAnswer
    ) -> bool:
        """Every known span matched by a distinct marked span of the same severity whose start
        and end are each within ``char_tolerance``; the score within ``score_tolerance`` of the
        known one (when given); no unmatched marked span beyond what ``extra`` allows."""
        known = expected.get("spans", [])
        given = answer.get("spans")
        if given is None:
            return False
        matched = _match(known, given, expected.get("char_tolerance", DEFAULT_CHAR_TOLERANCE))
        if any(j is None for j in matched):
            return False
        extra = expected.get("extra", "minor")
        used = set(matched)
        unmatched = [g for j, g in enumerate(given) if j not in used]
        if extra == "none" and unmatched:
            return False
        if extra == "minor" and any(g["severity"] != "minor" for g in unmatched):
            return False
        score = expected.get("score")
        tol = expected.get("score_tolerance", DEFAULT_SCORE_TOLERANCE)
        return score is None or abs(answer["score"] - score) <= tol


KIND = ErrorSpans()
