"""Guideline revisions (docs/languages.md): the wording workers were given — a study's
question, instructions (and their versions per language), criteria and qualification test —
kept as one text per revision, with who made it and when. Editing any of it makes a new
revision; every label carries the number in force (``Annotation.guideline_revision``, copied
from ``Study.guideline_revision`` by the worker cycle with no extra statement)."""

from __future__ import annotations

import difflib
import json

from django.db import transaction

from .models import GuidelineRevision, QualificationTest, Study


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def guideline_text(study: Study) -> str:
    """The study's worker-facing wording as text, one labelled part after another (what a
    revision keeps and its diff compares)."""
    lines = [f"question: {study.question}", "instructions:", study.instructions or ""]
    for language, text in sorted((study.instructions_by_language or {}).items()):
        lines += [f"instructions [{language}]:", text]
    criteria = (study.options or {}).get("criteria")
    if criteria:
        lines += ["criteria:", *(_json(c) for c in criteria)]
    test = study.qualification
    if test is not None:
        lines += [
            f"qualification: {test.name} · pass {test.pass_threshold} · "
            f"attempts {test.max_attempts}",
            test.instructions or "",
        ]
        for q in test.questions.all().order_by("order", "pk"):
            lines.append(
                f"question {q.order}: {_json(q.prompt)} · outputs {_json(q.outputs)} · "
                f"expected {_json(q.expected)}"
            )
    return "\n".join(lines)


def revision_baseline(study_pk: int) -> None:
    """Before an edit: keep the stored wording as the revision in force when the study has
    none recorded yet (studies made before revisions existed, or never edited)."""
    study = Study.objects.filter(pk=study_pk).first()
    if study is not None and not study.revisions.exists():
        GuidelineRevision.objects.create(
            study=study, number=study.guideline_revision, text=guideline_text(study)
        )


def revision_record(study: Study, *, by=None) -> GuidelineRevision | None:
    """After an edit: a new revision when the wording changed (the study's number rises, so
    labels from now on carry it); ``None`` when nothing workers read changed."""
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        text = guideline_text(locked)
        last = locked.revisions.order_by("-number").first()
        if last is not None and last.text == text:
            return None
        number = locked.guideline_revision if last is None else last.number + 1
        revision = GuidelineRevision.objects.create(
            study=locked, number=number, text=text, created_by=by
        )
        Study.objects.filter(pk=locked.pk).update(guideline_revision=number)
    study.guideline_revision = number
    return revision


def studies_of_test(test: QualificationTest) -> list[int]:
    return list(Study.objects.filter(qualification=test).values_list("pk", flat=True))


def revision_diff(revision: GuidelineRevision) -> str:
    """The revision against the one before it, as a unified diff (empty for the first)."""
    before = (
        GuidelineRevision.objects.filter(study_id=revision.study_id, number__lt=revision.number)
        .order_by("-number")
        .first()
    )
    if before is None:
        return ""
    return "\n".join(
        difflib.unified_diff(
            before.text.splitlines(),
            revision.text.splitlines(),
            f"revision {before.number}",
            f"revision {revision.number}",
            lineterm="",
        )
    )
