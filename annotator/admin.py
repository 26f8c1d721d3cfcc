"""Researchers configure studies, import files and watch progress here. No logic.

Per-study access: every admin of study data is a :class:`StudyScopedAdmin`, which shows a
user only the rows of the studies ``selectors.studies_visible_to`` gives them (superusers:
all), in lists, change, delete and history pages, actions, list filters, foreign-key choices
and autocomplete. Model permissions (view, change, …) still come from Django's auth."""

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from django.shortcuts import redirect, render
from django.template.response import TemplateResponse
from django.urls import path

import kinds

from . import admin_jobs, admin_judge, admin_workspace, importers, revisions, selectors, services
from .errors import ConfigRefused, ImportRejected, ServiceError
from .models import (
    Annotation,
    Annotator,
    Assignment,
    GuidelineRevision,
    Item,
    JudgeRating,
    Participation,
    QualificationQuestion,
    QualificationTest,
    Study,
    System,
)


class ScopedAdmin(admin.ModelAdmin):
    """An admin whose rows depend on who asks: ``scope`` narrows every queryset (lists, the
    object behind change, delete and history pages, the rows an action receives, list
    filters' choices), each object page checks its object against it, and a foreign key or
    many-to-many to a model whose admin is scoped offers only the rows that admin shows."""

    def scope(self, queryset: QuerySet, request: HttpRequest) -> QuerySet:
        raise NotImplementedError

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return self.scope(super().get_queryset(request), request)

    def in_scope(self, request: HttpRequest, obj) -> bool:
        return obj is None or self.get_queryset(request).filter(pk=obj.pk).exists()

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return super().has_view_permission(request, obj) and self.in_scope(request, obj)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return super().has_change_permission(request, obj) and self.in_scope(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and self.in_scope(request, obj)

    def _choices(self, db_field, request: HttpRequest, kwargs: dict) -> dict:
        related = self.admin_site._registry.get(db_field.remote_field.model)
        if isinstance(related, ScopedAdmin) and "queryset" not in kwargs:
            kwargs["queryset"] = related.get_queryset(request)
        return kwargs

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return super().formfield_for_foreignkey(
            db_field, request, **self._choices(db_field, request, kwargs)
        )

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        return super().formfield_for_manytomany(
            db_field, request, **self._choices(db_field, request, kwargs)
        )

    def get_list_filter(self, request: HttpRequest):
        """A filter on a related object offers only the objects of rows in scope (Django's
        default lists every study by name)."""
        return [
            (f, admin.RelatedOnlyFieldListFilter)
            if isinstance(f, str) and get_fields_from_path(self.model, f)[-1].is_relation
            else f
            for f in super().get_list_filter(request)
        ]


class StudyScopedAdmin(ScopedAdmin):
    """Rows of the studies the user may see (``selectors.studies_visible_to``; superusers:
    all). ``study_path`` is the lookup from the model to its study: ``"study"``,
    ``"round__study"``; ``""`` for the study itself."""

    study_path = "study"

    def scope(self, queryset: QuerySet, request: HttpRequest) -> QuerySet:
        if request.user.is_active and request.user.is_superuser:
            return queryset
        visible = selectors.studies_visible_to(request.user)
        if not self.study_path:
            return queryset.filter(pk__in=visible.values("pk"))
        lookup = {f"{self.study_path}__in": visible.values("pk")}
        fields = get_fields_from_path(self.model, self.study_path)
        if any(f.many_to_many or f.one_to_many for f in fields):  # one row per match: dedupe
            return queryset.filter(pk__in=self.model._default_manager.filter(**lookup).values("pk"))
        return queryset.filter(**lookup)


class PrepareChecksForm(forms.Form):
    gold = forms.IntegerField(min_value=0, initial=5, help_text="Gold checks shown among the work.")
    qualification = forms.IntegerField(
        min_value=0, initial=10, help_text="Questions of the test taken before the work (0: none)."
    )

    def clean(self):
        data = super().clean()
        if not data.get("gold") and not data.get("qualification"):
            raise forms.ValidationError("Ask for gold checks, qualification questions or both.")
        return data


@admin.action(
    description="Prepare gold checks and a qualification test from known answers",
    permissions=["change"],
)
def prepare_checks(modeladmin: admin.ModelAdmin, request, queryset):
    """Ask how many, then call ``services.study_prepare_checks`` for each selected study."""
    form = PrepareChecksForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        gold, questions = form.cleaned_data["gold"], form.cleaned_data["qualification"]
        for study in queryset:
            try:
                test = services.study_prepare_checks(
                    study, n_gold=gold, n_qualification=questions, owner=request.user
                )
            except ServiceError as exc:
                modeladmin.message_user(
                    request, f"{study.name}: nothing was made. {exc.message}", messages.ERROR
                )
                continue
            made = [f"{gold} gold checks"] if gold else []
            if test is not None:
                made.append(
                    f"a qualification test of {questions} questions "
                    f"({test.pass_threshold} correct to pass)"
                )
            modeladmin.message_user(
                request, f"{study.name}: made {' and '.join(made)}.", messages.SUCCESS
            )
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Prepare gold checks and a qualification test",
        "form": form,
        "studies": queryset,
        "opts": modeladmin.model._meta,
    }
    return TemplateResponse(request, "admin/annotator/study/prepare_checks.html", context)


class IndentedJSONField(forms.JSONField):
    """A JSON field shown indented, one setting a line, so it reads and edits as a list."""

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2, cls=self.encoder)


def _without_switches(options: dict) -> dict:
    """``options`` less the answer switches (the form shows those as boxes)."""
    return {k: v for k, v in options.items() if k not in kinds.ANSWER_SWITCHES}


class StudyForm(forms.ModelForm):
    """The kind's settings in one validated ``options``: its answer switches as boxes, the
    rest (criteria, strength …) as JSON; asks the service whether an edit can take effect
    and, if not, the page says why."""

    options = IndentedJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 80}),
        help_text="The kind's settings as JSON (criteria, strength, a ranking's per_item …; "
        "docs/import-formats.md), checked by the kind when saved. The answer switches are the "
        "boxes.",
    )
    allow_tie = forms.BooleanField(required=False, initial=True, label="Allow tie")
    allow_both_good = forms.BooleanField(required=False, label="Allow both good")
    allow_both_bad = forms.BooleanField(required=False, label="Allow both bad")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and "options" in self.fields:
            settings = self.instance.kind_settings
            for name in kinds.ANSWER_SWITCHES:
                self.fields[name].initial = settings.get(name, False)
            self.initial["options"] = _without_switches(self.instance.options or {})

    def clean(self) -> dict:
        cleaned = super().clean()
        kind = kinds.get(cleaned["kind"]) if cleaned.get("kind") in kinds.NAMES else None
        if kind is not None and "options" in cleaned:
            self._clean_options(kind, cleaned)
        if self.instance.pk and not self.errors:
            changes = {name: cleaned[name] for name in self.changed_data if name in cleaned}
            try:
                services.study_configure_check(self.instance, changes)
            except ConfigRefused as exc:
                raise forms.ValidationError(exc.reasons) from None
        return cleaned

    def _clean_options(self, kind: kinds.Kind, cleaned: dict) -> None:
        """``options`` with the switches the kind takes, validated by the kind; a switch
        shown for the study's former kind and turned on is refused."""
        given = cleaned["options"] if cleaned["options"] is not None else {}
        if self.add_prefix("options") not in self.data:  # a post without the field keeps them
            given = _without_switches(self.instance.options or {})
        if not isinstance(given, dict):
            self.add_error("options", "Give the options as a JSON object.")
            return
        for name in kind.unused_switches(cleaned):
            self.add_error(
                name,
                f"{kind.a_noun[:1].upper()}{kind.a_noun[1:]} study has no such answer; "
                "turn it off.",
            )
        if unknown := kind.unknown_options(given):
            self.add_error("options", unknown)
            return
        switches = {name: bool(cleaned.get(name)) for name in kind.answer_switches}
        options = _without_switches(given) | switches
        collection = cleaned.get("collection", self.instance.collection)
        try:
            validated = kind.validate_options({**options, "collection": collection}, None)
        except kinds.OptionError as exc:
            self.add_error("options", exc.messages)
            return
        cleaned["options"] = validated
        if validated != (self.instance.options or {}) and "options" not in self.changed_data:
            self.changed_data.append("options")


@admin.register(Study)
class StudyAdmin(StudyScopedAdmin):
    """Studies. A user who adds or imports one becomes its researcher; ``researchers``
    offers (besides superusers' every user) staff users and the user's co-researchers."""

    form = StudyForm
    study_path = ""
    list_display = ["name", "kind", "progress", "config_version", "is_active", "created_at"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name"]
    filter_horizontal = ["researchers"]
    actions = [prepare_checks, admin_judge.run_judge, admin_judge.cancel_judge_runs]
    readonly_fields = ["public_id", "config_version", "guideline_revision", "source"]
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
                    "options",
                    "language",
                    "languages",
                    "instructions_by_language",
                    "render_markdown",
                    "show_reference",
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
                ]
            },
        ),
        (
            "Adaptive rounds",
            {
                "fields": ["batch_size", "budget", "gamma"],
                "description": "Used only when collection is 'Adaptive rounds (protocol)'; a "
                "study with all items at once ignores them.",
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
                ]
            },
        ),
        (
            "Cost estimate",
            {
                "fields": [
                    "pay_per_hour",
                    "pay_currency",
                    "expected_seconds_per_item",
                    "platform_fee_percent",
                ]
            },
        ),
        (
            "Status",
            {
                "fields": [
                    "config_version",
                    "guideline_revision",
                    "public_id",
                    "source",
                ]
            },
        ),
    ]

    def get_fieldsets(self, request, obj=None):
        """The answer switches (tie, both good, both bad) the study's kind takes, no others
        (``Kind.answer_switches``)."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        unused = set(kinds.ANSWER_SWITCHES) - set(obj.kind_impl.answer_switches)
        return [
            (name, {**spec, "fields": [f for f in spec["fields"] if f not in unused]})
            for name, spec in fieldsets
        ]

    @admin.display(description="progress")
    def progress(self, study: Study) -> str:
        p = selectors.study_progress(study)
        return f"{p['submitted']} / {p['target_annotations']}"

    def save_model(self, request, obj, form, change) -> None:
        if change:
            revisions.revision_baseline(obj.pk)
        try:
            notes = services.study_configure(obj, form.changed_data if change else [])
        except ConfigRefused as exc:  # the state changed since the form's check
            messages.error(request, f"Not saved: {exc.message}")
            return
        for note in notes:
            messages.info(request, note)

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        if not change:  # after the form's researchers are stored, which would replace it
            services.study_researcher_add(form.instance, request.user)
        # after the criteria inlines: a changed wording is a new guideline revision
        revisions.revision_record(form.instance, by=request.user)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "researchers" and not request.user.is_superuser:
            visible = selectors.studies_visible_to(request.user)
            kwargs["queryset"] = (
                get_user_model()
                .objects.filter(
                    Q(is_staff=True, is_active=True)
                    | Q(studies__in=visible)
                    | Q(pk=request.user.pk)
                )
                .distinct()
                .order_by("username")
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="annotator_study_import",
            ),
            path(
                "jobs/<uuid:public_id>/",
                self.admin_site.admin_view(self.job_view),
                name="annotator_study_job",
            ),
            path(
                "jobs/<uuid:public_id>/download/",
                self.admin_site.admin_view(admin_jobs.job_download),
                name="annotator_study_job_download",
            ),
            path(
                "<int:pk>/export/",
                self.admin_site.admin_view(self.export_view),
                name="annotator_study_export",
            ),
            path(
                "<int:pk>/invites/",
                self.admin_site.admin_view(self.invites_view),
                name="annotator_study_invites",
            ),
            path(
                "<int:pk>/preview/",
                self.admin_site.admin_view(self.preview_view),
                name="annotator_study_preview",
            ),
            path(
                "<int:pk>/preview/<int:item_id>/",
                self.admin_site.admin_view(self.preview_view),
                name="annotator_study_preview_item",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request, form_url="", extra_context=None):
        """No empty shells: a study is created from a file or pasted rows."""
        return redirect("admin:annotator_study_import")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        study = self.get_object(request, object_id)
        if study is not None:
            checks_action = "prepare_checks" in self.get_actions(request)
            extra_context = {
                **(extra_context or {}),
                **admin_workspace.workspace_context(request, study, checks_action=checks_action),
                "export_formats": admin_jobs.export_formats(study),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def preview_view(self, request, pk: int, item_id: int | None = None):
        study = self.get_object(request, str(pk))
        if study is None or not self.has_view_permission(request, study):
            raise Http404("No such study.")
        return admin_workspace.preview(request, study, item_id)

    def export_view(self, request, pk: int):
        """A label export, always as a background job (:mod:`annotator.admin_jobs`)."""
        study = self.get_object(request, str(pk))
        if study is None or not self.has_view_permission(request, study):
            raise Http404("No such study.")
        return admin_jobs.export_start(request, study)

    def job_view(self, request, public_id):
        context = {**self.admin_site.each_context(request), "opts": self.model._meta}
        return admin_jobs.job_page(request, public_id, context)

    def invites_view(self, request, pk: int):
        """Signed invitation links let workers in: making them needs change permission."""
        study = self.get_object(request, str(pk))
        if study is None or not self.has_change_permission(request, study):
            raise Http404("No such study.")
        context = {**self.admin_site.each_context(request), "opts": self.model._meta}
        return admin_workspace.invites(request, study, context)

    def import_view(self, request):
        if not self.has_add_permission(request):  # importing needs annotator.add_study
            raise PermissionDenied
        form = admin_workspace.ImportForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            data, filename = form.source()
            if admin_jobs.import_needs_job(data) and data.size <= importers.max_import_bytes():
                return admin_jobs.import_start(request, data, form.overrides())
            try:
                study = services.study_import(  # an upload: refused unread when too large
                    data, filename=filename, overrides=form.overrides(), owner=request.user
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
            "title": "Create a study",
            "examples": admin_workspace.import_examples(),
            "opts": self.model._meta,
        }
        return render(request, "admin/annotator/study/import.html", context)


class ReadOnlyAdmin(StudyScopedAdmin):
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
        "answer",
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
        "display_order",
        "state",
        "issued_at",
        "expires_at",
        "seen_at",
    ]
    list_filter = ["study", "state"]


@admin.register(Annotator)
class AnnotatorAdmin(StudyScopedAdmin):
    """Workers who took part in one of your studies. A worker is shared by every study, so
    only a superuser may change (block everywhere) or delete one; researchers block a worker
    in their study with the Participations actions."""

    study_path = "participations__study"
    list_display = ["pseudonym", "platform", "external_id", "is_blocked", "created_at"]
    list_filter = ["platform", "is_blocked"]
    search_fields = ["pseudonym", "external_id"]
    readonly_fields = ["pseudonym", "platform", "external_id", "created_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser and super().has_delete_permission(request, obj)


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


class _ParticipationChangeList(ChangeList):
    """The list of workers with each row's statistics read for the whole page at once (a
    constant number of queries, not three per row)."""

    def get_results(self, request) -> None:
        super().get_results(request)
        stats = selectors.participations_stats(self.result_list)
        for participation in self.result_list:
            participation._stats_cache = stats[participation.pk]


@admin.register(Participation)
class ParticipationAdmin(StudyScopedAdmin):
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

    def get_changelist(self, request, **kwargs):
        return _ParticipationChangeList

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
        return obj.code_given or "—"

    @admin.action(
        description="Block: flag their labels and give back their open work", permissions=["change"]
    )
    def block(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_set_blocked(participation, True)
        messages.success(request, f"Blocked {queryset.count()} worker(s).")

    @admin.action(description="Unblock: unflag their labels", permissions=["change"])
    def unblock(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_set_blocked(participation, False)
        messages.success(request, f"Unblocked {queryset.count()} worker(s).")

    @admin.action(description="Approve", permissions=["change"])
    def approve(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_review(participation, True)

    @admin.action(description="Reject", permissions=["change"])
    def reject(self, request, queryset) -> None:
        for participation in queryset:
            services.participation_review(participation, False)


class QuestionFormSet(forms.BaseInlineFormSet):
    """Each question knows its test while it is validated, also a test being added, so
    its known answer is read by the kind chosen on the same page
    (``QualificationQuestion.clean``)."""

    def _construct_form(self, i, **kwargs):
        form = super()._construct_form(i, **kwargs)
        form.instance.test = self.instance
        return form


class QualificationQuestionInline(admin.StackedInline):
    """A question: its prompt, its outputs and known answer as JSON, checked by the test's
    kind (docs/crowd.md, "Known answers per kind")."""

    model = QualificationQuestion
    formset = QuestionFormSet
    fields = ["prompt", "conversation", "outputs", "expected", "order"]
    extra = 0


@admin.register(QualificationTest)
class QualificationTestAdmin(ScopedAdmin):
    """Tests are shared between studies: a researcher sees the tests they wrote and those a
    study of theirs uses, and changes or deletes only their own (superusers: all)."""

    list_display = ["name", "kind", "pass_threshold", "created_by", "created_at"]
    readonly_fields = ["created_by"]
    inlines = [QualificationQuestionInline]

    def scope(self, queryset: QuerySet, request: HttpRequest) -> QuerySet:
        user = request.user
        if user.is_active and user.is_superuser:
            return queryset
        visible = selectors.studies_visible_to(user)
        mine = QualificationTest.objects.filter(
            Q(created_by=user.pk) | Q(studies__in=visible.values("pk"))
        )
        return queryset.filter(pk__in=mine.values("pk"))

    def _owns(self, request: HttpRequest, obj) -> bool:
        return obj is None or request.user.is_superuser or obj.created_by_id == request.user.pk

    def has_change_permission(self, request, obj=None) -> bool:
        return self._owns(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._owns(request, obj) and super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.created_by = request.user
        else:
            for pk in revisions.studies_of_test(obj):
                revisions.revision_baseline(pk)
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        for study in Study.objects.filter(qualification=form.instance):
            revisions.revision_record(study, by=request.user)


@admin.register(GuidelineRevision)
class GuidelineRevisionAdmin(ReadOnlyAdmin):
    """Each wording of a study's guidelines, who made it and when, and what changed from
    the one before (``annotator.revisions``)."""

    list_display = ["study", "number", "created_by", "created_at"]
    list_filter = ["study"]
    readonly_fields = ["study", "number", "created_by", "created_at", "text"]
    change_form_template = "admin/annotator/guidelinerevision/change_form.html"

    def has_delete_permission(self, request, obj=None) -> bool:
        # the record of which wording labels were made under: only a superuser removes one
        return request.user.is_superuser and super().has_delete_permission(request, obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        revision = self.get_object(request, object_id)
        diff = revisions.revision_diff(revision) if revision is not None else ""
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), "diff": diff}
        )
