"""Ranking (best-of-n): an item shows m ≥ 3 outputs of one input as cards in an order drawn
per assignment; the worker orders them best → worst, with ties when the study allows them.

* options: ``per_item`` (m, 2 < m ≤ k; default all k systems), ``allow_tie`` (default
  false). A ranking study needs k ≥ 3 systems. Without ``per_item`` an input gives one item
  with all k outputs; with it, one item with m outputs drawn at random
  (:meth:`Ranking.item_groups`).
* submitted data: ``ranking``, JSON (a string from the form, or a list from the API) —
  the displayed outputs best → worst as a list of *tiers*, each a list of **0-based display
  positions** (``display_order[d]`` is the system-order position of the output shown d-th,
  labelled "Response d+1"). Every shown output exactly once; a tier of more than one
  output only when ``allow_tie``.
* answer (system order): ``{"raw": [[display positions], …], "ranking": [[positions],
  …]}`` — the same tiers, best first, with each display position replaced by the output's
  position in the item's system order (sorted inside a tier).
* pair preferences: criterion ``preference``, every pair i < j of the item's outputs
  (m(m−1)/2 rows): 1.0 when i's tier is better, 0.0 when j's is, 0.5 when tied.
* scores: criterion ``rank`` → position → rank (1 = best; a tied tier gets the mean of
  the places it covers, e.g. a tie for 2nd and 3rd is 2.5). Lower is better.
* export: ``systems`` (the item's systems in system order), ``display_order`` (the same
  systems in the order shown, first = "Response 1") and ``ranking`` (tiers of system names,
  best first); the common pair columns (``system_a``, ``system_b``, ``left_system``,
  ``label``, ``preferred_system``) stay empty, as an item shows more than two outputs.
  :func:`export_pairs` reads a row back as the pairs the report compares.
* known answer (gold items, qualification questions): ``{"ranking": [[positions], …]}``
  (the full ranking, matched exactly, ties included) or ``{"top": position}`` (the best
  output: the worker's best tier must be that output alone). :func:`expected_from_gold`
  builds it from the import format (system names).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from .base import (
    AnswerError,
    CommonOptions,
    Kind,
    OptionError,
    PairPreference,
    answer_json,
    once,
    switch,
)

#: The criterion name of the pair preferences (the same overall property as pairwise).
OVERALL = "preference"
#: The criterion name of the rank positions in :meth:`Ranking.scores`.
RANK = "rank"
#: The longest submitted ``ranking`` string read (a hundred outputs fit easily).
MAX_ANSWER_CHARS = 2000

Tiers = list[list[int]]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_tiers(value: object, n: int, allow_tie: bool) -> Tiers:
    """``value`` (JSON text or a list) as tiers of 0-based positions ``0..n-1``, each
    exactly once, best first; :class:`AnswerError` with a message for the worker (also for
    text nested too deep to parse, and for a ranking sent twice)."""
    value = once(value, "the ranking")
    if isinstance(value, str | bytes):
        if len(value) > MAX_ANSWER_CHARS:
            raise AnswerError("The ranking is too long.")
        value = answer_json(value, "Order the responses before submitting.")
    if not isinstance(value, list) or not value:
        raise AnswerError("Order the responses before submitting.")
    tiers: Tiers = []
    for tier in value:
        if _is_int(tier):
            tier = [tier]
        if not isinstance(tier, list) or not tier or not all(map(_is_int, tier)):
            raise AnswerError("A ranking is a list of groups of response numbers.")
        if len(tier) > 1 and not allow_tie:
            raise AnswerError("This study does not allow ties: give every response its own place.")
        tiers.append(sorted(tier))
    seen = [p for tier in tiers for p in tier]
    if sorted(seen) != list(range(n)):
        raise AnswerError(f"Rank each of the {n} responses exactly once.")
    return tiers


def rank_positions(tiers: Sequence[Sequence[int]]) -> dict[int, float]:
    """Position → rank (1 = best), a tied tier getting the mean of the places it covers."""
    ranks: dict[int, float] = {}
    place = 1
    for tier in tiers:
        mean = place + (len(tier) - 1) / 2
        for position in tier:
            ranks[int(position)] = mean
        place += len(tier)
    return ranks


def _tier_of(tiers: Sequence[Sequence[int]]) -> dict[int, int]:
    return {int(p): t for t, tier in enumerate(tiers) for p in tier}


def expected_from_gold(gold: object, systems: Sequence[str]) -> dict[str, Any]:
    """A gold answer of the import format as a known answer in system order: a system name
    (the best output) → ``{"top": position}``; a list of tiers of system names, best first
    (a bare name is a tier of one) → ``{"ranking": …}``. ``ValueError`` with a message."""
    index = {name: i for i, name in enumerate(systems)}
    if isinstance(gold, str):
        if gold not in index:
            raise ValueError(f"'gold' names '{gold}', which is not one of this item's systems")
        return {"top": index[gold]}
    if not isinstance(gold, list) or not gold:
        raise ValueError("'gold' is a system name (the best output) or a list of tiers of names")
    tiers: Tiers = []
    for tier in gold:
        names = [tier] if isinstance(tier, str) else tier
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ValueError("'gold' is a list of tiers, each a system name or a list of names")
        unknown = [n for n in names if n not in index]
        if unknown:
            raise ValueError(f"'gold' names unknown systems: {', '.join(unknown)}")
        tiers.append(sorted(index[n] for n in names))
    if sorted(p for tier in tiers for p in tier) != list(range(len(systems))):
        raise ValueError("'gold' must rank every system of the item exactly once")
    return {"ranking": tiers}


def _stored_expected(gold: Mapping[str, Any], n: int) -> dict[str, Any]:
    """A stored known answer checked against an item of ``n`` outputs."""
    if set(gold) == {"top"} and gold["top"] in range(n) and not isinstance(gold["top"], bool):
        return {"top": gold["top"]}
    tiers = gold.get("ranking") if set(gold) == {"ranking"} else None
    if (
        isinstance(tiers, list)
        and all(isinstance(t, list) and t for t in tiers)
        and sorted(p for t in tiers for p in t if isinstance(p, int)) == list(range(n))
        and all(isinstance(p, int) and not isinstance(p, bool) for t in tiers for p in t)
    ):
        return {"ranking": [sorted(t) for t in tiers]}
    raise AnswerError(
        "a known ranking is {'top': position} or {'ranking': tiers of positions}"
        f" (positions 0–{n - 1})"
    )


class RankingOptions(CommonOptions, total=False):
    """A ranking study's settings (``Study.options``)."""

    allow_tie: bool
    per_item: int


class RankingAnswer(TypedDict, total=False):
    """A ranking: tiers of positions best first, as shown (``raw``: display order) and in
    system order (``ranking``)."""

    raw: Tiers
    ranking: Tiers


class Ranking(Kind[RankingOptions, RankingAnswer]):
    name = "ranking"
    label = "Ranking (best to worst)"
    noun = "ranking"
    template = "kinds/ranking.html"
    extra_options = frozenset({"per_item"})
    answer_switches = {"allow_tie": False}  # "Tie with the one above"; no both good/bad
    adaptive = True
    report_by_pair = True

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> RankingOptions:
        errors = []
        if n_systems is not None and n_systems < 3:
            errors.append(
                f"a ranking study needs outputs from at least 3 systems (found {n_systems}); "
                "use a pairwise study for two"
            )
        per_item = opts.get("per_item")
        if per_item is not None:
            if not _is_int(per_item) or per_item < 3:
                errors.append("'per_item' must be a whole number of at least 3")
            elif n_systems is not None and n_systems >= 3 and per_item > n_systems:
                errors.append(
                    f"'per_item' ({per_item}) exceeds the number of systems ({n_systems})"
                )
        out: RankingOptions = {"allow_tie": switch(self, opts, "allow_tie", errors)}
        if errors:
            raise OptionError(errors)
        if per_item:
            out["per_item"] = per_item
        return out

    def outputs_per_item(self, opts: RankingOptions, n_systems: int) -> int:
        per_item = opts.get("per_item")
        return min(int(per_item), n_systems) if per_item else n_systems

    def item_groups(
        self, opts: RankingOptions, n_systems: int, rng: random.Random
    ) -> list[tuple[int, ...]]:
        """One item per input: all systems, or ``per_item`` of them drawn at random."""
        m = self.outputs_per_item(opts, n_systems)
        if m >= n_systems:
            return [tuple(range(n_systems))]
        return [tuple(sorted(rng.sample(range(n_systems), m)))]

    def context(self, opts: RankingOptions) -> dict[str, Any]:
        return {"allow_tie": bool(opts.get("allow_tie", False))}

    def parse_answer(
        self,
        opts: RankingOptions,
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[str] = (),
    ) -> RankingAnswer:
        shown = [int(p) for p in display_order]
        if sorted(shown) != list(range(len(shown))) or len(shown) < 3:
            raise AnswerError("This task's display order is not a ranking of three or more.")
        raw = parse_tiers(data.get("ranking"), len(shown), bool(opts.get("allow_tie", False)))
        ranking = [sorted(shown[d] for d in tier) for tier in raw]
        return {"raw": raw, "ranking": ranking}

    def summary(self, opts: RankingOptions, answer: RankingAnswer) -> dict[str, Any]:
        """No single overall value: the ranking lives in ``Annotation.answer``."""
        return {"raw_answer": "", "value": "", "scores": {}}

    def simulate_answer(
        self,
        opts: RankingOptions,
        display_order: Sequence[int],
        qualities: Sequence[float | None],
        known_range: tuple[float, float] | None,
        expected: Mapping[str, Any],
        rng: random.Random,
        accuracy: float,
    ) -> tuple[dict[str, Any], bool]:
        """Outputs sorted by true quality (or the known ranking), then each neighbouring
        pair swapped with chance ``1 - accuracy``; equal qualities tie when allowed."""
        allow_tie = bool(opts.get("allow_tie", False))
        n = len(display_order)
        if all(q is not None for q in qualities) and len(qualities) == n:
            key = {p: -float(q) for p, q in enumerate(qualities)}  # type: ignore[arg-type]
        elif expected.get("ranking"):
            key = {p: float(t) for p, t in _tier_of(expected["ranking"]).items()}
        else:
            order = list(range(n))
            rng.shuffle(order)
            return {"ranking": json.dumps([[d] for d in order])}, True
        where = {p: d for d, p in enumerate(display_order)}
        best_first = sorted(range(n), key=lambda p: key[p])
        for i in range(n - 1):
            if rng.random() > accuracy:
                best_first[i], best_first[i + 1] = best_first[i + 1], best_first[i]
        tiers: Tiers = []
        for position in best_first:
            if allow_tie and tiers and key[position] == key[tiers[-1][-1]]:
                tiers[-1].append(position)
            else:
                tiers.append([position])
        return {"ranking": json.dumps([[where[p] for p in tier] for tier in tiers])}, False

    def pair_preferences(self, opts: RankingOptions, answer: RankingAnswer) -> list[PairPreference]:
        tier = _tier_of(answer.get("ranking") or [])
        rows: list[PairPreference] = []
        for i, j in itertools.combinations(sorted(tier), 2):
            pref = 0.5 if tier[i] == tier[j] else 1.0 if tier[i] < tier[j] else 0.0
            rows.append((OVERALL, i, j, pref))
        return rows

    def report_properties(
        self, opts: RankingOptions, question: str, observed: Mapping[str, set[Any]]
    ) -> list[tuple[str, str, tuple[Any, ...], str]]:
        """One pairwise property, ``preference``, over every pair of an item's outputs."""
        labels = (
            ("A", "B", "tie")
            if opts.get("allow_tie")
            or observed.get(OVERALL, set())
            - {
                "A",
                "B",
            }
            else ("A", "B")
        )
        return [(OVERALL, "pairwise", labels, question)]

    def scores(self, opts: RankingOptions, answer: RankingAnswer) -> dict[str, dict[int, float]]:
        ranking = answer.get("ranking") or []
        return {RANK: rank_positions(ranking)} if ranking else {}

    def gold_correct(
        self, opts: RankingOptions, expected: Mapping[str, Any], answer: RankingAnswer
    ) -> bool:
        ranking = [sorted(map(int, tier)) for tier in answer.get("ranking") or []]
        if not ranking:
            return False
        if expected.get("ranking"):
            return ranking == [sorted(map(int, tier)) for tier in expected["ranking"]]
        top = expected.get("top")
        return _is_int(top) and ranking[0] == [top]

    def parse_expected(
        self,
        opts: RankingOptions,
        gold: Any,
        *,
        systems: list[str],
        outputs: list[str],
    ) -> dict[str, Any]:
        """``gold`` (a system name, or tiers of names best first) over the item's
        ``systems`` in the order given (a gold item shows them all, in that order); the stored
        form (``{"top": p}`` or ``{"ranking": tiers of positions}``) reads as itself."""
        if isinstance(gold, Mapping) and set(gold) in ({"top"}, {"ranking"}):
            return _stored_expected(gold, len(systems))
        try:
            return expected_from_gold(gold, systems)
        except ValueError as exc:
            raise AnswerError(str(exc)) from None

    def gold_groups(self, opts: RankingOptions, n_outputs: int) -> list[tuple[int, ...]]:
        """A gold input shows all its outputs, even with ``per_item``."""
        return [tuple(range(n_outputs))]

    def card_settings(self, opts: RankingOptions) -> dict[str, Any]:
        return {
            "allow_tie": bool(opts.get("allow_tie", False)),
            "per_item": opts.get("per_item"),
        }

    def export_fields(self, opts: RankingOptions) -> list[str]:
        return ["systems", "display_order", "ranking"]

    def export_types(self, opts: RankingOptions) -> dict[str, Any]:
        return {"systems": ["string"], "display_order": ["string"], "ranking": [["string"]]}

    def export_row(
        self,
        opts: RankingOptions,
        answer: RankingAnswer,
        systems: Sequence[str],
        display_order: Sequence[int],
    ) -> dict[str, Any]:
        """``systems``: the item's system names in system order; ``display_order``: the same
        in the order shown; ``ranking``: tiers of system names, best first (lists; ``None``
        when unknown)."""
        ranking = answer.get("ranking") or []
        return {
            "systems": list(systems) or None,
            "display_order": [systems[p] for p in display_order] or None,
            "ranking": [[systems[p] for p in tier] for tier in ranking] or None,
        }


KIND = Ranking()


def export_pairs(systems: Sequence[str], ranking: Sequence[Sequence[str]]) -> list[tuple[Any, ...]]:
    """An exported ranking (``systems`` in system order, ``ranking`` tiers of their names,
    best first) as the report reads it: per pair of positions i < j, ``(i, j, label)`` with
    label ``A`` (i ranked better), ``B`` or ``tie`` — the pairs of
    :meth:`Ranking.pair_preferences`. :class:`ValueError` when a name is not one of
    ``systems`` or appears twice.

    >>> export_pairs(["x", "y", "z"], [["z"], ["x", "y"]])
    [(0, 1, 'tie'), (0, 2, 'B'), (1, 2, 'B')]
    """
    index = {name: i for i, name in enumerate(systems)}
    tier_of: dict[int, int] = {}
    for t, tier in enumerate(ranking):
        for name in tier:
            if name not in index:
                raise ValueError(f"the ranking names {name!r}, not one of the item's systems")
            if index[name] in tier_of:
                raise ValueError(f"the ranking names {name!r} twice")
            tier_of[index[name]] = t
    labels = {-1: "A", 0: "tie", 1: "B"}
    return [
        (i, j, labels[(tier_of[i] > tier_of[j]) - (tier_of[i] < tier_of[j])])
        for i, j in itertools.combinations(sorted(tier_of), 2)
    ]
