import os
import shutil
import time

import pytest

from tests.services import (
    fast_flush_between_tests,  # noqa: F401 (a session fixture)
    missing,
)

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between page actions are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
CHROMIUM = os.environ.get("HUMEVAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        missing(f"needs Chromium at {CHROMIUM} (apt-get install chromium; ./run test does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("needs the playwright package (pip install -e '.[test]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        new_context, new_page = browser.new_context, browser.new_page
        browser.new_context = lambda *a, **kw: tracked(new_context(*a, **kw))
        browser.new_page = lambda *a, **kw: (page := new_page(*a, **kw), tracked(page.context))[0]
        yield browser
        browser.close()


def tracked(context):
    """``context`` with the set of its requests not yet finished or failed (``close_settled``
    waits for them)."""
    in_flight: set = set()
    context.on("request", lambda r: in_flight.add(r))
    context.on("requestfinished", lambda r: in_flight.discard(r))
    context.on("requestfailed", lambda r: in_flight.discard(r))
    context.in_flight = in_flight
    return context


def close_settled(context, timeout: float = 5.0) -> None:
    """Close a browser context once its pages' requests have settled. A test may end on a
    click that navigates; closing the context while a routed request of the new page (its
    favicon) is still due to a ``page.route`` handler waits for that handler, which the sync
    API can no longer run: the close hangs. So: wait until no request is in flight (the
    handlers run meanwhile, and the server has answered every request, so none writes after
    the test), then drop the routes without waiting for a handler, then close. Waiting for
    the request count, not for Playwright's network idle, saves its 500 ms of quiet."""
    from playwright.sync_api import Error as PlaywrightError

    in_flight = getattr(context, "in_flight", None)
    try:
        if in_flight is None:  # a context made elsewhere: the old, slower wait
            for page in context.pages:
                page.wait_for_load_state("networkidle", timeout=timeout * 1000)
        else:
            deadline = time.monotonic() + timeout
            while in_flight and context.pages and time.monotonic() < deadline:
                context.pages[0].wait_for_timeout(20)  # lets the events of the requests in
        for page in context.pages:
            page.unroute_all(behavior="ignoreErrors")
        context.unroute_all(behavior="ignoreErrors")
    except PlaywrightError:
        pass
    context.close()


def watch(page, problems: list[str] | None = None) -> list[str]:
    """Every console error, uncaught exception and 5xx answer of the page, as it happens
    (added to ``problems`` when given)."""
    problems = [] if problems is None else problems
    page.on("pageerror", lambda e: problems.append(f"exception: {e}"))
    page.on(
        "console",
        lambda m: m.type == "error" and problems.append(f"console: {m.text} {m.location}"),
    )
    page.on("response", lambda r: r.status >= 500 and problems.append(f"{r.status} {r.url}"))
    return problems


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    close_settled(context)


@pytest.fixture
def base_url(live_server) -> str:
    """The live server by address: this machine's Chromium resolves no host names."""
    return live_server.url.replace("localhost", "127.0.0.1")


@pytest.fixture
def prolific_url(base_url, settings) -> str:
    """Prolific's completion page, stood in for by a path of the live server."""
    settings.HUMEVAL_PROLIFIC_COMPLETE_URL = f"{base_url}/prolific-complete"
    return settings.HUMEVAL_PROLIFIC_COMPLETE_URL
