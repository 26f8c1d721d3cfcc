"""Vocabularies of the annotator models (a task kind's own answers live in ``kinds/``)."""

from django.db import models


class Preference(models.TextChoices):
    """A pairwise answer in *system order*: A is the item's first output (position 0)."""

    A = "A", "A is better"
    B = "B", "B is better"
    TIE = "tie", "Tie"
    BOTH_GOOD = "both_good", "Both good"
    BOTH_BAD = "both_bad", "Both bad"


class AssignmentState(models.TextChoices):
    ISSUED = "issued", "Issued"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Expired"
    RETURNED = "returned", "Returned"


class AnnotationSource(models.TextChoices):
    PLATFORM = "platform", "Collected on this platform"
    IMPORT = "import", "Imported with the dataset"
