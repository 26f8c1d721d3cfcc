"""The OpenAPI schema of the REST API: every operation also documents the errors it answers
with, in every format it renders, so a client can rely on the schema for each status code
(checked by schemathesis in ``tests/integration/test_api_schema.py``)."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import permissions

from .serializers import VALIDATION_ERROR_SCHEMA, ErrorSerializer

JSON = "application/json"
_PATH_PARAMETER = re.compile(r"{\w+}")

UNAUTHENTICATED = "No valid credentials: send `Authorization: Token <key>` or a session cookie."
FORBIDDEN = (
    "Authenticated but not allowed: a permission is missing, or a session request lacks its "
    "CSRF token."
)
NOT_FOUND_STUDY = "No such study, or not one you may read."
NOT_FOUND_PAGE = "No such page (`page` or `cursor` out of range or malformed)."
NOT_ACCEPTABLE = (
    "No such `format` (`detail` names the formats this operation writes), or an `Accept` "
    "header none of them satisfies."
)
UNSUPPORTED_MEDIA_TYPE = "The body is not in a media type this operation reads."
THROTTLED = "Too many requests; `Retry-After` gives the seconds to wait."
RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer"},
        "description": "Seconds until the rate limit lets the next request through.",
    }
}


class ApiSchema(AutoSchema):
    """drf-spectacular's schema of an operation plus the errors DRF and the view answer with:
    400 (invalid query or body), 401 (no credentials), 403 (missing permission or CSRF
    token), 404 (no such or no visible study; no such or malformed page or cursor), 406
    (unsupported ``format`` or ``Accept``), 415 (body media type), 429 (throttled, with
    ``Retry-After``). An error the view documents itself wins.

    Set it as ``schema`` on an API view; ``@extend_schema`` on its methods builds on it."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation.setdefault("responses", {})
        for code, response in self._errors().items():
            responses.setdefault(str(code), response)
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _errors(self) -> dict[int, dict[str, Any]]:
        view, unsafe = self.view, self.method not in permissions.SAFE_METHODS
        checks = [type(p) for p in view.get_permissions()]
        error = self.resolve_serializer(ErrorSerializer, "response").ref
        errors: dict[int, dict[str, Any]] = {}
        if unsafe or getattr(view, "filterset_class", None):
            errors[400] = self._error("The request is invalid.", VALIDATION_ERROR_SCHEMA)
        if any(c is not permissions.AllowAny for c in checks):
            errors[401] = self._error(UNAUTHENTICATED, error)
        if unsafe or any(
            c not in (permissions.AllowAny, permissions.IsAuthenticated) for c in checks
        ):
            errors[403] = self._error(FORBIDDEN, error)
        missing = []
        if _PATH_PARAMETER.search(self.path):
            missing.append(NOT_FOUND_STUDY)
        if getattr(view, "pagination_class", None) and self.method == "GET":
            if getattr(view, "action", "list") == "list":
                missing.append(NOT_FOUND_PAGE)
        if missing:
            errors[404] = self._error(" ".join(missing), error)
        errors[406] = self._error(NOT_ACCEPTABLE, error)
        if unsafe:
            errors[415] = self._error(UNSUPPORTED_MEDIA_TYPE, error)
        if view.get_throttles():
            errors[429] = self._error(THROTTLED, error, headers=RETRY_AFTER)
        return errors

    def _error(
        self, description: str, schema: dict[str, Any], headers: dict | None = None
    ) -> dict[str, Any]:
        """The error in JSON, and as text in the view's other formats (CSV, JSON Lines), which
        render errors too."""
        media_types = self.map_renderers("media_type") or [JSON]
        content = {m: {"schema": schema if m == JSON else {"type": "string"}} for m in media_types}
        return {
            "description": description,
            **({"headers": headers} if headers else {}),
            "content": content,
        }


#: ``GET /api/studies/{id}/judgebench/``: the study's labels as one Judge-Bench document
#: (:mod:`formats.judgebench_export`), not paged.
JUDGEBENCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["dataset", "annotations", "instances"],
    "properties": {
        "dataset": {"type": "string", "description": "The study's name."},
        "annotations": {
            "type": "array",
            "description": "One entry per judged property: a pairwise study's `preference` "
            "(categorical, `labels_list`), a Likert criterion (graded with `worst`/`best`, "
            "or categorical).",
            "items": {
                "type": "object",
                "required": ["metric", "category"],
                "properties": {
                    "metric": {"type": "string"},
                    "category": {"type": "string", "enum": ["categorical", "graded"]},
                    "labels_list": {"type": "array", "items": {"type": "string"}},
                    "worst": {"type": "integer"},
                    "best": {"type": "integer"},
                    "description": {"type": "string"},
                },
            },
        },
        "instances": {
            "type": "array",
            "description": "One per item. Position k of `individual_human_scores` is the same "
            "worker in every instance (null where that worker gave no label); "
            "`majority_human` is the most frequent label, null on a tie.",
            "items": {
                "type": "object",
                "required": ["id", "instance", "annotations"],
                "properties": {
                    "id": {"type": "string"},
                    "instance": {"type": "object", "additionalProperties": True},
                    "annotations": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {
                                "individual_human_scores": {"type": "array", "items": {}},
                                "majority_human": {},
                            },
                        },
                    },
                },
            },
        },
    },
}
