"""Eight workers at once on PostgreSQL in an error-span study that skips the items the judge
found error-free: no skipped item is ever leased, every other item gets its redundancy, each
error-free item is decided once (skipped or control, as the seeded draw says)."""

import json

import pytest
from django.db import connection

from annotator import prefill_skip, services, span_prefill
from annotator.models import Assignment, Item, Output
from tests.conftest import bundle
from tests.integration.test_concurrency import run_in_threads
from tests.leasing import next_lease
from tests.unit.test_prefill_skip import judge

WORKERS = 8
SHARE = 0.3


@pytest.mark.django_db(transaction=True)
def test_parallel_workers_never_get_a_skipped_item(make_study):
    assert connection.vendor == "postgresql"
    records = [
        {"id": f"d{i:02d}", "input": f"doc {i}", "outputs": {"sys": f"Text number {i}."}}
        for i in range(30)
    ]
    options = {"kind": "error_spans", "redundancy": 2, "prefill_spans": "on"}
    options |= {"prefill_skip_clean": True, "prefill_skip_control_share": SHARE}
    study = make_study(bundle(records, options))
    error = [{"start": 0, "end": 4, "severity": "minor", "text": "Text"}]
    for o in Output.objects.filter(input__study=study).select_related("input"):
        judge(study, o.input_id, o.system_id, [] if int(o.input.external_id[1:]) < 20 else error)

    def work(i: int) -> None:
        part = services.participation_enter(study=study, platform="link", external_id=f"w{i}")
        while (a := next_lease(participation=part)) is not None:
            shown = span_prefill.shown(study, a.item, study.kind_options())["spans"]
            spans = [
                s | {"origin": "judge", "action": "accepted", "suggestion": k}
                for k, s in enumerate(shown)
            ]
            services.annotation_submit(
                annotator=part.annotator,
                token=str(a.token),
                data={"spans": json.dumps(spans), "score": "80"},
            )

    assert run_in_threads(work, WORKERS) == []
    items = list(Item.objects.filter(study=study).select_related("input"))
    clean = [i for i in items if int(i.input.external_id[1:]) < 20]
    controls = {i.pk for i in clean if prefill_skip.in_control(study.pk, i.pk, SHARE)}
    assert 0 < len(controls) < len(clean)
    for item in items:
        if item in clean and item.pk not in controls:
            assert (item.prefill_skip, item.is_active, item.n_taken, item.n_done) == (
                "skipped",
                False,
                0,
                0,
            )
        else:
            assert item.prefill_skip == ("control" if item.pk in controls else "")
            assert (item.is_active, item.n_taken, item.n_done) == (True, 2, 2)
    assert not Assignment.objects.filter(item__prefill_skip="skipped").exists()
    assert Assignment.objects.filter(study=study).count() == 2 * (10 + len(controls))
