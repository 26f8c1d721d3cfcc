"""The protocol's settings and state in the admin, per study: each admin is a
``StudyScopedAdmin`` (a researcher sees only their studies' rows)."""

from django.contrib import admin
from django.template.loader import render_to_string
from django.urls import reverse

from annotator.admin import StudyScopedAdmin

from .models import Decision, ProtocolConfig, Round, SystemPair
from .outcome import pair_status


@admin.register(ProtocolConfig)
class ProtocolConfigAdmin(StudyScopedAdmin):
    list_display = ["study", "paper", "allocation", "metric_judge", "committed", "dashboard"]
    readonly_fields = [
        "committed",
        "decision_level",
        "lone_decision_level",
        "futility_threshold",
        "dashboard",
    ]

    @admin.display(description="dashboard")
    def dashboard(self, obj: ProtocolConfig) -> str:
        if not obj.study_id:  # the add page
            return "—"
        url = reverse("protocol:dashboard", args=[obj.study_id])
        return render_to_string("protocol/_dashboard_link.html", {"url": url})


class ReadOnly(StudyScopedAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SystemPair)
class SystemPairAdmin(ReadOnly):
    list_display = [
        "study",
        "system_a",
        "system_b",
        "status",
        "winner",
        "theta",
        "decided_in_round",
    ]
    list_filter = ["study", "state"]
    list_select_related = ["study", "system_a", "system_b", "winner"]
    readonly_fields = ["status"]

    @admin.display(description="status", ordering="state")
    def status(self, obj: SystemPair) -> str:
        """The state in words with why the pair closed (``protocol.outcome.pair_status``)."""
        winner = obj.winner.name if obj.winner_id else None
        return pair_status(
            obj.state, obj.evidence.get("outcome"), winner, obj.evidence.get("implied_by")
        )


@admin.register(Round)
class RoundAdmin(ReadOnly):
    list_display = ["study", "number", "state", "items", "committed", "opened_at", "decided_at"]
    list_filter = ["study", "state"]


@admin.register(Decision)
class DecisionAdmin(ReadOnly):
    study_path = "round__study"
    list_display = ["round", "pair", "theta", "outcome", "human_counts", "created_at"]
