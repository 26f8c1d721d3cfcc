"""The pairwise vocabulary, defined once: the platform's labels, which output a label
names, and the label words readers of other formats use."""

from __future__ import annotations

#: A pairwise label in *system order*: ``A`` (the item's first output, position 0) is
#: better, ``B`` is, or no side (a tie, both good, both bad).
A, B, TIE, BOTH_GOOD, BOTH_BAD = "A", "B", "tie", "both_good", "both_bad"

#: Every pairwise label, in the order reports list them; the last three count as a tie.
PAIRWISE_LABELS: tuple[str, ...] = (A, B, TIE, BOTH_GOOD, BOTH_BAD)

#: The labels that name neither output (the same in display and system order).
SIDE_NEUTRAL: tuple[str, ...] = (TIE, BOTH_GOOD, BOTH_BAD)

#: A label as the preference of the first output over the second: 1, 0, or 0.5 (no side).
PREFERENCE: dict[str, float] = {A: 1.0, B: 0.0, **dict.fromkeys(SIDE_NEUTRAL, 0.5)}

#: A pair preference (1, 0.5, 0) as its label.
LABEL_OF_PREFERENCE: dict[float, str] = {1.0: A, 0.0: B, 0.5: TIE}

#: Words that make a Judge-Bench label a tie (``tie``, ``both_equal``, ``same``, ...).
TIE_WORDS = ("tie", "equal", "same", "both", "draw", "neither")

#: A rating's preference label (lower case) -> ``A``, ``B`` or ``tie``.
PREFERENCES = {"a": A, "b": B, "tie": TIE, "draw": TIE, "=": TIE}

#: As :data:`PREFERENCES`, plus the platform's two side-neutral answers.
PAIRWISE_WORDS = {**PREFERENCES, BOTH_GOOD: BOTH_GOOD, BOTH_BAD: BOTH_BAD}

#: The other side of a preference (ties stay).
FLIP = {A: B, B: A}


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
