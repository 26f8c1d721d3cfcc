"""Tasks run in a real Celery worker process through Redis, against PostgreSQL."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from annotator import services
from annotator.models import Assignment, Item
from annotator.tasks import release_expired_leases
from tests.leasing import next_lease
from tests.services import wait_for

#: The tests on the session's shared Celery worker (``celery_worker``, here and in
#: test_celery_worker.py / test_protocol_worker.py) run in one process, one after another:
#: its worker starts once (a start took 10-25 s on the loaded 2-core machine).
pytestmark = pytest.mark.xdist_group("shared-celery-worker")


def test_production_mode_is_configured():
    assert settings.CELERY_TASK_ALWAYS_EAGER is False
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


@pytest.mark.django_db(transaction=True)
def test_worker_process_releases_expired_leases_once(make_study, celery_worker):
    study = make_study()
    leases = [
        next_lease(
            participation=services.participation_enter(
                study=study, platform="link", external_id=f"w{i}"
            )
        )
        for i in range(3)
    ]
    Assignment.objects.filter(pk__in=[a.pk for a in leases[:2]]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    taken_before = sum(Item.objects.values_list("n_taken", flat=True))
    release_expired_leases.delay()
    release_expired_leases.delay()  # a duplicate delivery changes nothing more
    wait_for(lambda: Assignment.objects.filter(state="expired").count() == 2)
    wait_for(lambda: sum(Item.objects.values_list("n_taken", flat=True)) == taken_before - 2)
    assert Assignment.objects.get(pk=leases[2].pk).state == "issued"
    assert "annotator.release_expired_leases" in celery_worker.log.read_text()
