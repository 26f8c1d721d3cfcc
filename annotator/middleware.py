"""A strict Content-Security-Policy on worker pages: scripts and styles only from this
site, nothing inline, no framing. Model outputs are sanitised already; this is the second
lock on the door."""

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse

#: Where a worker's form posts may lead: this site, MTurk's submit endpoints, and (through
#: the redirect chain that ends a task) the Prolific completion page.
MTURK_ORIGINS = "https://www.mturk.com https://workersandbox.mturk.com"


def worker_csp() -> str:
    prolific = urlsplit(settings.HUMEVAL_PROLIFIC_COMPLETE_URL)
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        f"form-action 'self' {MTURK_ORIGINS} {prolific.scheme}://{prolific.netloc}"
    )


class WorkerPageCSP:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith("/w/"):
            response.setdefault("Content-Security-Policy", worker_csp())
        return response
