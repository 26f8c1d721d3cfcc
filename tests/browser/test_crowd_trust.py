"""Trust in real Chromium: a worker's study stays in the browser that started it, the
code comes only when the work is done, every page keeps its Content-Security-Policy
without breaking, and an MTurk HIT works inside a frame on another site."""

import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from annotator import services
from annotator.models import Annotation, Assignment, Participation
from tests.conftest import bundle, make_superuser
from tests.leasing import next_lease
from tests.services import require_postgres_and_redis

RECORDS = [
    {"id": f"q{i}", "input": f"question {i}", "outputs": {"m1": f"one {i}", "m2": f"two {i}"}}
    for i in range(6)
]


@pytest.fixture
def study(make_study):
    require_postgres_and_redis()
    return make_study(
        bundle(RECORDS, {"kind": "pairwise", "redundancy": 2}),
        items_per_worker=3,
        completion_code="ALLDONE",
        lease_seconds=600,
    )


def answer(page, side: str = "left") -> None:
    page.wait_for_selector("#output-left")
    page.click(f'button[value="{side}"]')
    page.wait_for_load_state("load")


@pytest.mark.django_db(transaction=True)
def test_second_browser_is_refused_then_takes_over_after_idle(base_url, browser, study):
    entry = f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID=victim&SESSION_ID=s1"
    own = browser.new_context().new_page()
    own.goto(entry)
    own.click("text=Start")
    own.wait_for_selector("#output-left")
    # the owner's first label binds the participation to this browser (before it, another
    # Prolific session may take over: tests/unit/test_crowd.py, docs/crowd.md)
    answer(own)
    assert Annotation.objects.get().annotator.external_id == "victim"
    token = Assignment.objects.get(annotation__isnull=True).token
    other = browser.new_context().new_page()
    other.goto(entry.replace("s1", "forged"))
    assert other.inner_text("h1") == "This study is open in another browser"
    assert str(token) not in other.content()
    other.goto(f"{base_url}/w/{study.public_id}/task/")
    assert "Who are you?" in other.inner_text("h1")
    # the owner goes away: their lease runs out and nothing happens for lease_seconds
    ago = timedelta(seconds=study.lease_seconds + 1)
    for lease in Assignment.objects.all():
        Assignment.objects.filter(pk=lease.pk).update(
            issued_at=lease.issued_at - ago,
            expires_at=lease.expires_at - ago,
            closed_at=lease.closed_at and lease.closed_at - ago,
        )
    part = Participation.objects.get()
    Participation.objects.filter(pk=part.pk).update(browser_since=part.browser_since - ago)
    other.goto(entry)
    other.click("text=Start")
    answer(other)
    own.reload()
    assert own.inner_text("h1") == "This study continued in another browser"
    assert Annotation.objects.count() == 2
    assert Participation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_completion_code_only_after_items_per_worker(base_url, prolific_url, page, study):
    page.goto(f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID=steady")
    page.click("text=Start")
    answer(page)
    page.goto(f"{base_url}/w/{study.public_id}/end/")  # too early
    assert page.inner_text("h1") == "Not finished yet"
    assert page.inner_text("#items-left") == "2 items left"
    assert "ALLDONE" not in page.content() and page.url.startswith(base_url)
    page.click("#back-to-work")
    answer(page, "right")
    assert not page.url.startswith(prolific_url)
    answer(page)
    page.wait_for_url(f"{prolific_url}**")
    assert page.url == f"{prolific_url}?cc=ALLDONE"
    assert Annotation.objects.count() == 3
    assert Participation.objects.get().code_given == "ALLDONE"


@pytest.mark.django_db(transaction=True)
def test_stopping_early_returns_to_prolific_without_a_code(base_url, prolific_url, page, study):
    page.goto(f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID=leaver")
    page.click("text=Start")
    answer(page)
    page.goto(f"{base_url}/w/{study.public_id}/end/")
    page.click("text=Stop without a code")
    page.wait_for_selector("text=Please return your submission on Prolific")
    assert "ALLDONE" not in page.content() and page.url.startswith(base_url)
    assert not Assignment.objects.filter(state="issued").exists()


@pytest.mark.django_db(transaction=True)
def test_researcher_pages_work_under_their_csp(base_url, page, study):
    for w in range(3):  # labels, so the report draws its charts
        part = services.participation_enter(study=study, platform="link", external_id=f"w{w}")
        while (a := next_lease(participation=part)) is not None:
            services.annotation_submit(
                annotator=part.annotator, token=a.token, data={"answer": "left"}
            )
    make_superuser()
    violations, errors = [], []
    page.context.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "x" * 12)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    headers = {}
    for path, ready in (
        ("/admin/", "#content-main"),
        ("/admin/annotator/study/", "#result_list"),
        (f"/admin/annotator/study/{study.pk}/change/", "#study_form"),
        ("/admin/annotator/participation/", "#result_list"),
        (f"/studies/{study.pk}/report/", ".hv-report svg"),
        (f"/studies/{study.pk}/protocol/", "h1"),
        ("/api/docs/", ".swagger-ui .info .title"),
    ):
        response = page.goto(base_url + path)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        headers[path] = response.headers.get("content-security-policy", "")
    assert all("frame-ancestors 'none'" in h for h in headers.values()), headers
    assert violations == [] and [e for e in errors if "CSP" in e] == [], violations + errors
    # the report's style applies: its cards are laid out by the inline <style>
    page.goto(f"{base_url}/studies/{study.pk}/report/")
    assert page.eval_on_selector(".hv-report th", "e => getComputedStyle(e).backgroundColor") == (
        "rgb(246, 248, 250)"
    )


class _MTurkStandIn(BaseHTTPRequestHandler):
    """MTurk on another loopback address: a HIT page framing the study, and the
    externalSubmit endpoint, which records what is posted."""

    frame_src = ""
    posted: list = []

    def do_GET(self):
        self._send(f'<!doctype html><h1>HIT</h1><iframe id="hit" src="{self.frame_src}" '
                   'width="1200" height="800"></iframe>')  # fmt: skip

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        type(self).posted.append((self.path, parse_qs(body)))
        self._send("<p id='thanks'>HIT submitted</p>")

    def _send(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def mturk_site():
    server = ThreadingHTTPServer(("127.0.0.2", 0), _MTurkStandIn)
    _MTurkStandIn.posted = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.django_db(transaction=True)
def test_mturk_hit_completed_inside_a_frame_on_another_site(
    base_url, page, study, mturk_site, settings
):
    settings.HUMEVAL_MTURK_FRAME_ANCESTORS = [mturk_site]
    settings.HUMEVAL_MTURK_SUBMIT_HOSTS = [mturk_site]
    _MTurkStandIn.frame_src = (
        f"{base_url}/w/{study.public_id}/mturk/?assignmentId=ASG1&workerId=WK1&hitId=H1"
        f"&turkSubmitTo={mturk_site}"
    )
    page.goto(mturk_site)
    frame = page.frame_locator("#hit")
    frame.locator("text=Start").click()
    for side in ("left", "right", "left"):
        frame.locator("#output-left").wait_for()
        frame.locator(f'button[value="{side}"]').click()
    frame.locator("#mturk-submit button").click()
    frame.locator("#thanks").wait_for()
    assert page.url == mturk_site + "/"  # all of it happened inside the frame
    [(path, form)] = _MTurkStandIn.posted
    assert path == "/mturk/externalSubmit"
    assert form["assignmentId"] == ["ASG1"] and form["items"] == ["3"]
    part = Participation.objects.get()
    assert (part.annotator.external_id, part.status, part.code_given) == (
        "WK1",
        "finished",
        "ALLDONE",
    )
    assert Annotation.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_other_pages_refuse_to_be_framed(base_url, page, study, mturk_site, settings):
    settings.HUMEVAL_MTURK_FRAME_ANCESTORS = [mturk_site]
    _MTurkStandIn.frame_src = f"{base_url}/w/{study.public_id}/?worker=framed"
    # the browser says why it refused the frame (waited for, not a fixed time)
    with page.expect_console_message(lambda m: "frame-ancestors" in m.text):
        page.goto(mturk_site)
    assert page.frame_locator("#hit").locator("text=Start").count() == 0
