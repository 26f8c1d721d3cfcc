"""The researcher's dashboard of an adaptive study (a page saying so for any other study).
No logic beyond HTTP."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from annotator.selectors import studies_visible_to, study_progress

from . import charts, selectors
from .outcome import protocol_outcome


@login_required
def dashboard(request: HttpRequest, pk: int) -> HttpResponse:
    study = get_object_or_404(studies_visible_to(request.user), pk=pk)
    if study.collection != "adaptive":
        context = {"study": study, "progress": study_progress(study)}
        return render(request, "protocol/not_adaptive.html", context)
    data = selectors.dashboard(study)
    systems = sorted(
        {p["system_a"] for p in data["pairs"]} | {p["system_b"] for p in data["pairs"]}
    )
    cells = {(p["system_a"], p["system_b"]): p for p in data["pairs"]}
    matrix = [
        {
            "system": row,
            "cells": [cells.get((row, col)) or cells.get((col, row)) for col in systems],
        }
        for row in systems
    ]
    context = {
        "study": study,
        "data": data,
        "systems": systems,
        "matrix": matrix,
        "outcome": protocol_outcome(data),
        # both drawings escape every name they contain
        "order_svg": mark_safe(charts.partial_order_svg(data["partial_order"])),  # noqa: S308
        "budget_svg": mark_safe(charts.budget_svg(data["rounds"], data["budget"])),  # noqa: S308
    }
    return render(request, "protocol/dashboard.html", context)
