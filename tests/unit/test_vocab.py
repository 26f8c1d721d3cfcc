"""The pairwise vocabulary is defined once (``formats.vocab``, issue 26): every module that
names the labels takes them from there, so a reader and a writer cannot drift apart."""

from analysis import assisted_report, counts
from annotator import judging
from annotator import selectors as annotator_selectors
from annotator.choices import Preference
from formats import judgebench_export, vocab
from kinds import criteria, pairwise
from protocol import selectors as protocol_selectors
from protocol.management.commands import replay


def test_every_module_takes_the_labels_from_the_vocabulary():
    assert counts.PAIRWISE_LABELS is vocab.PAIRWISE_LABELS
    assert judgebench_export.PAIRWISE_LABELS is vocab.PAIRWISE_LABELS
    assert criteria.PAIRWISE_VALUES is vocab.PAIRWISE_LABELS
    assert pairwise.SIDE_NEUTRAL is vocab.SIDE_NEUTRAL
    assert assisted_report.PREFERENCE is vocab.PREFERENCE
    assert annotator_selectors.PAIR_LABELS is vocab.LABEL_OF_PREFERENCE
    assert tuple(Preference.values) == vocab.PAIRWISE_LABELS
    assert (judging.LABEL_FIRST, judging.LABEL_SECOND, judging.LABEL_TIE) == ("A", "B", "tie")


def test_the_derived_tables_agree_with_the_vocabulary():
    assert vocab.PAIRWISE_LABELS == ("A", "B", "tie", "both_good", "both_bad")
    assert vocab.PREFERENCE == {"A": 1.0, "B": 0.0, "tie": 0.5, "both_good": 0.5, "both_bad": 0.5}
    assert {label: vocab.LABEL_OF_PREFERENCE[p] for label, p in vocab.PREFERENCE.items()} == {
        "A": "A",
        "B": "B",
        "tie": "tie",
        "both_good": "tie",
        "both_bad": "tie",
    }
    # the protocol's counts [n>, n=, n<] and the replay's labels: every label has a place
    assert protocol_selectors.LABEL_INDEX == {
        "A": 0,
        "tie": 1,
        "both_good": 1,
        "both_bad": 1,
        "B": 2,
    }
    assert set(replay.EXPORT_LABELS) == set(vocab.PAIRWISE_LABELS)
    assert [replay.EXPORT_LABELS[x] for x in vocab.PAIRWISE_LABELS] == ["a", "b"] + ["tie"] * 3
