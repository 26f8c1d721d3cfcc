"""Frames for the study report, read from the database (reads only; the figures come from
the pure :mod:`analysis.report`).

The frames are the ones :mod:`analysis.loaders` builds from a label export, so a report
computed here equals the report of ``python -m analysis report`` on that study's export:

* one annotation row per (annotation, property): pairwise labels under the property
  ``preference`` (system order, ``Annotation.value``), Likert scores under their criterion;
* one item row per item: input id, ``system_a`` (the system of ``output_a``), ``system_b``
  (of ``output_b``; none for a Likert item), the input's ``priority`` and the gold flag;
* judge ratings (``JudgeRating``) mapped onto items by :func:`analysis.loaders.attach_judges`:
  a preference stored in the order (``system``, ``other_system``) is flipped where the item's
  A is ``other_system``; a Likert score per (input, system, criterion) goes to the Likert item
  of that output; per-output metric scores become preferences by the sign of their difference.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.db.models import Count

from analysis.aggregation import PAIRWISE_LABELS
from analysis.loaders import PREFERENCE_PROPERTY, Dataset, attach_judges
from analysis.report import Property, build_report
from annotator.choices import StudyKind
from annotator.models import Annotation, Item, JudgeRating, Study

__all__ = ["study_dataset", "study_judges", "study_properties", "study_report"]

_RAW_TO_LABEL = {"left": "A", "right": "B"}
_CHUNK = 5000


def study_properties(study: Study, observed: set[str] | None = None) -> list[Property]:
    """The study's judged properties: its pairwise preference (the allowed answers plus any
    label present in the data), or one property per Likert criterion with its scale."""
    if study.kind == StudyKind.PAIRWISE:
        allowed = {_RAW_TO_LABEL.get(str(a), str(a)) for a in study.pairwise_answers()}
        allowed |= observed or set()
        labels = tuple(x for x in PAIRWISE_LABELS if x in allowed)
        return [Property(PREFERENCE_PROPERTY, "pairwise", labels, title=study.question or "")]
    props = []
    for c in study.criteria.all():
        if c.labels:
            props.append(Property(c.name, "categorical", tuple(str(x) for x in c.labels), c.label))
        else:
            props.append(
                Property(c.name, "ordinal", tuple(range(c.scale_min, c.scale_max + 1)), c.label)
            )
    return props


def study_dataset(study: Study) -> Dataset:
    """Annotation and item frames of one study, with its property declarations."""
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "annotation",
            "item",
            "annotator",
            "label",
            "property",
            "raw",
            "source",
            "flagged",
            "is_gold",
        )
    }
    rows = (
        Annotation.objects.filter(study=study)
        .order_by("id")
        .values_list(
            "pk",
            "item_id",
            "annotator__pseudonym",
            "value",
            "scores",
            "raw_answer",
            "source",
            "is_flagged",
            "item__is_gold",
        )
    )
    observed: set[str] = set()
    for pk, item, who, value, scores, raw, source, flagged, gold in rows.iterator(_CHUNK):
        labels = [(PREFERENCE_PROPERTY, value)] if value else list((scores or {}).items())
        if value:
            observed.add(value)
        for prop, label in labels:
            if label is None or label == "":
                continue
            cols["annotation"].append(pk)
            cols["item"].append(item)
            cols["annotator"].append(who)
            cols["label"].append(label)
            cols["property"].append(prop)
            cols["raw"].append(raw or None)
            cols["source"].append(source)
            cols["flagged"].append(bool(flagged))
            cols["is_gold"].append(bool(gold))
    annotations = pd.DataFrame(cols)
    annotations["label"] = annotations["label"].astype(object)
    items = pd.DataFrame.from_records(
        Item.objects.filter(study=study)
        .order_by("id")
        .values_list(
            "pk",
            "input__external_id",
            "output_a__system__name",
            "output_b__system__name",
            "input__priority",
            "is_gold",
        )
        .iterator(_CHUNK),
        columns=["item", "input_id", "system_a", "system_b", "priority", "is_gold"],
    )
    if not items["priority"].notna().any():
        items = items.drop(columns="priority")
    return Dataset(
        annotations,
        items,
        study_properties(study, observed),
        title=study.name,
        source=f"study {study.pk}",
    )


def study_judges(study: Study, dataset: Dataset) -> tuple[pd.DataFrame, list[str]]:
    """The study's judge and metric ratings mapped onto its items (see the module docstring).

    Every parsed sample enters, with its ``sample`` number (the report reads sample 0, and
    all samples for the agreement among a judge's samples); answers ``run_judge`` could not
    parse are counted in a note, never used."""
    unparsed = (
        JudgeRating.objects.filter(study=study, sample=0, parse_ok=False)
        .values("judge")
        .annotate(n=Count("pk"))
        .order_by("judge")
    )
    unparsed_notes = [
        f"judge '{row['judge']}': {row['n']} answers could not be parsed and are left out"
        for row in unparsed
    ]
    records = pd.DataFrame.from_records(
        JudgeRating.objects.filter(study=study, parse_ok=True)
        .order_by("id")
        .values_list(
            "judge",
            "input__external_id",
            "system__name",
            "other_system__name",
            "criterion",
            "label",
            "score",
            "sample",
            "pk",
        )
        .iterator(_CHUNK),
        columns=[
            "judge", "input_id", "system", "system_b", "criterion", "label", "score", "sample",
            "pk",
        ],
    )  # fmt: skip
    if not len(records):
        return pd.DataFrame(columns=["item", "judge", "label", "property", "sample"]), (
            unparsed_notes
        )
    records["item"] = None
    records["where"] = [f"rating {pk}" for pk in records.pop("pk")]
    frames, notes = [], []
    for sample, group in records.groupby("sample", sort=True):
        frame, sample_notes = attach_judges(
            group.drop(columns="sample"), dataset.items, dataset.properties
        )
        frames.append(frame.assign(sample=int(sample)))
        notes += sample_notes if sample == 0 else []
    return pd.concat(frames, ignore_index=True), notes + unparsed_notes


def study_report(
    study: Study,
    *,
    threshold: float = 0.1,
    include_flagged: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    interval: bool = False,
    worker_models: bool = False,
) -> dict[str, Any]:
    """The report of one study (see :func:`analysis.report.build_report`)."""
    dataset = study_dataset(study)
    judges, notes = study_judges(study, dataset)
    if not len(dataset.annotations):
        notes = ["the study has no labels yet", *notes]
    return build_report(
        dataset.annotations,
        dataset.properties,
        judges=judges if len(judges) else None,
        items=dataset.items,
        threshold=threshold,
        include_flagged=include_flagged,
        n_boot=n_boot,
        seed=seed,
        interval=interval,
        worker_models=worker_models,
        title=dataset.title,
        source=dataset.source,
        notes=notes,
    )
