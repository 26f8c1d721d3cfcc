"""Likert rating: an item shows one output; the worker rates it on every criterion of the
study (a numeric scale with anchors, or categorical labels).

* options: ``criteria``, a list of ``{"name", "label", "scale_min", "scale_max",
  "anchors", "labels"}`` (:func:`criterion` reads one; ``overall`` 1–5 when none);
* answer: ``{"scores": {criterion: value}}`` (whole numbers, or a label);
* scores: criterion → {0: value} for criteria rated on a scale (labels have no order);
* no pair preferences of its own: the protocol and the report compare two outputs' scores
  (:func:`kinds.preferences_from_scores`);
* known answer (gold inputs: the known rating of each of the input's outputs; qualification
  questions): ``{"scores": {criterion: value}, "tolerance": t}`` — written and stored
  alike; correct when every given criterion is within ``t`` (default 0) of the known
  value, labels equal.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from formats.judgebench_export import JudgeBenchProperty

from .base import AnswerError, CommonOptions, Kind, OptionError, once, shown

#: Standard deviation, in scale points, of a simulated worker's rating around the truth.
SIMULATED_NOISE = 0.7


class ScaleCriterion(TypedDict):
    """One rated criterion in its stored form (:func:`criterion`)."""

    name: str
    label: str
    scale_min: int
    scale_max: int
    anchors: dict[str, str]
    labels: list[str]


#: The criterion a Likert study gets when it names none.
DEFAULT_CRITERION: ScaleCriterion = {
    "name": "overall",
    "label": "Overall quality",
    "scale_min": 1,
    "scale_max": 5,
    "anchors": {"1": "very poor", "5": "excellent"},
    "labels": [],
}

#: The longest criterion label.
MAX_LABEL = 200


def criterion(raw: Any) -> ScaleCriterion:
    """One criterion as a study line or ``Study.options`` writes it (a scale as ``"scale":
    [min, max]`` or ``scale_min``/``scale_max``; or categorical ``labels``), in the stored
    form; ``ValueError`` says what is wrong.

    >>> criterion({"name": "fluency", "scale": [1, 7]})["scale_max"]
    7
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ValueError("a criterion needs a 'name'")
    name = raw["name"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,60}", name):
        raise ValueError(f"criterion name '{name}' may use letters, digits, '_' and '-'")
    label = str(raw.get("label") or name)
    if len(label) > MAX_LABEL:
        raise ValueError(f"the label of criterion '{name}' is longer than {MAX_LABEL} characters")
    labels = raw.get("labels") or []
    if labels:
        if not isinstance(labels, list) or len({str(x) for x in labels}) < 2:
            raise ValueError("'labels' needs at least two distinct labels")
        return {
            "name": name,
            "label": label,
            "scale_min": 1,
            "scale_max": 5,
            "anchors": {},
            "labels": [str(x) for x in labels],
        }
    scale = raw.get("scale") or [raw.get("scale_min", 1), raw.get("scale_max", 5)]
    if (
        not isinstance(scale, list)
        or len(scale) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
        or not 0 < scale[1] - scale[0] <= 20
    ):
        raise ValueError("'scale' must be [min, max] whole numbers, 2 to 21 points")
    anchors = raw.get("anchors") or {}
    if not isinstance(anchors, Mapping):
        raise ValueError("'anchors' must map scale points to text")
    return {
        "name": name,
        "label": label,
        "scale_min": scale[0],
        "scale_max": scale[1],
        "anchors": {str(k): str(v) for k, v in anchors.items()},
        "labels": [],
    }


def choices(criterion: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(value, caption) per scale point or label, in display order."""
    if criterion.get("labels"):
        return [(str(label), str(label)) for label in criterion["labels"]]
    anchors = criterion.get("anchors") or {}
    return [
        (str(v), str(anchors.get(str(v), "")))
        for v in range(int(criterion.get("scale_min", 1)), int(criterion.get("scale_max", 5)) + 1)
    ]


def parse_value(criterion: Mapping[str, Any], value: object) -> int | str:
    """One submitted value validated; ``ValueError`` with a readable message."""
    name = criterion["name"]
    if criterion.get("labels"):
        if str(value) not in map(str, criterion["labels"]):
            raise ValueError(f"{shown(value)} is not one of the labels of '{name}'")
        return str(value)
    try:
        number = int(str(value))
    except ValueError:
        raise ValueError(f"'{name}' needs a whole number") from None
    low, high = int(criterion.get("scale_min", 1)), int(criterion.get("scale_max", 5))
    if not low <= number <= high:
        raise ValueError(f"'{name}' must be between {low} and {high}")
    return number


class LikertOptions(CommonOptions, total=False):
    """A Likert study's settings (``Study.options``)."""

    criteria: list[ScaleCriterion]


class LikertAnswer(TypedDict):
    """A Likert answer: each criterion's rating (a scale point, or a label)."""

    scores: dict[str, int | str]


class Likert(Kind[LikertOptions, LikertAnswer]):
    name = "likert"
    label = "Likert rating"
    noun = "Likert"
    template = "kinds/likert.html"
    extra_options = frozenset({"criteria"})
    scored = True
    adaptive = True
    shape = "rating"
    judgebench_form = "rating"

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> LikertOptions:
        given = opts.get("criteria") or []
        problems = [] if isinstance(given, list) else ["study: 'criteria' must be a list"]
        criteria = []
        for i, raw in enumerate(given if not problems else []):
            try:
                criteria.append(criterion(raw))
            except ValueError as exc:
                problems.append(f"study, criterion {i + 1}: {exc}")
        names = [c["name"] for c in criteria]
        if len(set(names)) != len(names):
            problems.append("study: criterion names must be distinct")
        criteria = criteria or [DEFAULT_CRITERION.copy()]
        if opts.get("collection") == "adaptive":
            # pairs compare the two outputs' mean ratings (docs/protocol.md, "Live studies")
            if n_systems is not None and n_systems < 2:
                problems.append("study: adaptive collection compares systems: give at least two")
            if all(c.get("labels") for c in criteria):
                problems.append(
                    "study: adaptive collection of a Likert study needs a criterion rated on a "
                    "scale (categorical labels have no order to compare)"
                )
            if opts.get("gold"):
                problems.append(
                    "study: gold checks are pairwise; an adaptive Likert study takes no "
                    "'gold' inputs"
                )
        if problems:
            raise OptionError(problems)
        return {"criteria": criteria}

    def outputs_per_item(self, opts: LikertOptions, n_systems: int) -> int:
        return 1

    def judgebench_properties(self, opts: LikertOptions, question: str) -> list[JudgeBenchProperty]:
        """One property per criterion: categorical with its labels, else graded on its
        scale."""
        return [
            JudgeBenchProperty(
                c["name"], tuple(map(str, c["labels"])), description=c.get("label", "")
            )
            if c.get("labels")
            else JudgeBenchProperty(
                c["name"], (), c.get("scale_min", 1), c.get("scale_max", 5), c.get("label", "")
            )
            for c in opts.get("criteria") or []
        ]

    def score_scales(self, opts: LikertOptions) -> list[tuple[str, float, float]]:
        """The criteria rated on a scale (not ``labels``), in order."""
        return [
            (c["name"], c.get("scale_min", 1), c.get("scale_max", 5))
            for c in opts.get("criteria") or []
            if not c.get("labels")
        ]

    def score_columns(self, opts: LikertOptions) -> list[str]:
        return [c["name"] for c in opts.get("criteria") or []]

    def card_settings(self, opts: LikertOptions) -> dict[str, Any]:
        return {
            "criteria": [
                {"name": c["name"], "label": c.get("label") or c["name"]}
                | (
                    {"labels": list(c["labels"])}
                    if c.get("labels")
                    else {"scale": [c.get("scale_min", 1), c.get("scale_max", 5)]}
                )
                for c in opts.get("criteria") or []
            ]
        }

    def context(self, opts: LikertOptions) -> dict[str, Any]:
        return {
            "criteria": [
                {"name": c["name"], "label": c.get("label") or c["name"], "choices": choices(c)}
                for c in opts.get("criteria") or []
            ]
        }

    def parse_answer(
        self,
        opts: LikertOptions,
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[str] = (),
    ) -> LikertAnswer:
        given = data.get("scores") or {}
        if not isinstance(given, Mapping):
            raise AnswerError("'scores' must map criteria to values.")
        criteria = opts.get("criteria") or []
        clean: dict[str, int | str] = {}
        problems = []
        for criterion in criteria:
            name = criterion["name"]
            if name not in given or given[name] in ("", None):
                problems.append(f"Rate '{criterion.get('label') or name}'.")
                continue
            try:
                once(given[name], f"'{criterion.get('label') or name}'")
                clean[name] = parse_value(criterion, given[name])
            except ValueError as exc:  # AnswerError included
                problems.append(str(exc))
        unknown = set(given) - {c["name"] for c in criteria}
        if unknown:
            names = ", ".join(shown(n)[1:-1] for n in sorted(unknown)[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            problems.append(f"Unknown criteria: {names}{more}.")
        if problems:
            raise AnswerError(" ".join(problems))
        return {"scores": clean}

    def simulate_answer(
        self,
        opts: LikertOptions,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        """A rating per criterion: the output's true quality placed on the scale between
        the input's lowest and highest, with Gaussian noise; else the known answer's score
        with that noise (a label: the known one with chance ``accuracy``); at random when
        neither is known."""
        quality = qualities[0] if qualities else None
        known_scores = expected.get("scores") or {}
        scores: dict[str, Any] = {}
        for criterion in opts.get("criteria") or []:
            name = criterion["name"]
            if criterion.get("labels"):
                labels = [str(x) for x in criterion["labels"]]
                known = known_scores.get(name)
                right = known is not None and rng.random() < accuracy
                scores[name] = str(known) if right else rng.choice(labels)
                continue
            lo, hi = int(criterion.get("scale_min", 1)), int(criterion.get("scale_max", 5))
            if (quality is None or known_range is None) and name in known_scores:
                value = round(float(known_scores[name]) + rng.gauss(0, SIMULATED_NOISE))
                scores[name] = min(max(value, lo), hi)
                continue
            if quality is None or known_range is None:
                scores[criterion["name"]] = rng.randint(lo, hi)
                continue
            low, high = known_range
            share = (quality - low) / (high - low) if high > low else 0.5
            value = round(lo + share * (hi - lo) + rng.gauss(0, SIMULATED_NOISE))
            scores[criterion["name"]] = min(max(value, lo), hi)
        return {"scores": scores}, quality is None and not known_scores

    def scores(self, opts: LikertOptions, answer: LikertAnswer) -> dict[str, dict[int, float]]:
        numeric = {c["name"] for c in opts.get("criteria") or [] if not c.get("labels")}
        out: dict[str, dict[int, float]] = {}
        for name, value in (answer.get("scores") or {}).items():
            if name in numeric and isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = {0: float(value)}
        return out

    def report_properties(
        self, opts: LikertOptions, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        props = []
        for c in opts.get("criteria") or []:
            title = c.get("label", "")
            if c.get("labels"):
                labels: tuple[Any, ...] = tuple(str(x) for x in c["labels"])
                props.append((c["name"], "categorical", labels, title))
            else:
                low, high = int(c.get("scale_min", 1)), int(c.get("scale_max", 5))
                props.append((c["name"], "ordinal", tuple(range(low, high + 1)), title))
        return props

    def report_labels(self, opts: LikertOptions, answer: LikertAnswer) -> list[tuple[str, Any]]:
        return list((answer.get("scores") or {}).items())

    def parse_expected(
        self, opts: LikertOptions, gold: Any, *, systems: list[str], outputs: list[str]
    ) -> dict[str, Any]:
        """``gold`` is ``{"scores": {criterion: value}, "tolerance": t}``, the known rating
        of every output of the input (each is an item of its own): at least one criterion,
        every value valid on its criterion's scale (or one of its labels), ``t`` a number
        ≥ 0 (default 0; labels always match exactly)."""
        if not isinstance(gold, Mapping) or not isinstance(gold.get("scores"), Mapping):
            raise AnswerError(
                'a Likert known answer is {"scores": {criterion: value}, "tolerance": t}'
            )
        unknown = set(gold) - {"scores", "tolerance"}
        if unknown:
            raise AnswerError(f"unknown keys in the known answer: {', '.join(sorted(unknown))}")
        by_name = {c["name"]: c for c in opts.get("criteria") or []}
        scores: dict[str, Any] = {}
        problems = []
        for name, value in gold["scores"].items():
            if name not in by_name:
                problems.append(f"'{name}' is not a criterion of the study")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                problems.append(f"'{name}' needs a value on its scale")
                continue
            try:
                scores[name] = parse_value(by_name[name], value)
            except ValueError as exc:
                problems.append(str(exc))
        if not gold["scores"]:
            problems.append("give the known score of at least one criterion")
        tolerance = gold.get("tolerance", 0)
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
            problems.append("'tolerance' must be a number")
        elif not 0 <= tolerance < float("inf"):
            problems.append("'tolerance' must be 0 or more")
        if problems:
            raise AnswerError("; ".join(problems))
        return {"scores": scores, "tolerance": tolerance}

    def gold_correct(
        self, opts: LikertOptions, expected: Mapping[str, Any], answer: LikertAnswer
    ) -> bool:
        want = expected.get("scores") or {}
        got = answer.get("scores") or {}
        tolerance = float(expected.get("tolerance", 0))
        if not want:
            return False
        for name, value in want.items():
            if name not in got:
                return False
            if isinstance(value, int | float) and isinstance(got[name], int | float):
                if abs(float(got[name]) - float(value)) > tolerance:
                    return False
            elif str(got[name]) != str(value):
                return False
        return True


KIND = Likert()
