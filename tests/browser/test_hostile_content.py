"""Model outputs and instructions are untrusted: in real Chromium nothing they carry runs."""

import pytest

from tests.conftest import bundle
from tests.services import require_postgres_and_redis

PAYLOADS = [
    "<script>window.__pwned = 'script'</script>",
    '<img src="x" onerror="window.__pwned = \'onerror\'">',
    "[click me](javascript:window.__pwned='link')",
    "<a href=\"javascript:window.__pwned='raw-link'\">raw</a>",
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    "<iframe src=\"javascript:parent.__pwned='iframe'\"></iframe>",
]
HOSTILE = "\n\n".join(PAYLOADS)


@pytest.mark.django_db(transaction=True)
def test_hostile_outputs_and_instructions_stay_inert(base_url, page, make_study):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [
                {
                    "id": "x",
                    "input": f"Question {HOSTILE}",
                    "outputs": {"m1": f"Left {HOSTILE}", "m2": f"Right {HOSTILE}"},
                }
            ],
            {
                "kind": "pairwise",
                "instructions": f"Read carefully. {HOSTILE}",
                "question": "<script>window.__pwned='question'</script>Which?",
            },
        )
    )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=w")
    assert page.evaluate("window.__pwned") is None
    page.click("text=Start")
    page.wait_for_selector("#output-left")
    page.wait_for_load_state("domcontentloaded")  # every payload on the page, not a part
    for link in page.query_selector_all("a"):
        href = link.get_attribute("href") or ""
        assert not href.lower().startswith("javascript:"), href
    for link in page.query_selector_all("#output-left a, #output-right a"):
        link.click(timeout=2000)  # whatever links survive lead nowhere harmful
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    assert page.evaluate("document.querySelectorAll('iframe, [onerror], [onload]').length") == 0
    # the payloads are visible as text to the worker, not interpreted
    assert "window.__pwned = 'script'" in page.inner_text("#output-left")
    page.goto(f"{base_url}/w/{study.public_id}/instructions/")
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
