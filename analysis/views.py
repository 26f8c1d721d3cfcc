"""The study report page (HTML with inline SVG charts). Login required; a user sees the
reports of the studies the API lets them read (``studies_visible_to``), others get 404."""

from __future__ import annotations

import base64
import hashlib

from csp.decorators import csp_update
from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from analysis import selectors
from analysis.render import REPORT_CSS, render_html
from annotator.selectors import studies_visible_to

MAX_N_BOOT = 10_000
#: The report's one inline ``<style>`` element (``render_html``), allowed by its hash.
_REPORT_CSS_SHA256 = base64.b64encode(hashlib.sha256(REPORT_CSS.encode()).digest()).decode()
REPORT_STYLE_HASH = f"'sha256-{_REPORT_CSS_SHA256}'"


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

    def options(self) -> dict:
        data = self.cleaned_data
        return {
            "threshold": 0.1 if data.get("threshold") is None else data["threshold"],
            "include_flagged": bool(data.get("include_flagged")),
            "n_boot": 1000 if data.get("n_boot") is None else data["n_boot"],
            "interval": bool(data.get("interval")),
        }


@csp_update({"style-src": [REPORT_STYLE_HASH]})
@login_required
def study_report(request: HttpRequest, pk: int) -> HttpResponse:
    study = get_object_or_404(studies_visible_to(request.user), pk=pk)
    form = ReportOptionsForm(request.GET)
    if form.is_valid():
        options = form.options()
        report = selectors.study_report(study, **options)
        # render_html escapes every piece of text that comes from the data
        report_html = mark_safe(render_html(report))  # noqa: S308
    else:
        options, report_html = None, ""
    return render(
        request,
        "analysis/report.html",
        {"study": study, "form": form, "options": options, "report_html": report_html},
        status=200 if options is not None else 400,
    )
