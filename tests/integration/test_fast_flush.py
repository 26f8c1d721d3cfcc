"""The faster clean-up between transactional tests (``tests/services.py``, ``FastFlush``)
leaves the database as Django's flush would: every table empty but the content types and
permissions, and those exactly the rows the flush's post_migrate signal writes again; where
a test changed them, it declines and Django's flush runs."""

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from tests.services import KEPT_TABLES, FastFlush

pytestmark = pytest.mark.integration


def _rows() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        counts = {}
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


def _kept() -> tuple[set, set]:
    types = set(ContentType.objects.values_list("app_label", "model"))
    perms = set(
        Permission.objects.values_list("content_type__app_label", "content_type__model", "codename")
    )
    return types, perms


def _fill(make_study) -> None:
    """Rows in many tables, linked to each other and to content types and permissions."""
    from annotator import services

    study = make_study()
    part = services.participation_enter(study=study, platform="link", external_id="w1")
    assert part.pk
    user = User.objects.create_user("someone", password="x" * 12)
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    group = Group.objects.create(name="g")
    group.permissions.add(Permission.objects.get(codename="view_study"))
    user.groups.add(group)
    study.researchers.add(user)
    LogEntry.objects.log_actions(
        user.pk, [study], ADDITION, change_message="made", single_object=True
    )


@pytest.mark.django_db(transaction=True)
def test_it_empties_what_djangos_flush_empties_and_keeps_what_it_rewrites(make_study):
    flush = FastFlush()
    flush.snapshot()
    _fill(make_study)
    filled = _rows()
    assert sum(n for t, n in filled.items() if t not in KEPT_TABLES) > 10
    kept_before = _kept()
    ids_before = list(ContentType.objects.order_by("pk").values_list("pk", flat=True))

    assert flush() is True
    after = _rows()
    assert {t for t, n in after.items() if n} == set(KEPT_TABLES)
    assert _kept() == kept_before
    assert list(ContentType.objects.order_by("pk").values_list("pk", flat=True)) == ids_before

    # Django's own flush, from the same filled state, leaves the same rows (by name)
    _fill(make_study)
    call_command("flush", verbosity=0, interactive=False)
    assert _rows() == after
    assert _kept() == kept_before


@pytest.mark.django_db(transaction=True)
def test_it_declines_where_a_test_changed_the_content_types_or_permissions():
    flush = FastFlush()
    flush.snapshot()
    User.objects.create_user("someone", password="x" * 12)
    Permission.objects.filter(codename="add_study").delete()
    assert flush() is False
    assert User.objects.exists()  # nothing done: Django's flush runs (at this test's end)

    call_command("flush", verbosity=0, interactive=False)  # restores the permission
    flush.snapshot()
    ContentType.objects.create(app_label="tests", model="stray")
    assert flush() is False
    ContentType.objects.filter(app_label="tests").delete()
    assert flush() is True


@pytest.mark.django_db
def test_it_does_nothing_on_another_engine(monkeypatch):
    flush = FastFlush()
    monkeypatch.setattr(connection, "vendor", "sqlite")
    flush.snapshot()
    assert flush() is False
