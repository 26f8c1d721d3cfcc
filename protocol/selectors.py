"""Reads the protocol needs: evidence per pair, the partial order, the dashboard."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from numbers import Rational
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import Count, Q

from annotator.models import Item, ItemOutput, JudgeRating, Output, Study
from annotator.selectors import label_rows, score_rows
from formats import vocab

from .decision import preferences_from_scores
from .models import ProtocolConfig, Round, SystemPair
from .outcome import pair_status

#: A judge's preference label in system order → index into [n>, n=, n<].
LABEL_INDEX = {vocab.A: 0, **dict.fromkeys(vocab.SIDE_NEUTRAL, 1), vocab.B: 2}
#: A pair preference (1 the first system better, 0.5 a draw, 0) → index into [n>, n=, n<].
PREFERENCE_INDEX = {1.0: 0, 0.5: 1, 0.0: 2}
#: Preference code (+1 a better, 0 draw, −1 b better) → the same index.
CODE_INDEX = {1: 0, 0: 1, -1: 2}


class StudyOutputs:
    """The study's outputs by system and input, read once (a round's decision and the next
    round's opening ask it for pools and outputs several times)."""

    def __init__(self, study: Study) -> None:
        gold = Item.objects.filter(study=study, is_gold=True).values_list("input_id", flat=True)
        self.gold = frozenset(gold)
        self.of_system: defaultdict[int, dict[int, int]] = defaultdict(dict)
        rows = Output.objects.filter(input__study=study).values_list("pk", "input_id", "system_id")
        for pk, input_id, system_id in rows:
            self.of_system[system_id][input_id] = pk
        self._inputs: dict[int, frozenset[int]] = {}
        self._distinct: dict[frozenset[int], frozenset[int]] = {}
        self._pools: dict[tuple[int, int], frozenset[int]] = {}

    def pools(self, pairs: Sequence[SystemPair]) -> list[frozenset[int]]:
        """Each pair's pool: the inputs with outputs from both its systems, gold inputs
        excluded. Each is made once; pairs whose systems cover the same inputs (as in most
        studies) share one."""
        return [self._pool(p.system_a_id, p.system_b_id) for p in pairs]

    def _pool(self, a: int, b: int) -> frozenset[int]:
        key = (a, b) if a <= b else (b, a)
        if key not in self._pools:
            first, second = self._covered(a), self._covered(b)
            self._pools[key] = first if first is second else first & second
        return self._pools[key]

    def _covered(self, system: int) -> frozenset[int]:
        """The non-gold inputs the system has outputs for: the same object for systems that
        cover the same inputs."""
        if system not in self._inputs:
            mine = frozenset(self.of_system[system].keys() - self.gold)
            self._inputs[system] = self._distinct.setdefault(mine, mine)
        return self._inputs[system]

    def __getitem__(self, key: tuple[int, int]) -> int:
        """The id of the output of ``(input, system)``."""
        input_id, system_id = key
        return self.of_system[system_id][input_id]


def pair_pools(study: Study, pairs: Sequence[SystemPair]) -> list[frozenset[int]]:
    """Each pair's pool (:meth:`StudyOutputs.pools`)."""
    return StudyOutputs(study).pools(pairs)


def items_by_pair(study: Study) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """The work items of every pair, in one statement: per (first, second) system an item
    shows, in system order, each item's ``(input, redundancy)``."""
    first: dict[int, int] = {}
    second: dict[int, int] = {}
    meta: dict[int, tuple[int, int]] = {}
    rows = ItemOutput.objects.filter(item__study=study, item__is_gold=False, position__lt=2)
    for item, input_id, redundancy, position, system in rows.values_list(
        "item_id", "item__input_id", "item__redundancy", "position", "output__system_id"
    ):
        (first if position == 0 else second)[item] = system
        meta[item] = (input_id, redundancy)
    out: defaultdict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for item, system in first.items():
        if item in second:
            out[(system, second[item])].append(meta[item])
    return dict(out)


def item_shape(study: Study) -> str:
    """How the protocol releases and counts the study's items (``Kind.item_shape``:
    ``pair``, ``scored`` or ``several``)."""
    return study.bound_kind().item_shape(study.systems.count())


def pair_used_inputs(study: Study, pair: SystemPair) -> set[int]:
    """The inputs the pair has been given, as its study's human labels count them
    (:func:`human_evidence`)."""
    return human_evidence(study).given(pair)


# --- kinds whose items show several outputs (rankings) ----------------------------------------
def items_shown(study: Study) -> dict[int, list[tuple[frozenset[int], int, int | None]]]:
    """Per input, its (non-gold) items as ``(systems shown, redundancy, round)``: what a
    ranking study has released (an item of m outputs serves the m(m−1)/2 pairs among them)."""
    systems: dict[int, set[int]] = defaultdict(set)
    meta: dict[int, tuple[int, int, int | None]] = {}
    links = ItemOutput.objects.filter(item__study=study, item__is_gold=False).values_list(
        "item_id", "item__input_id", "item__redundancy", "item__round_number", "output__system_id"
    )
    for item, input_id, redundancy, number, system in links:
        systems[item].add(system)
        meta[item] = (input_id, redundancy, number)
    out: dict[int, list[tuple[frozenset[int], int, int | None]]] = defaultdict(list)
    for item in sorted(systems):
        input_id, redundancy, number = meta[item]
        out[input_id].append((frozenset(systems[item]), redundancy, number))
    return dict(out)


def shown_together(
    shown: dict[int, list[tuple[frozenset[int], int, int | None]]], pair: SystemPair
) -> dict[int, int]:
    """Of :func:`items_shown`, the inputs whose items show both systems of the pair, with
    the annotations those items take (their redundancies summed)."""
    a, b = pair.system_a_id, pair.system_b_id
    out: dict[int, int] = {}
    for input_id, items in shown.items():
        for systems, redundancy, _ in items:
            if a in systems and b in systems:
                out[input_id] = out.get(input_id, 0) + redundancy
    return out


# --- scored studies (Likert, error spans): a preference per input from two outputs' scores --
@dataclass(frozen=True)
class ScoredRatings:
    """What the protocol reads of a scored study, for every pair at once: per system the
    inputs whose output has an item (``itemised``; a scored item shows one output and serves
    every pair with that system), per ``(input, system)`` the output's score where its item
    is complete (``scores``: the mean rating over the annotators whose labels count, kept
    exact), and the dead zone of Definition 5 in scale points."""

    itemised: dict[int, frozenset[int]]
    scores: dict[tuple[int, int], Fraction]
    dead_zone: float = 0.0

    def both(self, pair: SystemPair) -> set[int]:
        """Inputs whose outputs of both systems of the pair have an item."""
        return itemised_for_both(self.itemised, pair)


def itemised_for_both(itemised: dict[int, frozenset[int]], pair: SystemPair) -> set[int]:
    """Of ``itemised`` (system → inputs), the inputs itemised for both systems of the pair."""
    empty: frozenset[int] = frozenset()
    return set(itemised.get(pair.system_a_id, empty) & itemised.get(pair.system_b_id, empty))


def scored_itemised(study: Study) -> dict[int, frozenset[int]]:
    """Per system, the inputs whose output has a (non-gold) item of its own (a scored study)."""
    out: dict[int, set[int]] = defaultdict(set)
    single = ItemOutput.objects.filter(item__study=study, item__is_gold=False, position=0).exclude(
        item__item_outputs__position=1
    )
    for input_id, system_id in single.values_list("item__input_id", "output__system_id"):
        out[system_id].add(input_id)
    return {system: frozenset(inputs) for system, inputs in out.items()}


@dataclass(frozen=True)
class Scale:
    """A criterion a scored kind rates on a scale (``Kind.score_scales``), kept exact."""

    name: str
    scale_min: Fraction
    scale_max: Fraction


def scored_criteria(study: Study, criterion: str = "") -> list[Scale]:
    """The criteria whose ratings make an output's score: the named one, or (blank) every
    criterion the study's kind rates on a scale (``Kind.score_scales``); categorical
    criteria have no order and never count."""
    numeric = [
        Scale(name, Fraction(low), Fraction(high))
        for name, low, high in study.bound_kind().score_scales()
    ]
    chosen = [c for c in numeric if c.name == criterion] if criterion else numeric
    if not chosen:
        raise ValueError(
            f"study {study.pk}: "
            + (
                f"'{criterion}' is not a criterion rated on a scale"
                if criterion
                else "no criterion is rated on a scale"
            )
        )
    return chosen


def annotator_rating(scores: dict[str, Any], criteria: list[Scale]) -> Rational | None:
    """One annotator's rating of one output: the mean of their ratings on ``criteria``, each
    mapped linearly onto the scale of the first (the identity when the scales are equal), or
    ``None`` when they rated none of them. Exact: a whole number on the first scale alone
    stays an ``int``, anything else is a ``Fraction``."""
    ref = criteria[0]
    values: list[Rational] = []
    for c in criteria:
        value = scores.get(c.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if c is ref:
            values.append(value if isinstance(value, int) else Fraction(value))
            continue
        values.append(
            ref.scale_min
            + (Fraction(value) - c.scale_min)
            * (ref.scale_max - ref.scale_min)
            / (c.scale_max - c.scale_min)
        )
    if len(values) == 1:
        return values[0]
    return Fraction(sum(values)) / len(values) if values else None


def scored_ratings(study: Study, config: ProtocolConfig | None = None) -> ScoredRatings:
    """Every output's score in a scored study (see :class:`ScoredRatings`), from the study's
    score rows (``annotator.selectors.score_rows``). Only complete items count; flagged
    labels (workers blocked after gold checks) and gold items never do. The criterion and
    dead zone are the study's protocol settings (``ProtocolConfig.scored_criterion``,
    ``scored_dead_zone``)."""
    if config is None:
        config = ProtocolConfig.objects.filter(study=study).first()
    criteria = scored_criteria(study, config.scored_criterion if config else "")
    totals: dict[tuple[int, int], list] = {}
    rows = score_rows(study)
    rows = rows[rows["complete"].astype(bool)]
    per_label: dict[int, tuple[int, int, dict[str, float]]] = {}
    for pk, input_id, system_id, criterion, score in zip(
        rows["annotation"],
        rows["input"],
        rows["system"],
        rows["criterion"],
        rows["score"],
        strict=True,
    ):
        per_label.setdefault(int(pk), (int(input_id), int(system_id), {}))[2][criterion] = score
    for input_id, system_id, scores in per_label.values():
        rating = annotator_rating(scores, criteria)
        if rating is not None:
            total = totals.setdefault((input_id, system_id), [0, 0])
            total[0] += rating
            total[1] += 1
    return ScoredRatings(
        itemised=scored_itemised(study),
        scores={key: Fraction(total) / n for key, (total, n) in totals.items()},
        dead_zone=config.scored_dead_zone if config else 0.0,
    )


def _difference(x: Fraction, y: Fraction) -> float:
    """``float(x - y)``: the exact difference rounded once (an integer division, which
    Python rounds correctly), without building the difference as a ``Fraction``."""
    p, q = x.numerator, x.denominator
    r, s = y.numerator, y.denominator
    return (p * s - r * q) / (q * s)


def scored_labels(pair: SystemPair, ratings: ScoredRatings) -> dict[int, list[int]]:
    """Per input whose outputs of both systems are rated, the one derived preference of the
    pair as an index into [>, =, <]: the sign of the difference of the two outputs' mean
    ratings, a draw within the dead zone (Definition 5). The difference is exact (means of
    whole numbers are fractions), then rounded once, so equal means are always a draw and a
    difference of exactly the dead zone is one too."""
    a, b = pair.system_a_id, pair.system_b_id
    inputs = sorted(
        i for i in ratings.both(pair) if (i, a) in ratings.scores and (i, b) in ratings.scores
    )
    if not inputs:
        return {}
    diff = np.array([_difference(ratings.scores[i, a], ratings.scores[i, b]) for i in inputs])
    codes = preferences_from_scores(diff, np.zeros_like(diff), ratings.dead_zone)
    return {i: [CODE_INDEX[int(c)]] for i, c in zip(inputs, codes, strict=True)}


def score_preference_rows(
    study: Study, pairs: list[SystemPair], ratings: ScoredRatings
) -> pd.DataFrame:
    """The pairs' per-input preferences in a scored study (:func:`scored_labels`) as pair
    preference rows (``input, system, other_system, preference`` with 1 / 0.5 / 0 for
    ``system``, as ``label_rows`` gives them), with the ``round`` in which the later of the
    two outputs' items was released."""
    released = ItemOutput.objects.filter(
        item__study=study, item__is_gold=False, position=0
    ).exclude(item__item_outputs__position=1)
    round_of = {
        (input_id, system_id): number or 0
        for input_id, system_id, number in released.values_list(
            "item__input_id", "output__system_id", "item__round_number"
        )
    }
    out = []
    for pair in pairs:
        a, b = pair.system_a_id, pair.system_b_id
        for input_id, labels in scored_labels(pair, ratings).items():
            number = max(round_of.get((input_id, a), 0), round_of.get((input_id, b), 0))
            out += [(input_id, a, b, 1.0 - index / 2, number) for index in labels]
    return pd.DataFrame(out, columns=["input", "system", "other_system", "preference", "round"])


def human_labels(
    study: Study, pair: SystemPair, rows: pd.DataFrame | None = None
) -> dict[int, list[int]]:
    """Per input, the human labels of the pair as indices into [>, =, <], from the study's
    pair rows (``annotator.selectors.label_rows``; ``rows``: read once for all pairs, else
    here): the kind's overall preference between the pair's two systems (on an item that
    shows ``system_b`` first, turned round); flagged labels (workers blocked after gold
    checks) and gold items left out."""
    if rows is None:
        rows = label_rows(study)
    labels: dict[int, list[int]] = defaultdict(list)
    overall = rows[rows["criterion"] == study.bound_kind().overall_criterion()]
    a, b = pair.system_a_id, pair.system_b_id
    for first, second, flip in ((a, b, False), (b, a, True)):  # an item may show b first
        mine = overall[(overall["system"] == first) & (overall["other_system"] == second)]
        for input_id, preference in zip(mine["input"], mine["preference"], strict=True):
            preference = 1.0 - float(preference) if flip else float(preference)
            labels[int(input_id)].append(PREFERENCE_INDEX[preference])
    return labels


def metric_labels(study: Study, pair: SystemPair, judge: str, dead_zone: float) -> dict[int, int]:
    """Per input, the metric's preference for the pair as an index into [>, =, <]: from a
    preference rating (either orientation) or from two scalar scores by the sign of their
    difference (Definition 5, with an optional dead zone)."""
    a, b = pair.system_a_id, pair.system_b_id
    out: dict[int, int] = {}
    ratings = JudgeRating.objects.filter(
        study=study, judge=judge, criterion="", sample=0, parse_ok=True
    )
    for input_id, system, label in ratings.filter(
        Q(system_id=a, other_system_id=b) | Q(system_id=b, other_system_id=a)
    ).values_list("input_id", "system_id", "label"):
        index = LABEL_INDEX.get(label)
        if index is not None and system == b:
            index = 2 - index  # the rating's A is the pair's b
        if index is not None:
            out[input_id] = index
    scores: dict[int, dict[int, float]] = defaultdict(dict)
    for input_id, system, score in ratings.filter(
        other_system=None, system_id__in=[a, b], score__isnull=False
    ).values_list("input_id", "system_id", "score"):
        scores[input_id][system] = score
    both = [i for i, s in scores.items() if a in s and b in s and i not in out]
    if both:
        codes = preferences_from_scores(
            np.array([scores[i][a] for i in both]),
            np.array([scores[i][b] for i in both]),
            dead_zone,
        )
        out.update({i: CODE_INDEX[int(c)] for i, c in zip(both, codes, strict=True)})
    return out


# --- the human labels of a pair, by item shape ------------------------------------------------
class PairLabels:
    """The human labels of a study whose items give their pairs labels (item shape ``pair``
    or ``several``): every label counts (:func:`human_labels`; the study's pair rows read
    once, for all pairs)."""

    ratings: ScoredRatings | None = None

    def __init__(
        self,
        study: Study,
        rows: pd.DataFrame | None = None,
        items: dict[tuple[int, int], list[tuple[int, int]]] | None = None,
    ) -> None:
        self.study = study
        self.rows = rows if rows is not None else label_rows(study)
        if items is not None:
            self._items = items  # already read (:func:`items_by_pair`)

    def labels(self, pair: SystemPair) -> dict[int, list[int]]:
        """Per input, the pair's labels as indices into [>, =, <]."""
        return human_labels(self.study, pair, self.rows)

    @cached_property
    def _items(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        return items_by_pair(self.study)

    def given(self, pair: SystemPair) -> set[int]:
        """The inputs with an item of the pair."""
        return {i for i, _ in self._items.get((pair.system_a_id, pair.system_b_id), [])}


class ScoredLabels:
    """The human labels of a scored study (item shape ``scored``): one derived label per
    input, by the sign of the two outputs' score difference (:func:`scored_labels`; the
    study's ratings read once, for all pairs)."""

    rows: pd.DataFrame | None = None

    def __init__(self, study: Study, config: ProtocolConfig | None = None) -> None:
        self.study = study
        self.ratings = scored_ratings(study, config)

    def labels(self, pair: SystemPair) -> dict[int, list[int]]:
        """Per input, the pair's one label as an index into [>, =, <]."""
        return scored_labels(pair, self.ratings)

    def given(self, pair: SystemPair) -> set[int]:
        """The inputs whose outputs of both systems have an item (whichever pair asked)."""
        return self.ratings.both(pair)


def human_evidence(study: Study, config: ProtocolConfig | None = None) -> PairLabels | ScoredLabels:
    """The study's human labels as the protocol counts them, by its item shape
    (:func:`item_shape`); ``config``: the scored settings (criterion, dead zone)."""
    if item_shape(study) == "scored":
        return ScoredLabels(study, config)
    return PairLabels(study)


def pair_evidence(
    study: Study,
    pair: SystemPair,
    judge: str = "",
    dead_zone: float = 0.0,
    *,
    humans: PairLabels | ScoredLabels | None = None,
) -> dict[str, Any]:
    """Counts for Algorithm 1: human ``[n>, n=, n<]``; with a metric, the confusion
    ``n[c, c']`` (metric said c, a human c') on human-rated inputs, counted per human label,
    and the metric-only counts ``m`` on inputs no human rated for this pair (never the
    metric ratings of human-rated inputs again).

    Pairwise and ranking studies count every human label; scored studies one derived label
    per input (``humans``: :func:`human_evidence`, read once for all pairs, else here).
    ``dead_zone`` is the metric's (``ProtocolConfig.metric_dead_zone``)."""
    evidence_of = humans if humans is not None else human_evidence(study)
    by_input = evidence_of.labels(pair)
    human = np.zeros(3, dtype=np.int64)
    for labels in by_input.values():
        human += np.bincount(labels, minlength=3)
    evidence: dict[str, Any] = {"human": human, "confusion": None, "metric": None}
    if judge:
        metric = metric_labels(study, pair, judge, dead_zone)
        confusion = np.zeros((3, 3), dtype=np.int64)
        only = np.zeros(3, dtype=np.int64)
        given = evidence_of.given(pair)
        for input_id, c in metric.items():
            if input_id in given:
                for c_human in by_input.get(input_id, []):
                    confusion[c, c_human] += 1
            else:
                only[c] += 1
        evidence["confusion"], evidence["metric"] = confusion, only
    return evidence


def partial_order(study: Study) -> dict[str, Any]:
    """Systems and the decided ``winner → loser`` edges, with each system's layer (the
    longest chain of wins above it), for drawing the partial order."""
    names = dict(study.systems.values_list("pk", "name"))
    edges, implied = [], []
    for pair in SystemPair.objects.filter(study=study, state=SystemPair.State.DECIDED):
        loser = pair.system_b_id if pair.winner_id == pair.system_a_id else pair.system_a_id
        edges.append((pair.winner_id, loser))
        implied.append(bool(pair.evidence.get("implied_by")))
    layer = dict.fromkeys(names, 0)
    for _ in range(len(names)):  # longest path in a DAG by relaxation
        changed = False
        for winner, loser in edges:
            if layer[loser] < layer[winner] + 1:
                layer[loser] = layer[winner] + 1
                changed = True
        if not changed:
            break
    return {
        "systems": [{"name": names[pk], "layer": layer[pk]} for pk in sorted(names, key=names.get)],
        "edges": [  # "implied": decided by implication (only on such edges)
            {"winner": names[w], "loser": names[lo], **({"implied": True} if imp else {})}
            for (w, lo), imp in zip(edges, implied, strict=True)
        ],
    }


def _predicted(pair: SystemPair) -> list[dict[str, Any]] | None:
    """The predicted outcome of the decision on all the pair's inputs, as of its last look."""
    pred = pair.evidence.get("predicted")
    if not pred:
        return None
    return [
        {"outcome": f"{pair.system_a.name} wins", "probability": pred["a"]},
        {"outcome": f"{pair.system_b.name} wins", "probability": pred["b"]},
        {"outcome": "undecided", "probability": pred["undecided"]},
    ]


def dashboard(study: Study) -> dict[str, Any]:
    """The pair matrix (state, θ, counts), budget spent per round and the partial order.
    The budget is always in annotations; a Likert study's pair counts are in inputs (one
    preference per input from the two outputs' mean ratings)."""
    config = getattr(study, "protocol", None)
    pairs = []
    for pair in SystemPair.objects.filter(study=study).select_related(
        "system_a", "system_b", "winner"
    ):
        pairs.append(
            {
                "system_a": pair.system_a.name,
                "system_b": pair.system_b.name,
                "state": pair.state,
                "winner": pair.winner.name if pair.winner else None,
                "theta": pair.theta,
                "human_counts": pair.evidence.get("human"),
                "metric_counts": pair.evidence.get("metric"),
                "outcome": pair.evidence.get("outcome"),
                "status": pair_status(
                    pair.state,
                    pair.evidence.get("outcome"),
                    pair.winner.name if pair.winner else None,
                    pair.evidence.get("implied_by"),
                ),
                # decided by implication: the chain of decided pairs, winner first
                "implied_by": pair.evidence.get("implied_by"),
                "predicted": _predicted(pair),
                "decided_in_round": pair.decided_in_round,
            }
        )
    collected = dict(
        Item.objects.filter(study=study, is_gold=False, round_number__isnull=False)
        .values("round_number")
        .annotate(n=Count("annotations", filter=Q(annotations__source="platform")))
        .values_list("round_number", "n")
    )
    rounds, spent = [], 0
    for rnd in Round.objects.filter(study=study).order_by("number"):
        spent += collected.get(rnd.number, 0)
        rounds.append(
            {
                "number": rnd.number,
                "state": rnd.state,
                "items": rnd.items,
                "committed": rnd.committed,
                "collected": collected.get(rnd.number, 0),
                "spent_so_far": spent,
            }
        )
    scored = item_shape(study) == "scored"
    criterion = ((config.scored_criterion if config else "") or "mean") if scored else None
    return {
        "study": study.pk,
        "kind": study.kind,
        "kind_label": study.kind_impl.noun,
        "scored": scored,
        # what a pair's counts count: every human label, or one derived label per input
        "human_counts_unit": "inputs" if scored else "labels",
        "scored_criterion": criterion,
        "budget": study.budget,
        "committed": config.committed if config else 0,
        "spent": spent,
        "paper_protocol": config.paper if config else None,
        "metric_judge": (config.metric_judge or None) if config else None,
        "pairs": pairs,
        "rounds": rounds,
        "partial_order": partial_order(study),
    }


#: Bootstrap resamples of the dashboard's ranking (computed on each page view).
DASHBOARD_N_BOOT = 200
_OUTCOME_OF_INDEX = (vocab.A, vocab.TIE, vocab.B)


def ranking_comparisons(study: Study) -> list[dict[str, Any]]:
    """The human preferences of every system pair as comparisons ``input, system_a,
    system_b, outcome`` ("A", "tie", "B"), counted as the protocol counts them: every human
    label of a pairwise study, one derived label per input of a Likert study."""
    humans = human_evidence(study)
    rows = []
    pairs = SystemPair.objects.filter(study=study).select_related("system_a", "system_b")
    for pair in pairs.order_by("pk"):
        for input_id, labels in sorted(humans.labels(pair).items()):
            rows += [
                {
                    "input": input_id,
                    "system_a": pair.system_a.name,
                    "system_b": pair.system_b.name,
                    "outcome": _OUTCOME_OF_INDEX[index],
                }
                for index in labels
            ]
    return rows


def ranking(study: Study, n_boot: int = DASHBOARD_N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Bradley-Terry scores of the study's systems from its human labels so far
    (:func:`ranking.bradley_terry.bradley_terry`: a tie is half a win to each side, Elo-like
    scale, percentile bootstrap over inputs): ``rows`` best first, ``reason`` when undefined."""
    import pandas as pd

    from ranking.bradley_terry import bradley_terry

    comparisons = ranking_comparisons(study)
    out: dict[str, Any] = {"rows": [], "n_boot": n_boot, "n_comparisons": len(comparisons)}
    if not comparisons:
        return out | {"reason": "no human labels yet"}
    table = bradley_terry(pd.DataFrame(comparisons), n_boot=n_boot, seed=seed)
    rows = table.astype(object).where(table.notna(), None).to_dict("records")
    for row in rows:
        for key in ("score", "low", "high"):
            row[key] = None if row[key] is None else float(row[key])
        for key in ("rank", "wins", "losses", "ties", "n"):
            row[key] = None if row[key] is None else int(row[key])
        row["reason"] = table.attrs["reason"] if row["score"] is None else ""
    return out | {
        "rows": rows,
        "reason": table.attrs["reason"],
        "n_inputs": table.attrs["n_inputs"],
    }
