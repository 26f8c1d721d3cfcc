"""Pairwise preference: an item shows two outputs side by side (the order drawn per
assignment); the worker says which is better, or tie / both good / both bad when the study
allows them.

* options: ``allow_tie`` (default true), ``allow_both_good``, ``allow_both_bad`` (default
  false) — study columns, passed in ``opts``;
* answer (system order): ``{"raw": "left"|"right"|"tie"|"both_good"|"both_bad",
  "value": "A"|"B"|"tie"|"both_good"|"both_bad"}``; ``A`` is the output at position 0;
* pair preferences: criterion ``preference``, A → 1.0, B → 0.0, the rest → 0.5;
* known answer (gold items, ``Item.expected``; qualification questions): ``{"value": "A"}``,
  matched exactly.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .base import AnswerError, Kind, OptionError, PairPreference

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
SIDE_NEUTRAL = ("tie", "both_good", "both_bad")
#: A system-order value → preference of A over B.
PREFERENCE = {"A": 1.0, "B": 0.0, "tie": 0.5, "both_good": 0.5, "both_bad": 0.5}
#: System-order values in report order (the last three count as a tie).
VALUES = ("A", "B", "tie", "both_good", "both_bad")
#: The criterion name of the overall preference.
OVERALL = "preference"


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


class Pairwise(Kind):
    name = "pairwise"
    label = "Pairwise preference"
    noun = "pairwise"
    template = "kinds/pairwise.html"
    adaptive = True

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> dict[str, Any]:
        if n_systems is not None and n_systems < 2:
            raise OptionError(["a pairwise study needs outputs from at least two systems"])
        return {
            "allow_tie": bool(opts.get("allow_tie", True)),
            "allow_both_good": bool(opts.get("allow_both_good", False)),
            "allow_both_bad": bool(opts.get("allow_both_bad", False)),
        }

    def outputs_per_item(self, opts: Mapping[str, Any], n_systems: int) -> int:
        return 2

    def answers(self, opts: Mapping[str, Any]) -> list[str]:
        """The display-order answers a worker may give, in button order."""
        allowed = ["left", "right"]
        allowed += ["tie"] if opts.get("allow_tie", True) else []
        allowed += ["both_good"] if opts.get("allow_both_good") else []
        allowed += ["both_bad"] if opts.get("allow_both_bad") else []
        return allowed

    def context(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        return {"answers": [Choice(a, RAW_ANSWERS[a]) for a in self.answers(opts)]}

    def parse_answer(
        self, opts: Mapping[str, Any], display_order: Sequence[int], data: Mapping[str, Any]
    ) -> dict[str, Any]:
        allowed = self.answers(opts)
        raw = data.get("answer")
        if raw not in allowed:
            raise AnswerError(f"Choose one of: {', '.join(allowed)}.")
        return {"raw": raw, "value": normalise(raw, display_order)}

    def simulate_answer(
        self,
        opts: Mapping[str, Any],
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
            return {"answer": rng.choice(["left", "right"] + ["tie"] * allow_tie)}, True
        left_is_a = list(display_order)[:1] == [0]
        return {"answer": pick(known, left_is_a, rng, accuracy, allow_tie)}, False

    def pair_preferences(
        self, opts: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> list[PairPreference]:
        value = answer.get("value")
        return [(OVERALL, 0, 1, PREFERENCE[value])] if value in PREFERENCE else []

    def report_properties(
        self, opts: Mapping[str, Any], question: str, observed: Mapping[str, set]
    ) -> list[tuple[str, str, tuple, str]]:
        shown = {"left": "A", "right": "B"}
        allowed = {shown.get(a, a) for a in self.answers(opts)} | set(observed.get(OVERALL, ()))
        return [(OVERALL, "pairwise", tuple(x for x in VALUES if x in allowed), question)]

    def report_labels(
        self, opts: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> list[tuple[str, Any]]:
        value = answer.get("value")
        return [(OVERALL, value)] if value else []

    def gold_correct(
        self, opts: Mapping[str, Any], expected: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> bool:
        return bool(expected.get("value")) and answer.get("value") == expected.get("value")

    def card_settings(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        return {"answers": self.answers(opts)}


KIND = Pairwise()
