"""The crowd app without services: the Prolific client's retries, hook signatures (a worked
example), sealed tokens, money arithmetic, review proposals from evidence, the command."""

import io
import json
from decimal import Decimal

import httpx
import pytest
from django.core.management import call_command
from django.test import Client

from annotator import services as annotator_services
from annotator.models import Participation
from crowd import hooks, services
from crowd.admin import CrowdStudyForm
from crowd.client import CrowdError, ProlificClient, Uncertain
from crowd.models import CrowdStudy, LedgerEntry, Submission
from tests.conftest import make_superuser
from tests.protocol_sim import adaptive_bundle, crowd_visit


def client_with(answers: list, sleeps: list):
    """A client whose server gives ``answers`` (status, headers) in turn; requests kept."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, headers = answers[min(len(seen), len(answers)) - 1]
        return httpx.Response(status, headers=headers, json={"id": "x", "n": len(seen)})

    client = ProlificClient(
        "tok-secret",
        base_url="http://prolific.test",
        sleep=sleeps.append,
        transport=httpx.MockTransport(handler),
    )
    return client, seen


def test_throttled_and_failing_answers_are_retried_with_backoff():
    sleeps: list = []
    client, seen = client_with([(429, {"Retry-After": "2"}), (503, {}), (200, {})], sleeps)
    assert client.study_set_places("s1", 5)["n"] == 3
    assert sleeps == [2.0, 0.4]  # Retry-After, then 0.2 × 2^1
    assert seen[0].headers["Authorization"] == "Token tok-secret"
    assert json.loads(seen[0].content) == {"total_available_places": 5}
    assert "tok-secret" not in repr(client)


def test_a_call_not_safe_to_repeat_is_never_retried_after_a_5xx():
    client, seen = client_with([(502, {}), (200, {})], [])
    with pytest.raises(Uncertain):
        client.bonus_pay("b1")
    assert len(seen) == 1
    client, seen = client_with([(429, {"Retry-After": "0"}), (200, {})], [])
    client.bonus_pay("b1")  # a 429 was not acted on: safe to send again
    assert len(seen) == 2


def test_a_refusal_is_not_retried_and_keeps_trying_at_most_the_attempts():
    client, seen = client_with([(400, {})], [])
    with pytest.raises(CrowdError) as refused:
        client.submission_approve("x")
    assert refused.value.status == 400 and len(seen) == 1
    client, seen = client_with([(503, {})], [])
    with pytest.raises(CrowdError):
        client.study("s1")
    assert len(seen) == 5


def test_a_rejection_needs_one_of_prolifics_categories_and_a_long_message():
    client, seen = client_with([(200, {})], [])
    with pytest.raises(CrowdError):
        client.submission_reject("x", "BECAUSE", "m" * 100)
    with pytest.raises(CrowdError):
        client.submission_reject("x", "TOO_QUICKLY", "too short")
    assert seen == []


def test_hook_signature_worked_example():
    """base64(HMAC-SHA256(secret, timestamp + body)), as Prolific signs hooks; the value
    checked with ``printf %s "1700000000{body}" | openssl dgst -sha256 -hmac secret
    -binary | base64``."""
    body = b'{"event_type": "submission.status.change", "resource_id": "s1", "status": "RETURNED"}'
    signature = hooks.sign("secret", "1700000000", body)
    assert signature == "jcJ2WQCtxBOggYXjEnMS4id9hngSDMESj+MHjLYZL6Q="
    hooks.verify("secret", "1700000000", signature, body, now=1700000100)
    for secret, stamp, sig, now in [
        ("other", "1700000000", signature, 1700000100),  # wrong secret
        ("secret", "1700000000", signature, 1700000400),  # over 5 minutes old
        ("secret", "1700000000", "", 1700000100),  # unsigned
        ("secret", "nonsense", signature, 1700000100),
    ]:
        with pytest.raises(hooks.Refused):
            hooks.verify(secret, stamp, sig, body, now=now)


@pytest.fixture
def study(db):
    bundle = adaptive_bundle(
        n_inputs=12,
        systems=("s1", "s2"),
        collection="all",
        items_per_worker=3,
        completion_code="DONE1",
    )
    study = annotator_services.study_import(bundle, filename="s.jsonl")
    study.platform_fee_percent = Decimal("33")
    study.save()
    return study


def crowd_of(study, **fields) -> CrowdStudy:
    return CrowdStudy.objects.create(
        study=study,
        reward_cents=fields.pop("reward_cents", 150),
        estimated_minutes=5,
        money_budget_cents=fields.pop("money_budget_cents", 10_000),
        **fields,
    )


def test_money_worked_example(study):
    """150 cents a place + 33 % fee = 199.5, rounded up to 200; 10,000 cents pay 50 places;
    12 items × redundancy 1 ÷ 3 per worker need 4."""
    crowd = crowd_of(study)
    assert services.place_cents(crowd) == 200
    assert services.max_places(crowd) == 50
    assert services.wanted_places(crowd) == 4
    LedgerEntry.objects.create(crowd=crowd, action="bonus", key="b", state="uncertain", cents=450)
    assert services.max_places(crowd) == 47  # (10,000 − 450) // 200
    crowd.places = 4
    assert services.spend(crowd)["committed"] == 4 * 200 + 450


def test_the_token_is_kept_sealed_and_never_shown_back(study):
    crowd = crowd_of(study)
    form = CrowdStudyForm(
        instance=crowd,
        data={
            "study": study.pk,
            "platform": "prolific",
            "reward_cents": 150,
            "estimated_minutes": 5,
            "money_budget_cents": 10_000,
            "min_gold_accuracy": 0.6,
            "min_seconds_per_item": 3,
            "bonus_per_item_cents": 0,
            "bonus_per_gold_cents": 0,
            "device_compatibility": "[]",
            "exclude_groups": "[]",
            "api_token": "tok-very-secret",
        },
    )
    assert form.is_valid(), form.errors
    crowd = form.save()
    crowd.refresh_from_db()
    assert "tok-very-secret" not in crowd.token_sealed and crowd.token() == "tok-very-secret"
    assert "tok-very-secret" not in CrowdStudyForm(instance=crowd).as_p()


def submit(study, pid: str, items: int, ms: int, finish: bool = True) -> Participation:
    return crowd_visit(study, "prolific", pid, f"sub-{pid}", items, ms, finish)


def proposal(crowd, pid: str) -> tuple[str, str]:
    sub = Submission(crowd=crowd, remote_id=f"sub-{pid}", participant_id=pid, status="x")
    services.propose(crowd, sub)
    return sub.proposal, sub.category


def test_reviews_are_proposed_from_the_evidence_following_prolifics_rules(study):
    crowd = crowd_of(study)
    submit(study, "good", 3, ms=20_000)
    submit(study, "fast", 3, ms=500)
    submit(study, "quit", 1, ms=20_000, finish=False)
    blocked = submit(study, "blocked", 1, ms=20_000, finish=False)
    Participation.objects.filter(pk=blocked.pk).update(
        status="blocked", gold_seen=3, gold_correct=0, strikes=3
    )
    failed = annotator_services.participation_enter(
        study=study, platform="prolific", external_id="screened", session="sub-screened"
    )
    Participation.objects.filter(pk=failed.pk).update(status="failed")
    assert proposal(crowd, "good") == ("approve", "")
    assert proposal(crowd, "fast") == ("reject", "TOO_QUICKLY")
    assert proposal(crowd, "quit") == ("return", "")  # unfinished: asked to return
    assert proposal(crowd, "blocked") == ("reject", "FAILED_CHECK")
    assert proposal(crowd, "screened") == ("return", "")  # a screen is not a rejection
    assert proposal(crowd, "stranger") == ("return", "")  # no work here


def test_a_forged_hook_gets_403_and_an_unknown_study_404(study, settings):
    crowd = crowd_of(study)
    crowd.set_hook_secret("s3cret")
    crowd.save()
    url = f"/crowd/hooks/prolific/{study.public_id}/"
    body = b'{"resource_id": "sub-x", "status": "RETURNED"}'
    web = Client()
    forged = web.post(
        url,
        body,
        content_type="application/json",
        HTTP_X_PROLIFIC_REQUEST_TIMESTAMP="1",
        HTTP_X_PROLIFIC_REQUEST_SIGNATURE="x",
    )
    assert forged.status_code == 403 and not Submission.objects.exists()
    other = "/crowd/hooks/prolific/00000000-0000-0000-0000-000000000000/"
    assert web.post(other, body, content_type="application/json").status_code == 404
    assert web.get(url).status_code == 405


def test_the_command_shows_status_and_previews_without_spending(study):
    crowd_of(study)
    out = io.StringIO()
    call_command("crowd", str(study.public_id), "status", stdout=out)
    status = json.loads(out.getvalue())
    assert status["remote_status"] == "not created" and status["wanted_places"] == 4
    out = io.StringIO()
    call_command("crowd", str(study.pk), "bonus", stdout=out)
    assert json.loads(out.getvalue())["amounts"] == {}
    assert not LedgerEntry.objects.exists()


class FakeProlific:
    """Records the calls the services make; answers as Prolific would."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, *args))
            return {"id": f"{name}-1", "status": "ACTIVE"}

        return call


def test_auto_approve_approves_what_passes_and_groups_the_workers(study):
    crowd = crowd_of(study, auto_approve=True, worker_group="g-wave1")
    crowd.remote_id = "s1"
    crowd.save()
    fake = FakeProlific()
    services.client_factory, saved = (lambda c: fake), services.client_factory
    try:
        submit(study, "good", 3, ms=20_000)
        submit(study, "fast", 3, ms=300)
        services.record(crowd, "sub-good", "good", "AWAITING REVIEW")
        services.record(crowd, "sub-fast", "fast", "AWAITING REVIEW")
        services.record(crowd, "sub-good", "good", "AWAITING REVIEW")  # seen again
    finally:
        services.client_factory = saved
    assert fake.calls == [
        ("submission_approve", "sub-good"),
        ("group_add", "g-wave1", ["good"]),
    ]  # the speeder waits for the researcher
    assert Submission.objects.get(remote_id="sub-fast").status == "AWAITING REVIEW"


def test_a_later_wave_excludes_the_earlier_group_and_keeps_prolifics_placeholders(study):
    crowd = crowd_of(study, exclude_groups=["g-wave1"], device_compatibility=["desktop"])
    body = services.study_body(crowd, "https://eval.example.org/")
    assert body["filters"] == [
        {"filter_id": "participant_group_blocklist", "selected_values": ["g-wave1"]}
    ]
    assert body["external_study_url"] == (
        f"https://eval.example.org/w/{study.public_id}/prolific/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert body["completion_codes"][0] == {
        "code": "DONE1",
        "code_type": "COMPLETED",
        "actions": [{"action": "MANUALLY_REVIEW"}],
    }
    assert body["reward"] == 150 and body["estimated_completion_time"] == 5


def test_adding_places_beyond_the_budget_is_refused_and_changes_nothing(study):

    crowd = crowd_of(study, money_budget_cents=1000)  # 200 a place: 5 places
    crowd.remote_id, crowd.places = "s1", 4
    crowd.save()
    web = Client()
    web.force_login(make_superuser("r"))
    url = f"/crowd/panel/{crowd.pk}/"
    for extra, said in [
        ("2", "6 places cost more than the money budget"),
        ("zero", "Give the number of places to add"),
        ("0", "Add at least one place"),
    ]:
        page = web.post(url, {"action": "add_places", "extra": extra})
        assert page.status_code == 400 and said in page.content.decode()
        crowd.refresh_from_db()
        assert crowd.places == 4 and not LedgerEntry.objects.exists()
    assert web.post(url, {"action": "drop_tables"}).status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize(
    "options",
    [
        {"kind": "pairwise"},
        {"kind": "likert"},
        {"kind": "ranking", "per_item": 3, "allow_tie": False},
        {"kind": "error_spans", "categories": ["Accuracy"]},
    ],
    ids=lambda o: o["kind"],
)
def test_places_follow_the_released_work_of_every_kind(options):
    """Static and adaptive studies of each kind: places = ⌈annotations ÷ items per worker⌉
    (redundancy 2, 3 items per worker), the adaptive ones from the protocol's ledger."""
    from protocol.models import ProtocolConfig

    for collection in ("all", "adaptive"):
        study = annotator_services.study_import(
            adaptive_bundle(
                n_inputs=8,
                systems=("s1", "s2", "s3"),
                collection=collection,
                redundancy=2,
                budget=60,
                items_per_worker=3,
                completion_code="C",
                **options,
            ),
            filename="k.jsonl",
        )
        crowd = crowd_of(study)
        if collection == "adaptive":
            released = ProtocolConfig.objects.get(study=study).committed
        else:
            released = 2 * study.items.filter(is_gold=False).count()
        assert released > 0
        assert services.wanted_places(crowd) == -(-released // 3), (options, collection)


def test_a_prolific_entry_must_be_the_participants_own_submission(study):
    """With the study live on Prolific, an entry whose SESSION_ID is not that participant's
    submission in the study (a guessed or leaked id) is refused and stores nothing; when
    Prolific cannot be asked, the entry goes ahead."""
    from django.core.cache import cache

    crowd = crowd_of(study)
    crowd.remote_id, crowd.remote_status = "s-live", "ACTIVE"
    crowd.save()
    known = {"S1": {"id": "S1", "participant_id": "P1", "study_id": "s-live"}}
    down = {"flag": False}

    class Entry:
        def submission(self, session):
            if down["flag"]:
                raise CrowdError("cannot connect")
            if session not in known:
                raise CrowdError("404 Not found", 404)
            return known[session]

    saved = services.entry_client_factory
    services.entry_client_factory = lambda c: Entry()
    cache.clear()
    try:
        web = Client()
        base = f"/w/{study.public_id}/prolific/?STUDY_ID=s-live"
        for pid, session in [("P1", "forged"), ("P2", "S1"), ("P1", "")]:
            page = web.get(f"{base}&PROLIFIC_PID={pid}&SESSION_ID={session}")
            assert page.status_code == 403 and "no such submission" in page.content.decode()
        assert not Participation.objects.exists()
        assert web.get(f"{base}&PROLIFIC_PID=P1&SESSION_ID=S1").status_code == 302
        down["flag"] = True
        assert Client().get(f"{base}&PROLIFIC_PID=P3&SESSION_ID=S3").status_code == 302
        ids = set(Participation.objects.values_list("annotator__external_id", flat=True))
        assert ids == {"P1", "P3"}
        crowd.remote_status = "COMPLETED"  # a study no longer live on Prolific: no check
        crowd.save()
        down["flag"] = False
        assert Client().get(f"{base}&PROLIFIC_PID=P4&SESSION_ID=x").status_code == 302
    finally:
        services.entry_client_factory = saved


def test_time_and_reward_come_from_the_study_estimate_when_not_set(study):
    """3 items per worker × 45 s expected = 135 s → 3 minutes; at 12.00 an hour, 60 cents;
    with neither set, publishing says what to set."""
    crowd = CrowdStudy.objects.create(study=study, money_budget_cents=10_000)
    with pytest.raises(CrowdError, match="expected seconds per item"):
        crowd.terms()
    study.expected_seconds_per_item = 45
    study.save()
    with pytest.raises(CrowdError, match="pay per hour"):
        crowd.terms()
    study.pay_per_hour = Decimal("12.00")
    study.save()
    assert crowd.terms() == (3, 60)
    assert services.study_body(crowd, "https://h/")["reward"] == 60
    assert services.place_cents(crowd) == 80  # 60 + 33 %, rounded up
    crowd.reward_cents, crowd.estimated_minutes = 150, 5
    assert crowd.terms() == (5, 150)


def test_the_panel_shows_only_the_researchers_own_studies(study):
    from django.contrib.auth.models import Permission, User

    crowd = crowd_of(study)
    url = f"/crowd/panel/{crowd.pk}/"
    stranger = User.objects.create_user("stranger", password="pw", is_staff=True)
    reader = User.objects.create_user("reader", password="pw", is_staff=True)
    study.researchers.add(reader)
    web = Client()
    web.force_login(stranger)
    assert web.get(url).status_code == 404  # staff, but not one of the study's researchers
    web.force_login(reader)
    assert web.get(url).status_code == 200
    assert web.post(url, {"action": "publish"}).status_code == 403  # may read, not act
    reader.user_permissions.add(Permission.objects.get(codename="change_crowdstudy"))
    web.force_login(User.objects.get(pk=reader.pk))
    page = web.post(url, {"action": "add_places", "extra": "nope"})
    assert page.status_code == 400
