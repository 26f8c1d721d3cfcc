"""annotator.entry: a platform's registered check decides whether an entry goes on."""

import pytest

from annotator import entry


@pytest.fixture
def checks(monkeypatch):
    monkeypatch.setattr(entry, "_CHECKS", {})
    return entry


def test_only_a_false_answer_refuses_and_a_failing_check_admits(checks, caplog):
    assert checks.vouched(None, "prolific", "p1", "s1")  # no check registered: admitted
    asked = []

    def check(study, external_id, session):
        asked.append((external_id, session))
        return {"p1": False, "p2": None, "p3": True}.get(external_id)

    checks.register("prolific", check)
    assert not checks.vouched(None, "prolific", "p1", "s1")
    assert checks.vouched(None, "prolific", "p2", "s2")
    assert checks.vouched(None, "prolific", "p3", "s3")
    assert checks.vouched(None, "link", "p1", "s1")  # another platform is not asked
    assert asked == [("p1", "s1"), ("p2", "s2"), ("p3", "s3")]

    def broken(study, external_id, session):
        raise ConnectionError("Prolific is down")

    checks.register("prolific", broken)
    assert checks.vouched(None, "prolific", "p1", "s1")
    assert "the prolific entry check failed" in caplog.text
