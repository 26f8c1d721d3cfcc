"""``manage.py compile_catalogs``: compile the worker pages' catalogs (``locale/*/LC_MESSAGES/
*.po``) to the ``.mo`` files Django reads, in pure Python (Babel), where GNU gettext's
``msgfmt`` (and so Django's ``compilemessages``) is missing. The ``.mo`` files are committed;
``tests/unit/test_languages.py`` fails when one no longer matches its ``.po``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


def compile_catalog(po_path: Path) -> Path:
    """Write ``po_path``'s ``.mo`` beside it (fuzzy entries left out, as msgfmt does)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po_path.open("rb") as po:
        catalog = read_po(po)
    mo_path = po_path.with_suffix(".mo")
    with mo_path.open("wb") as mo:
        write_mo(mo, catalog, use_fuzzy=False)
    return mo_path


class Command(BaseCommand):
    help = "Compile locale/*/LC_MESSAGES/*.po to .mo without GNU gettext (needs Babel)."

    def handle(self, *args, **options) -> None:
        try:
            import babel  # noqa: F401
        except ImportError as exc:  # pragma: no cover - babel is a test dependency
            raise CommandError("compile_catalogs needs Babel: pip install babel") from exc
        for root in settings.LOCALE_PATHS:
            for po_path in sorted(Path(root).glob("*/LC_MESSAGES/*.po")):
                self.stdout.write(str(compile_catalog(po_path)))
