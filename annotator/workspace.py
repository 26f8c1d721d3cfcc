"""Reads for the researcher's study workspace (the panel on a study's admin page): the launch
checklist, entry links, live progress, the cost estimate's inputs and the item preview.

The adaptive protocol's rounds come through ``collection_for(study).round_summary``
(``annotator`` imports no other app)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.urls import reverse
from django.utils import timezone

from . import selectors
from .choices import AssignmentState
from .collection import collection_for
from .estimate import CostEstimate, cost_estimate
from .invites import entry_urls
from .models import Annotation, Assignment, Item, Study

#: A worker counts as active with a live lease or an answer within this long.
ACTIVE_WINDOW = timedelta(minutes=10)


#: Workers whose answers a script posted (``annotator.simulated_crowd``): their times are
#: drawn, not measured, so no median time counts them.
SIMULATED_PLATFORM = "simulated"


def measured_times(study: Study) -> tuple[float | None, int]:
    """Median time on task, in seconds, of the labels people gave on the platform, and how
    many labels it is over (simulated workers' labels are left out)."""
    times = list(
        Annotation.objects.filter(study=study, source="platform", time_spent_ms__isnull=False)
        .exclude(annotator__platform=SIMULATED_PLATFORM)
        .values_list("time_spent_ms", flat=True)
        .order_by()
    )
    return (statistics.median(times) / 1000 if times else None), len(times)


def median_seconds(study: Study) -> float | None:
    """Median time on task of the labels people gave on the platform, in seconds."""
    return measured_times(study)[0]


def simulated_labels(study: Study) -> int:
    """Labels posted by simulated workers (``simulate_crowd``)."""
    return Annotation.objects.filter(
        study=study, source="platform", annotator__platform=SIMULATED_PLATFORM
    ).count()


def rounds(study: Study) -> dict[str, Any] | None:
    """The adaptive protocol's summary of the study's rounds, if it keeps any."""
    return collection_for(study).round_summary(study)


def progress(study: Study, now: datetime | None = None) -> dict[str, Any]:
    """What a researcher watches while a study runs: annotations submitted of the target,
    workers active now, median time per item, spend against budget and rounds (adaptive)."""
    now = now or timezone.now()
    counts = selectors.study_progress(study)
    leasing = Assignment.objects.filter(
        study=study, state=AssignmentState.ISSUED, expires_at__gt=now
    ).values_list("annotator_id", flat=True)
    answering = Annotation.objects.filter(
        study=study, source="platform", submitted_at__gte=now - ACTIVE_WINDOW
    ).values_list("annotator_id", flat=True)
    active = len(set(leasing) | set(answering))
    adaptive = study.collection == "adaptive"
    spent = counts["collected"]
    return {
        **counts,
        "active_workers": active,
        "active_minutes": int(ACTIVE_WINDOW.total_seconds() // 60),
        "median_seconds": median_seconds(study),
        "simulated": simulated_labels(study),
        "adaptive": adaptive,
        "spent": spent,
        "budget": study.budget if adaptive else None,
        "budget_percent": (
            round(100 * spent / study.budget) if adaptive and study.budget else None
        ),
        "rounds": rounds(study) if adaptive else None,
    }


def item_slots(study: Study) -> int:
    """Annotations the study's (non-gold, active) items ask for: items × redundancy."""
    total = Item.objects.filter(study=study, is_active=True, is_gold=False).aggregate(
        n=Sum("redundancy")
    )["n"]
    return total or 0


def estimate(study: Study) -> CostEstimate:
    """The cost and time estimate of ``study`` (:func:`annotator.estimate.cost_estimate`),
    over the same annotations the progress counts (work items × redundancy)."""
    measured, n = measured_times(study)
    return cost_estimate(
        item_slots=item_slots(study),
        adaptive=study.collection == "adaptive",
        budget=study.budget,
        measured_seconds=measured,
        measured_n=n,
        expected_seconds=study.expected_seconds_per_item,
        pay_per_hour=study.pay_per_hour,
        currency=study.pay_currency,
        fee_percent=study.platform_fee_percent,
    )


@dataclass(frozen=True)
class Check:
    """One line of the launch checklist: ``required`` lines block a launch when not ``ok``;
    the others are recommended. ``fix`` is where to put it right (a URL or an anchor)."""

    name: str
    ok: bool
    detail: str
    required: bool = True
    fix: str = ""
    fix_text: str = ""


def checklist(study: Study, *, checks_action: bool = False) -> list[Check]:
    """What a study needs before workers arrive, with what is missing and where to fix it.

    ``checks_action``: whether the admin offers the action that prepares gold checks and a
    qualification test (else the management command is named)."""
    systems = study.systems.count()
    items = Item.objects.filter(study=study, is_active=True).aggregate(
        work=Count("id", filter=Q(is_gold=False)),
        gold=Count("id", filter=Q(is_gold=True)),
        known=Count("id", filter=Q(is_gold=False) & ~Q(expected={})),
    )
    create = reverse("admin:annotator_study_import")
    least = study.bound_kind().outputs_per_item(systems)  # systems an item shows
    checks = []
    enough = items["work"] >= 1 and systems >= least
    need = f"at least {least} systems and 1 item" if least > 1 else "at least 1 item"
    checks.append(
        Check(
            "Content",
            enough,
            f"{systems} systems, {items['work']} items (a {study.kind} study needs {need}).",
            fix="" if enough else create,
            fix_text="" if enough else "Create the study again from a complete file",
        )
    )
    if study.qualification_id:
        checks.append(
            Check(
                "Qualification test",
                True,
                f"'{study.qualification}' ({study.qualification.questions.count()} questions).",
                required=False,
            )
        )
    else:
        checks.append(
            Check(
                "Qualification test",
                False,
                "No qualification test: every worker starts on real work.",
                required=False,
                fix="#id_qualification",
                fix_text="Choose a test",
            )
        )
    if checks_action:
        prepare = reverse("admin:annotator_study_changelist")
        prepare_text = "Select the study and run 'Prepare gold checks and a qualification test'"
    else:
        prepare, prepare_text = "", f"Run: python manage.py prepare_checks {study.pk}"
    checks.append(
        Check(
            "Gold checks",
            items["gold"] > 0,
            f"{items['gold']} gold checks"
            + (f"; {items['known']} items have a known answer." if items["known"] else "."),
            required=False,
            fix="" if items["gold"] else prepare,
            fix_text="" if items["gold"] else prepare_text,
        )
    )
    checks.append(
        Check(
            "Accepting workers",
            study.is_active,
            "Entry links below are live." if study.is_active else "The study is switched off.",
            fix="" if study.is_active else "#id_is_active",
            fix_text="" if study.is_active else "Tick 'Is active'",
        )
    )
    codes = [
        label
        for label, value in (
            ("completion", study.completion_code),
            ("fail", study.fail_code),
            ("no work", study.no_work_code),
        )
        if not value
    ]
    checks.append(
        Check(
            "Completion codes (Prolific)",
            not codes,
            "All three codes are set." if not codes else f"Missing: {', '.join(codes)} code.",
            required=False,
            fix="#id_completion_code" if codes else "",
            fix_text="Set the codes Prolific gave you" if codes else "",
        )
    )
    if study.collection == "adaptive":
        checks.append(
            Check(
                "Budget",
                study.budget is not None,
                f"At most {study.budget} annotations."
                if study.budget is not None
                else "An adaptive study needs a budget.",
                fix="" if study.budget is not None else "#id_budget",
                fix_text="" if study.budget is not None else "Set the budget",
            )
        )
    priced = study.pay_per_hour is not None
    checks.append(
        Check(
            "Pay rate",
            priced,
            f"{study.pay_per_hour} {study.pay_currency} per hour." if priced else "Not set.",
            required=False,
            fix="" if priced else "#id_pay_per_hour",
            fix_text="" if priced else "Enter the pay rate",
        )
    )
    return checks


def entry_links(study: Study, absolute: Callable[[str], str]) -> list[dict[str, str]]:
    """The links that bring workers in, made absolute by ``absolute`` (the request's
    ``build_absolute_uri``); the open link only when open links are on.

    Only the path goes through ``absolute``: it percent-encodes a query's braces, and
    Prolific fills in ``{{%PROLIFIC_PID%}}`` only as written, so the query is kept as is."""

    def full(url: str) -> str:
        path, sep, query = url.partition("?")
        return absolute(path) + sep + query

    urls = entry_urls(study)
    links = [
        {"name": "Prolific study URL", "url": full(urls["prolific"])},
        {"name": "MTurk external question URL", "url": full(urls["mturk"])},
        {
            "name": "Personal invitation links (command; or 'Make invitation links' below)",
            "url": f"python manage.py invite_links {study.pk} --count 20",
        },
    ]
    if study.open_links:
        links.append({"name": "Open link (replace WORKER_ID)", "url": full(urls["open"])})
    return links


@dataclass(frozen=True)
class PreviewStep:
    """An item to preview and its neighbours in the study's item order."""

    item: Item
    position: int
    total: int
    previous_id: int | None
    next_id: int | None


def preview_step(study: Study, item_id: int | None = None) -> PreviewStep | None:
    """Item ``item_id`` of ``study`` (default: its first item) with the ids before and after
    it; ``None`` when the study has no such item."""
    ids = list(Item.objects.filter(study=study).order_by("id").values_list("id", flat=True))
    if not ids:
        return None
    target = ids[0] if item_id is None else item_id
    if target not in ids:
        return None
    index = ids.index(target)
    item = (
        Item.objects.select_related("input").prefetch_related("item_outputs__output").get(pk=target)
    )
    return PreviewStep(
        item=item,
        position=index + 1,
        total=len(ids),
        previous_id=ids[index - 1] if index > 0 else None,
        next_id=ids[index + 1] if index + 1 < len(ids) else None,
    )
