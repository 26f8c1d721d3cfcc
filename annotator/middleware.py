"""Content-Security-Policy on every page (django-csp) with the worker pages' own strict
policy, and MTurk's frame: the pages of an MTurk participation may be framed by MTurk,
and the cookies they set are cross-site (partitioned) ones, which a frame needs."""

from collections.abc import Callable
from dataclasses import asdict
from http.cookies import Morsel
from ipaddress import ip_address
from urllib.parse import urlsplit

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject, CSPMiddleware, PolicyParts
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.request import split_domain_port

WORKER_PREFIX = "/w/"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def worker_directives(*, framed: bool = False) -> dict[str, list[str]]:
    """The worker pages' policy: scripts and styles only from this site, nothing inline,
    forms only to this site, the Prolific completion page and the MTurk submit hosts, and
    no framing (``framed``: by ``HUMEVAL_MTURK_FRAME_ANCESTORS`` only)."""
    return {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": list(settings.HUMEVAL_MTURK_FRAME_ANCESTORS) if framed else ["'none'"],
        "form-action": [
            "'self'",
            *settings.HUMEVAL_MTURK_SUBMIT_HOSTS,
            _origin(settings.HUMEVAL_PROLIFIC_COMPLETE_URL),
        ],
    }


class ContentSecurityPolicy(CSPMiddleware):
    """django-csp's middleware: ``CONTENT_SECURITY_POLICY`` (settings) on every page, a
    view's ``csp_update``/``csp_replace`` on top; worker pages (``/w/…``) get
    :func:`worker_directives` instead, framable by MTurk when the view marked the response
    (``humeval_mturk_frame``).

    A response with no policy of its own (no ``csp_update``/``csp_replace``/nonce: every
    worker page) gets a header built once per policy (settings, worker, framed worker) and
    kept until a setting changes; the others are built by django-csp as they come."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if not report_only and request.path_info.startswith(WORKER_PREFIX):
            framed = getattr(response, "humeval_mturk_frame", False)
            parts.config = worker_directives(framed=framed)
        return parts

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if getattr(request, "_csp_nonce", None) is not None or any(
            getattr(response, name, None) is not None for name in _OWN_POLICY
        ):
            return super().process_response(request, response)
        if response.status_code in (500, 404) and settings.DEBUG:
            return response
        worker = request.path_info.startswith(WORKER_PREFIX)
        framed = worker and getattr(response, "humeval_mturk_frame", False)
        for report_only, header, exempt, setting in _HEADERS:
            key = (report_only, worker, framed)
            if key not in _BUILT:
                parts = self.get_policy_parts(request, response, report_only)
                _BUILT[key] = build_policy(**asdict(parts), report_only=report_only)
            value = _BUILT[key]
            prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
            if (
                value
                and header not in response
                and not getattr(response, exempt, False)
                and not request.path_info.startswith(tuple(prefixes))
            ):
                response[header] = value
        # as django-csp: a nonce asked for after the header is written is an error
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response


#: What makes a response's policy its own (django-csp's decorators set these).
_OWN_POLICY = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)
_HEADERS = (
    (False, HEADER, "_csp_exempt", "CONTENT_SECURITY_POLICY"),
    (True, HEADER_REPORT_ONLY, "_csp_exempt_ro", "CONTENT_SECURITY_POLICY_REPORT_ONLY"),
)
#: (report only, worker page, framed) → the header value; cleared when a setting changes.
_BUILT: dict[tuple[bool, bool, bool], str] = {}


@receiver(setting_changed)
def _policy_setting_changed(**kwargs) -> None:
    _BUILT.clear()


def _secure_context(request: HttpRequest) -> bool:
    """Whether the browser treats the page as a secure context, where it keeps ``Secure``
    cookies: HTTPS, or a loopback address (as Chromium does for http://127.0.0.1)."""
    if request.is_secure():
        return True
    host = split_domain_port(request.get_host())[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _cross_site(morsel: Morsel) -> None:
    morsel["secure"] = True
    # Partitioned (CHIPS): kept per top-level site, so it works in MTurk's frame where
    # browsers block ordinary third-party cookies. Python < 3.14 has no flag for it; the
    # SameSite value is written out as it is, so the attribute rides along.
    morsel["samesite"] = "None; Partitioned"


class FramedCookies:
    """On responses a view let MTurk frame, make every cookie set (the worker's, the CSRF
    token, messages) ``SameSite=None; Secure; Partitioned`` so the browser keeps and
    sends it inside the cross-site frame; in a context that is not secure (plain HTTP on
    a real host, which MTurk cannot frame anyway) they stay as they are. Must come before
    the CSRF and messages middleware, so it sees the cookies they set."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(response, "humeval_mturk_frame", False) and _secure_context(request):
            for morsel in response.cookies.values():
                _cross_site(morsel)
        return response
