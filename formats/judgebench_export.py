"""Write a study's labels as a Judge-Bench dataset (pure: plain data in, a JSON document out).

The document is what the Judge-Bench reader (:mod:`formats.judgebench`) takes:
``dataset`` (the study's name); ``annotations``, one per judged property (a pairwise study's
``preference``, categorical with the allowed answers; a Likert criterion, graded with
``worst``/``best`` or categorical with ``labels_list``); ``instances``, one per item, with
``id``, the input and outputs, the systems' names and ``input_id``, and per property the
human scores and ``majority_human``.

Position *k* of the human scores is the same worker in every instance (``null`` where that
worker gave no label), so per-worker figures survive the round trip. The majority is the
most frequent label, ``null`` when several tie for first. Readers map ``both_good`` and
``both_bad`` to a tie. docs/import-formats.md shows an example.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import vocab

__all__ = ["JudgeBenchProperty", "judgebench_chunks", "judgebench_document", "majority"]

#: The property name of a pairwise study's preference (as in the report).
PREFERENCE = "preference"
#: The platform's pairwise labels in system order, as both readers map them.
PAIRWISE_LABELS = vocab.PAIRWISE_LABELS


@dataclass(frozen=True)
class JudgeBenchProperty:
    """One judged property: categorical with ``labels``, or graded from ``worst`` to ``best``."""

    metric: str
    labels: tuple[str, ...] = ()
    worst: int | None = None
    best: int | None = None
    description: str = ""

    def declaration(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric}
        if self.labels:
            out |= {"category": "categorical", "labels_list": list(self.labels)}
        else:
            out |= {"category": "graded", "worst": self.worst, "best": self.best}
        if self.description:
            out["description"] = self.description
        return out


@dataclass
class _Instance:
    ident: str
    body: dict[str, Any]
    scores: dict[str, dict[int, Any]] = field(default_factory=dict)


def majority(scores: Iterable[Any]) -> Any:
    """The most frequent non-null score; ``None`` without scores or when several tie."""
    counts = Counter(s for s in scores if s is not None).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def judgebench_document(
    name: str,
    properties: list[JudgeBenchProperty],
    items: Iterable[Mapping[str, Any]],
    labels: Iterable[tuple[Any, str, Mapping[str, Any]]],
) -> dict[str, Any]:
    """The Judge-Bench document of a study, in memory (:func:`judgebench_chunks` writes the
    same document piece by piece).

    ``items``: one mapping per item with ``id`` and the instance fields (see the module
    docstring), in order. ``labels``: ``(item id, worker, {property: label or score})``
    per label, in submission order; a worker's place in ``individual_human_scores`` is the
    order in which workers first appear. A worker with a second label on one item takes a
    place of its own for it, so no label is lost.
    """
    items = list(items)
    scores = _scores(properties, labels, {item["id"] for item in items})
    return {
        "dataset": name,
        "annotations": [p.declaration() for p in properties],
        "instances": [_instance(_item(item, scores), properties) for item in items],
    }


def judgebench_chunks(
    name: str,
    properties: list[JudgeBenchProperty],
    items: Iterable[Mapping[str, Any]],
    labels: Iterable[tuple[Any, str, Mapping[str, Any]]],
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The text of :func:`judgebench_document`'s document as ``json.dumps(document,
    ensure_ascii=False, indent=1)`` writes it, and a newline, one instance at a time: only
    the labels' scores are held (read first, as a worker's place depends on every label),
    never the items' texts. ``progress(n)`` is called every :data:`PROGRESS_EVERY`
    instances and at the end with the number written. A label naming an item that never
    came raises ``ValueError`` at the end."""
    scores = _scores(properties, labels, None)
    head = json.dumps(
        {"dataset": name, "annotations": [p.declaration() for p in properties]},
        ensure_ascii=False,
        indent=1,
    )
    written = 0
    for item in items:
        text = json.dumps(_instance(_item(item, scores), properties), ensure_ascii=False, indent=1)
        text = text.replace("\n", "\n  ")
        yield (head[:-2] + ',\n "instances": [\n  ' if not written else ",\n  ") + text
        written += 1
        if progress is not None and written % PROGRESS_EVERY == 0:
            progress(written)
    yield (head[:-2] + ',\n "instances": []\n}\n') if not written else "\n ]\n}\n"
    if scores:
        item_id, (worker, _) = next(iter(scores.items()))
        raise ValueError(f"a label of worker {worker!r} names an unknown item {item_id!r}")
    if progress is not None:
        progress(written)


#: How often :func:`judgebench_chunks` reports progress (instances).
PROGRESS_EVERY = 500


def _item(item: Mapping[str, Any], scores: dict[Any, Any]) -> _Instance:
    body = {k: v for k, v in item.items() if k != "id" and v is not None}
    _, by_metric = scores.pop(item["id"], (None, {}))
    return _Instance(str(item["id"]), body, by_metric)


def _scores(
    properties: list[JudgeBenchProperty],
    labels: Iterable[tuple[Any, str, Mapping[str, Any]]],
    known: set[Any] | None,
) -> dict[Any, tuple[str, dict[str, dict[int, Any]]]]:
    """Per item id, (its first label's worker, {property: {place: score}})."""
    declared = {p.metric for p in properties}
    scores: dict[Any, tuple[str, dict[str, dict[int, Any]]]] = {}
    places: dict[str, int] = {}
    extra = 0
    for item_id, worker, values in labels:
        if known is not None and item_id not in known:
            raise ValueError(f"a label of worker {worker!r} names an unknown item {item_id!r}")
        by_metric = scores.setdefault(item_id, (worker, {}))[1]
        place = places.setdefault(worker, len(places) + extra)
        for metric, value in values.items():
            if metric not in declared or value is None or value == "":
                continue
            by_place = by_metric.setdefault(metric, {})
            where = place
            if where in by_place:  # the same worker twice on one item: a place of its own
                extra += 1
                where = len(places) + extra - 1
            by_place[where] = value
    return scores


def _instance(inst: _Instance, properties: list[JudgeBenchProperty]) -> dict[str, Any]:
    judged = {}
    for prop in properties:
        by_place = inst.scores.get(prop.metric)
        if not by_place:
            continue
        scores = [by_place.get(k) for k in range(max(by_place) + 1)]
        judged[prop.metric] = {
            "individual_human_scores": scores,
            "majority_human": majority(scores),
        }
    return {"id": inst.ident, "instance": inst.body, "annotations": judged}
