"""The error-span kind (ESA): options, answers checked against the output text, scores, export,
gold scoring. Worked examples on short outputs whose offsets can be counted by hand."""

import json
import random

import pytest

from kinds import span_prefill
from kinds.base import AnswerError, OptionError
from kinds.error_spans import KIND, _match, parse_expected

#          0123456789012345678901234
OUTPUT = "The cat sat on the mat."
CATS = {"categories": ["Accuracy", "Fluency"], "max_spans": 100}
PLAIN = {"categories": [], "max_spans": 100}


def span(start, end, severity="minor", category=None, text=OUTPUT):
    return {"start": start, "end": end, "severity": severity, "category": category,
            "text": text[start:end]}  # fmt: skip


def parse(data, opts=PLAIN, output=OUTPUT):
    return KIND.parse_answer(opts, [0], data, outputs=[output])


# --- options --------------------------------------------------------------------------------


def test_options_default_and_categories_normalised():
    assert KIND.validate_options({}, 3) == PLAIN
    # the validated options validate as themselves (a qualification test stores them)
    assert KIND.validate_options(PLAIN, None) == PLAIN
    got = KIND.validate_options({"categories": [" Accuracy", "Fluency "], "max_spans": 5}, 1)
    assert got == {"categories": ["Accuracy", "Fluency"], "max_spans": 5}


def test_options_every_problem_reported_at_once():
    with pytest.raises(OptionError) as err:
        KIND.validate_options(
            {"categories": ["A", "a", "", 3], "max_spans": 101, "criteria": [{"name": "x"}]}, 2
        )
    text = "; ".join(err.value.messages)
    assert "categories[1] 'a' is listed twice" in text
    assert "categories[2] must be a non-empty string" in text
    assert "categories[3] must be a non-empty string" in text
    assert "max_spans must be an integer from 1 to 100" in text
    assert "no criteria" in text
    with pytest.raises(OptionError, match="non-empty list"):
        KIND.validate_options({"categories": "Accuracy"}, 2)
    with pytest.raises(OptionError, match="at most 20"):
        KIND.validate_options({"categories": [f"c{i}" for i in range(21)]}, 2)
    with pytest.raises(OptionError, match="longer than 50"):
        KIND.validate_options({"categories": ["x" * 51]}, 2)


def test_common_study_options_pass_through_and_are_not_kept():
    common = {"collection": "adaptive", "gold": True, "allow_tie": True, "criteria": []}
    assert KIND.validate_options(common | {"categories": ["A"]}, None) == {
        "categories": ["A"],
        "max_spans": 100,
    }
    with pytest.raises(OptionError, match="at least two"):
        KIND.validate_options({"collection": "adaptive"}, 1)
    assert KIND.validate_options({"collection": "adaptive"}, 2) == PLAIN
    assert KIND.extra_options == {"categories", "max_spans"} | set(span_prefill.OPTION_KEYS)
    assert KIND.scored
    assert KIND.context(CATS) == {"categories": ["Accuracy", "Fluency"], "max_spans": 100}


def test_one_output_shown_in_order_zero():
    assert KIND.outputs_per_item(PLAIN, 5) == 1
    assert KIND.display_order(1, random.Random(3)) == [0]
    with pytest.raises(ValueError):
        KIND.display_order(2, random.Random(3))


# --- answers --------------------------------------------------------------------------------


def test_form_answer_parsed_sorted_and_scored():
    # "cat" is 4-7, "mat" is 19-22; the form sends them in the order marked.
    spans = [span(19, 22, "major", "Accuracy"), span(4, 7, "minor", "")]
    answer = parse({"spans": json.dumps(spans), "score": "70"}, CATS)
    assert answer == {
        "spans": [
            {"start": 4, "end": 7, "severity": "minor", "category": None, "text": "cat"},
            {"start": 19, "end": 22, "severity": "major", "category": "Accuracy", "text": "mat"},
        ],
        "score": 70,
    }
    assert KIND.scores(CATS, answer) == {"score": {0: 70.0}}
    assert KIND.pair_preferences(CATS, answer) == []
    assert KIND.summary(CATS, answer) == {"raw_answer": "", "value": "", "scores": {"score": 70}}


def test_outputs_must_be_passed_by_the_server():
    with pytest.raises(ValueError, match="needs outputs"):
        KIND.parse_answer(PLAIN, [0], {"spans": "[]", "score": "1"})


def test_no_spans_and_extreme_scores_are_answers():
    assert parse({"spans": "[]", "score": "0"}) == {"spans": [], "score": 0}
    assert parse({"spans": [], "score": 100}) == {"spans": [], "score": 100}
    # Touching spans (end == next start) and a span over the whole text are fine.
    whole = parse({"spans": [span(0, 23)], "score": 5})
    assert whole["spans"][0]["text"] == OUTPUT
    touching = parse({"spans": [span(0, 3), span(3, 7)], "score": 5})
    assert [s["text"] for s in touching["spans"]] == ["The", " cat"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"score": "50"}, "spans are missing"),
        ({"spans": "{not json", "score": "50"}, "JSON list"),
        ({"spans": '{"start": 1}', "score": "50"}, "must be a list"),
        ({"spans": [[4, 7]], "score": "50"}, "must be an object"),
        ({"spans": [span(4, 7) | {"note": "x"}], "score": "50"}, "unknown field 'note'"),
        ({"spans": [span(4, 7) | {"start": "4"}], "score": "50"}, "integers"),
        ({"spans": [span(4, 7) | {"start": True}], "score": "50"}, "integers"),
        ({"spans": [span(7, 7)], "score": "50"}, "0 <= start < end <= 23"),
        ({"spans": [span(-1, 3)], "score": "50"}, "0 <= start < end"),
        ({"spans": [span(20, 24)], "score": "50"}, "got 20 and 24"),
        ({"spans": [span(4, 7, "critical")], "score": "50"}, "minor or major"),
        ({"spans": [span(4, 7) | {"text": "dog"}], "score": "50"}, "text does not match"),
        ({"spans": [span(4, 7, category="Style")], "score": "50"}, "no categories"),
        ({"spans": [span(4, 8), span(6, 10)], "score": "50"}, "4-8 and 6-10 overlap"),
        ({"spans": [], "score": ""}, "give the response a score"),
        ({"spans": []}, "give the response a score"),
        ({"spans": [], "score": "70.5"}, "whole number"),
        ({"spans": [], "score": 70.0}, "whole number"),
        ({"spans": [], "score": True}, "whole number"),
        ({"spans": [], "score": "١٢"}, "whole number"),  # Arabic-Indic digits
        ({"spans": [], "score": "101"}, "between 0 and 100"),
        ({"spans": [], "score": -1}, "between 0 and 100"),
        ({"spans": "[" * 5000 + "]" * 5000, "score": "50"}, "JSON list"),  # too deep to parse
        ({"spans": '{"a":' * 990 + "1" + "}" * 990, "score": "50"}, "JSON list"),
        ({"spans": [], "score": "9" * 5000}, "between 0 and 100"),  # past int()'s digits
        ({"spans": ["[]", "[]"], "score": "50"}, "error spans: it was sent 2 times"),
        ({"spans": [], "score": ["50", "60"]}, "the score: it was sent 2 times"),
    ],
)
def test_bad_answers_are_refused(data, message):
    with pytest.raises(AnswerError, match=message):
        parse(data)


def test_category_must_be_in_the_study_list():
    with pytest.raises(AnswerError, match="unknown category 'Style'"):
        parse({"spans": [span(4, 7, category="Style")], "score": 1}, CATS)


def test_span_limit():
    limited = {"categories": [], "max_spans": 2}
    spans = [span(0, 3), span(4, 7), span(8, 11)]
    with pytest.raises(AnswerError, match="at most 2 error spans, got 3"):
        parse({"spans": spans, "score": 1}, limited)
    many = "x" * 202
    spans = [span(2 * i, 2 * i + 1, text=many) for i in range(101)]
    with pytest.raises(AnswerError, match="at most 100"):
        parse({"spans": spans, "score": 1}, output=many)


def test_offsets_are_code_points_of_the_python_string():
    # An emoji outside the BMP is one code point (two UTF-16 units in JavaScript).
    out = "Hi 😀 猫がいる"
    #      0123 4 5678
    assert out[3] == "😀" and out[5:7] == "猫が"
    answer = parse({"spans": [span(3, 4, text=out), span(5, 7, "major", text=out)], "score": 9},
                   output=out)  # fmt: skip
    assert [s["text"] for s in answer["spans"]] == ["😀", "猫が"]
    # The UTF-16 offsets a careless client would send (emoji = 2 units) do not match.
    with pytest.raises(AnswerError, match="text does not match"):
        parse({"spans": [{"start": 6, "end": 8, "severity": "major", "text": "猫が"}],
               "score": 9}, output=out)  # fmt: skip


def test_conversation_outputs_are_refused():
    with pytest.raises(ValueError, match="text outputs"):
        KIND.parse_answer(PLAIN, [0], {"spans": "[]", "score": "1"},
                          outputs=[[{"role": "assistant", "content": "hi"}]])  # fmt: skip


# --- export ---------------------------------------------------------------------------------


def test_export_row_counts_and_weights():
    answer = parse(
        {"spans": [span(0, 3, "minor"), span(4, 7, "major"), span(19, 22, "minor")], "score": 40}
    )
    assert KIND.export_fields(PLAIN) == [
        "score", "spans", "minor_errors", "major_errors", "mqm_errors",
    ]  # fmt: skip
    row = KIND.export_row(PLAIN, answer, ["sys-x"], [0])
    assert set(row) == set(KIND.export_fields(PLAIN))
    # 2 minor x 1 + 1 major x 5 = 7
    assert (row["minor_errors"], row["major_errors"], row["mqm_errors"]) == (2, 1, 7.0)
    assert row["score"] == 40
    assert [(s["start"], s["end"], s["text"]) for s in row["spans"]] == [
        (0, 3, "The"), (4, 7, "cat"), (19, 22, "mat"),
    ]  # fmt: skip
    json.dumps(row)  # serialisable as it is


def test_imported_score_without_spans():
    answer = KIND.answer_from_summary(PLAIN, "", {"score": 64})
    assert answer == {"spans": None, "score": 64}
    assert KIND.scores(PLAIN, answer) == {"score": {0: 64.0}}
    assert KIND.export_row(PLAIN, answer, ["s"], [0]) == {
        "score": 64, "spans": None, "minor_errors": None, "major_errors": None,
        "mqm_errors": None,
    }  # fmt: skip
    assert not KIND.gold_correct(PLAIN, gold(spans=[]), answer)
    with pytest.raises(AnswerError):
        KIND.answer_from_summary(PLAIN, "", {"score": 101})


# --- report, card, simulated workers --------------------------------------------------------


def test_report_sees_the_score_as_an_ordinal_property():
    [(name, scale, labels, title)] = KIND.report_properties(PLAIN, "", {})
    assert (name, scale, labels[0], labels[-1], len(labels)) == ("score", "ordinal", 0, 100, 101)
    assert KIND.report_labels(PLAIN, {"spans": [], "score": 12}) == [("score", 12)]
    assert KIND.card_settings(CATS)["categories"] == ["Accuracy", "Fluency"]


def test_simulated_answers_parse_and_follow_the_truth():
    rng = random.Random(7)
    # Quality 3 on a known range 1..5 is the middle: 50; mean of many draws close to it.
    drawn = []
    for _ in range(400):
        data, at_random = KIND.simulate_answer(PLAIN, [0], [3.0], (1.0, 5.0), {}, rng, 0.9)
        assert not at_random
        drawn.append(parse(data)["score"])
    assert abs(sum(drawn) / len(drawn) - 50) < 2
    # The best output of its input sits at the top; scores stay within 0..100.
    top = [parse(KIND.simulate_answer(PLAIN, [0], [5.0], (1.0, 5.0), {}, rng, 0.9)[0])["score"]
           for _ in range(200)]  # fmt: skip
    assert max(top) == 100 and sum(top) / len(top) > 85
    # A gold item: the known spans come back (accuracy 1) and pass the gold check.
    exp = gold(spans=[span(4, 7, "major")], score=30, score_tolerance=40)
    data, at_random = KIND.simulate_answer(PLAIN, [0], [None], None, exp, rng, 1.0)
    assert not at_random and KIND.gold_correct(PLAIN, exp, parse(data))
    data, _ = KIND.simulate_answer(PLAIN, [0], [None], None, exp, rng, 0.0)
    assert parse(data)["spans"] == []
    # No truth at all: a uniform score, flagged as random.
    data, at_random = KIND.simulate_answer(PLAIN, [0], [None], None, {}, rng, 0.9)
    assert at_random and 0 <= parse(data)["score"] <= 100


# --- gold -----------------------------------------------------------------------------------


def gold(**kw):
    return parse_expected(PLAIN, kw, outputs=[OUTPUT])


def answer_of(*spans, score=50):
    return parse({"spans": list(spans), "score": score})


def test_expected_defaults_and_validation():
    exp = gold(spans=[span(4, 7, "major")], score=30)
    assert exp["score_tolerance"] == 10 and exp["char_tolerance"] == 2 and exp["extra"] == "minor"
    with pytest.raises(AnswerError, match="text does not match"):
        gold(spans=[span(4, 7) | {"text": "dog"}])
    with pytest.raises(ValueError, match="unknown field 'tolerance'"):
        gold(spans=[], tolerance=3)
    with pytest.raises(ValueError, match="extra must be one of"):
        gold(spans=[], extra="some")
    with pytest.raises(ValueError, match="char_tolerance"):
        gold(spans=[], char_tolerance=-1)


def test_gold_boundaries_within_tolerance_and_same_severity():
    exp = gold(spans=[span(4, 7, "major")], score=30)  # "cat"
    # "he cat" 1-7: start off by 3 > 2.
    assert not KIND.gold_correct(PLAIN, exp, answer_of(span(1, 7, "major"), score=30))
    # " cat " 3-8: both boundaries off by 1.
    assert KIND.gold_correct(PLAIN, exp, answer_of(span(3, 8, "major"), score=30))
    # Right place, wrong severity.
    assert not KIND.gold_correct(PLAIN, exp, answer_of(span(4, 7, "minor"), score=30))
    # Score 41 is 11 away from 30 (tolerance 10); 40 is 10 away.
    assert not KIND.gold_correct(PLAIN, exp, answer_of(span(4, 7, "major"), score=41))
    assert KIND.gold_correct(PLAIN, exp, answer_of(span(4, 7, "major"), score=40))
    # Nothing marked.
    assert not KIND.gold_correct(PLAIN, exp, answer_of(score=30))


def test_gold_extra_spans_rule():
    exp = dict(gold(spans=[span(4, 7, "major")]))  # no score: any score passes
    marked = answer_of(span(4, 7, "major"), span(19, 22, "minor"), score=99)
    assert KIND.gold_correct(PLAIN, exp, marked)  # extra minor allowed by default
    assert not KIND.gold_correct(PLAIN, exp | {"extra": "none"}, marked)
    extra_major = answer_of(span(4, 7, "major"), span(19, 22, "major"))
    assert not KIND.gold_correct(PLAIN, exp, extra_major)
    assert KIND.gold_correct(PLAIN, exp | {"extra": "any"}, extra_major)


def test_gold_matching_is_one_to_one_and_maximal():
    # Known: "The" 0-3 and " cat" 3-7 (tolerance 2). The worker marked 0-4 and 4-7.
    # Greedy could give 0-4 to " cat" (|0-3|=3 > 2, so no) - check a real ambiguity:
    # known 2-5 and 5-8 with tolerance 3; marked 0-5 and 5-9. 0-5 fits only 2-5
    # (|0-5| > 3 for 5-8), 5-9 fits both but must go to 5-8.
    out = "abcdefghijklmnop"
    exp = parse_expected(
        PLAIN,
        {"spans": [span(2, 5, text=out), span(5, 8, text=out)], "char_tolerance": 3},
        outputs=[out],
    )
    ans = KIND.parse_answer(
        PLAIN, [0], {"spans": [span(0, 5, text=out), span(5, 9, text=out)], "score": 1},
        outputs=[out],
    )  # fmt: skip
    assert KIND.gold_correct(PLAIN, exp, ans)
    # One marked span cannot stand for two known ones.
    ans1 = KIND.parse_answer(PLAIN, [0], {"spans": [span(3, 7, text=out)], "score": 1},
                             outputs=[out])  # fmt: skip
    assert not KIND.gold_correct(PLAIN, exp, ans1)


def test_gold_matching_finds_what_a_greedy_match_misses():
    """Known 3-6 fits marked 3-6 (exactly) and 0-3; known 6-9 fits only marked 3-6
    (tolerance 3). Taking the closest or the first fitting span for 3-6 leaves 6-9
    unmatched; the maximum matching pairs 3-6 with 0-3 and 6-9 with 3-6."""
    out = "abcdefghijklmnop"
    known = [span(3, 6, text=out), span(6, 9, text=out)]
    given = [span(3, 6, text=out), span(0, 3, text=out)]  # as a first-fit greedy meets them
    assert _match(known, given, 3) == [1, 0]
    exp = parse_expected(PLAIN, {"spans": known, "char_tolerance": 3}, outputs=[out])
    ans = KIND.parse_answer(PLAIN, [0], {"spans": given, "score": 1}, outputs=[out])
    assert KIND.gold_correct(PLAIN, exp | {"extra": "none"}, ans)


def test_gold_matching_is_as_large_as_any_one_to_one_matching():
    """Against every assignment of small random span sets (seeded): the matching is one to
    one, pairs only spans that fit, and is as large as the largest."""
    import itertools

    rng = random.Random(26)

    def fits(k, g):
        return (
            k["severity"] == g["severity"]
            and abs(k["start"] - g["start"]) <= 2
            and (abs(k["end"] - g["end"]) <= 2)
        )

    for _ in range(300):
        known, given = (
            [
                {
                    "start": (a := rng.randrange(12)),
                    "end": a + rng.randrange(1, 4),
                    "severity": rng.choice(("minor", "major")),
                }  # fmt: skip
                for _ in range(rng.randrange(5))
            ]
            for _ in range(2)
        )
        matched = _match(known, given, 2)
        pairs = [(i, j) for i, j in enumerate(matched) if j is not None]
        assert len({j for _, j in pairs}) == len(pairs)
        assert all(fits(known[i], given[j]) for i, j in pairs)
        best = max(
            (
                sum(fits(known[i], given[j]) for i, j in enumerate(perm) if j is not None)
                for perm in itertools.permutations(
                    [*range(len(given)), *[None] * len(known)], len(known)
                )
            ),
            default=0,
        )
        assert len(pairs) == best


def test_gold_with_no_known_errors():
    exp = gold(spans=[], score=95, score_tolerance=5)
    assert KIND.gold_correct(PLAIN, exp, answer_of(score=90))
    assert KIND.gold_correct(PLAIN, exp, answer_of(span(19, 22, "minor"), score=100))
    assert not KIND.gold_correct(PLAIN, exp, answer_of(span(19, 22, "major"), score=100))
    assert not KIND.gold_correct(PLAIN, exp, answer_of(score=89))


def test_parse_expected_follows_the_shared_contract():
    """``Kind.parse_expected(opts, gold, *, systems, outputs)``: AnswerError on bad input, and
    the stored form parses to itself (so a stored known answer can be edited and saved)."""
    stored = KIND.parse_expected(
        PLAIN, {"spans": [span(4, 7, "major")], "score": 30}, systems=["m1"], outputs=[OUTPUT]
    )
    assert KIND.parse_expected(PLAIN, stored, systems=["m1"], outputs=[OUTPUT]) == stored
    for bad, outputs in (
        ("m1", [OUTPUT]),  # a pairwise-style answer
        ({"spans": []}, [OUTPUT, OUTPUT]),  # two outputs: a known answer is for one
        ({"spans": [], "score": 101}, [OUTPUT]),
    ):
        with pytest.raises(AnswerError):
            KIND.parse_expected(PLAIN, bad, systems=["m1"] * len(outputs), outputs=outputs)


def test_the_kind_is_registered_and_takes_plain_text_outputs_only():
    import kinds

    assert kinds.get("error_spans") is KIND
    assert ("error_spans", KIND.label) in kinds.choices()
    assert KIND.conversation_outputs is False and kinds.get("pairwise").conversation_outputs
    assert KIND.score_scales(PLAIN) == [("score", 0, 100)]
    assert KIND.report_sections == ("error_spans",)
