from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

import kinds

from .models import ImportJob, Study
from .selectors import label_row


class StudySerializer(serializers.ModelSerializer):
    options = serializers.SerializerMethodField(
        help_text="The kind's settings with its defaults: answer switches (allow_tie …), "
        "criteria, strength and the other options of docs/import-formats.md."
    )
    systems = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    entry_url = serializers.SerializerMethodField(
        help_text="Worker link; append a worker id as the 'worker' query parameter."
    )

    class Meta:
        model = Study
        fields = [
            "id",
            "public_id",
            "name",
            "kind",
            "description",
            "question",
            "redundancy",
            "batch_size",
            "budget",
            "gamma",
            "lease_seconds",
            "items_per_worker",
            "is_active",
            "config_version",
            "options",
            "systems",
            "entry_url",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_options(self, study: Study) -> dict:
        return {k: v for k, v in study.kind_settings.items() if k != "collection"}

    def get_entry_url(self, study: Study) -> str:
        request = self.context.get("request")
        path = f"/w/{study.public_id}/?worker="
        return request.build_absolute_uri(path) if request else path


class LabelSerializer(serializers.Serializer):
    """One label with its provenance (see ``annotator.selectors.label_row``)."""

    annotation_id = serializers.IntegerField()
    study_id = serializers.IntegerField()
    study_config_version = serializers.IntegerField()
    guideline_revision = serializers.IntegerField(
        help_text="The guideline revision in force when the label was made (docs/languages.md)."
    )
    item_id = serializers.IntegerField()
    input_id = serializers.CharField()
    round = serializers.IntegerField(allow_null=True)
    is_gold = serializers.BooleanField()
    system_a = serializers.CharField(
        allow_null=True,
        help_text="The item's first system (system order): the rated one of a Likert or "
        "error-span item; empty for an item of more than two outputs (ranking: `systems`).",
    )
    system_b = serializers.CharField(
        allow_null=True, help_text="The second system of a pairwise item; else empty."
    )
    left_system = serializers.CharField(
        allow_null=True,
        help_text="System shown on the left of a pairwise item (display order); else empty.",
    )
    raw_answer = serializers.CharField(
        allow_null=True, help_text="Answer as given: left / right / tie / both_good / both_bad."
    )
    label = serializers.CharField(
        allow_null=True, help_text="Answer in system order: A / B / tie / both_good / both_bad."
    )
    preferred_system = serializers.CharField(allow_null=True)
    scores = serializers.DictField(
        allow_null=True,
        help_text="Likert scores per criterion (error spans: empty, see `score`).",
    )
    annotator = serializers.CharField(help_text="Pseudonymous annotator id.")
    source = serializers.CharField()
    time_spent_ms = serializers.IntegerField(allow_null=True)
    submitted_at = serializers.DateTimeField()
    flagged = serializers.BooleanField()

    def to_representation(self, instance):
        return label_row(instance)


@extend_schema_field({"type": "string", "format": "binary"})
class UploadField(serializers.FileField):
    """A file part of a multipart form (a file's contents, not a URL as drf-spectacular
    documents a plain ``FileField``)."""


class ImportSerializer(serializers.Serializer):
    file = UploadField(help_text="A JSONL or CSV bundle, or a Judge-Bench JSON file.")
    name = serializers.CharField(required=False, max_length=200)
    kind = serializers.ChoiceField(choices=list(kinds.NAMES), required=False)


class ImportResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    public_id = serializers.UUIDField()
    name = serializers.CharField()


class RatingsImportSerializer(serializers.Serializer):
    file = UploadField(help_text="Ratings as JSONL or CSV (see docs/import-formats.md).")
    judge = serializers.CharField(
        required=False, max_length=100, help_text="Judge name for rows that have none."
    )


class RatingsImportResultSerializer(serializers.Serializer):
    imported = serializers.IntegerField()


class ErrorSerializer(serializers.Serializer):
    """The body of an error answer (DRF's own shape)."""

    detail = serializers.CharField()


#: A 400 body: field name → messages (``non_field_errors`` for the whole request), or a
#: ``detail`` (a body that could not be parsed, a rejected file) with the file's ``errors``.
VALIDATION_ERROR_SCHEMA = {
    "type": "object",
    "description": "Field name → messages; or `detail` with, for a rejected file, every "
    "reason in `errors`.",
    "properties": {
        "detail": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}

#: A rejected upload: nothing was stored.
REJECTED_FILE_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Every reason, naming the line or record.",
        },
    },
    "required": ["detail", "errors"],
}


class ImportJobSerializer(serializers.ModelSerializer):
    """A background job: ``status`` queued → running → done or failed (``errors``). An
    import (``operation`` ``import``) gives its ``study`` when done, its ``progress`` in
    bytes of ``total``, twice the file's ``size``: the file is read whole to be checked
    (up to ``size``), then the inputs stored (up to ``total``); an export (``operation``
    ``export``) reports instances written in ``progress``
    of ``total`` and, when done, a ``download`` URL served until ``expires_at``."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    study = ImportResultSerializer(read_only=True, allow_null=True)
    download = serializers.SerializerMethodField(
        help_text="An export's file, while it is kept (null otherwise)."
    )

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "operation",
            "status",
            "filename",
            "size",
            "progress",
            "total",
            "study",
            "errors",
            "created_at",
            "finished_at",
            "expires_at",
            "download",
        ]
        read_only_fields = fields

    def get_download(self, job: ImportJob) -> str | None:
        from .jobs import export_job_file

        if export_job_file(job) is None:
            return None
        path = f"/api/jobs/{job.public_id}/download/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path
