"""The Studies admin action "Rate with an LLM judge": a small form, then the ``run_judge``
task (:mod:`annotator.judging`) per selected study. No logic."""

import os
import re

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from . import judging, tasks
from .errors import ServiceError


class RunJudgeForm(forms.Form):
    base_url = forms.URLField(
        label="Base URL",
        assume_scheme="https",
        help_text="OpenAI-compatible API, e.g. http://localhost:8000/v1",
    )
    model = forms.CharField(max_length=100, help_text="Model name; also the judge's name.")
    api_key_env = forms.CharField(
        label="API key variable",
        max_length=100,
        initial=judging.API_KEY_ENV,
        required=False,
        help_text="Environment variable holding the key on the server (never the key itself); "
        "one of HUMEVAL_JUDGE_API_KEY_ENVS.",
    )
    samples = forms.IntegerField(min_value=1, max_value=20, initial=1)
    criterion = forms.CharField(max_length=60, required=False, help_text="Likert: only this one.")
    concurrency = forms.IntegerField(min_value=1, max_value=32, initial=4)

    def clean_api_key_env(self) -> str:
        name = self.cleaned_data["api_key_env"].strip()
        if name and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise forms.ValidationError("Give the name of an environment variable.")
        allowed = settings.HUMEVAL_JUDGE_API_KEY_ENVS
        if name and name not in allowed:  # the key goes to a URL the researcher chose
            raise forms.ValidationError(f"The key variable must be one of: {', '.join(allowed)}.")
        return name


@admin.action(description="Rate with an LLM judge", permissions=["change"])
def run_judge(modeladmin: admin.ModelAdmin, request, queryset):
    """Ask for the endpoint and model, then run (or queue) the judge per selected study."""
    form = RunJudgeForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        options = dict(form.cleaned_data)
        api_key_env = options.pop("api_key_env")
        if api_key_env and not os.environ.get(api_key_env):
            modeladmin.message_user(
                request,
                f"{api_key_env} is not set on the server: no API key is sent.",
                messages.WARNING,
            )
        for study in queryset:
            try:
                outcome = tasks.run_judge.delay(study.pk, api_key_env, **options)
            except ServiceError as exc:
                modeladmin.message_user(request, f"{study.name}: {exc.message}", messages.ERROR)
                continue
            if settings.CELERY_TASK_ALWAYS_EAGER:
                text = f"{study.name}: {outcome.get()}."
            else:
                text = f"{study.name}: the judge run is queued; its ratings appear as they come."
            modeladmin.message_user(request, text, messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Rate with an LLM judge",
        "form": form,
        "studies": queryset,
        "opts": modeladmin.model._meta,
    }
    return TemplateResponse(request, "admin/annotator/study/run_judge.html", context)
