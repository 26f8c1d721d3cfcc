"""Throttles that fit real deployments: the client address behind trusted proxies only, a
per-study entry limit, admin login lockout, wrong API tokens, and Redis failing open."""

import logging
import socket
import time

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, RequestFactory, override_settings
from rest_framework.authtoken.models import Token

from annotator import throttle
from annotator.models import Annotation, Assignment


@pytest.fixture(autouse=True)
def _fresh_counters(frozen_throttle_window):
    cache.clear()
    throttle._local.clear()
    throttle._redis_down_until = 0.0
    yield
    cache.clear()
    throttle._local.clear()
    throttle._redis_down_until = 0.0


def ip_of(remote: str, forwarded: str | None = None) -> str:
    meta = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    return throttle.client_ip(RequestFactory().get("/", **meta))


def test_forwarded_for_is_ignored_without_trusted_proxies():
    assert ip_of("203.0.113.7", "198.51.100.1") == "203.0.113.7"


@override_settings(HUMEVAL_TRUSTED_PROXIES=["10.0.0.0/8", "192.0.2.1"])
def test_the_client_is_the_right_most_untrusted_forwarded_address():
    # client -> proxy 10.1.1.1 -> proxy 192.0.2.1 -> us; the client wrote a fake first hop
    assert ip_of("192.0.2.1", "1.2.3.4, 198.51.100.9, 10.1.1.1") == "198.51.100.9"
    assert ip_of("192.0.2.1", "198.51.100.9") == "198.51.100.9"
    assert ip_of("192.0.2.1", " 2001:db8::5 ") == "2001:db8::5"
    # a peer that is not a trusted proxy cannot choose its address
    assert ip_of("203.0.113.7", "198.51.100.9") == "203.0.113.7"
    # every hop trusted, or a malformed one: the left-most valid address reached
    assert ip_of("192.0.2.1", "10.2.2.2, 10.1.1.1") == "10.2.2.2"
    assert ip_of("192.0.2.1", "garbage, 10.1.1.1") == "10.1.1.1"
    assert ip_of("192.0.2.1") == "192.0.2.1"  # a trusted peer without the header


@override_settings(HUMEVAL_THROTTLE_ENTRY="2/min", HUMEVAL_TRUSTED_PROXIES=["192.0.2.1"])
def test_entry_behind_a_proxy_counts_each_client_not_the_proxy(make_study):
    study = make_study()
    url = f"/w/{study.public_id}/"

    def enter(worker: str, client_ip: str, remote: str = "192.0.2.1") -> int:
        return (
            Client(REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=client_ip)
            .get(url, {"worker": worker})
            .status_code
        )

    # ten workers through the one proxy: each has its own counter
    assert [enter(f"w{i}", f"198.51.100.{i}") for i in range(10)] == [302] * 10
    # one client entering again and again is stopped, whatever it writes in the header
    assert [enter(f"x{i}", "198.51.100.50") for i in range(3)] == [302, 302, 429]
    assert [enter(f"y{i}", f"198.51.100.{60 + i}", remote="203.0.113.9") for i in range(3)] == [
        302,
        302,
        429,
    ]  # not through the proxy: counted by its own address, the header is not believed


@override_settings(HUMEVAL_THROTTLE_ENTRY="100/min", HUMEVAL_THROTTLE_ENTRY_STUDY="5/min")
def test_entry_is_also_limited_per_study(make_study):
    study, other = make_study(), make_study()

    def enter(s, i: int) -> int:
        client = Client(REMOTE_ADDR=f"198.51.100.{i}")
        return client.get(f"/w/{s.public_id}/", {"worker": f"w{i}"}).status_code

    assert [enter(study, i) for i in range(7)] == [302] * 5 + [429] * 2
    assert enter(other, 9) == 302  # another study has its own count
    assert study.participations.count() == 5


def test_the_per_study_default_lets_a_crowd_in():
    from django.conf import settings

    limit, window = throttle.parse_rate(settings.HUMEVAL_THROTTLE_ENTRY_STUDY)
    assert limit / window * 3600 >= 10_000  # thousands of workers an hour, each once


@pytest.mark.django_db
def test_admin_login_is_locked_after_wrong_passwords():
    User.objects.create_user("boss", password="right-password-1", is_staff=True)
    attacker = Client(REMOTE_ADDR="198.51.100.1")
    codes = [
        attacker.post("/admin/login/", {"username": "boss", "password": f"guess{i}"}).status_code
        for i in range(40)
    ]
    assert codes[0] == 200  # the form again, with its error
    assert codes[-1] == 429
    response = attacker.post("/admin/login/", {"username": "boss", "password": "right-password-1"})
    assert response.status_code == 429
    assert "_auth_user_id" not in attacker.session
    assert attacker.get("/admin/").status_code == 302  # still not logged in
    # the lockout is of that user from that address: the user elsewhere is not locked out
    owner = Client(REMOTE_ADDR="203.0.113.5")
    response = owner.post("/admin/login/", {"username": "boss", "password": "right-password-1"})
    assert response.status_code == 302 and owner.get("/admin/").status_code == 200


@pytest.mark.django_db
def test_a_few_wrong_passwords_do_not_lock_out():
    User.objects.create_user("boss", password="right-password-1", is_staff=True)
    client = Client(REMOTE_ADDR="198.51.100.2")
    for i in range(3):
        client.post("/admin/login/", {"username": "boss", "password": f"typo{i}"})
    response = client.post("/admin/login/", {"username": "boss", "password": "right-password-1"})
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


@pytest.mark.django_db
def test_wrong_api_tokens_are_throttled_per_address():
    user = User.objects.create_user("res", password="x" * 12)
    good = Token.objects.create(user=user).key
    attacker = Client(REMOTE_ADDR="198.51.100.3")
    codes = [
        attacker.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {i:040x}").status_code
        for i in range(70)
    ]
    assert codes[0] == 401
    assert 429 in codes and set(codes) == {401, 429}
    first = codes.index(429)
    assert codes[first:] == [429] * (70 - first)  # once limited, limited for the window
    response = attacker.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {good}")
    assert response.status_code == 429  # a right token from there is not even checked
    assert int(response["Retry-After"]) > 0
    assert response.json()["detail"]
    other = Client(REMOTE_ADDR="203.0.113.6")
    assert other.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {good}").status_code == 200


@pytest.mark.django_db
def test_right_tokens_are_not_counted_as_failures():
    user = User.objects.create_user("res", password="x" * 12)
    good = Token.objects.create(user=user).key
    client = Client(REMOTE_ADDR="198.51.100.4")
    codes = {
        client.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {good}").status_code
        for _ in range(40)
    }
    assert codes == {200}


def dead_redis_url() -> str:
    """A Redis URL nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def dead_redis_cache() -> dict:
    return {
        "default": {
            "BACKEND": throttle.REDIS_CACHE,
            "LOCATION": dead_redis_url(),
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }


def test_without_redis_the_throttle_counts_in_process_and_warns_once(caplog):
    with override_settings(CACHES=dead_redis_cache()), caplog.at_level(logging.WARNING):
        results = [throttle.allow("submit", "w1", "3/min") for _ in range(5)]
        assert results == [True, True, True, False, False]  # the same limit, in process
        assert throttle.allow("submit", "w2", "3/min")
        assert not throttle.redis_available()  # left alone for a few seconds
    warnings = [r for r in caplog.records if "Redis unreachable" in r.getMessage()]
    assert len(warnings) == 1


def test_redis_is_tried_again_after_the_back_off(monkeypatch):
    import redis

    calls = []
    real = redis.Redis.evalsha

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "evalsha", counting)
    with override_settings(CACHES=dead_redis_cache()):
        throttle.allow("submit", "w", "100/min")
        assert len(calls) == 1
        for _ in range(10):
            throttle.allow("submit", "w", "100/min")
        assert len(calls) == 1  # within the back-off Redis is not asked
        throttle._redis_down_until = time.monotonic() - 1  # the back-off is over
        throttle.allow("submit", "w", "100/min")
        assert len(calls) == 2


def test_a_redis_outage_costs_no_worker_page_and_no_label(make_study):
    study = make_study()
    with override_settings(CACHES=dead_redis_cache()):
        worker = Client()
        assert worker.get(f"/w/{study.public_id}/?worker=w1").status_code == 302
        assert worker.get(f"/w/{study.public_id}/task/").status_code == 200
        token = str(Assignment.objects.get(annotator__external_id="w1").token)
        started = time.monotonic()
        response = worker.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        assert response.status_code == 200
        assert time.monotonic() - started < 2  # no connect timeout paid per request
    assert Annotation.objects.filter(assignment__token=token).count() == 1


def test_a_redis_outage_costs_no_api_request(db):
    user = User.objects.create_user("res", password="x" * 12)
    good = Token.objects.create(user=user).key
    with override_settings(CACHES=dead_redis_cache()):
        client = Client()
        assert client.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {good}").status_code == 200
        assert client.get("/api/studies/").status_code == 401  # anonymous: throttled, answered
        assert client.get("/api/studies/", HTTP_AUTHORIZATION="Token bad").status_code == 401


def test_sixty_entries_in_four_seconds_across_a_minute_boundary_are_refused(monkeypatch):
    """A fixed window counted 30 in the last 2 s of one minute and 30 in the first 2 s of
    the next: all 60 passed a 30/min limit. The bucket passes its burst of 30, then one
    per 2 s."""
    from types import SimpleNamespace

    clock = [(time.time() // 60 + 1) * 60 - 2.0]
    monkeypatch.setattr(
        throttle, "time", SimpleNamespace(time=lambda: clock[0], monotonic=time.monotonic)
    )
    passed = []
    for _ in range(60):
        passed.append(throttle.allow("entry", "198.51.100.1", "30/min"))
        clock[0] += 4 / 60
    assert sum(passed) <= 32 and passed[:30] == [True] * 30
    clock[0] += 60  # a minute later the bucket is full again
    assert [throttle.allow("entry", "198.51.100.1", "30/min") for _ in range(31)] == [True] * 30 + [
        False
    ]


@override_settings(HUMEVAL_THROTTLE_ENTRY="30/min", HUMEVAL_THROTTLE_ENTRY_STUDY="5/min")
def test_the_study_budget_counts_addresses_and_never_holds_back_returning_workers(make_study):
    study = make_study()

    browsers: dict[str, Client] = {}

    def enter(worker: str, address: str) -> int:
        client = browsers.setdefault(worker, Client())
        url = f"/w/{study.public_id}/"
        return client.get(url, {"worker": worker}, REMOTE_ADDR=address).status_code

    # one address entering many new workers takes one unit of the study's budget
    assert [enter(f"flood{i}", "198.51.100.1") for i in range(20)] == [302] * 20
    assert [enter(f"w{i}", f"203.0.113.{i}") for i in range(4)] == [302] * 4
    assert enter("late", "203.0.113.50") == 429  # five addresses: the budget is used up
    # a worker already in the study enters again (another address) whatever the budget
    assert enter("w0", "192.0.2.77") == 302
    assert enter("flood3", "192.0.2.78") == 302


def test_entries_that_never_led_to_work_are_swept(make_study, settings):
    from datetime import timedelta

    from django.utils import timezone

    from annotator import services
    from annotator.models import Annotator, Participation

    settings.HUMEVAL_ENTRY_SWEEP_MINUTES = 60
    study = make_study()
    idle, working = Client(REMOTE_ADDR="198.51.100.1"), Client(REMOTE_ADDR="198.51.100.2")
    assert idle.get(f"/w/{study.public_id}/", {"worker": "idle"}).status_code == 302
    assert working.get(f"/w/{study.public_id}/", {"worker": "busy"}).status_code == 302
    assert working.get(f"/w/{study.public_id}/task/").status_code == 200  # took an item
    assert services.participations_sweep_unused() == 0  # too recent
    later = timezone.now() + timedelta(minutes=61)
    assert services.participations_sweep_unused(now=later) == 1
    assert list(Participation.objects.values_list("annotator__external_id", flat=True)) == ["busy"]
    assert not Annotator.objects.filter(external_id="idle").exists()
    # the swept worker's browser is told to open its link again, and may
    assert idle.get(f"/w/{study.public_id}/task/").status_code == 403
    assert idle.get(f"/w/{study.public_id}/", {"worker": "idle"}).status_code == 302
