"""Project-level promises: deployment file, rendering of untrusted text, checks."""

from pathlib import Path

import yaml
from django.core.management import call_command

from annotator.rendering import render_untrusted
from tests.conftest import active_markup

ROOT = Path(__file__).resolve().parents[2]


def test_docker_compose_runs_web_worker_postgres_and_redis():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "db", "redis"}
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"].startswith("celery -A config worker")
    assert services["db"]["image"].startswith("postgres")
    assert services["redis"]["image"].startswith("redis")
    env = compose["x-app"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://")


def test_markdown_is_sanitised():
    html = render_untrusted(
        '# T\n\n<script>x()</script> <a href="javascript:y()" onclick="z()">l</a>\n\n'
        "[ok](https://example.org) [bad](javascript:alert(1))\n\n```python\nprint(1)\n```"
    )
    assert active_markup(html) == []
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html
    assert '<code class="language-python">print(1)\n</code>' in html
    assert "&lt;script&gt;" in html  # raw HTML is shown as text, not run


def test_plain_text_is_escaped():
    assert str(render_untrusted("<b>x</b>\n", markdown=False)) == (
        '<div class="plain">&lt;b&gt;x&lt;/b&gt;\n</div>'
    )


def test_django_system_check_is_clean(capsys):
    call_command("check", "--fail-level", "WARNING")
    assert "no issues" in capsys.readouterr().out


def test_embedded_default_uses_sqlite_and_eager_celery(settings):
    from config.celery import app

    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        assert settings.CELERY_TASK_ALWAYS_EAGER is True
        assert app.conf.task_always_eager is True
