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

from collections.abc import Mapping, Sequence
from typing import Any

from .base import AnswerError, Kind, OptionError, PairPreference

#: Display-order answers with their button captions, in button order.
RAW_ANSWERS = {
    "left": "Left is better",
    "right": "Right is better",
    "tie": "Tie",
    "both_good": "Both good",
    "both_bad": "Both bad",
}
#: Answers that name neither side (the same in display and system order).
SIDE_NEUTRAL = ("tie", "both_good", "both_bad")
#: A system-order value → preference of A over B.
PREFERENCE = {"A": 1.0, "B": 0.0, "tie": 0.5, "both_good": 0.5, "both_bad": 0.5}
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


class Pairwise(Kind):
    name = "pairwise"
    label = "Pairwise preference"
    template = "kinds/pairwise.html"

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
        return {"answers": [{"value": a, "label": RAW_ANSWERS[a]} for a in self.answers(opts)]}

    def parse_answer(
        self, opts: Mapping[str, Any], display_order: Sequence[int], data: Mapping[str, Any]
    ) -> dict[str, Any]:
        allowed = self.answers(opts)
        raw = data.get("answer")
        if raw not in allowed:
            raise AnswerError(f"Choose one of: {', '.join(allowed)}.")
        return {"raw": raw, "value": normalise(raw, display_order)}

    def pair_preferences(
        self, opts: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> list[PairPreference]:
        value = answer.get("value")
        return [(OVERALL, 0, 1, PREFERENCE[value])] if value in PREFERENCE else []

    def gold_correct(
        self, opts: Mapping[str, Any], expected: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> bool:
        return bool(expected.get("value")) and answer.get("value") == expected.get("value")

    def export_fields(self, opts: Mapping[str, Any]) -> list[str]:
        return []


KIND = Pairwise()
