from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from annotator.admin import StudyScopedAdmin

from .models import CrowdStudy


class CrowdStudyForm(forms.ModelForm):
    """The token and hook secret are written only: the form never shows them back."""

    api_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Your Prolific API token (kept encrypted; empty keeps the one set, else "
        "HUMEVAL_PROLIFIC_TOKEN is used). MTurk takes none here: boto3 reads "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.",
    )
    hook_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The hook secret Prolific gave your workspace (kept encrypted).",
    )

    class Meta:
        model = CrowdStudy
        fields = (
            "study",
            "platform",
            "reward_cents",
            "estimated_minutes",
            "money_budget_cents",
            "auto_approve",
            "min_gold_accuracy",
            "min_seconds_per_item",
            "bonus_per_item_cents",
            "bonus_per_gold_cents",
            "device_compatibility",
            "exclude_groups",
            "worker_group",
        )

    def save(self, commit=True):
        crowd = super().save(commit=False)
        if self.cleaned_data.get("api_token"):
            crowd.set_token(self.cleaned_data["api_token"])
        if self.cleaned_data.get("hook_secret"):
            crowd.set_hook_secret(self.cleaned_data["hook_secret"])
        if commit:
            crowd.save()
        return crowd


@admin.register(CrowdStudy)
class CrowdStudyAdmin(StudyScopedAdmin):
    form = CrowdStudyForm
    list_display = ("study", "platform", "remote_status", "places", "panel_link")
    readonly_fields = ("remote_id", "remote_status", "places", "token_set", "panel_link")

    @admin.display(description="token")
    def token_set(self, obj: CrowdStudy) -> str:
        from .platforms import of

        return "set" if obj.token_sealed else of(obj).credentials

    @admin.display(description="panel")
    def panel_link(self, obj: CrowdStudy) -> str:
        if not obj.pk:
            return "-"
        return format_html('<a href="{}">Crowd panel</a>', reverse("crowd:panel", args=[obj.pk]))
