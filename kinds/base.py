"""The interface every task kind provides (placeholder until the core branch's ``kinds/base.py``
is merged; it follows docs/KINDS_CONTRACT: ``Kind``, ``AnswerError``, ``OptionError``)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AnswerError", "Kind", "OptionError"]


class AnswerError(ValueError):
    """A worker's answer that cannot be stored; the message is shown to the worker (400)."""


class OptionError(ValueError):
    """A study line's kind options that are not valid; ``messages`` lists every problem."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


class Kind:
    """One task kind: options, outputs shown, answers, export columns, gold scoring."""

    name: str = ""
    label: str = ""
    template: str = ""

    def validate_options(self, opts: Mapping[str, Any], n_systems: int) -> dict[str, Any]:
        raise NotImplementedError

    def outputs_per_item(self, opts: Mapping[str, Any], n_systems: int) -> int:
        raise NotImplementedError

    def display_order(self, n: int, rng: random.Random) -> list[int]:
        raise NotImplementedError

    def parse_answer(
        self, opts: Mapping[str, Any], display_order: list[int], data: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def pair_preferences(
        self, opts: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> list[tuple[str, int, int, float]]:
        return []

    def scores(self, opts: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, dict]:
        return {}

    def export_fields(self, opts: Mapping[str, Any]) -> list[str]:
        raise NotImplementedError

    def export_row(
        self,
        opts: Mapping[str, Any],
        answer: Mapping[str, Any],
        systems: list[str],
        display_order: list[int],
    ) -> dict[str, Any]:
        raise NotImplementedError

    def gold_correct(
        self, opts: Mapping[str, Any], expected: Mapping[str, Any], answer: Mapping[str, Any]
    ) -> bool:
        raise NotImplementedError
