"""Pairwise preference: an item shows two outputs side by side (the order drawn per
assignment); the worker says which is better, or tie / both good / both bad when the study
allows them.

* options: ``allow_tie`` (default true), ``allow_both_good``, ``allow_both_bad`` (default
  false) — study columns, passed in ``opts``;
* answer (system order): ``{"raw": "left"|"right"|"tie"|"both_good"|"both_bad",
  "value": "A"|"B"|"tie"|"both_good"|"both_bad"}``; ``A`` is the output at position 0;
* pair preferences: criterion ``preference``, A → 1.0, B → 0.0, the rest → 0.5;
* known answer (gold items, ``Item.expected``; qualification questions): written as the
  name of the better output's system or ``"tie"`` (a qualification question's outputs are
  ``A`` and ``B``), or per criterion; stored as ``{"value": "A"}``, matched exactly, or
  ``{"criteria": {"safe": "B"}}`` checking each criterion named;
* ``criteria``, ``strength``, ``rationale`` (study-line options): several questions per pair,
  a five-point answer, a written reason — :mod:`kinds.criteria`, to which this kind delegates
  (a study without them behaves exactly as above).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from formats import vocab
from formats.judgebench_export import PREFERENCE, JudgeBenchProperty

from . import criteria
from .base import (
    AnswerError,
    CommonOptions,
    Kind,
    OptionError,
    PairPreference,
    once,
    switch,
)
from .criteria import PairwiseAnswer

#: Display-order answers with their button captions, in button order.
RAW_ANSWERS = {
    "left": "Left is better",
    "right": "Right is better",
    "tie": "Tie",
    "both_good": "Both good",
    "both_bad": "Both bad",
}


class Choice(NamedTuple):
    """An answer button: its submitted value and caption."""

    value: str
    label: str


#: Answers that name neither side (the same in display and system order).
SIDE_NEUTRAL = vocab.SIDE_NEUTRAL


def normalise(raw: str, display_order: Sequence[int]) -> str:
    """A display-order answer in system order (``display_order[0]`` is the position of
    the output shown on the left)."""
    if raw in SIDE_NEUTRAL:
        return raw
    left_is_a = list(display_order)[:1] == [0]
    if raw == "left":
        return "A" if left_is_a else "B"
    if raw == "right":
        return "B" if left_is_a else "A"
    raise AnswerError(f"'{raw}' is not a pairwise answer.")


def pick(truth: str, left_is_a: bool, rng: random.Random, accuracy: float, allow_tie: bool) -> str:
    """A simulated worker's display-order answer to a pair whose true preference (system
    order) is ``truth``: right with chance ``accuracy``."""
    if truth == "tie":
        if allow_tie:
            return "tie"
        return rng.choice(["left", "right"])
    a_better = truth == "A"
    if rng.random() > accuracy:
        a_better = not a_better
    return "left" if a_better == left_is_a else "right"


class PairCriterion(TypedDict):
    """One question of a pairwise study (:func:`kinds.criteria.validate_options`)."""

    name: str
    label: str


class PairwiseOptions(CommonOptions, total=False):
    """A pairwise study's settings (``Study.options``)."""

    allow_tie: bool
    allow_both_good: bool
    allow_both_bad: bool
    criteria: list[PairCriterion]
    strength: bool
    rationale: str


class Pairwise(Kind[PairwiseOptions, PairwiseAnswer]):
    name = "pairwise"
    label = "Pairwise preference"
    noun = "pairwise"
    template = "kinds/pairwise.html"
    extra_options = frozenset({"criteria", "strength", "rationale"})
    answer_switches = {"allow_tie": True, "allow_both_good": False, "allow_both_bad": False}
    adaptive = True
    shape = "pair"
    judgebench_form = "pair"

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> PairwiseOptions:
        errors = []
        if n_systems is not None and n_systems < 2:
            errors.append("a pairwise study needs outputs from at least two systems")
        out: PairwiseOptions = {
            "allow_tie": switch(self, opts, "allow_tie", errors),
            "allow_both_good": switch(self, opts, "allow_both_good", errors),
            "allow_both_bad": switch(self, opts, "allow_both_bad", errors),
        }
        try:
            extra = criteria.validate_options(opts)
        except OptionError as exc:
            raise OptionError(errors + exc.messages) from None
        if errors:
            raise OptionError(errors)
        if extra["criteria"]:
            out["criteria"] = extra["criteria"]
        if extra["strength"]:
            out["strength"] = True
        if extra["rationale"] != "none":
            out["rationale"] = extra["rationale"]
        return out

    def overall_criterion(self, opts: PairwiseOptions) -> str:
        return criteria.overall_criterion(opts)

    def outputs_per_item(self, opts: PairwiseOptions, n_systems: int) -> int:
        return 2

    def answers(self, opts: PairwiseOptions) -> list[str]:
        """The display-order answers a worker may give, in button order."""
        allowed = ["left", "right"]
        allowed += ["tie"] if opts.get("allow_tie", True) else []
        allowed += ["both_good"] if opts.get("allow_both_good") else []
        allowed += ["both_bad"] if opts.get("allow_both_bad") else []
        return allowed

    def judgebench_properties(
        self, opts: PairwiseOptions, question: str
    ) -> list[JudgeBenchProperty]:
        """The preference, with the answers the study allows in system order."""
        side = {"left": vocab.A, "right": vocab.B}
        labels = tuple(side.get(a, a) for a in self.answers(opts))
        return [JudgeBenchProperty(PREFERENCE, labels, description=question)]

    def context(self, opts: PairwiseOptions) -> dict[str, Any]:
        return {
            "answers": [Choice(a, RAW_ANSWERS[a]) for a in self.answers(opts)],
            "criteria_form": criteria.template_context(opts) if criteria.uses_form(opts) else None,
        }

    def parse_answer(
        self,
        opts: PairwiseOptions,
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[str] = (),
    ) -> PairwiseAnswer:
        if criteria.uses_form(opts):
            return criteria.parse_answer(opts, display_order, data)
        allowed = self.answers(opts)
        raw = once(data.get("answer"), "which response is better")
        if raw not in allowed:
            raise AnswerError(f"Choose one of: {', '.join(allowed)}.")
        return {"raw": raw, "value": normalise(raw, display_order)}

    def simulate_answer(
        self,
        opts: PairwiseOptions,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        allow_tie = bool(opts.get("allow_tie", True))
        qa, qb = (list(qualities) + [None, None])[:2]
        if qa is not None and qb is not None:
            known = "tie" if qa == qb else "A" if qa > qb else "B"
        elif expected.get("value"):
            known = str(expected["value"])
        else:
            if criteria.uses_form(opts):
                return criteria.simulate_form(opts, display_order, None, rng, accuracy), True
            return {"answer": rng.choice(["left", "right"] + ["tie"] * allow_tie)}, True
        left_is_a = list(display_order)[:1] == [0]
        if criteria.uses_form(opts):
            return criteria.simulate_form(opts, display_order, known, rng, accuracy), False
        return {"answer": pick(known, left_is_a, rng, accuracy, allow_tie)}, False

    def pair_preferences(
        self, opts: PairwiseOptions, answer: PairwiseAnswer
    ) -> list[PairPreference]:
        return criteria.pair_preferences(opts, answer)

    def report_properties(
        self, opts: PairwiseOptions, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        return criteria.report_properties(opts, question, observed)

    def report_labels(self, opts: PairwiseOptions, answer: PairwiseAnswer) -> list[tuple[Any, ...]]:
        return criteria.report_labels_with_raw(opts, answer)

    def gold_correct(
        self, opts: PairwiseOptions, expected: Mapping[str, Any], answer: PairwiseAnswer
    ) -> bool:
        return criteria.gold_correct(opts, expected, answer)

    def parse_expected(
        self, opts: PairwiseOptions, gold: Any, *, systems: list[str], outputs: list[str]
    ) -> dict[str, Any]:
        """A known answer: the better system's name or ``"tie"`` (the summary criterion), or
        criterion → name/``"tie"`` (:func:`kinds.criteria.parse_expected`); the stored form
        (``{"value": "A"}``, ``{"criteria": {...}}``) is accepted as well."""
        if len(systems) != 2:
            raise AnswerError("a pairwise known answer needs exactly two outputs")
        if isinstance(gold, Mapping) and gold and set(gold) <= {"value", "criteria"}:
            named = ("A", "B", "tie")
            return criteria.parse_expected(
                opts,
                gold["criteria"] if "criteria" in gold else gold["value"],
                named[:2],
            ) | ({"value": gold["value"]} if "value" in gold and gold["value"] in named else {})
        return criteria.parse_expected(opts, gold, systems)

    def card_settings(self, opts: PairwiseOptions) -> dict[str, Any]:
        settings: dict[str, Any] = {"answers": self.answers(opts)}
        if criteria.uses_form(opts):
            settings["answers"] = [v for v, _ in criteria.answer_choices(opts)]
            settings |= {
                "criteria": [c["name"] for c in criteria.criteria_of(opts)],
                "strength": bool(opts.get("strength")),
                "rationale": opts.get("rationale") or "none",
            }
        return settings

    def export_fields(self, opts: PairwiseOptions) -> list[str]:
        return criteria.export_fields(opts)

    def export_types(self, opts: PairwiseOptions) -> dict[str, Any]:
        return criteria.export_types(opts)

    def export_row(
        self,
        opts: PairwiseOptions,
        answer: PairwiseAnswer,
        systems: Sequence[str],
        display_order: Sequence[int],
    ) -> dict[str, Any]:
        return criteria.export_row(opts, answer)


KIND = Pairwise()
