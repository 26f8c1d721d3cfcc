"""The researcher's dashboard of an adaptive study (a page saying so for any other study).
No logic beyond HTTP."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotator.selectors import studies_visible_to, study_progress
from charts.ranking import ranking_chart

from . import charts, selectors
from .outcome import protocol_outcome, views_compared


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
    ranking = selectors.ranking(study)
    context = {
        "study": study,
        "data": data,
        "ranking": ranking,
        "ranking_chart": ranking_chart(ranking["rows"], "Bradley-Terry ranking from the labels"),
        "systems": systems,
        "matrix": matrix,
        "outcome": protocol_outcome(data),
        "compared": views_compared(data, ranking),
        "order_chart": charts.partial_order_chart(data["partial_order"]),
        "budget_chart": charts.budget_chart(data["rounds"], data["budget"]),
    }
    return render(request, "protocol/dashboard.html", context)
