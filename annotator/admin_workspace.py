"""The researcher's study workspace in the admin: the create form (a file or pasted rows),
the panel's context on a study's change page, and the item preview. No logic of its own:
reads come from :mod:`annotator.workspace`, writes from :mod:`annotator.services`."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

import kinds

from . import selectors, workspace
from .estimate import MIN_MEASURED_LABELS, MIN_PLAUSIBLE_SECONDS
from .invites import MAX_INVITES, WORKER_ID, invite_links, numbered_workers
from .models import Study

EXAMPLE_JSONL = (
    '{"study": {"name": "My study", "kind": "pairwise", "redundancy": 3}}\n'
    '{"id": "q1", "input": "Explain rainbows.", "outputs": {"m1": "Light bends…", '
    '"m2": "Rain and sun…"}}\n'
    '{"id": "q2", "input": "Name a prime.", "outputs": {"m1": "7", "m2": "9"}}'
)
EXAMPLE_CSV = (
    "input_id,input,system,output\n"
    'q1,Explain rainbows.,m1,"Light bends…"\n'
    'q1,Explain rainbows.,m2,"Rain and sun…"'
)


class ImportForm(forms.Form):
    """A study from an uploaded file or from rows pasted into the page; either way the same
    import (:func:`annotator.services.study_import`)."""

    FORMATS = [("auto", "Tell from the rows"), ("jsonl", "JSONL lines"), ("csv", "CSV rows")]

    file = forms.FileField(
        required=False, help_text="A JSONL or CSV bundle, or a Judge-Bench JSON file."
    )
    rows = forms.CharField(
        required=False,
        strip=False,
        label="Or paste rows",
        widget=forms.Textarea(attrs={"rows": 10, "cols": 100, "spellcheck": "false"}),
        help_text="JSONL lines or CSV rows (examples below).",
    )
    format = forms.ChoiceField(
        choices=FORMATS, initial="auto", required=False, help_text="Of the pasted rows."
    )
    kind = forms.ChoiceField(
        choices=[("", "As the rows say"), *kinds.choices()],
        required=False,
        help_text="CSV rows carry no study line: choose the kind here.",
    )
    name = forms.CharField(required=False, help_text="Overrides the name in the rows or file.")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        has_file, has_rows = bool(data.get("file")), bool((data.get("rows") or "").strip())
        if has_file == has_rows:
            raise forms.ValidationError("Upload a file or paste rows (one of the two).")
        return data

    def source(self) -> tuple[bytes | UploadedFile, str]:
        """The bytes to import and a file name that names their format."""
        upload = self.cleaned_data.get("file")
        if upload:
            return upload, upload.name
        rows = self.cleaned_data["rows"].strip() + "\n"
        fmt = self.cleaned_data.get("format") or "auto"
        if fmt == "auto":
            fmt = _sniff(rows)
        return rows.encode("utf-8"), f"pasted.{fmt}"

    def overrides(self) -> dict[str, str]:
        return {key: self.cleaned_data[key] for key in ("name", "kind") if self.cleaned_data[key]}


def _sniff(rows: str) -> str:
    """``jsonl`` when the first line is a JSON object, ``json`` when the rows are one JSON
    document (Judge-Bench), else ``csv``."""
    if not rows.startswith("{"):
        return "csv"
    try:
        return "jsonl" if isinstance(json.loads(rows.split("\n", 1)[0]), dict) else "json"
    except ValueError:
        return "json"


def import_examples() -> dict[str, str]:
    return {"jsonl": EXAMPLE_JSONL, "csv": EXAMPLE_CSV}


def workspace_context(request: HttpRequest, study: Study, *, checks_action: bool) -> dict:
    """What the workspace panel on a study's change page shows."""
    checks = workspace.checklist(study, checks_action=checks_action)
    return {
        "checklist": checks,
        "checklist_missing": [c for c in checks if c.required and not c.ok],
        "entry_links": workspace.entry_links(study, request.build_absolute_uri),
        "live": workspace.progress(study),
        "estimate": workspace.estimate(study),
        "min_measured": MIN_MEASURED_LABELS,
        "min_plausible": MIN_PLAUSIBLE_SECONDS,
        "preview_url": reverse("admin:annotator_study_preview", args=[study.pk]),
        "invites_url": reverse("admin:annotator_study_invites", args=[study.pk]),
        "report_url": reverse("analysis:report", args=[study.pk]),
        "dashboard_url": (
            reverse("protocol:dashboard", args=[study.pk]) if study.collection == "adaptive" else ""
        ),
    }


def preview(request: HttpRequest, study: Study, item_id: int | None) -> HttpResponse:
    """An item as a worker sees it, in a random display order, with the answer form
    disabled: no assignment, no token, nothing that can record."""
    step = workspace.preview_step(study, item_id)
    if step is None:
        raise Http404("This study has no such item.")
    item = step.item
    shown = study.kind_impl.display_order(len(item.output_list()), random.Random())

    def link(pk: int | None) -> str:
        return reverse("admin:annotator_study_preview_item", args=[study.pk, pk]) if pk else ""

    context = {
        "study": study,
        "input": item.input,
        **selectors.task_page(study, item, shown),
        "progress": {"position": step.position, "total": step.total, "done": step.position - 1},
        "preview": {
            "item": item,
            "previous": link(step.previous_id),
            "next": link(step.next_id),
            "back": reverse("admin:annotator_study_change", args=[study.pk]),
        },
    }
    return render(request, "annotator/task.html", context)


class InviteForm(forms.Form):
    """How many signed invitation links to make: numbered ids (``prefix-001`` …) or the ids
    listed, one per line or comma-separated (the same links as the ``invite_links`` command)."""

    count = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_INVITES,
        initial=20,
        help_text=f"Numbered worker ids, at most {MAX_INVITES}.",
    )
    prefix = forms.CharField(
        required=False, initial="worker", max_length=40, help_text="Of the numbered ids."
    )
    workers = forms.CharField(
        required=False,
        label="Or these worker ids",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60, "spellcheck": "false"}),
        help_text="One per line or comma-separated: letters, digits and . _ @ + -.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        listed = [w.strip() for w in (data.get("workers") or "").replace(",", "\n").splitlines()]
        listed = [w for w in listed if w]
        if listed:
            ids = listed
        elif data.get("count"):
            ids = numbered_workers(data.get("prefix") or "worker", data["count"])
        else:
            raise forms.ValidationError("Give a number of links or a list of worker ids.")
        if len(ids) > MAX_INVITES:
            raise forms.ValidationError(f"At most {MAX_INVITES} links at a time.")
        bad = [w for w in ids if not WORKER_ID.fullmatch(w)]
        if bad:
            raise forms.ValidationError(
                f"Not a worker id: {bad[0]!r} (letters, digits and . _ @ + -, at most 100)."
            )
        if len(set(ids)) != len(ids):
            raise forms.ValidationError("A worker id is listed twice.")
        data["ids"] = ids
        return data


def invites(request: HttpRequest, study: Study, context: dict[str, Any]) -> HttpResponse:
    """Make signed invitation links: shown to copy, or (``download``) as a CSV file.
    Nothing is stored: a link is the signed worker id, valid for this study only."""
    form = InviteForm(request.POST if request.method == "POST" else None)
    links: list[tuple[str, str]] = []
    if form.is_valid():
        host = request.build_absolute_uri("/").rstrip("/")
        links = invite_links(study, form.cleaned_data["ids"], host)
        if "download" in request.POST:
            buffer = io.StringIO()
            writer = csv.writer(buffer)
            writer.writerow(["worker", "link"])
            writer.writerows(links)
            response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
            name = f"study-{study.pk}-invitations.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
    status = 400 if request.method == "POST" and not form.is_valid() else 200
    context = {
        **context,
        "title": "Make invitation links",
        "study": study,
        "form": form,
        "links": links,
        "back": reverse("admin:annotator_study_change", args=[study.pk]),
    }
    return render(request, "admin/annotator/study/invites.html", context, status=status)
