"""REST endpoint of the study report (JSON). Token or session auth; the same visibility
rule as the label export (``studies_visible_to``): other studies answer 404."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import selectors
from analysis.views import MAX_N_BOOT
from annotator.selectors import studies_visible_to


class ReportQuerySerializer(serializers.Serializer):
    threshold = serializers.FloatField(
        min_value=0,
        max_value=1,
        default=0.1,
        help_text="Soft-vote tie threshold on |p_A - p_B| (ORA: 0.1 between model families, "
        "0.2 within one).",
    )
    include_flagged = serializers.BooleanField(
        default=False,
        help_text="Keep labels of workers blocked after gold checks (excluded by default; "
        "counted either way).",
    )
    n_boot = serializers.IntegerField(
        min_value=0,
        max_value=MAX_N_BOOT,
        default=1000,
        help_text="Bootstrap resamples over items for every interval (0: none).",
    )
    seed = serializers.IntegerField(min_value=0, default=0, help_text="Bootstrap seed.")
    interval = serializers.BooleanField(
        default=False,
        help_text="Also report Krippendorff's alpha at the interval level (numeric scales).",
    )


class StudyReportView(APIView):
    """The study report as JSON: reliability, win rates, Likert summaries, human vs judge,
    stratified agreement, perception-chart data, position bias and the prioritisation check
    for each judged property. An undefined figure has ``value: null`` and a ``reason``."""

    @extend_schema(
        parameters=[ReportQuerySerializer],
        responses={
            200: OpenApiResponse(
                response=OpenApiTypes.OBJECT,
                description="The report (schema `humeval.report/1`; see docs/analysis.md).",
            ),
            400: OpenApiResponse(description="A query parameter is out of range."),
            404: OpenApiResponse(description="No such study, or not one you may read."),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        study = get_object_or_404(studies_visible_to(request.user), pk=pk)
        query = ReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(selectors.study_report(study, **query.validated_data))
