"""Slow clients against the production stack: nginx (``deploy/nginx.conf``, the file
docker-compose mounts) in front of gunicorn's sync workers. Eight connections that each send
one header line at a time used to hold every gunicorn worker and take the site down; nginx
reads each request whole before gunicorn sees it, so the site keeps answering."""

import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from tests.integration.test_faults import free_port, get, gunicorn_server
from tests.services import ROOT, wait_for

SLOW_CLIENTS = 8


def nginx_in_front(tmp_path, upstream: str) -> tuple[subprocess.Popen, str]:
    """nginx with the repository's server block, its upstream pointed at ``upstream``."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(nginx), "nginx is not installed (./run installs it)"
    port = free_port()
    server = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server web:8000;" in server and "listen 80;" in server
    server = server.replace("server web:8000;", f"server {upstream};")
    server = server.replace("listen 80;", f"listen 127.0.0.1:{port};")
    (tmp_path / "humeval.conf").write_text(server)
    temp = {name: tmp_path / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    user = "user root;" if os.geteuid() == 0 else ""
    (tmp_path / "nginx.conf").write_text(
        f"""{user}
daemon off;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {tmp_path}/humeval.conf;
}}
"""
    )
    process = subprocess.Popen(
        [nginx, "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    return process, f"http://127.0.0.1:{port}"


def slow_clients(base: str, stop: threading.Event) -> list[threading.Thread]:
    """Connections that send a request line, then one header line a second, forever;
    returns once each has sent two header lines."""
    host, port = base.removeprefix("http://").split(":")
    sent = []

    def trickle() -> None:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(b"GET /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                n = 0
                while not stop.wait(1.0):
                    sock.sendall(f"X-Slow-{n}: {'a' * 10}\r\n".encode())
                    n += 1
                    if n == 2:
                        sent.append(1)
        except OSError:
            pass  # closed by the server (nginx's 408 after client_header_timeout)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(SLOW_CLIENTS)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(sent) == SLOW_CLIENTS, timeout=30)
    return threads


def timed_get(url: str) -> tuple[int, float]:
    started = time.monotonic()
    return get(url), time.monotonic() - started


@pytest.mark.django_db(transaction=True)
def test_slow_clients_do_not_stop_the_site_behind_nginx(make_study, tmp_path):
    study = make_study()
    page = f"/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"
    with gunicorn_server(tmp_path, workers=2) as (direct, _log):
        proxy, base = nginx_in_front(tmp_path, direct.removeprefix("http://"))
        try:
            wait_for(lambda: get(f"{base}{page}") == 200, timeout=30)
            stop = threading.Event()
            threads = slow_clients(base, stop)
            answers = [timed_get(f"{base}{page}") for _ in range(10)]
            # the control: the same attack straight at gunicorn holds both its workers
            stop.set()
            for thread in threads:
                thread.join(10)
            stop = threading.Event()
            threads = slow_clients(direct, stop)
            direct_status = get_within(f"{direct}{page}", 3)
            stop.set()
            for thread in threads:
                thread.join(10)
        finally:
            proxy.terminate()
            proxy.wait(10)
    assert [status for status, _ in answers] == [200] * 10, answers
    assert max(seconds for _, seconds in answers) < 5, answers
    assert direct_status == 0  # gunicorn alone did not answer in 3 s


def get_within(url: str, seconds: float) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=seconds) as response:  # noqa: S310 - loopback
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, TimeoutError, OSError):
        return 0
