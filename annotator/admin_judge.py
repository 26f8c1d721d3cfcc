"""The Studies admin actions "Rate with an LLM judge" (a form, then one queued
:class:`~annotator.models.JudgeRun` per selected study, carried out by the ``run_judge`` task
on the judge queue) and "Cancel LLM judge runs". No logic: :mod:`annotator.judging`."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from . import judging, tasks
from .errors import ServiceError
from .models import JudgeRun

OWN = "own"


def endpoint_choices() -> list[tuple[str, str]]:
    """The listed endpoints, each saying which key goes with it, then "your own"."""
    choices = []
    for url, key_env in settings.HUMEVAL_JUDGE_ENDPOINTS:
        sent = f"sends the operator's key {key_env}" if key_env else "sends no key"
        choices.append((url, f"{url} ({sent})"))
    choices.append((OWN, "Your own endpoint (below; sends your key if you give one, else none)"))
    return choices


class RunJudgeForm(forms.Form):
    endpoint = forms.ChoiceField(
        widget=forms.RadioSelect,
        help_text="The endpoints the operator lists (HUMEVAL_JUDGE_ENDPOINTS) each send only "
        "the key bound to them; the operator's keys never go to any other URL.",
    )
    base_url = forms.URLField(
        label="Your endpoint's base URL",
        assume_scheme="https",
        required=False,
        help_text="OpenAI-compatible API, e.g. http://gpu-box:8080/v1 (with your own endpoint).",
    )
    api_key = forms.CharField(
        label="Your API key",
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False),
        help_text="With your own endpoint only: sent to it as a Bearer token, kept in the "
        "run's row until the run ends, then erased. Empty: no key is sent.",
    )
    model = forms.CharField(max_length=100, help_text="Model name.")
    judge = forms.CharField(
        label="Judge name",
        max_length=100,
        required=False,
        help_text="Names the ratings in reports and the protocol. Empty: the model name. "
        "A judge keeps one prompt: give a new name when you change it.",
    )
    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16, "cols": 100}),
        required=False,
        strip=False,
        help_text="A Django template (variables in docs/analysis.md). Empty: each study's "
        "built-in prompt for its kind.",
    )
    samples = forms.IntegerField(min_value=1, max_value=20, initial=1)
    criterion = forms.CharField(max_length=60, required=False, help_text="Likert: only this one.")
    concurrency = forms.IntegerField(min_value=1, max_value=32, initial=4)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].choices = endpoint_choices()
        self.fields["endpoint"].initial = self.fields["endpoint"].choices[0][0]

    def clean_prompt(self) -> str:
        prompt = self.cleaned_data["prompt"]
        if prompt.strip():
            try:
                judging.PromptTemplate.from_text(prompt)
            except judging.JudgeRefused as exc:
                raise forms.ValidationError(exc.message) from None
        return prompt

    def clean(self) -> dict:
        data = super().clean()
        endpoint = data.get("endpoint")
        if endpoint == OWN:
            url = data.get("base_url")
            if not url:
                self.add_error("base_url", "Give your endpoint's base URL.")
            elif judging.endpoint_key(url) is not None:
                self.add_error("base_url", "This endpoint is listed above: pick it there.")
        elif endpoint:
            data["base_url"] = endpoint
            if data.get("api_key"):
                self.add_error(
                    "api_key", "A listed endpoint sends the key bound to it; leave this empty."
                )
        return data

    def sends(self) -> str:
        """What the run will send as its key, in words."""
        data = self.cleaned_data
        if data["endpoint"] == OWN:
            return "your key" if data.get("api_key") else "no key"
        key_env = judging.endpoint_key(data["base_url"])
        return f"the operator's key {key_env} (as set on the judge worker)" if key_env else "no key"


def _initial_prompt(queryset) -> str:
    """The built-in prompt when every selected study has the same one, else empty."""
    texts = set()
    for study in queryset:
        try:
            texts.add(judging.PromptTemplate.default(study).text)
        except ServiceError:
            continue
    return texts.pop() if len(texts) == 1 else ""


@admin.action(description="Rate with an LLM judge", permissions=["change"])
def run_judge(modeladmin: admin.ModelAdmin, request, queryset):
    """Ask for the endpoint, model and prompt, then queue (or, without a broker, run) one
    judge run per selected study."""
    if "apply" in request.POST:
        form = RunJudgeForm(request.POST)
    else:
        form = RunJudgeForm(initial={"prompt": _initial_prompt(queryset)})
    if form.is_valid():
        data = form.cleaned_data
        for study in queryset:
            try:
                run = judging.judge_run_create(
                    study,
                    base_url=data["base_url"],
                    model=data["model"],
                    judge=data["judge"],
                    own_key=data["api_key"] if data["endpoint"] == OWN else "",
                    prompt=data["prompt"],
                    criterion=data["criterion"],
                    samples=data["samples"],
                    concurrency=data["concurrency"],
                    user=request.user,
                )
                outcome = tasks.run_judge.delay(run.pk)
            except ServiceError as exc:
                modeladmin.message_user(request, f"{study.name}: {exc.message}", messages.ERROR)
                continue
            if settings.CELERY_TASK_ALWAYS_EAGER:
                run.refresh_from_db()
                level = messages.ERROR if run.state == JudgeRun.State.FAILED else messages.SUCCESS
                text = f"{study.name}: {outcome.get()} (sent {run.key_sent} to {run.base_url})."
            else:
                level = messages.SUCCESS
                text = (
                    f"{study.name}: the judge run is queued; it will send {form.sends()} to "
                    f"{run.base_url}. Its ratings appear as they come."
                )
            modeladmin.message_user(request, text, level)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Rate with an LLM judge",
        "form": form,
        "studies": queryset,
        "runs": JudgeRun.objects.filter(study__in=queryset).select_related("study")[:20],
        "opts": modeladmin.model._meta,
    }
    return TemplateResponse(request, "admin/annotator/study/run_judge.html", context)


@admin.action(description="Cancel LLM judge runs", permissions=["change"])
def cancel_judge_runs(modeladmin: admin.ModelAdmin, request, queryset):
    """Stop every queued or running judge run of the selected studies."""
    n = judging.judge_runs_cancel(queryset)
    text = (
        f"{n} judge run(s) asked to stop; a running one stops within seconds, keeping "
        "the ratings it stored."
        if n
        else "No judge run of these studies is queued or running."
    )
    modeladmin.message_user(request, text, messages.SUCCESS if n else messages.INFO)
