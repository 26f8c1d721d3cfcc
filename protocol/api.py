"""The protocol's state as JSON: pair matrix, rounds and budget, partial order."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from annotator.api import FormatNegotiation
from annotator.openapi import ApiSchema
from annotator.selectors import studies_visible_to

from . import selectors


class ProtocolStateView(APIView):
    content_negotiation_class = FormatNegotiation
    schema = ApiSchema()

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        description="Pairs (state, winner, θ, counts), rounds with the budget spent, and the "
        "partial order of the systems.",
    )
    def get(self, request, pk: int) -> Response:
        study = get_object_or_404(studies_visible_to(request.user), pk=pk)
        return Response(selectors.dashboard(study))
