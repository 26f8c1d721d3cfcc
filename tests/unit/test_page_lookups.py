"""The task page names only what its context holds, for every kind: a name the template
cannot resolve renders as nothing, but Django finds that out by raising and catching up to
four exceptions, which cost more than the rest of a fragment (docs/benchmarks.md). And the
default instructions read the study's settings."""

from __future__ import annotations

import re

import pytest
from django.template import base
from django.test import Client

from tests.conftest import bundle
from tests.unit.test_exports_by_kind import STUDIES, _records


@pytest.fixture
def misses(monkeypatch) -> list[str]:
    """Every variable the templates failed to resolve, by name."""
    found: list[str] = []
    resolve = base.Variable._resolve_lookup

    def recording(self, context):
        try:
            return resolve(self, context)
        except base.VariableDoesNotExist:
            found.append(self.var)
            raise

    monkeypatch.setattr(base.Variable, "_resolve_lookup", recording)
    return found


@pytest.mark.parametrize(
    ("label", "conversation"),
    [
        (label, chat)
        for label, (*_, chats, _) in STUDIES.items()
        for chat in ((False, True) if chats else (False,))
    ],
)
def test_every_kinds_task_page_resolves_every_name_it_uses(label, conversation, make_study, misses):
    """The page of the answer cycle, texts and (where the kind takes them) conversations:
    as leased, and as answered again after a refused answer (with its message)."""
    line, systems, *_ = STUDIES[label]
    study = make_study(
        bundle(_records(systems, conversation), {"name": label, "redundancy": 1, **line})
    )
    client = Client()
    url = f"/w/{study.public_id}/task/"
    client.get(f"/w/{study.public_id}/", {"worker": "w1"}, follow=True)
    misses.clear()
    task = client.get(url).content.decode()
    assert 'id="task-form"' in task and "Task 1" in task
    assert ('class="conversation"' in task) == conversation
    token = re.search(r'data-token="([0-9a-f-]{36})"', task).group(1)  # the lease heartbeat
    refused = client.post(url, {"token": token, "time_ms": "5"})
    assert refused.status_code == 400 and 'class="messages"' in refused.content.decode()
    assert misses == [], sorted(set(misses))


@pytest.mark.parametrize("categories", [["accuracy", "fluency"], []], ids=["with", "without"])
def test_the_error_span_instructions_say_whether_there_are_categories(categories, make_study):
    line = {**STUDIES["error_spans"][0], "categories": categories}
    study = make_study(bundle(_records(("s1", "s2"), False), {"name": "esa", **line}))
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    page = client.get(f"/w/{study.public_id}/instructions/").content.decode()
    assert "Then give the response an overall score" in page
    assert ("with a category if one fits" in page) == bool(categories)
