"""No default secret: production refuses to start without one, the embedded mode makes its
own once, and a cookie signed with the former built-in key is refused."""

import os
import stat
import subprocess
import sys

import pytest
from django.core import signing
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from tests.conftest import ROOT, settings_under

#: The key every installation used before, public in the repository's history.
OLD_PUBLIC_KEY = "insecure-embedded-mode-key-set-DJANGO_SECRET_KEY"


def settings_run(var_dir, **env) -> dict:
    """The settings a process started in ``var_dir`` with ``env`` reads (run in this
    process: tests/conftest.py ``settings_under``)."""
    base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DATABASE_URL")}
    return settings_under({**base, "HUMEVAL_VAR_DIR": str(var_dir), **env})


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    production = {"DATABASE_URL": "postgres://humeval@127.0.0.1:1/humeval"}
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is not set"):
        settings_run(tmp_path, **production)
    # and manage.py, in a process of its own, stops on it
    base = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, "HUMEVAL_VAR_DIR": str(tmp_path), **production},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY is not set" in result.stderr
    assert not (tmp_path / "secret_key").exists()  # production never makes one


def test_production_takes_the_key_from_the_environment(tmp_path):
    key = "k" * 60
    got = settings_run(tmp_path, DJANGO_SECRET_KEY=key, DATABASE_URL="postgres://x@h/db")
    assert got["SECRET_KEY"] == key


def test_embedded_mode_makes_a_random_key_once_and_reuses_it(tmp_path):
    key = settings_run(tmp_path)["SECRET_KEY"]
    path = tmp_path / "secret_key"
    assert path.read_text().strip() == key
    assert len(key) >= 50 and key != OLD_PUBLIC_KEY
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # readable by its owner only
    mtime = path.stat().st_mtime_ns
    assert settings_run(tmp_path)["SECRET_KEY"] == key  # the next start reuses it
    assert path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir() if "secret" in p.name) == ["secret_key"]
    other = settings_run(tmp_path / "elsewhere")["SECRET_KEY"]
    assert other and other != key  # another installation gets its own


def test_a_truncated_key_file_is_refused_not_used(tmp_path):
    (tmp_path / "secret_key").write_text("short")
    with pytest.raises(ImproperlyConfigured, match="holds no usable secret key"):
        settings_run(tmp_path)


def test_a_cookie_signed_with_the_old_public_key_is_refused(make_study):
    from annotator.views import COOKIE_SALT, _cookie_name

    study = make_study()
    owner = Client()
    assert owner.get(f"/w/{study.public_id}/?worker=victim").status_code == 302
    assert owner.get(f"/w/{study.public_id}/task/").status_code == 200
    name = _cookie_name(study.public_id)
    # the cookie's value (participation and browser secret) re-signed with the old public
    # key: only the key differs, so a refusal is the key's doing
    value = owner.cookies[name].value.rsplit(":", 2)[0]  # less its timestamp and signature
    with override_settings(SECRET_KEY=OLD_PUBLIC_KEY):  # what an attacker can compute
        forged = signing.get_cookie_signer(salt=name + COOKIE_SALT).sign(value)
    attacker = Client()
    attacker.cookies[name] = forged
    response = attacker.get(f"/w/{study.public_id}/task/")
    assert response.status_code == 403
    assert b"Who are you?" in response.content
    assert owner.get(f"/w/{study.public_id}/task/").status_code == 200  # the real one works
    with override_settings(SECRET_KEY=OLD_PUBLIC_KEY):  # the forgery is well made: a server
        assert attacker.get(f"/w/{study.public_id}/task/").status_code == 200  # on it is fooled
