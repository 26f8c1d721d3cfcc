"""Adaptive collection of a ranking study, run live through the services (SQLite, eager
tasks): items of m outputs chosen for the open pairs, one annotation per ranking charged to
the budget, the k(k−1)/2 pair preferences of each ranking decided with the correlation of
pairs that share inputs — the same decisions as the ranking replay's on the same labels."""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from django.db import models

from annotator import services
from annotator.errors import ImportRejected
from annotator.models import Annotation, Input, Item
from annotator.selectors import label_rows, score_rows
from kinds.ranking import Ranking
from protocol import rounds, selectors
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from protocol.replay.ranking_sim import decide_step
from protocol.services import protocol_settings
from tests.protocol_sim import QUALITY, likert_bundle, ranking_bundle, run_workers

BIG = 10**12
STATE = {
    rounds.OPEN: "open",
    rounds.DECIDED: "decided",
    rounds.IMPLIED: "decided",
    rounds.EQUIVALENT: "equivalent",
    rounds.FUTILE: "exhausted",
    rounds.EXHAUSTED: "exhausted",
    rounds.BUDGET: "exhausted",
}


def make(**options):
    study = services.study_import(ranking_bundle(**options), filename="rank.jsonl")
    return study, ProtocolConfig.objects.get(study=study)


def shown(study, **filters) -> list[tuple[int, frozenset[str]]]:
    """Every item as (input id, the system names it shows)."""
    items: dict[int, tuple[int, set[str]]] = {}
    for pk, input_id, name in Item.objects.filter(study=study, **filters).values_list(
        "pk", "input_id", "item_outputs__output__system__name"
    ):
        items.setdefault(pk, (input_id, set()))[1].add(name)
    return [(i, frozenset(names)) for i, names in items.values()]


def assert_no_open_pair_twice_on_an_input(study) -> None:
    """A pair gets at most one ranking of an input while it is open."""
    seen: dict[tuple[int, frozenset[str]], int] = {}
    for number, input_id, systems in (
        (n, i, s)
        for n in Round.objects.filter(study=study).values_list("number", flat=True)
        for i, s in shown(study, round_number=n)
    ):
        for pair in combinations(sorted(systems), 2):
            key = (input_id, frozenset(pair))
            if key in seen:
                first = SystemPair.objects.get(
                    study=study, system_a__name=pair[0], system_b__name=pair[1]
                )
                assert first.decided_in_round is not None
                assert first.decided_in_round < number, (key, seen[key], number)
            seen.setdefault(key, number)


@pytest.mark.django_db(transaction=True)
def test_adaptive_ranking_import_releases_rankings_that_cover_every_pair():
    study, config = make(redundancy=2)
    assert study.kind == "ranking" and study.collection == "adaptive"
    assert SystemPair.objects.filter(study=study).count() == 6
    items = shown(study)
    assert all(len(systems) == 3 for _, systems in items)  # per_item: 3 of the 4 systems
    # every pair gets its batch of 5 inputs, each item serving three pairs: 11 items, not 30
    # (10 would need each of the four triples 2.5 times)
    for a, b in combinations(sorted(QUALITY), 2):
        assert sum({a, b} <= systems for _, systems in items) >= 5, (a, b)
    assert len(items) == 11
    assert list(Round.objects.values_list("number", "state", "items")) == [(1, "open", 11)]
    assert config.committed == 11 * 2  # one annotation per ranking, redundancy 2
    assert_no_open_pair_twice_on_an_input(study)


@pytest.mark.django_db(transaction=True)
def test_complete_rankings_use_one_item_per_input():
    study, config = make(per_item=4)
    items = shown(study)
    assert all(systems == frozenset(QUALITY) for _, systems in items)
    assert len(items) == len({i for i, _ in items}) == 5  # 5 inputs give every pair 5 labels


@pytest.mark.django_db(transaction=True)
def test_ranking_rounds_run_until_every_pair_is_retired_and_the_budget_counts_rankings():
    study, config = make(budget=60)
    run_workers(study)
    config.refresh_from_db()
    collected = Annotation.objects.filter(study=study).count()
    assert collected == config.committed <= 60  # one per ranking
    assert not SystemPair.objects.filter(study=study, state="open").exists()
    assert set(Round.objects.filter(study=study).values_list("state", flat=True)) == {"decided"}
    rows = label_rows(study)
    assert len(rows) == 3 * collected  # a ranking of 3 gives 3 pair preferences
    s1_s3 = SystemPair.objects.get(study=study, system_a__name="s1", system_b__name="s3")
    assert (s1_s3.state, s1_s3.winner.name) == ("decided", "s1")
    for pair in SystemPair.objects.filter(study=study, state="decided"):
        assert QUALITY[pair.winner.name] == max(
            QUALITY[pair.system_a.name], QUALITY[pair.system_b.name]
        )
    assert_no_open_pair_twice_on_an_input(study)


def assert_the_replay_decides_alike(
    study, config, rows: pd.DataFrame, per_ranking: int = 1
) -> None:
    """Every round decided live is decided again by the ranking replay's step
    (``ranking_sim.decide_step``: its own label arrays, ``label_correlation`` and
    ``shared_input_correlation``) on the labels collected up to that round (``rows``: pair
    preferences ``input, system, other_system, preference`` with the ``round`` that released
    them; ``per_ranking``: pair labels per annotation, for the budget left): the same pairs
    are open, and each gets the same outcome, θ, counts and, at its
    last look, the same predicted outcome (which the correlation changes)."""
    settings = protocol_settings(study, config)
    names = list(study.systems.order_by("name").values_list("pk", flat=True))
    index = {pk: n for n, pk in enumerate(names)}
    pairs = list(SystemPair.objects.filter(study=study).order_by("pk"))
    systems = np.array([[index[p.system_a_id], index[p.system_b_id]] for p in pairs])
    inputs = sorted(Input.objects.filter(study=study).values_list("pk", flat=True))
    column = {i: u for u, i in enumerate(inputs)}
    pool = np.zeros((len(pairs), len(inputs)), dtype=bool)
    for j, pool_j in enumerate(selectors.pair_pools(study, pairs)):
        pool[j, [column[i] for i in pool_j]] = True
    row_of = {(p.system_a_id, p.system_b_id): j for j, p in enumerate(pairs)}
    is_open = np.ones(len(pairs), dtype=bool)
    closed_in = np.full(len(pairs), BIG)
    decisions = np.zeros(len(pairs), dtype=np.int8)  # what was decided, for implications
    effects = rounds.ClosedPairs(np.zeros(len(pairs)), np.ones(len(pairs)), systems, decisions)
    kept = {p.pk: p.evidence for p in pairs}  # each pair's last look, with its prediction
    compared = 0
    decided = Round.objects.filter(study=study, state="decided").order_by("number")
    assert decided.count() >= 3
    for rnd in decided:
        live = {d.pair_id: d for d in Decision.objects.filter(round=rnd)}
        assert {p.pk for p, o in zip(pairs, is_open, strict=True) if o} == set(live)
        labels = np.zeros(pool.shape, dtype=np.int8)
        seen = np.zeros(pool.shape, dtype=bool)
        for _, row in rows[rows["round"] <= rnd.number].iterrows():
            j = row_of[(row["system"], row["other_system"])]  # items show systems by name
            if row["round"] > closed_in[j]:
                continue  # the replay gives a closed pair no more labels
            assert not seen[j, column[row["input"]]]
            seen[j, column[row["input"]]] = True
            labels[j, column[row["input"]]] = int(np.sign(row["preference"] - 0.5))
        budget_left = BIG
        if study.budget is not None:  # as the replay counts it: rankings left × pairs each
            spent = sum(Round.objects.filter(study=study, number__lte=rnd.number).values_list(
                "committed", flat=True
            ))  # fmt: skip
            budget_left = max(study.budget - spent, 0) * per_ranking
        step = decide_step(
            labels, seen, pool, systems, is_open, effects, budget_left, settings,
            level=config.decision_level,
        )  # fmt: skip
        idx = np.flatnonzero(is_open)
        for k, j in enumerate(idx):
            decision = live[pairs[j].pk]
            assert decision.outcome == STATE[step.outcome[k]], (rnd.number, pairs[j])
            assert decision.theta == pytest.approx(step.theta[k], abs=1e-12)
            got, lab = seen[j], labels[j]
            assert decision.human_counts == [int((got & (lab == c)).sum()) for c in (1, 0, -1)]
            if kept[pairs[j].pk]["round"] == rnd.number:  # pooled with the correlation
                predicted = kept[pairs[j].pk]["predicted"]
                assert predicted["a"] == pytest.approx(step.p_a[k], abs=1e-4)
                assert predicted["b"] == pytest.approx(step.p_b[k], abs=1e-4)
                assert predicted["undecided"] == pytest.approx(step.p_u[k], abs=1e-4)
                compared += 1
        effects.effect_mean[idx] = step.effect_mean
        effects.effect_var[idx] = step.effect_var
        decisions[idx] = step.decision
        closing = idx[step.outcome != rounds.OPEN]
        is_open[closing] = False
        closed_in[closing] = rnd.number
        if rnd.number == 1:
            human = np.array([d.human_counts for d in live.values()])
            level = rounds.decision_level(
                settings, int(pool.sum(axis=1).max()), settings.batch, human
            )
            assert config.decision_level == pytest.approx(level)
    assert compared == len(pairs) and not is_open.any()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("budget", [None, 45])
def test_live_ranking_decisions_equal_the_replays_on_the_same_labels(budget):
    study, config = make(n_inputs=60, **({"budget": budget} if budget else {}))
    run_workers(study, per_worker=40)
    config.refresh_from_db()
    rows = label_rows(study)
    round_of = dict(Item.objects.filter(study=study).values_list("pk", "round_number"))
    rows = rows.assign(round=rows["item"].map(round_of))
    assert_the_replay_decides_alike(study, config, rows, per_ranking=3)
    if budget:
        assert Annotation.objects.filter(study=study).count() == config.committed <= budget
        outcomes = [p.evidence["outcome"] for p in SystemPair.objects.filter(study=study)]
        assert "budget" in outcomes  # the budget binds: the last looks are the replay's too


@pytest.mark.django_db(transaction=True)
def test_live_likert_decisions_equal_the_replays_on_the_same_labels():
    """A Likert study pools with the correlation too: a pair's label on an input is the
    sign of the difference of its two outputs' mean ratings, read here from the score rows."""
    study = services.study_import(likert_bundle(n_inputs=60), filename="likert.jsonl")
    run_workers(study, per_worker=40)
    config = ProtocolConfig.objects.get(study=study)
    scores = score_rows(study)
    mean = scores.groupby(["input", "system"])["score"].mean()
    round_of = {
        (i, s): n
        for i, s, n in Item.objects.filter(study=study).values_list(
            "input_id", "item_outputs__output__system_id", "round_number"
        )
    }
    rows = [
        (i, pair.system_a_id, pair.system_b_id, 0.5 + np.sign(diff) / 2, number)
        for pair in SystemPair.objects.filter(study=study)
        for i in sorted({i for i, _ in mean.index})
        if (i, pair.system_a_id) in mean.index and (i, pair.system_b_id) in mean.index
        for diff in [mean[i, pair.system_a_id] - mean[i, pair.system_b_id]]
        for number in [max(round_of[i, pair.system_a_id], round_of[i, pair.system_b_id])]
    ]
    columns = ["input", "system", "other_system", "preference", "round"]
    assert_the_replay_decides_alike(study, config, pd.DataFrame(rows, columns=columns))


@pytest.mark.django_db
def test_a_kind_the_protocol_cannot_collect_is_refused_at_import(monkeypatch):
    monkeypatch.setattr(Ranking, "adaptive", False)
    with pytest.raises(ImportRejected) as caught:
        services.study_import(ranking_bundle(), filename="rank.jsonl")
    assert "cannot be collected adaptively" in str(caught.value.errors)
    assert not Round.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_simulated_crowd_runs_an_adaptive_ranking_study_to_its_end(capsys):
    """``simulate_crowd --until-done`` answers with the ranking kind's simulated worker
    (``Kind.simulate_answer``) until every pair of the adaptive study is closed."""
    from django.core.management import call_command

    study, config = make(n_inputs=30, redundancy=2, budget=80)
    call_command("simulate_crowd", str(study.pk), "--until-done", "--seed", "0")
    config.refresh_from_db()
    assert not SystemPair.objects.filter(study=study, state="open").exists()
    assert Annotation.objects.filter(study=study).count() == config.committed <= 80
    answers = Annotation.objects.filter(study=study).values_list("answer", flat=True)
    assert all(len([p for tier in a["ranking"] for p in tier]) == 3 for a in answers)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bundle", ["ranking", "likert", "pairwise"])
def test_a_round_is_decided_and_the_next_opened_reading_the_outputs_once(bundle):
    """The decision's pools, the correlation's and the next round's outputs all come from
    one read of the study's outputs (it is every output of the study)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from protocol.services import round_close_if_complete, round_decide
    from tests.protocol_sim import adaptive_bundle

    make_bundle = {"ranking": ranking_bundle, "likert": likert_bundle}.get(bundle)
    data = make_bundle() if make_bundle else adaptive_bundle()
    study = services.study_import(data, filename="a.jsonl")
    Item.objects.filter(study=study, round_number=1).update(
        n_taken=models.F("redundancy"), n_done=models.F("redundancy")
    )
    assert round_close_if_complete(study.pk, 1)
    with CaptureQueriesContext(connection) as queries:
        assert round_decide(study.pk, 1)
    assert Round.objects.filter(study=study, number=2).exists()
    reads = [q["sql"] for q in queries if 'FROM "annotator_output"' in q["sql"]]
    assert len(reads) == 1, reads
