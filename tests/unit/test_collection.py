"""The collection interface: what the worker cycle and the workspace ask about work still to
come, answered by annotator for a study of all items at once and by the protocol for an
adaptive one; and annotator's side of the layering (it imports no other app)."""

import ast
from pathlib import Path

import pytest

from annotator import selectors, services, workspace
from annotator.collection import ALL_AT_ONCE, Outlook, collection_for
from protocol.collection import AdaptiveCollection
from protocol.models import Round
from tests.conftest import pairwise_bundle
from tests.protocol_sim import adaptive_bundle

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_a_study_of_all_items_at_once_expects_no_more_work_and_has_no_rounds():
    study = services.study_import(pairwise_bundle(), filename="p.jsonl")
    assert collection_for(study) is ALL_AT_ONCE
    assert selectors.work_outlook(study) is Outlook.NONE
    assert workspace.rounds(study) is None


@pytest.mark.django_db
def test_an_adaptive_study_is_answered_by_the_protocol_round_by_round():
    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    assert isinstance(collection_for(study), AdaptiveCollection)
    # round 1 open: more work is coming, none is being made this moment
    assert selectors.work_outlook(study) is Outlook.LATER
    assert workspace.rounds(study) == {
        "rounds": 1,
        "current": 1,
        "current_state": Round.State.OPEN.label,
        "committed": 30,  # batch 5 × 6 pairs
        "open_pairs": 6,
        "settled_pairs": 0,
    }
    # complete, awaiting its decision: the next round is imminent
    Round.objects.filter(study=study).update(state=Round.State.CLOSED)
    assert selectors.work_outlook(study) is Outlook.IMMINENT
    assert workspace.rounds(study)["current_state"] == Round.State.CLOSED.label
    # decided and no further round opened: no more work
    Round.objects.filter(study=study).update(state=Round.State.DECIDED)
    assert selectors.work_outlook(study) is Outlook.NONE


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_annotator_imports_no_other_app():
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "annotator").rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in ("protocol", "crowd", "analysis")
    ]
    assert found == []


def test_the_services_package_has_no_module_over_700_lines():
    sizes = {
        path.name: len(path.read_text().splitlines())
        for path in (ROOT / "annotator" / "services").glob("*.py")
    }
    assert len(sizes) >= 7 and max(sizes.values()) <= 700, sizes
