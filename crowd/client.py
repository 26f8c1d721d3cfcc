"""A client of Prolific's researcher API (v1), over httpx.

Endpoints used (names as in Prolific's API reference): create a study
(``POST /api/v1/studies/``), transition a study (``POST /api/v1/studies/{id}/transition/``:
PUBLISH, PAUSE, START, STOP), update a study (``PATCH /api/v1/studies/{id}/``, for
``total_available_places``), list studies, list submissions
(``GET /api/v1/submissions/?study=``), transition a submission
(``POST /api/v1/submissions/{id}/transition/``: APPROVE, REJECT with a
``rejection_category``), request a return (``POST /api/v1/submissions/{id}/request-return/``),
set up bonuses (``POST /api/v1/submissions/bonus-payments/``) and pay them
(``POST /api/v1/bulk-bonus-payments/{id}/pay/``, which Prolific does not make idempotent:
:mod:`crowd.ledger` calls it at most once per bonus), participant groups
(``/api/v1/participant-groups/``).

Retries: a 429 (with ``Retry-After``) or 5xx answer, or a connection that fails before the
request was sent, is retried with exponential backoff, *except* for calls that are not safe
to repeat (``retry_unsafe=False``): those raise :class:`Uncertain` on any failure after the
request may have reached the server, and the ledger reconciles them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx

DEFAULT_API_URL = "https://api.prolific.com"

#: Prolific's rejection categories (the ``rejection_category`` of a REJECT transition).
REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
#: Prolific asks for a rejection message of at least this many characters.
MIN_REJECTION_MESSAGE = 100


class CrowdError(Exception):
    """The platform refused a call (4xx other than 429), or kept failing."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Uncertain(CrowdError):
    """A call that is not safe to repeat failed after it may have reached the platform:
    whether it took effect is unknown until reconciled."""


@dataclass
class Backoff:
    attempts: int = 5
    base: float = 0.2
    cap: float = 5.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.cap)
            except ValueError:
                pass
        return min(self.base * 2**attempt, self.cap)


def api_url() -> str:
    return os.environ.get("HUMEVAL_PROLIFIC_API_URL", DEFAULT_API_URL).rstrip("/")


class ProlificClient:
    """One researcher's access to Prolific. ``token`` never leaves this object except in
    the ``Authorization: Token …`` header."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        backoff: Backoff | None = None,
        timeout: float = 20.0,
        sleep=time.sleep,
        transport: httpx.BaseTransport | None = None,
    ):
        if not token:
            raise CrowdError("No Prolific API token (set HUMEVAL_PROLIFIC_TOKEN or the study's)")
        self._http = httpx.Client(
            base_url=base_url or api_url(),
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
            transport=transport,
        )
        self._backoff = backoff or Backoff()
        self._sleep = sleep

    def __repr__(self) -> str:  # never the token
        return f"ProlificClient({self._http.base_url})"

    def close(self) -> None:
        self._http.close()

    # --- transport ------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, json=None, params=None, retry_unsafe=True) -> Any:
        last = None
        for attempt in range(self._backoff.attempts):
            try:
                response = self._http.request(method, path, json=json, params=params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last = CrowdError(f"{method} {path}: cannot connect ({exc.__class__.__name__})")
            except httpx.TransportError as exc:  # sent, answer lost
                if not retry_unsafe:
                    raise Uncertain(f"{method} {path}: {exc.__class__.__name__}") from exc
                last = CrowdError(f"{method} {path}: {exc.__class__.__name__}")
            else:
                if response.status_code == 429:
                    last = CrowdError(f"{method} {path}: 429 too many requests", 429)
                    self._sleep(self._backoff.delay(attempt, response.headers.get("Retry-After")))
                    continue
                if response.status_code >= 500:
                    if not retry_unsafe:
                        raise Uncertain(
                            f"{method} {path}: {response.status_code}", response.status_code
                        )
                    last = CrowdError(
                        f"{method} {path}: {response.status_code}", response.status_code
                    )
                elif response.status_code >= 400:
                    raise CrowdError(
                        f"{method} {path}: {response.status_code} {response.text[:300]}",
                        response.status_code,
                    )
                else:
                    return response.json() if response.content else {}
            self._sleep(self._backoff.delay(attempt, None))
        raise last or CrowdError(f"{method} {path}: failed")

    # --- studies --------------------------------------------------------------------------
    def study_create(self, body: dict) -> dict:
        """A draft (UNPUBLISHED) study; not safe to repeat (reconcile by ``internal_name``)."""
        return self._call("POST", "/api/v1/studies/", json=body, retry_unsafe=False)

    def studies(self) -> list[dict]:
        return self._call("GET", "/api/v1/studies/").get("results", [])

    def study(self, study_id: str) -> dict:
        return self._call("GET", f"/api/v1/studies/{study_id}/")

    def study_transition(self, study_id: str, action: str) -> dict:
        """PUBLISH, PAUSE, START (resume) or STOP; repeating one is harmless."""
        return self._call(
            "POST", f"/api/v1/studies/{study_id}/transition/", json={"action": action}
        )

    def study_set_places(self, study_id: str, places: int) -> dict:
        """Set ``total_available_places`` (an absolute value: safe to repeat)."""
        return self._call(
            "PATCH", f"/api/v1/studies/{study_id}/", json={"total_available_places": places}
        )

    # --- submissions ----------------------------------------------------------------------
    def submissions(self, study_id: str) -> list[dict]:
        results, params = [], {"study": study_id, "page_size": 200}
        path: str | None = "/api/v1/submissions/"
        while path:
            page = self._call("GET", path, params=params)
            results += page.get("results", [])
            nxt = (page.get("_links") or {}).get("next", {}) or {}
            path, params = (nxt.get("href"), None) if nxt.get("href") else (None, None)
        return results

    def submission(self, submission_id: str) -> dict:
        return self._call("GET", f"/api/v1/submissions/{submission_id}/")

    def submission_approve(self, submission_id: str) -> dict:
        """Prolific makes a repeated transition a no-op."""
        return self._call(
            "POST", f"/api/v1/submissions/{submission_id}/transition/", json={"action": "APPROVE"}
        )

    def submission_reject(self, submission_id: str, category: str, message: str) -> dict:
        if category not in REJECTION_CATEGORIES:
            raise CrowdError(f"Unknown rejection category {category!r}")
        if len(message) < MIN_REJECTION_MESSAGE:
            raise CrowdError(f"A rejection message needs {MIN_REJECTION_MESSAGE} characters")
        return self._call(
            "POST",
            f"/api/v1/submissions/{submission_id}/transition/",
            json={"action": "REJECT", "rejection_category": category, "message": message},
        )

    def submission_request_return(self, submission_id: str, reasons: list[str]) -> dict:
        return self._call(
            "POST",
            f"/api/v1/submissions/{submission_id}/request-return/",
            json={"request_return_reasons": reasons},
        )

    # --- bonuses --------------------------------------------------------------------------
    def bonus_setup(self, study_id: str, amounts: dict[str, Decimal]) -> dict:
        """Set up (not pay) bonuses: ``{participant id: amount in the study's currency}``.
        Unpaid set-ups cost nothing, so this is safe to repeat."""
        csv = "".join(f"{pid},{amount:.2f}\n" for pid, amount in amounts.items())
        return self._call(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            json={"study_id": study_id, "csv_bonuses": csv},
        )

    def bonus_pay(self, bulk_id: str) -> dict:
        """Pay a set-up bonus. Not idempotent at Prolific: never retried after it may have
        been received (:class:`Uncertain`)."""
        return self._call(
            "POST", f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/", json={}, retry_unsafe=False
        )

    # --- participant groups ---------------------------------------------------------------
    def group_create(self, name: str, workspace_id: str = "") -> dict:
        body = {"name": name, **({"workspace_id": workspace_id} if workspace_id else {})}
        return self._call("POST", "/api/v1/participant-groups/", json=body)

    def group_add(self, group_id: str, participant_ids: list[str]) -> dict:
        """Adding a participant already in the group is harmless."""
        return self._call(
            "POST",
            f"/api/v1/participant-groups/{group_id}/participants/",
            json={"participant_ids": participant_ids},
        )

    # --- hooks ----------------------------------------------------------------------------
    def hook_secret_create(self, workspace_id: str) -> dict:
        """A new secret for the workspace's hooks (``POST /api/v1/hooks/secrets/``)."""
        return self._call("POST", "/api/v1/hooks/secrets/", json={"workspace_id": workspace_id})

    def hook_subscribe(self, workspace_id: str, event_type: str, target_url: str) -> dict:
        return self._call(
            "POST",
            "/api/v1/hooks/subscriptions/",
            json={"workspace_id": workspace_id, "event_type": event_type, "target_url": target_url},
        )
