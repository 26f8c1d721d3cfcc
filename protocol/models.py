"""System pairs under test and the rounds that collect evidence on them."""

from django.db import models
from django.db.models import F, Q

from annotator.models import Study, System


class SystemPair(models.Model):
    class State(models.TextChoices):
        OPEN = "open", "Open"
        DECIDED = "decided", "Decided"
        EQUIVALENT = "equivalent", "Practically equivalent"
        EXHAUSTED = "exhausted", "Inputs or budget exhausted"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="system_pairs")
    system_a = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    system_b = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    winner = models.ForeignKey(
        System, on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )
    theta = models.FloatField(null=True, blank=True, help_text="Last P(p> > p<).")
    evidence = models.JSONField(default=dict, blank=True)
    decided_in_round = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "system_a", "system_b"], name="pair_unique"),
            models.CheckConstraint(condition=~Q(system_a=F("system_b")), name="pair_distinct"),
        ]

    def __str__(self) -> str:
        return f"{self.system_a} vs {self.system_b}"


class Round(models.Model):
    class State(models.TextChoices):
        OPEN = "open", "Collecting"
        CLOSED = "closed", "Complete, awaiting decision"
        DECIDED = "decided", "Decided"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="round_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.study} round {self.number}"
