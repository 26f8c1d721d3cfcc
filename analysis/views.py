"""The study report page (HTML with inline SVG charts). Login required; a user sees the
reports of the studies the API lets them read (``studies_visible_to``), others get 404."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from analysis import selectors
from analysis.render import report_context
from annotator.selectors import studies_visible_to

MAX_N_BOOT = 10_000


class ReportOptionsForm(forms.Form):
    """Query parameters of the report (the same as the API's)."""

    threshold = forms.FloatField(
        min_value=0,
        max_value=1,
        required=False,
        initial=0.1,
        widget=forms.NumberInput(attrs={"placeholder": "0.1", "step": "any"}),
        label="tie threshold",
        help_text="Soft vote: an item counts as a tie when the two sides' shares of its "
        "labels differ by at most this (0–1).",
    )
    include_flagged = forms.BooleanField(
        required=False,
        label="include flagged labels",
        help_text="Also count the labels of blocked workers (too many missed gold checks, "
        "or blocked by hand); left out by default.",
    )
    n_boot = forms.IntegerField(
        min_value=0,
        max_value=MAX_N_BOOT,
        required=False,
        initial=1000,
        widget=forms.NumberInput(attrs={"placeholder": "1000"}),
        label="bootstrap resamples",
        help_text="Resamples over items for every interval (0: no intervals).",
    )
    interval = forms.BooleanField(
        required=False,
        label="also compute Krippendorff's alpha at the interval level",
        help_text="Besides the alpha at each property's own level, treat numeric labels "
        "(Likert scores) as equally spaced numbers. Undefined for categorical labels.",
    )

    worker_models = forms.BooleanField(
        required=False,
        label="also compute worker-weighted labels (Dawid-Skene, MACE)",
        help_text="Labels weighted by each worker's estimated reliability, with that "
        "reliability per worker. A few seconds on a few hundred labels, longer on a large "
        "study.",
    )

    def options(self) -> dict:
        data = self.cleaned_data
        return {
            "threshold": 0.1 if data.get("threshold") is None else data["threshold"],
            "include_flagged": bool(data.get("include_flagged")),
            "n_boot": 1000 if data.get("n_boot") is None else data["n_boot"],
            "interval": bool(data.get("interval")),
            "worker_models": bool(data.get("worker_models")),
        }


@login_required
def study_report(request: HttpRequest, pk: int) -> HttpResponse:
    study = get_object_or_404(studies_visible_to(request.user), pk=pk)
    form = ReportOptionsForm(request.GET)
    if form.is_valid():
        options = form.options()
        report = report_context(selectors.study_report(study, **options))
    else:
        options, report = None, None
    return render(
        request,
        "analysis/report.html",
        {"study": study, "form": form, "options": options, "report": report},
        status=200 if options is not None else 400,
    )
