"""REST API: studies, labels with provenance, imports. Token or session auth."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import FileResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotAcceptable, NotFound, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from . import importers, jobs, selectors, services
from .choices import AnnotationSource
from .errors import ImportRejected, NoJudgeBenchForm
from .filters import PAIR_PATTERN, TEXT_PATTERN, LabelFilter
from .models import Annotation, ImportJob
from .openapi import JUDGEBENCH_SCHEMA, ApiSchema
from .renderers import CSVRenderer, JSONLinesRenderer
from .serializers import (
    REJECTED_FILE_SCHEMA,
    VALIDATION_ERROR_SCHEMA,
    ImportJobSerializer,
    ImportResultSerializer,
    ImportSerializer,
    LabelSerializer,
    RatingsImportResultSerializer,
    RatingsImportSerializer,
    StudySerializer,
)

REJECTED = OpenApiResponse(
    VALIDATION_ERROR_SCHEMA,
    description="The file was rejected (`errors` lists why) or a form field is invalid; "
    "nothing was stored.",
)
TOO_LARGE = OpenApiResponse(
    REJECTED_FILE_SCHEMA,
    description="The file is above the import size limit (`HUMEVAL_IMPORT_MAX_BYTES`).",
)
NO_JUDGEBENCH_FORM = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "detail": {"type": "string"},
            "kind": {"type": "string"},
            "judgebench_kinds": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["detail", "kind", "judgebench_kinds"],
    },
    description="The study's kind has no Judge-Bench form (ranking, error spans): `detail` "
    "says so, `kind` names it and `judgebench_kinds` the kinds that export as Judge-Bench.",
)
PAGE_SIZE_HELP = "Labels per page: a whole number, at least 1 (at most 10000 are sent)."
#: Room for the multipart envelope around an upload at the size limit.
MULTIPART_SLACK = 64 * 1024


@csrf_exempt
def not_found(request, *args, **kwargs) -> JsonResponse:
    """Any other URL under ``/api/`` (a study id that is not a number, say): the API's JSON
    404, not the site's HTML page."""
    return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)


class FormatNegotiation(DefaultContentNegotiation):
    """``?format=`` naming no format of the view answers 406 with the formats it has (DRF's
    default is a bare 404 "Not found")."""

    def filter_renderers(self, renderers, format):
        chosen = [renderer for renderer in renderers if renderer.format == format]
        if not chosen:
            supported = ", ".join(renderer.format for renderer in renderers)
            raise NotAcceptable(f"Unsupported format '{format}'; supported formats: {supported}.")
        return chosen


class StudyPagination(PageNumberPagination):
    """Page numbers; a ``page`` that is not one written in ASCII digits (empty, ``last``, a
    word, `` 1``, an Arabic-Indic digit) or is past the end answers 404 "Invalid page"."""

    last_page_strings = ()

    def get_page_number(self, request, paginator):
        page = request.query_params.get(self.page_query_param, "1")
        return page if re.fullmatch(r"[0-9]+", page) else "invalid"


class LabelPagination(CursorPagination):
    """Cursor pages; for CSV and JSONL the rows are the body and the next page is in ``Link``."""

    ordering = "id"
    page_size = 1000
    page_size_query_param = "page_size"
    max_page_size = 10000

    def get_page_size(self, request) -> int:
        """``page_size``: a whole number ≥ 1 (above the maximum: the maximum); anything else
        is an error rather than silently the default."""
        value = request.query_params.get(self.page_size_query_param)
        if value is None:
            return self.page_size
        if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
            raise ValidationError({self.page_size_query_param: [PAGE_SIZE_HELP]})
        return min(int(value), self.max_page_size)

    def decode_cursor(self, request) -> Cursor | None:
        """DRF's decoding, plus a position that must be a label id (ordering is ``id``): a
        cursor that does not come from ``next``/``previous`` (bad base64, ``p=abc``, an empty
        or out-of-range position) answers 404 "Invalid cursor" instead of failing the query."""
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            position = cursor.position
            if not re.fullmatch(r"-?[0-9]{1,19}", position) or not (
                -(2**63) <= int(position) < 2**63
            ):
                raise NotFound(self.invalid_cursor_message)
        return cursor

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
    """Creating a study needs the Django permission ``annotator.add_study`` (superusers have
    every permission); being staff is not enough."""

    message = "You may not create studies (the permission annotator.add_study is missing)."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.has_perm("annotator.add_study"))


LINK = OpenApiParameter(
    "Link",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description='CSV and JSONL: `<url>; rel="next"` and `<url>; rel="prev"` where there are '
    "more pages.",
)


@extend_schema_view(
    get=extend_schema(
        parameters=[
            LINK,
            OpenApiParameter(
                "page_size", {"type": "integer", "minimum": 1}, description=PAGE_SIZE_HELP
            ),
            OpenApiParameter(
                "system",
                OpenApiTypes.STR,
                pattern=TEXT_PATTERN,
                description="Labels on items that show this system.",
            ),
            OpenApiParameter(
                "pair",
                OpenApiTypes.STR,
                pattern=PAIR_PATTERN,
                description="Labels on items that show these two systems: 'sys1,sys2'.",
            ),
            OpenApiParameter(
                "annotator",
                OpenApiTypes.STR,
                pattern=TEXT_PATTERN,
                description="Pseudonymous annotator id.",
            ),
            OpenApiParameter(
                "source",
                OpenApiTypes.STR,
                enum=[choice.value for choice in AnnotationSource],
                description="Where the label comes from: `platform` (collected here from a "
                "worker) or `import` (imported with the dataset, e.g. Judge-Bench human "
                "scores).",
            ),
            OpenApiParameter(
                "cursor",
                OpenApiTypes.STR,
                description="The page to read: copy it from `next` / `previous` (JSON) or "
                "`Link` (CSV, JSON Lines). Any other value answers 404 `Invalid cursor`.",
            ),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(
                LabelSerializer(many=True),
                description="JSON: a cursor page. JSON Lines: one label object per line. "
                "CSV: a header row (the label fields, Likert scores as `score_<criterion>` "
                "columns, then the kind's own columns: pairwise criteria, a ranking's "
                "`systems`/`display_order`/`ranking`, error spans' `score`/`spans`/…), then "
                "one row per label. CSV and JSON Lines name the next page in `Link`. The "
                "columns of each kind: docs/import-formats.md.",
            ),
            (200, "application/jsonl"): OpenApiTypes.STR,
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
)
class StudyLabelsView(generics.ListAPIView):
    """Labels of one study with their provenance, in system order.

    Formats: `?format=json` (cursor pages), `jsonl` and `csv` (rows in the body, the next
    page in the `Link` header); any other format answers 406 naming these three. Filters:
    `system`, `pair=a,b`, `annotator`, `round`, `submitted_after`, `submitted_before`,
    `source` (`platform` or `import`), `flagged`.
    """

    serializer_class = LabelSerializer
    filterset_class = LabelFilter
    filter_backends = [DjangoFilterBackend]
    pagination_class = LabelPagination
    # No browsable HTML here: `format` is one of the three data formats the schema names.
    renderer_classes = [JSONRenderer, JSONLinesRenderer, CSVRenderer]
    content_negotiation_class = FormatNegotiation
    schema = ApiSchema()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Annotation.objects.none()
        study = get_object_or_404(
            selectors.studies_visible_to(self.request.user), pk=self.kwargs["pk"]
        )
        return selectors.annotations_for_export(study)

    def finalize_response(self, request, response, *args, **kwargs):
        """Keep the Content-Type of an empty body (JSON Lines with no labels), which DRF
        drops when it renders nothing."""
        response = super().finalize_response(request, response, *args, **kwargs)
        renderer = getattr(response, "accepted_renderer", None)
        if renderer is not None and hasattr(response, "add_post_render_callback"):
            content_type = f"{renderer.media_type}; charset={renderer.charset}"
            response.add_post_render_callback(
                lambda rendered: rendered.setdefault("Content-Type", content_type)
            )
        return response


class StudyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Studies you may read: those that name you as a researcher (all for superusers)."""

    serializer_class = StudySerializer
    filter_backends: list = []
    pagination_class = StudyPagination
    content_negotiation_class = FormatNegotiation
    schema = ApiSchema()

    def get_queryset(self):
        return (
            selectors.studies_visible_to(self.request.user)
            .prefetch_related("systems")
            .order_by("id")
        )

    def _upload(self, request, form_class, store, result) -> Response:
        """Validate the upload form, hand the uploaded file itself to ``store`` (the service
        reads it, in chunks for a study); a rejected file answers 400 with every reason and
        nothing stored. A file above the import size limit answers 413: before the request
        body is parsed when its declared length already says so, else before the file is
        read (its size is known once uploaded)."""
        limit = importers.max_import_bytes()
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        try:
            if declared > limit + MULTIPART_SLACK:
                raise importers.too_large(None, limit)
            form = form_class(data=request.data)
            form.is_valid(raise_exception=True)
            upload = form.validated_data["file"]
            stored = store(upload, upload.name, form.validated_data)
            if isinstance(stored, Response):  # handed to a background job
                return stored
        except ImportRejected as exc:
            return Response(
                {"detail": "The file was rejected; nothing was imported.", "errors": exc.errors},
                status=exc.status,
            )
        return Response(result(stored), status=status.HTTP_201_CREATED)

    @extend_schema(
        description="Create a study from a file. A file above `HUMEVAL_IMPORT_JOB_BYTES` is "
        "imported in the background: the answer is 202 with the job (`Location`: its URL); "
        "poll it until `status` is `done` (then `study`) or `failed` (then `errors`).",
        request={"multipart/form-data": ImportSerializer},
        responses={
            201: ImportResultSerializer,
            202: ImportJobSerializer,
            400: REJECTED,
            413: TOO_LARGE,
        },
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
        def store(data: UploadedFile, name: str, fields: dict):
            overrides = {k: fields[k] for k in ("name", "kind") if k in fields}
            if (data.size or 0) > settings.HUMEVAL_IMPORT_JOB_BYTES:
                job = jobs.import_job_create(data, overrides=overrides, owner=request.user)
                job.refresh_from_db()
                url = request.build_absolute_uri(f"/api/jobs/{job.public_id}/")
                body = ImportJobSerializer(job).data | {"url": url}
                return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
            return services.study_import(
                data, filename=name, overrides=overrides, owner=request.user
            )

        return self._upload(
            request, ImportSerializer, store, lambda s: ImportResultSerializer(s).data
        )

    @extend_schema(
        description="The study's labels as one Judge-Bench dataset (`dataset`, `annotations` "
        "declaring each property, `instances` with `individual_human_scores` and "
        "`majority_human`), unpaged and streamed; flagged labels are left out, as in the "
        "report. `python -m analysis report` and `import_study` read it back. A study with "
        "more than `HUMEVAL_EXPORT_JOB_LABELS` labels, or any with `async=1`, is exported in "
        "the background: the answer is 202 with the job (`Location`: its URL); poll it until "
        "`status` is `done` (then `download`, kept until `expires_at`) or `failed`.",
        parameters=[
            OpenApiParameter(
                "async",
                enum=["0", "1"],
                required=False,
                description="`1`: export in the background whatever the study's size; `0` "
                "(the default): only above the threshold. Anything else is a 400.",
            )
        ],
        responses={
            200: JUDGEBENCH_SCHEMA,
            202: ImportJobSerializer,
            400: OpenApiResponse(description="`async` is neither `0` nor `1`."),
            409: NO_JUDGEBENCH_FORM,
        },
    )
    @action(detail=True, methods=["get"], url_path="judgebench", pagination_class=None)
    def judgebench(self, request, pk=None):
        """A study's labels as a Judge-Bench dataset (202 and a job for a large one); 409
        for a kind without that form."""
        asked = request.query_params.get("async", "0")
        if asked not in ("0", "1"):
            raise ValidationError({"async": ["Give 1 (in the background) or 0."]})
        study = self.get_object()
        try:
            chunks = selectors.study_judgebench_chunks(study)
        except NoJudgeBenchForm as exc:
            body = {"detail": exc.message, "kind": exc.kind, "judgebench_kinds": exc.kinds}
            return Response(body, status=exc.status)
        if jobs.export_job_needed(study, asked == "1"):
            chunks.close()  # nothing was read
            job = jobs.export_job_create(study, owner=request.user)
            job.refresh_from_db()
            url = request.build_absolute_uri(f"/api/jobs/{job.public_id}/")
            body = ImportJobSerializer(job, context={"request": request}).data | {"url": url}
            return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
        return StreamingHttpResponse(
            (chunk.encode() for chunk in chunks), content_type="application/json"
        )

    @extend_schema(
        request={"multipart/form-data": RatingsImportSerializer},
        responses={201: RatingsImportResultSerializer, 400: REJECTED, 413: TOO_LARGE},
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

        def store(data: UploadedFile, name: str, fields: dict) -> int:
            return services.judge_ratings_import(
                study, data, filename=name, judge=fields.get("judge", "")
            )

        return self._upload(request, RatingsImportSerializer, store, lambda n: {"imported": n})


class ImportJobView(generics.RetrieveAPIView):
    """A background job: an import started by `POST /api/studies/import/` or a Judge-Bench
    export started by `GET /api/studies/{id}/judgebench/` (only its owner sees it)."""

    serializer_class = ImportJobSerializer
    permission_classes = [permissions.IsAuthenticated]
    lookup_field = "public_id"
    schema = ApiSchema()

    def get_queryset(self):
        return ImportJob.objects.filter(owner=self.request.user).select_related("study")


class JobDownloadView(generics.GenericAPIView):
    """A finished export's file, streamed, to the job's owner while it is kept (else 404)."""

    permission_classes = [permissions.IsAuthenticated]
    lookup_field = "public_id"
    schema = ApiSchema()

    def get_queryset(self):
        return ImportJob.objects.filter(
            owner=self.request.user, operation=ImportJob.Operation.EXPORT
        )

    @extend_schema(
        responses={
            (200, "application/json"): JUDGEBENCH_SCHEMA,
            404: OpenApiResponse(description="No such export of yours, or no longer kept."),
        }
    )
    def get(self, request, public_id=None):
        job = self.get_object()
        path = jobs.export_job_file(job)
        if path is None:
            raise NotFound("This export is not finished or is no longer kept.")
        return FileResponse(
            path.open("rb"),
            as_attachment=True,
            filename=job.filename,
            content_type="application/json",
        )
