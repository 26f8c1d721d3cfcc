"""A round closes when its last unfinished item is done, whichever item that is, and only
once (``protocol.services.round_close_if_complete`` reads the round's newest items first)."""

import random

import pytest

from annotator import services
from annotator.models import Item
from protocol.models import Round
from protocol.services import round_close_if_complete
from tests.protocol_sim import adaptive_bundle


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(4))
def test_a_round_closes_with_its_last_item_in_any_order_and_only_once(seed):
    study = services.study_import(adaptive_bundle(n_inputs=40), filename="a.jsonl")
    items = list(Item.objects.filter(study=study, round_number=1, is_gold=False))
    assert len(items) > 3
    Item.objects.filter(study=study, round_number=1).update(n_taken=1)
    order = items[:]
    random.Random(seed).shuffle(order)
    if seed == 0:  # the newest first, the oldest last: the scan's first entry is done early
        order = sorted(items, key=lambda i: -i.pk)
    # an inactive item never holds the round open
    Item.objects.filter(pk=order[0].pk).update(is_active=False)
    for done, item in enumerate(order[1:], start=1):
        assert not round_close_if_complete(study.pk, 1)
        Item.objects.filter(pk=item.pk).update(n_done=1)
        closes = done == len(order) - 1
        assert round_close_if_complete(study.pk, 1) is closes
    assert Round.objects.get(study=study, number=1).state == Round.State.CLOSED
    assert Round.objects.get(study=study, number=1).closed_at is not None
    assert not round_close_if_complete(study.pk, 1)  # only the first caller closes it
