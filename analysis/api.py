"""REST endpoint of the study report (JSON). Token or session auth; the same visibility
rule as the label export (``studies_visible_to``): other studies answer 404."""

from __future__ import annotations

import re

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import selectors
from analysis.views import MAX_N_BOOT
from annotator.api import FormatNegotiation
from annotator.openapi import ApiSchema
from annotator.selectors import studies_visible_to
from annotator.serializers import VALIDATION_ERROR_SCHEMA

_JSON_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false``, as the schema's boolean is written in a query (not ``yes``,
    ``1`` or ``on``, which the schema does not allow)."""

    def to_internal_value(self, data):
        if data in (True, False):
            return data
        if data in ("true", "false"):
            return data == "true"
        self.fail("invalid", input=data)


class StrictIntegerField(serializers.IntegerField):
    """An integer as JSON writes it (not ``1.0`` or `` 1``)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not _JSON_INTEGER.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A number as JSON writes it (not ``1_0``, `` 1`` or ``nan``)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not _JSON_NUMBER.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class ReportQuerySerializer(serializers.Serializer):
    """The report's query: each value exactly as its OpenAPI schema allows, else 400."""

    threshold = StrictFloatField(
        min_value=0,
        max_value=1,
        default=0.1,
        help_text="Soft-vote tie threshold on |p_A - p_B| (ORA: 0.1 between model families, "
        "0.2 within one).",
    )
    include_flagged = StrictBooleanField(
        default=False,
        help_text="Keep labels of workers blocked after gold checks (excluded by default; "
        "counted either way).",
    )
    n_boot = StrictIntegerField(
        min_value=0,
        max_value=MAX_N_BOOT,
        default=1000,
        help_text="Bootstrap resamples over items for every interval (0: none).",
    )
    seed = StrictIntegerField(  # MACE seeds numpy's RandomState: 32 bits
        min_value=0, max_value=2**32 - 1, default=0, help_text="Bootstrap seed."
    )
    interval = StrictBooleanField(
        default=False,
        help_text="Also report Krippendorff's alpha at the interval level (numeric scales).",
    )
    worker_models = StrictBooleanField(
        default=False,
        help_text="Also report Dawid-Skene and MACE labels with each worker's reliability "
        "(seconds to minutes on a large study).",
    )


class StudyReportView(APIView):
    """The study report as JSON: reliability, win rates, Likert summaries, human vs judge,
    stratified agreement, perception-chart data, position bias and the prioritisation check
    for each judged property. An undefined figure has ``value: null`` and a ``reason``."""

    content_negotiation_class = FormatNegotiation
    schema = ApiSchema()

    @extend_schema(
        parameters=[ReportQuerySerializer],
        responses={
            200: OpenApiResponse(
                response=OpenApiTypes.OBJECT,
                description="The report (schema `humeval.report/1`; see docs/analysis.md).",
            ),
            400: OpenApiResponse(
                VALIDATION_ERROR_SCHEMA, description="A query parameter is out of range."
            ),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        study = get_object_or_404(studies_visible_to(request.user), pk=pk)
        query = ReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(selectors.study_report(study, **query.validated_data))
