"""A scored study's ratings stay exact: an annotator's rating and the pair's differences are
what the plain ``Fraction`` arithmetic gives (``protocol.selectors``), so equal means are a
draw and a difference of exactly the dead zone is one too."""

import random
from fractions import Fraction

import pytest

from protocol.selectors import Scale, _difference, annotator_rating


def plain_rating(scores, criteria):
    ref, values = criteria[0], []
    for c in criteria:
        value = scores.get(c.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        span = (ref.scale_max - ref.scale_min) / (c.scale_max - c.scale_min)
        values.append(ref.scale_min + (Fraction(value) - c.scale_min) * span)
    return sum(values, Fraction(0)) / len(values) if values else None


@pytest.mark.parametrize("seed", range(10))
def test_an_annotators_rating_is_the_exact_mean_of_their_mapped_ratings(seed):
    rng = random.Random(seed)
    criteria = [
        Scale("a", Fraction(1), Fraction(5)),
        Scale("b", Fraction(0), Fraction(100)),
        Scale("c", Fraction(1), Fraction(7)),
    ]
    for _ in range(300):
        chosen = criteria[: rng.randint(1, 3)]
        scores = {
            c.name: rng.choice([rng.randint(0, 100), rng.random() * 7, True, "x", None])
            for c in chosen
            if rng.random() < 0.9
        }
        got = annotator_rating(scores, chosen)
        want = plain_rating(scores, chosen)
        assert got == want and (got is None) == (want is None), scores
        assert got is None or isinstance(got, int | Fraction)


def test_a_difference_is_the_exact_one_rounded_once():
    rng = random.Random(0)
    for _ in range(5000):
        x = Fraction(rng.randint(-500, 500), rng.randint(1, 12))
        y = Fraction(rng.randint(-500, 500), rng.randint(1, 12))
        assert _difference(x, y) == float(x - y)
    # means equal as numbers are a draw; exactly the dead zone compares equal to it
    assert _difference(Fraction(7, 3), Fraction(14, 6)) == 0.0
    assert _difference(Fraction(11, 10), Fraction(1)) == 0.1
    assert _difference(Fraction(43, 10), Fraction(42, 10)) == 0.1  # 4.3 − 4.2 in floats is not
