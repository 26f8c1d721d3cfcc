"""A live adaptive study closes a pair that decided pairs order, and shows the chain: the
dashboard's matrix, its JSON and the admin's pair list."""

import html
import random
import re

import pytest

from annotator import services
from protocol.models import Decision, ProtocolConfig, SystemPair
from protocol.selectors import dashboard
from tests.conftest import boss_client
from tests.protocol_sim import QUALITY, adaptive_bundle, run_workers

#: How often a worker picks the better system: the adjacent pairs are clear, the far pairs
#: s1 vs s3 and s1 vs s4 slow to decide from their own labels (their order follows anyway).
ACCURACY = {
    frozenset(("s1", "s2")): 0.95,
    frozenset(("s2", "s3")): 0.95,
    frozenset(("s2", "s4")): 0.95,
    frozenset(("s1", "s3")): 0.6,
    frozenset(("s1", "s4")): 0.6,
}


def _answer(assignment, rng: random.Random) -> dict[str, str]:
    a, b = (o.system.name for o in assignment.item.output_list())
    if QUALITY[a] == QUALITY[b]:
        return {"answer": rng.choice(["tie", "left", "right"])}
    better_is_a = QUALITY[a] > QUALITY[b]
    if rng.random() > ACCURACY[frozenset((a, b))]:
        better_is_a = not better_is_a
    return {"answer": "left" if better_is_a == (assignment.display_order == [0, 1]) else "right"}


@pytest.fixture
def implied_study(transactional_db):
    study = services.study_import(adaptive_bundle(n_inputs=120), filename="a.jsonl")
    # every open pair gets a batch each round and none is stopped as futile: the far pairs
    # are still open when the adjacent ones are decided
    ProtocolConfig.objects.filter(study=study).update(futility=0, allocation="uniform")
    run_workers(study, n_workers=400, answer_with=_answer)
    return study


def test_an_implied_pair_is_closed_with_its_chain_in_the_page_json_and_admin(implied_study):
    pairs = {
        (p.system_a.name, p.system_b.name): p
        for p in SystemPair.objects.filter(study=implied_study).select_related("system_a")
    }
    implied = {k: p for k, p in pairs.items() if p.evidence.get("outcome") == "implied"}
    assert implied, {k: p.evidence.get("outcome") for k, p in pairs.items()}
    for (a, b), pair in implied.items():
        chain = pair.evidence["implied_by"]
        assert pair.state == SystemPair.State.DECIDED and pair.winner.name == chain[0] == a == "s1"
        assert chain[-1] == b and len(chain) >= 3
        # every step of the chain is a pair decided before or in the same round, not implied
        for w, lo in zip(chain, chain[1:], strict=False):
            step = pairs.get((w, lo)) or pairs[(lo, w)]
            assert step.state == SystemPair.State.DECIDED and step.winner.name == w
            assert step.decided_in_round <= pair.decided_in_round
        # its own labels alone did not decide it: far from the 120 inputs, still undecided
        assert sum(pair.evidence["human"]) < 120
        assert Decision.objects.filter(pair=pair, outcome="decided").count() == 1
    data = dashboard(implied_study)
    rows = {(p["system_a"], p["system_b"]): p for p in data["pairs"]}
    (a, b), pair = next(iter(implied.items()))
    chain_text = " > ".join(pair.evidence["implied_by"])
    assert rows[(a, b)]["implied_by"] == pair.evidence["implied_by"]
    assert rows[(a, b)]["status"] == f"decided by implication: s1 is better ({chain_text})"
    edge = next(e for e in data["partial_order"]["edges"] if {e["winner"], e["loser"]} == {a, b})
    assert edge["implied"] is True
    client = boss_client()
    page = client.get(f"/studies/{implied_study.pk}/protocol/").content.decode()
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page)))
    assert "decided by implication: s1 is better" in text
    assert "no real difference are decided at most γ = 0.05 of the time over all looks" in text
    assert f"from the decided pairs {chain_text}" in text
    api = client.get(f"/api/studies/{implied_study.pk}/protocol/").json()
    api_row = next(p for p in api["pairs"] if (p["system_a"], p["system_b"]) == (a, b))
    assert api_row["implied_by"] == pair.evidence["implied_by"]
    admin = client.get(f"/admin/protocol/systempair/?study__id__exact={implied_study.pk}")
    admin_text = html.unescape(admin.content.decode())
    assert f"decided by implication: s1 is better ({chain_text})" in admin_text
