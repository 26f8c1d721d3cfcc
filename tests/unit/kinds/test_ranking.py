"""The ranking kind (kinds/ranking.py) on worked examples: options, answers in display order
brought to system order, pair preferences, rank scores, export and gold answers."""

import json
import random

import pytest

import kinds
from kinds import AnswerError, OptionError
from kinds.ranking import KIND as RANKING
from kinds.ranking import expected_from_gold, export_pairs, rank_positions

TIES = {"allow_tie": True}
NO_TIES = {"allow_tie": False}


def test_registered_under_its_import_name():
    assert kinds.get("ranking") is RANKING
    assert "ranking" in kinds.NAMES
    assert ("ranking", RANKING.label) in kinds.choices()
    assert RANKING.template == "kinds/ranking.html"


# --- options ---------------------------------------------------------------------------


def test_options_default_to_all_outputs_without_ties():
    assert RANKING.validate_options({}, 4) == {"allow_tie": False}
    assert RANKING.outputs_per_item({}, 4) == 4
    opts = RANKING.validate_options({"per_item": 3, "allow_tie": True}, 5)
    assert opts == {"allow_tie": True, "per_item": 3}
    assert RANKING.outputs_per_item(opts, 5) == 3


@pytest.mark.parametrize(
    ("opts", "n_systems", "message"),
    [
        ({}, 2, "at least 3 systems (found 2)"),
        ({"per_item": 2}, 4, "'per_item' must be a whole number of at least 3"),
        ({"per_item": True}, 4, "'per_item' must be a whole number of at least 3"),
        ({"per_item": 3.5}, 4, "'per_item' must be a whole number of at least 3"),
        ({"per_item": 5}, 4, "'per_item' (5) exceeds the number of systems (4)"),
        ({"allow_tie": "yes"}, 4, "'allow_tie' must be true or false"),
    ],
)
def test_bad_options_are_named(opts, n_systems, message):
    with pytest.raises(OptionError) as caught:
        RANKING.validate_options(opts, n_systems)
    assert any(message in m for m in caught.value.messages), caught.value.messages


def test_every_problem_is_listed_at_once():
    with pytest.raises(OptionError) as caught:
        RANKING.validate_options({"per_item": 1, "allow_tie": 1}, 2)
    assert len(caught.value.messages) == 3


def test_options_without_a_known_number_of_systems_skip_the_counting_checks():
    assert RANKING.validate_options({"per_item": 7}, None) == {"allow_tie": False, "per_item": 7}


def test_an_item_shows_every_system_or_per_item_drawn_at_random():
    assert RANKING.item_groups({}, 4, random.Random(1)) == [(0, 1, 2, 3)]
    drawn = {RANKING.item_groups({"per_item": 3}, 5, random.Random(seed))[0] for seed in range(40)}
    assert all(len(g) == 3 and list(g) == sorted(set(g)) for g in drawn)
    assert all(0 <= p < 5 for g in drawn for p in g)
    assert len(drawn) > 3  # really drawn, not always the same three


def test_display_order_is_a_permutation_drawn_per_assignment():
    orders = {tuple(RANKING.display_order(4, random.Random(seed))) for seed in range(50)}
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert len(orders) > 10


# --- answers ---------------------------------------------------------------------------


def test_answer_in_display_positions_becomes_the_ranking_in_system_order():
    # Shown: Response 1 = system position 2, Response 2 = position 0, Response 3 = position 1.
    # The worker puts Response 2 first, then Response 3, then Response 1.
    answer = RANKING.parse_answer(NO_TIES, [2, 0, 1], {"ranking": "[[1], [2], [0]]"})
    assert answer == {"raw": [[1], [2], [0]], "ranking": [[0], [1], [2]]}
    assert json.loads(json.dumps(answer)) == answer


def test_a_json_list_from_the_api_is_read_too_and_bare_numbers_are_tiers_of_one():
    answer = RANKING.parse_answer(NO_TIES, [1, 2, 0], {"ranking": [0, [2], 1]})
    assert answer["ranking"] == [[1], [0], [2]]


def test_tied_outputs_share_a_tier():
    answer = RANKING.parse_answer(TIES, [2, 0, 1], {"ranking": "[[2, 0], [1]]"})
    assert answer == {"raw": [[0, 2], [1]], "ranking": [[1, 2], [0]]}


@pytest.mark.parametrize(
    ("submitted", "message"),
    [
        (None, "Order the responses"),
        ("", "Order the responses"),
        ("not json", "Order the responses"),
        ("[]", "Order the responses"),
        ('{"0": 1}', "Order the responses"),
        ("[[0], [1]]", "exactly once"),  # one response left out
        ("[[0], [1], [1]]", "exactly once"),  # one twice
        ("[[0], [1], [3]]", "exactly once"),  # no Response 4 on this page
        ("[[0], [1], [-1]]", "exactly once"),
        ("[[0], [1], [2], [3]]", "exactly once"),
        ('[["0"], [1], [2]]', "groups of response numbers"),
        ("[[true], [1], [2]]", "groups of response numbers"),
        ("[[0.0], [1], [2]]", "groups of response numbers"),
        ("[[], [0], [1], [2]]", "groups of response numbers"),
        ("[[[0]], [1], [2]]", "groups of response numbers"),
        ("[[0, 1], [2]]", "does not allow ties"),
        ("[" + "0," * 1500 + "0]", "too long"),
        ("[" * 999 + "]" * 999, "Order the responses"),  # deeper than json.loads follows
        ("[" * 1900, "Order the responses"),
        (["[[0], [1], [2]]", "[[2], [1], [0]]"], "the ranking: it was sent 2 times"),
    ],
)
def test_bad_answers_are_refused_with_a_message(submitted, message):
    with pytest.raises(AnswerError) as caught:
        RANKING.parse_answer(NO_TIES, [2, 0, 1], {"ranking": submitted})
    assert message in caught.value.message


def test_a_broken_display_order_is_refused():
    with pytest.raises(AnswerError):
        RANKING.parse_answer(NO_TIES, [0, 0, 1], {"ranking": "[[0], [1], [2]]"})


# --- pair preferences and scores -------------------------------------------------------


def test_pair_preferences_are_every_pair_in_system_order():
    answer = RANKING.parse_answer(TIES, [2, 0, 1], {"ranking": "[[0, 2], [1]]"})
    # ranking [[1, 2], [0]]: 1 and 2 tied, both above 0.
    assert RANKING.pair_preferences(TIES, answer) == [
        ("preference", 0, 1, 0.0),
        ("preference", 0, 2, 0.0),
        ("preference", 1, 2, 0.5),
    ]


def test_k_outputs_give_k_choose_2_pair_rows():
    answer = {"ranking": [[3], [0], [4], [1], [2]]}
    rows = RANKING.pair_preferences(NO_TIES, answer)
    assert len(rows) == 10
    assert all(i < j for _, i, j, _ in rows)
    assert ("preference", 0, 3, 0.0) in rows  # 3 is first
    assert ("preference", 1, 2, 1.0) in rows
    assert ("preference", 0, 4, 1.0) in rows
    # 3 > 0 > 4 > 1 > 2: the lower position wins in (0,1) (0,2) (0,4) (1,2) (3,4), no other.
    wins = sorted((i, j) for _, i, j, p in rows if p == 1.0)
    assert wins == [(0, 1), (0, 2), (0, 4), (1, 2), (3, 4)]
    assert RANKING.pair_preferences(NO_TIES, {}) == []


def test_scores_are_rank_positions_with_the_mean_for_ties():
    answer = {"ranking": [[2], [0, 3], [1]]}
    assert RANKING.scores(TIES, answer) == {"rank": {2: 1.0, 0: 2.5, 3: 2.5, 1: 4.0}}
    assert rank_positions([[0, 1, 2]]) == {0: 2.0, 1: 2.0, 2: 2.0}
    assert RANKING.scores(TIES, {}) == {}


def test_summary_leaves_the_pairwise_columns_empty():
    answer = {"raw": [[0], [1], [2]], "ranking": [[0], [1], [2]]}
    assert RANKING.summary(NO_TIES, answer) == {"raw_answer": "", "value": "", "scores": {}}


# --- export ----------------------------------------------------------------------------


def test_export_names_systems_best_to_worst_and_the_order_shown():
    systems = ["gpt", "llama", "mistral"]
    answer = RANKING.parse_answer(TIES, [2, 0, 1], {"ranking": "[[1], [0, 2]]"})
    assert RANKING.export_fields(TIES) == ["systems", "display_order", "ranking"]
    assert list(RANKING.export_types(TIES)) == RANKING.export_fields(TIES)
    assert RANKING.export_row(TIES, answer, systems, [2, 0, 1]) == {
        "systems": ["gpt", "llama", "mistral"],
        "display_order": ["mistral", "gpt", "llama"],
        "ranking": [["gpt"], ["llama", "mistral"]],
    }
    assert RANKING.export_row(TIES, {}, [], []) == dict.fromkeys(RANKING.export_fields(TIES))


def test_an_exported_ranking_reads_back_as_its_pairs():
    systems = ["gpt", "llama", "mistral"]
    answer = RANKING.parse_answer(TIES, [2, 0, 1], {"ranking": "[[1], [0, 2]]"})
    row = RANKING.export_row(TIES, answer, systems, [2, 0, 1])
    labels = {1.0: "A", 0.0: "B", 0.5: "tie"}
    assert export_pairs(row["systems"], row["ranking"]) == [
        (i, j, labels[p]) for _, i, j, p in RANKING.pair_preferences(TIES, answer)
    ]
    with pytest.raises(ValueError, match="not one of the item's systems"):
        export_pairs(systems, [["gpt"], ["claude"]])
    with pytest.raises(ValueError, match="twice"):
        export_pairs(systems, [["gpt"], ["gpt", "llama"]])


# --- gold answers ----------------------------------------------------------------------


def test_gold_full_ranking_must_match_exactly_ties_included():
    expected = {"ranking": [[1], [0, 2]]}
    assert RANKING.gold_correct(TIES, expected, {"ranking": [[1], [2, 0]]})
    assert not RANKING.gold_correct(TIES, expected, {"ranking": [[1], [0], [2]]})
    assert not RANKING.gold_correct(TIES, expected, {"ranking": [[0], [1, 2]]})
    assert not RANKING.gold_correct(TIES, expected, {})


def test_gold_top_item_must_be_alone_in_first_place():
    expected = {"top": 2}
    assert RANKING.gold_correct(TIES, expected, {"ranking": [[2], [0], [1]]})
    assert RANKING.gold_correct(TIES, expected, {"ranking": [[2], [0, 1]]})
    assert not RANKING.gold_correct(TIES, expected, {"ranking": [[0, 2], [1]]})
    assert not RANKING.gold_correct(TIES, expected, {"ranking": [[0], [2], [1]]})
    assert not RANKING.gold_correct(TIES, {}, {"ranking": [[0], [2], [1]]})


def test_gold_from_the_import_format_names_systems():
    systems = ["a", "b", "c"]
    assert expected_from_gold("b", systems) == {"top": 1}
    assert expected_from_gold(["c", ["a", "b"]], systems) == {"ranking": [[2], [0, 1]]}
    for bad, message in [
        ("z", "not one of this item's systems"),
        (["a", "b"], "every system of the item exactly once"),
        (["a", "b", "b", "c"], "every system of the item exactly once"),
        (["a", ["b", "q"], "c"], "unknown systems: q"),
        ([["a"], []], "list of tiers"),
        (3, "a system name"),
    ]:
        with pytest.raises(ValueError, match=message):
            expected_from_gold(bad, systems)


# --- simulated workers -----------------------------------------------------------------


def test_a_perfect_simulated_worker_submits_the_true_order_in_display_positions():
    rng = random.Random(3)
    order = RANKING.display_order(4, rng)
    qualities = [0.1, 0.9, 0.5, 0.3]
    data, guessed = RANKING.simulate_answer(NO_TIES, order, qualities, None, {}, rng, 1.0)
    assert not guessed
    assert RANKING.parse_answer(NO_TIES, order, data)["ranking"] == [[1], [2], [3], [0]]


def test_simulated_ties_only_when_allowed_and_guesses_without_truth():
    rng = random.Random(5)
    data, _ = RANKING.simulate_answer(TIES, [0, 1, 2], [0.5, 0.5, 0.1], None, {}, rng, 1.0)
    assert RANKING.parse_answer(TIES, [0, 1, 2], data)["ranking"] == [[0, 1], [2]]
    data, guessed = RANKING.simulate_answer(NO_TIES, [2, 1, 0], [None] * 3, None, {}, rng, 0.9)
    assert guessed
    assert len(RANKING.parse_answer(NO_TIES, [2, 1, 0], data)["ranking"]) == 3


def test_dataset_card_states_the_options():
    assert RANKING.card_settings({"allow_tie": True, "per_item": 3}) == {
        "allow_tie": True,
        "per_item": 3,
    }
    assert RANKING.card_settings({}) == {"allow_tie": False, "per_item": None}
