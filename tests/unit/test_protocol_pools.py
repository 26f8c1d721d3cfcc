"""A pair's pool (``protocol.selectors.StudyOutputs.pools``): the inputs with outputs from
both its systems, gold inputs left out; made once per pair, and one object for the pairs
whose systems cover the same inputs (which the correlation then indexes once)."""

from itertools import combinations

import pytest

from annotator.models import Input, Item, Output
from protocol import selectors
from protocol.models import SystemPair
from tests.protocol_sim import adaptive_bundle


@pytest.mark.django_db
def test_each_pool_is_the_inputs_both_systems_answer_gold_left_out(make_study):
    study = make_study(adaptive_bundle(n_inputs=12))
    # s4 answers only the even inputs (an import takes every system on every input; a
    # study whose outputs were removed since has pools that differ)
    odd = [f"in{i}" for i in range(1, 12, 2)]
    Output.objects.filter(system__name="s4", input__external_id__in=odd).delete()
    gold = Input.objects.get(study=study, external_id="in4")
    Item.objects.create(study=study, input=gold, is_gold=True, expected={}, redundancy=1)
    pairs = list(SystemPair.objects.filter(study=study).select_related("system_a", "system_b"))
    assert len(pairs) == 6
    outputs = selectors.StudyOutputs(study)
    pools = outputs.pools(pairs)
    id_of = dict(Input.objects.filter(study=study).values_list("external_id", "pk"))
    every = {id_of[f"in{i}"] for i in range(12)} - {gold.pk}
    even = {id_of[f"in{i}"] for i in range(0, 12, 2)} - {gold.pk}
    for pair, pool in zip(pairs, pools, strict=True):
        names = {pair.system_a.name, pair.system_b.name}
        assert pool == (even if "s4" in names else every), names
        assert isinstance(pool, frozenset)
    # pairs of systems answering the same inputs share one pool; asked again, the same
    shared = [pool for pair, pool in zip(pairs, pools, strict=True)
              if "s4" not in {pair.system_a.name, pair.system_b.name}]  # fmt: skip
    assert len(shared) == 3 and all(a is b for a, b in combinations(shared, 2))
    again = outputs.pools(pairs[::-1])[::-1]
    assert all(a is b for a, b in zip(pools, again, strict=True))
