"""A study's presence on a crowd platform, its spend ledger, its submissions and hooks."""

import math
from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotator.models import Study

from . import secrets
from .client import CrowdError


class CrowdStudy(models.Model):
    """The remote study a humeval study runs on (a Prolific study or an MTurk HIT)."""

    class Platform(models.TextChoices):
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "MTurk"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="crowd")
    platform = models.CharField(max_length=12, choices=Platform.choices, default="prolific")
    remote_id = models.CharField(max_length=64, blank=True, editable=False)
    remote_status = models.CharField(max_length=24, blank=True, editable=False)
    places = models.PositiveIntegerField(
        default=0, editable=False, help_text="Places last set on the platform."
    )
    reward_cents = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Pay per place (per submission), in cents of the study's currency. Empty: "
        "from the study's pay per hour and the estimated time.",
    )
    estimated_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Estimated completion time per place. Empty: items per worker × the "
        "study's time per item (measured, else expected), rounded up.",
    )
    money_budget_cents = models.PositiveIntegerField(
        help_text="Most the study may spend on the platform, in cents: rewards + bonuses + "
        "the platform's fee (Study.platform_fee_percent). Places never exceed it."
    )
    auto_approve = models.BooleanField(
        default=False, help_text="Approve, without asking, submissions whose evidence passes."
    )
    min_gold_accuracy = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Gold accuracy below this (with at least 2 gold items) proposes a review.",
    )
    min_seconds_per_item = models.FloatField(
        default=3.0, help_text="A median time per item below this is speeding."
    )
    bonus_per_item_cents = models.PositiveIntegerField(default=0)
    bonus_per_gold_cents = models.PositiveIntegerField(
        default=0, help_text="Bonus per gold check passed, in cents."
    )
    device_compatibility = models.JSONField(default=list, blank=True)
    exclude_groups = models.JSONField(
        default=list,
        blank=True,
        help_text="Kept out (earlier waves): Prolific participant group ids, or MTurk "
        "qualification type ids.",
    )
    worker_group = models.CharField(
        max_length=64,
        blank=True,
        help_text="Where this study's approved workers are put: a Prolific participant "
        "group id, or an MTurk qualification type id.",
    )
    token_sealed = models.TextField(blank=True, editable=False)
    hook_secret_sealed = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "crowd study"

    def __str__(self) -> str:
        return f"{self.get_platform_display()}: {self.study}"

    def set_token(self, token: str) -> None:
        self.token_sealed = secrets.seal(token)

    def token(self) -> str:
        import os

        return secrets.unseal(self.token_sealed) or os.environ.get("HUMEVAL_PROLIFIC_TOKEN", "")

    def set_hook_secret(self, secret: str) -> None:
        self.hook_secret_sealed = secrets.seal(secret)

    def hook_secret(self) -> str:
        import os

        return secrets.unseal(self.hook_secret_sealed) or os.environ.get(
            "HUMEVAL_PROLIFIC_HOOK_SECRET", ""
        )

    def terms(self) -> tuple[int, int]:
        """(estimated minutes, reward in cents) per place: as set, else from the study's
        cost estimate (time per item × items per worker, at the pay per hour)."""
        from annotator.workspace import estimate

        minutes, reward = self.estimated_minutes, self.reward_cents
        if minutes is None or reward is None:
            study, guess = self.study, estimate(self.study)
            if minutes is None:
                if not (guess.seconds_per_item and study.items_per_worker):
                    raise CrowdError(
                        "Set the estimated minutes, or the study's expected "
                        "seconds per item and items per worker"
                    )
                minutes = math.ceil(guess.seconds_per_item * study.items_per_worker / 60)
            if reward is None:
                if study.pay_per_hour is None:
                    raise CrowdError("Set the reward, or the study's pay per hour")
                reward = math.ceil(Decimal(str(study.pay_per_hour)) * 100 * minutes / 60)
        return minutes, reward

    @property
    def fee_rate(self) -> Decimal:
        return Decimal(str(self.study.platform_fee_percent or 0)) / 100

    def with_fee(self, cents: int) -> int:
        """Cents of pay plus the platform's fee on it, rounded up."""
        total = Decimal(cents) * (1 + self.fee_rate)
        return int(total.to_integral_value(rounding="ROUND_CEILING"))


class LedgerEntry(models.Model):
    """One call to the platform that changes something, written *before* the call with an
    idempotency key and reconciled after: ``pending`` (about to be sent, or sent by a run
    that crashed), ``done``, ``failed`` (refused: nothing happened) or ``uncertain`` (sent,
    answer lost; counted as spent and never sent again until reconciled)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        UNCERTAIN = "uncertain", "Sent, outcome unknown"

    crowd = models.ForeignKey(CrowdStudy, on_delete=models.CASCADE, related_name="ledger")
    action = models.CharField(max_length=16)
    key = models.CharField(max_length=200, unique=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    cents = models.IntegerField(
        default=0, help_text="Money this call commits, platform fee included."
    )
    detail = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.action} {self.key} ({self.state})"


class Submission(models.Model):
    """A platform submission as last seen, with the review humeval proposes for it."""

    class Proposal(models.TextChoices):
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        RETURN = "return", "Ask to return"
        WAIT = "wait", "Wait"

    crowd = models.ForeignKey(CrowdStudy, on_delete=models.CASCADE, related_name="submissions")
    remote_id = models.CharField(max_length=64)
    participant_id = models.CharField(max_length=64)
    status = models.CharField(max_length=24)
    study_code = models.CharField(max_length=64, blank=True)
    proposal = models.CharField(max_length=8, choices=Proposal.choices, blank=True)
    category = models.CharField(max_length=24, blank=True)
    reason = models.TextField(blank=True)
    bonus_cents = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["crowd", "remote_id"], name="crowd_submission_once")
        ]

    def __str__(self) -> str:
        return f"{self.remote_id} ({self.status})"


class HookDelivery(models.Model):
    """A verified hook request, kept so a redelivery is recognised and changes nothing."""

    digest = models.CharField(max_length=64, unique=True)
    event_type = models.CharField(max_length=64)
    resource_id = models.CharField(max_length=64)
    status = models.CharField(max_length=24, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.event_type} {self.resource_id} {self.status}"
