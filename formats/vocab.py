"""Label words shared by every reader: which output a preference label names."""

from __future__ import annotations

#: Words that make a Judge-Bench label a tie (``tie``, ``both_equal``, ``same``, ...).
TIE_WORDS = ("tie", "equal", "same", "both", "draw", "neither")

#: A rating's preference label (lower case) -> ``A``, ``B`` or ``tie``.
PREFERENCES = {"a": "A", "b": "B", "tie": "tie", "draw": "tie", "=": "tie"}

#: As :data:`PREFERENCES`, plus the platform's two side-neutral answers.
PAIRWISE_WORDS = {**PREFERENCES, "both_good": "both_good", "both_bad": "both_bad"}

#: The other side of a preference (ties stay).
FLIP = {"A": "B", "B": "A"}


def preference_of(label: object) -> str | None:
    """Which output a Judge-Bench pairwise label prefers: ``A``, ``B``, ``tie`` or None.

    >>> [preference_of(x) for x in ("model_a", "Response_B", "both equal", "good")]
    ['A', 'B', 'tie', None]
    """
    low = str(label).strip().lower()
    if low in ("a", "model_a", "output_a", "response_a", "system_a") or low.endswith("_a"):
        return "A"
    if low in ("b", "model_b", "output_b", "response_b", "system_b") or low.endswith("_b"):
        return "B"
    if any(word in low for word in TIE_WORDS):
        return "tie"
    return None
