"""Researchers configure studies, import files and watch progress here. No logic."""

from django import forms
from django.contrib import admin, messages
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.html import format_html

from . import selectors, services
from .errors import ConfigRefused, ImportRejected
from .invites import entry_urls
from .models import (
    Annotation,
    Annotator,
    Assignment,
    Criterion,
    Item,
    JudgeRating,
    Participation,
    QualificationQuestion,
    QualificationTest,
    Study,
    System,
)


class CriterionInline(admin.TabularInline):
    model = Criterion
    extra = 0


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSONL or CSV bundle, or a Judge-Bench JSON file.")
    name = forms.CharField(required=False, help_text="Overrides the name in the file.")


class StudyForm(forms.ModelForm):
    """Asks the service whether an edit can take effect; if not, the page says why."""

    def clean(self) -> dict:
        cleaned = super().clean()
        if self.instance.pk and not self.errors:
            changes = {name: cleaned[name] for name in self.changed_data if name in cleaned}
            try:
                services.study_configure_check(self.instance, changes)
            except ConfigRefused as exc:
                raise forms.ValidationError(exc.reasons) from None
        return cleaned


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    form = StudyForm
    list_display = ["name", "kind", "progress", "config_version", "is_active", "created_at"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name"]
    inlines = [CriterionInline]
    filter_horizontal = ["researchers"]
    readonly_fields = [
        "evidence_links",
        "public_id",
        "config_version",
        "worker_link",
        "progress_table",
        "source",
        "entry_links",
    ]
    fieldsets = [
        (None, {"fields": ["name", "kind", "description", "researchers", "is_active"]}),
        (
            "What workers see",
            {
                "fields": [
                    "question",
                    "instructions",
                    "allow_tie",
                    "allow_both_good",
                    "allow_both_bad",
                    "render_markdown",
                    "show_reference",
                    "worker_link",
                ]
            },
        ),
        (
            "Collection",
            {
                "fields": [
                    "collection",
                    "redundancy",
                    "items_per_worker",
                    "lease_seconds",
                    "batch_size",
                    "budget",
                    "gamma",
                ]
            },
        ),
        (
            "Crowd workers",
            {
                "fields": [
                    "open_links",
                    "qualification",
                    "completion_code",
                    "fail_code",
                    "no_work_code",
                    "gold_rate_start",
                    "gold_rate_end",
                    "gold_rate_halflife",
                    "max_strikes",
                    "entry_links",
                ]
            },
        ),
        (
            "Status",
            {
                "fields": [
                    "progress_table",
                    "evidence_links",
                    "config_version",
                    "public_id",
                    "source",
                ]
            },
        ),
    ]

    @admin.display(description="progress")
    def progress(self, study: Study) -> str:
        p = selectors.study_progress(study)
        return f"{p['submitted']} / {p['target_annotations']}"

    @admin.display(description="progress")
    def progress_table(self, study: Study) -> str:
        if not study.pk:
            return "—"
        p = selectors.study_progress(study)
        return format_html(
            "{} systems · {} inputs · {} items<br>{} of {} annotations submitted, {} leased now, "
            "{} workers<br>{} imported labels",
            p["systems"],
            p["inputs"],
            p["items"],
            p["submitted"],
            p["target_annotations"],
            p["leased"],
            p["workers"],
            p["imported"],
        )

    @admin.display(description="evidence")
    def evidence_links(self, study: Study) -> str:
        if not study.pk:
            return "—"
        report = reverse("analysis:report", args=[study.pk])
        if study.collection != "adaptive":
            return format_html('<a href="{}">Report</a>', report)
        dashboard = reverse("protocol:dashboard", args=[study.pk])
        return format_html(
            '<a href="{}">Report</a> · <a href="{}">Protocol dashboard</a>', report, dashboard
        )

    @admin.display(description="worker link")
    def worker_link(self, study: Study) -> str:
        if not study.pk:
            return "—"
        url = reverse("annotator:enter", args=[study.public_id]) + "?worker=WORKER_ID"
        return format_html("<code>{}</code>", url)

    @admin.display(description="entry links")
    def entry_links(self, study: Study) -> str:
        if not study.pk:
            return "—"
        urls = entry_urls(study)
        return format_html(
            "Prolific: <code>{}</code><br>MTurk external question: <code>{}</code><br>"
            "Lab invitations: <code>python manage.py invite_links {} --workers a,b,c</code>",
            urls["prolific"],
            urls["mturk"],
            study.pk,
        )

    def save_model(self, request, obj, form, change) -> None:
        try:
            notes = services.study_configure(obj, form.changed_data if change else [])
        except ConfigRefused as exc:  # the state changed since the form's check
            messages.error(request, f"Not saved: {exc.message}")
            return
        for note in notes:
            messages.info(request, note)

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="annotator_study_import",
            ),
            *super().get_urls(),
        ]

    def import_view(self, request):
        if not self.has_add_permission(request):
            return redirect("admin:annotator_study_changelist")
        form = ImportForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            overrides = {"name": form.cleaned_data["name"]} if form.cleaned_data["name"] else {}
            try:
                study = services.study_import(  # the upload: refused unread when too large
                    upload, filename=upload.name, overrides=overrides, owner=request.user
                )
            except ImportRejected as exc:
                errors = exc.errors
            else:
                messages.success(request, f"Imported study {study.pk}: {study.name}")
                return redirect("admin:annotator_study_change", study.pk)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "errors": errors,
            "title": "Import a study",
            "opts": self.model._meta,
        }
        return render(request, "admin/annotator/study/import.html", context)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "study",
        "item",
        "annotator",
        "value",
        "raw_answer",
        "source",
        "time_spent_ms",
        "submitted_at",
        "is_flagged",
    ]
    list_filter = ["study", "source", "is_flagged"]
    list_select_related = ["study", "annotator"]


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "study",
        "input",
        "round_number",
        "is_gold",
        "n_done",
        "n_taken",
        "redundancy",
        "is_active",
    ]
    list_filter = ["study", "is_gold", "is_active"]
    list_select_related = ["study", "input"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = [
        "token",
        "study",
        "item",
        "annotator",
        "left_is_a",
        "state",
        "issued_at",
        "expires_at",
    ]
    list_filter = ["study", "state"]


@admin.register(Annotator)
class AnnotatorAdmin(admin.ModelAdmin):
    list_display = ["pseudonym", "platform", "external_id", "is_blocked", "created_at"]
    list_filter = ["platform", "is_blocked"]
    search_fields = ["pseudonym", "external_id"]
    readonly_fields = ["pseudonym", "platform", "external_id", "created_at"]


@admin.register(System)
class SystemAdmin(ReadOnlyAdmin):
    list_display = ["name", "study"]
    list_filter = ["study"]


@admin.register(JudgeRating)
class JudgeRatingAdmin(ReadOnlyAdmin):
    list_display = [
        "judge",
        "study",
        "input",
        "system",
        "other_system",
        "criterion",
        "score",
        "label",
    ]
    list_filter = ["study", "judge"]
    list_select_related = ["study", "input", "system", "other_system"]


@admin.register(Participation)
class ParticipationAdmin(admin.ModelAdmin):
    """Per worker and study: output, speed, gold accuracy, position bias, status."""

    list_display = [
        "annotator",
        "platform",
        "platform_id",
        "study",
        "status",
        "review",
        "items_done",
        "median_time",
        "gold_accuracy",
        "strikes",
        "left_rate",
        "code",
    ]
    list_filter = ["study", "status", "review"]
    search_fields = ["annotator__pseudonym", "annotator__external_id", "platform_session"]
    list_select_related = ["annotator", "study"]
    readonly_fields = [
        "study",
        "annotator",
        "platform_session",
        "return_url",
        "status",
        "review",
        "strikes",
        "gold_seen",
        "gold_correct",
        "started_at",
        "finished_at",
    ]
    exclude = ["last_was_gold"]
    actions = ["block", "unblock", "approve", "reject"]

    def has_add_permission(self, request) -> bool:
        return False

    def _stats(self, obj: Participation) -> dict:
        cache = getattr(obj, "_stats_cache", None)
        if cache is None:
            cache = obj._stats_cache = selectors.participation_stats(obj)
        return cache

    @admin.display(description="platform")
    def platform(self, obj: Participation) -> str:
        return obj.annotator.platform

    @admin.display(description="platform id")
    def platform_id(self, obj: Participation) -> str:
        return obj.annotator.external_id

    @admin.display(description="done")
    def items_done(self, obj: Participation) -> int:
        return self._stats(obj)["done"]

    @admin.display(description="median time (s)")
    def median_time(self, obj: Participation) -> str:
        value = self._stats(obj)["median_time_ms"]
        return "—" if value is None else f"{value / 1000:.1f}"

    @admin.display(description="gold accuracy")
    def gold_accuracy(self, obj: Participation) -> str:
        value = self._stats(obj)["gold_accuracy"]
        return "—" if value is None else f"{value:.0%} of {obj.gold_seen}"

    @admin.display(description="left choices")
    def left_rate(self, obj: Participation) -> str:
        value = self._stats(obj)["left_rate"]
        return "—" if value is None else f"{value:.0%}"

    @admin.display(description="completion code")
    def code(self, obj: Participation) -> str:
        kind = selectors.participation_outcome(obj)["kind"]
        study = obj.study
        return {
            "completed": study.completion_code,
            "failed": study.fail_code,
            "no_work": study.no_work_code,
        }[kind] or "—"

    @admin.action(description="Block: flag their labels and give back their open work")
    def block(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_set_blocked(participation, True)
        messages.success(request, f"Blocked {queryset.count()} worker(s).")

    @admin.action(description="Unblock: unflag their labels")
    def unblock(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_set_blocked(participation, False)
        messages.success(request, f"Unblocked {queryset.count()} worker(s).")

    @admin.action(description="Approve")
    def approve(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_review(participation, True)

    @admin.action(description="Reject")
    def reject(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_review(participation, False)


class QualificationQuestionInline(admin.StackedInline):
    model = QualificationQuestion
    extra = 0


@admin.register(QualificationTest)
class QualificationTestAdmin(admin.ModelAdmin):
    list_display = ["name", "pass_threshold", "created_at"]
    inlines = [QualificationQuestionInline]
