"""docker-compose.yml: every service restarts by itself and has a health check, and no
secret has a default."""

import yaml

from tests.conftest import ROOT


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_restarts_and_is_health_checked():
    services = compose()["services"]
    assert {"proxy", "web", "worker", "db", "redis"} <= set(services)
    for name, service in services.items():
        assert service["restart"] == "unless-stopped", name
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    web_check = services["web"]["healthcheck"]["test"]
    assert web_check[:2] == ["CMD", "python"]
    compile(web_check[-1], "healthcheck", "exec")  # the inline script is valid Python
    assert services["web"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_the_secret_key_has_no_default():
    env = compose()["services"]["web"]["environment"]
    assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")


def test_only_the_buffering_proxy_is_published():
    services = compose()["services"]
    assert "ports" not in services["web"]  # gunicorn is reached through nginx only
    assert services["proxy"]["ports"] == ["8000:80"]
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["proxy"]["volumes"]
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server web:8000;" in conf and "proxy_request_buffering on;" in conf
