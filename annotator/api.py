"""REST API: studies, labels with provenance, imports. Token or session auth."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response

from . import selectors, services
from .errors import ImportRejected
from .filters import LabelFilter
from .models import Annotation
from .renderers import CSVRenderer, JSONLinesRenderer
from .serializers import (
    ImportResultSerializer,
    ImportSerializer,
    LabelSerializer,
    RatingsImportResultSerializer,
    RatingsImportSerializer,
    StudySerializer,
)

REJECTED = OpenApiResponse(description="The file was rejected; `errors` lists why.")


class LabelPagination(CursorPagination):
    """Cursor pages; for CSV and JSONL the rows are the body and the next page is in ``Link``."""

    ordering = "id"
    page_size = 1000
    page_size_query_param = "page_size"
    max_page_size = 10000

    def get_paginated_response(self, data):
        if self.request.accepted_renderer.format in ("csv", "jsonl"):
            links = [
                f'<{url}>; rel="{rel}"'
                for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
                if url
            ]
            return Response(data, headers={"Link": ", ".join(links)} if links else None)
        return super().get_paginated_response(data)


class CanImport(permissions.BasePermission):
    message = "You may not create studies."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and (user.is_staff or user.has_perm("annotator.add_study")))


class StudyLabelsView(generics.ListAPIView):
    """Labels of one study with their provenance, in system order.

    Formats: `?format=json` (cursor pages), `jsonl` and `csv` (rows in the body, the next
    page in the `Link` header). Filters: `system`, `pair=a,b`, `annotator`, `round`,
    `submitted_after`, `submitted_before`, `source`, `flagged`.
    """

    serializer_class = LabelSerializer
    filterset_class = LabelFilter
    filter_backends = [DjangoFilterBackend]
    pagination_class = LabelPagination
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, JSONLinesRenderer, CSVRenderer]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Annotation.objects.none()
        study = get_object_or_404(
            selectors.studies_visible_to(self.request.user), pk=self.kwargs["pk"]
        )
        return selectors.annotations_for_export(study)


class StudyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Studies you may read: all for staff, else those that name you as a researcher."""

    serializer_class = StudySerializer
    filter_backends: list = []

    def get_queryset(self):
        return (
            selectors.studies_visible_to(self.request.user)
            .prefetch_related("criteria", "systems")
            .order_by("id")
        )

    def _upload(self, request, form_class, store, result) -> Response:
        """Validate the upload form, hand the file to ``store``; a rejected file answers 400
        with every reason and nothing stored."""
        form = form_class(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        try:
            stored = store(upload.read(), upload.name, form.validated_data)
        except ImportRejected as exc:
            return Response(
                {"detail": "The file was rejected; nothing was imported.", "errors": exc.errors},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(result(stored), status=status.HTTP_201_CREATED)

    @extend_schema(
        request={"multipart/form-data": ImportSerializer},
        responses={201: ImportResultSerializer, 400: REJECTED},
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        parser_classes=[MultiPartParser, FormParser],
        permission_classes=[permissions.IsAuthenticated, CanImport],
        serializer_class=ImportSerializer,
    )
    def import_study(self, request):
        def store(data: bytes, name: str, fields: dict):
            overrides = {k: fields[k] for k in ("name", "kind") if k in fields}
            return services.study_import(
                data, filename=name, overrides=overrides, owner=request.user
            )

        return self._upload(
            request, ImportSerializer, store, lambda s: ImportResultSerializer(s).data
        )

    @extend_schema(
        request={"multipart/form-data": RatingsImportSerializer},
        responses={201: RatingsImportResultSerializer, 400: REJECTED},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="ratings",
        parser_classes=[MultiPartParser, FormParser],
        serializer_class=RatingsImportSerializer,
    )
    def import_ratings(self, request, pk=None):
        """Add metric or LLM-judge ratings to a study you may read."""
        study = self.get_object()

        def store(data: bytes, name: str, fields: dict) -> int:
            return services.judge_ratings_import(
                study, data, filename=name, judge=fields.get("judge", "")
            )

        return self._upload(request, RatingsImportSerializer, store, lambda n: {"imported": n})
