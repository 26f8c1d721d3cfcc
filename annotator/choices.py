"""Vocabularies of the annotator models (a task kind's own answers live in ``kinds/``)."""

from django.db import models

from formats import vocab


class Preference(models.TextChoices):
    """A pairwise answer in *system order*: A is the item's first output (position 0)."""

    A = vocab.A, "A is better"
    B = vocab.B, "B is better"
    TIE = vocab.TIE, "Tie"
    BOTH_GOOD = vocab.BOTH_GOOD, "Both good"
    BOTH_BAD = vocab.BOTH_BAD, "Both bad"


class AssignmentState(models.TextChoices):
    ISSUED = "issued", "Issued"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Expired"
    RETURNED = "returned", "Returned"


class AnnotationSource(models.TextChoices):
    PLATFORM = "platform", "Collected on this platform"
    IMPORT = "import", "Imported with the dataset"
