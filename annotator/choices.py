"""Answer vocabularies and the left/right → system-order normalisation."""

from django.db import models


class StudyKind(models.TextChoices):
    PAIRWISE = "pairwise", "Pairwise preference"
    LIKERT = "likert", "Likert rating"


class Preference(models.TextChoices):
    """A pairwise answer in *system order*: A is the item's ``output_a``."""

    A = "A", "A is better"
    B = "B", "B is better"
    TIE = "tie", "Tie"
    BOTH_GOOD = "both_good", "Both good"
    BOTH_BAD = "both_bad", "Both bad"


class RawAnswer(models.TextChoices):
    """A pairwise answer as the worker gave it, in *display order*."""

    LEFT = "left", "Left is better"
    RIGHT = "right", "Right is better"
    TIE = "tie", "Tie"
    BOTH_GOOD = "both_good", "Both good"
    BOTH_BAD = "both_bad", "Both bad"


SIDE_NEUTRAL = {RawAnswer.TIE, RawAnswer.BOTH_GOOD, RawAnswer.BOTH_BAD}


def normalise(raw: str, left_is_a: bool) -> str:
    """Map a display-order answer to system order given which output was on the left."""
    raw = RawAnswer(raw)
    if raw in SIDE_NEUTRAL:
        return Preference(raw.value).value
    shown_left = Preference.A if left_is_a else Preference.B
    shown_right = Preference.B if left_is_a else Preference.A
    return (shown_left if raw == RawAnswer.LEFT else shown_right).value


class AssignmentState(models.TextChoices):
    ISSUED = "issued", "Issued"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Expired"
    RETURNED = "returned", "Returned"


class AnnotationSource(models.TextChoices):
    PLATFORM = "platform", "Collected on this platform"
    IMPORT = "import", "Imported with the dataset"
