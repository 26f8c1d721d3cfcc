"""Frames for the study report, read from the database (reads only; the figures come from
the pure :mod:`analysis.report`).

The frames are the ones :mod:`analysis.loaders` builds from a label export, so a report
computed here equals the report of ``python -m analysis report`` on that study's export
(but for the style-controlled ranking, which needs the outputs' texts, :func:`with_style_counts`):

* one annotation row per (annotation, property), as the study's kind reads its answers
  (``annotator.selectors.report_rows``): pairwise labels under the property ``preference``
  (system order), Likert scores under their criterion;
* one item row per item: input id, ``system_a`` (the system of the item's first output),
  ``system_b`` (of its second; none for a Likert item), the input's ``priority`` and the
  gold flag;
* judge ratings (``JudgeRating``) mapped onto items by
  :func:`analysis.loaders_judges.attach_judges`:
  a preference stored in the order (``system``, ``other_system``) is flipped where the item's
  A is ``other_system``; a Likert score per (input, system, criterion) goes to the Likert item
  of that output; per-output metric scores become preferences by the sign of their difference.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.db.models import Count

from analysis.loaders import Dataset
from analysis.loaders_judges import attach_judges
from analysis.prefill_report import with_skip
from analysis.report import Property, build_report, json_safe
from analysis.revisions import by_revision
from analysis.sections import kind_sections
from analysis.style import markdown_counts
from analysis.style_report import STYLE_COLUMNS
from annotator.models import JudgeRating, Study
from annotator.prefill_skip import skip_counts
from annotator.selectors import (
    annotation_revisions,
    answer_rows,
    item_texts,
    report_items,
    report_properties,
    report_rows,
)

__all__ = [
    "study_dataset",
    "study_judges",
    "study_kind_sections",
    "study_properties",
    "study_report",
]

_CHUNK = 5000


def study_properties(study: Study, observed: dict[str, set] | None = None) -> list[Property]:
    """The study's judged properties, as its kind declares them: a pairwise preference (the
    allowed answers plus any label present in the data, ``observed``: property → labels),
    or one property per Likert criterion with its scale."""
    return [
        Property(name, scale, labels, title=title)
        for name, scale, labels, title in report_properties(study, observed or {})
    ]


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
    observed: dict[str, set] = {}
    for pk, item, who, prop, label, raw, source, flagged, gold in report_rows(study):
        if label is None or label == "":
            continue
        observed.setdefault(prop, set()).add(label)
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
        report_items(study),
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


def study_kind_sections(
    study: Study,
    *,
    include_flagged: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """The sections the study's kind adds to its report (``Kind.report_sections``), built by
    :mod:`analysis.sections` from its stored answers (gold items left out)."""
    names = study.kind_impl.report_sections
    if not names:
        return []
    frame = pd.DataFrame.from_records(
        list(answer_rows(study, include_flagged=include_flagged)),
        columns=["annotation", "item", "annotator", "input", "system", "answer"],
    )
    sections = kind_sections(names, frame, n_boot=n_boot, seed=seed, confidence=confidence)
    counts = skip_counts(study)  # judge-clean items skipped (annotator/prefill_skip.py)
    return sections if counts is None else with_skip(sections, frame, counts, confidence)


def with_style_counts(study: Study, dataset: Dataset) -> pd.DataFrame:
    """The items with their answers' style counts (:mod:`analysis.style_report`) when the
    study has a pairwise property: the style-controlled ranking needs the outputs' texts,
    which a label export does not carry (so only the platform's report shows it)."""
    items = dataset.items
    if not len(items) or not any(p.scale == "pairwise" for p in dataset.properties):
        return items
    counts = {(i, pos): markdown_counts(text) for i, pos, text in item_texts(study)}
    rows = []
    for key in items["item"]:
        if isinstance(key, str) and ":" in key:  # "pk:i-j", a pair of a ranking item
            pk, pair = key.split(":", 1)
            i, j = (int(x) for x in pair.split("-"))
            ca, cb = counts.get((int(pk), i)), counts.get((int(pk), j))
        else:
            ca, cb = counts.get((key, 0)), counts.get((key, 1))
        if ca is not None and cb is not None:
            rows.append((key, *ca, *cb))
    style = pd.DataFrame(rows, columns=["item", *STYLE_COLUMNS])
    return items.merge(style, on="item", how="left") if len(style) else items


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
    report = build_report(
        dataset.annotations,
        dataset.properties,
        judges=judges if len(judges) else None,
        items=with_style_counts(study, dataset),
        threshold=threshold,
        include_flagged=include_flagged,
        n_boot=n_boot,
        seed=seed,
        interval=interval,
        worker_models=worker_models,
        title=dataset.title,
        source=dataset.source,
        notes=notes,
        kind_sections=study_kind_sections(
            study, include_flagged=include_flagged, n_boot=n_boot, seed=seed
        ),
    )
    # agreement and position bias per guideline revision (analysis/revisions.py)
    report["revisions"] = json_safe(
        by_revision(
            dataset.annotations,
            dataset.properties,
            annotation_revisions(study),
            study.guideline_revision,
            include_flagged=include_flagged,
            seed=seed,
        )
    )
    return report
