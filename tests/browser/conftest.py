import os
import shutil

import pytest

from tests.services import missing

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
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def base_url(live_server) -> str:
    """The live server by address: this machine's Chromium resolves no host names."""
    return live_server.url.replace("localhost", "127.0.0.1")


@pytest.fixture
def prolific_url(base_url, settings) -> str:
    """Prolific's completion page, stood in for by a path of the live server."""
    settings.HUMEVAL_PROLIFIC_COMPLETE_URL = f"{base_url}/prolific-complete"
    return settings.HUMEVAL_PROLIFIC_COMPLETE_URL
