"""The adaptive protocol's state: settings, system pairs under test, rounds, decisions."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from annotator.models import Study, System


class ProtocolConfig(models.Model):
    """How an adaptive study decides (Deriu et al. 2023, Algorithms 1-2, and the corrections
    beyond the paper; see ``protocol.settings.ProtocolSettings``) and its budget ledger."""

    class Allocation(models.TextChoices):
        UNIFORM = "uniform", "N inputs for every open pair (the paper)"
        ADAPTIVE = "adaptive", "Where it most changes decisions"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="protocol")
    paper = models.BooleanField(
        default=False, help_text="Run Algorithm 2 exactly as published (fixed γ at every look)."
    )
    allocation = models.CharField(
        max_length=10, choices=Allocation.choices, default=Allocation.ADAPTIVE
    )
    rope_delta = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0), MaxValueValidator(0.5)],
        help_text="Retire a pair as practically equivalent when P(|p> − p<| < δ) > 1 − γ.",
    )
    futility = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Retire a pair as undecided when the predicted chance that all its inputs "
        "(within the budget) decide it falls below this.",
    )
    metric_judge = models.CharField(
        max_length=100,
        blank=True,
        help_text="Judge or metric whose ratings enter the decision (Algorithm 1); empty: "
        "humans only.",
    )
    metric_dead_zone = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0)],
        help_text="Score differences within ± this count as a draw (Definition 5).",
    )
    scored_criterion = models.CharField(
        max_length=60,
        blank=True,
        help_text="Scored studies (Likert, error spans): the criterion rated on a scale whose "
        "mean ratings give each input's preference (Definition 5); empty: every such "
        "criterion, averaged.",
    )
    scored_dead_zone = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0)],
        help_text="Scored studies (Likert, error spans): mean-rating differences within ± "
        "this many scale points count as a draw (Definition 5).",
    )
    seed = models.BigIntegerField(default=0, help_text="Seeds input order and the sampler.")
    #: The ledger: annotations committed to released items (items × redundancy). Items are
    #: only released while this stays within the study's budget, and an item never takes
    #: more annotations than its redundancy, so the study never collects more than B.
    committed = models.PositiveIntegerField(default=0, editable=False)
    #: The predictive level a decision needs (calibrated under the null when the first round
    #: is decided, then fixed; ``protocol.predictive.calibrate_decision_level``).
    decision_level = models.FloatField(null=True, blank=True, editable=False)
    #: The level of a pair that pooling does not inform (calibrated on a lone null pair with
    #: ``decision_level``; then ``decision_level`` is the level of a pair the other pairs pin
    #: down, calibrated on null studies of this study's shape; ``protocol.rounds.study_level``).
    lone_decision_level = models.FloatField(null=True, blank=True, editable=False)
    #: The futility threshold calibrated over the looks when round 1 is decided (at most
    #: ``futility``; ``protocol.rounds.futility_threshold``); null: ``futility`` as given.
    futility_threshold = models.FloatField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"protocol of {self.study}"

    def clean(self) -> None:
        if self.scored_criterion:
            study = self.study
            numeric = {name for name, _, _ in study.bound_kind().score_scales()}
            if self.scored_criterion not in numeric:
                raise ValidationError(
                    {"scored_criterion": "Name a criterion of the study rated on a scale."}
                )


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
    items = models.PositiveIntegerField(default=0)
    committed = models.PositiveIntegerField(default=0, help_text="Annotations released.")
    opened_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="round_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.study} round {self.number}"


class Decision(models.Model):
    """What the decision function said about one pair after one round; written once."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="decisions")
    pair = models.ForeignKey(SystemPair, on_delete=models.CASCADE, related_name="decisions")
    theta = models.FloatField()
    outcome = models.CharField(max_length=12, choices=SystemPair.State.choices)
    human_counts = models.JSONField(help_text="[n>, n=, n<] so far.")
    metric_counts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["round", "pair"], name="decision_once_per_round")
        ]

    def __str__(self) -> str:
        return f"{self.pair} after {self.round}"
