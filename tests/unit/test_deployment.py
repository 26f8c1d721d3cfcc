"""docker-compose.yml: every service restarts by itself and has a health check, and no
secret has a default."""

import os

import yaml

from tests.conftest import ROOT


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_restarts_and_is_health_checked():
    services = compose()["services"]
    workers = {"worker-rounds", "worker-judge", "worker"}
    assert {"proxy", "web", "db", "redis"} | workers <= set(services)
    for name, service in services.items():
        assert service["restart"] == "unless-stopped", name
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    for name in workers:
        assert "inspect ping" in " ".join(services[name]["healthcheck"]["test"])
    web_check = services["web"]["healthcheck"]["test"]
    assert web_check[:2] == ["CMD", "python"]
    compile(web_check[-1], "healthcheck", "exec")  # the inline script is valid Python
    assert services["web"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_the_secret_key_has_no_default():
    env = compose()["services"]["web"]["environment"]
    assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")


def test_each_queue_has_its_own_workers_and_one_runs_the_sweeps():
    """Round decisions never wait behind judge runs, imports or exports: each queue of
    ``HUMEVAL_CELERY_QUEUES`` is consumed by exactly one worker service, alone."""
    from django.conf import settings

    services = compose()["services"]
    consumed = {}
    for name, service in services.items():
        command = service.get("command", "")
        if "celery -A config worker" in command:
            queues = command.split(" -Q ", 1)[1].split()[0].split(",")
            assert len(queues) == 1, name
            consumed[queues[0]] = command
    assert set(consumed) == set(settings.HUMEVAL_CELERY_QUEUES)
    assert [q for q, c in consumed.items() if " -B " in c] == ["rounds"]
    routes = settings.CELERY_TASK_ROUTES
    for task in ("protocol.decide_round", "protocol.recover_rounds"):
        assert routes[task]["queue"] == "rounds"
    assert routes["annotator.run_judge"]["queue"] == "judge"
    assert settings.CELERY_TASK_DEFAULT_QUEUE == "default"


def test_only_the_buffering_proxy_is_published():
    services = compose()["services"]
    assert "ports" not in services["web"]  # gunicorn is reached through nginx only
    assert services["proxy"]["ports"] == ["8000:80"]
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["proxy"]["volumes"]
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server web:8000;" in conf and "proxy_request_buffering on;" in conf


def test_web_and_worker_processes_start_without_the_heavy_statistics():
    """A web process (its URLconf) and a Celery worker (its tasks) start without importing
    ``scipy.stats`` or ``statsmodels.api`` (about a second each): the reports import them
    when they are built."""
    import subprocess
    import sys

    script = (
        "import sys, django; django.setup(); import config.urls; "
        "from config.celery import app; app.loader.import_default_modules(); "
        "print(sorted(m for m in ('scipy.stats', 'statsmodels.api', 'django.urls') "
        "if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[-2] == "['django.urls']"
