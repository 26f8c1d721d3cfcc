"""A stand-in for Prolific's researcher API (v1): the request and answer shapes of its
reference for studies, submissions, bonuses, participant groups and hooks, in memory.

Run as a process: ``python tests/prolific_server.py --token TOKEN [--hook-secret S]``; it
prints its port on the first line of stdout and serves on 127.0.0.1. Every API call needs
``Authorization: Token TOKEN`` (else 401). Besides the API, for tests:

* ``POST /_control/submission`` ``{"study", "id", "participant_id", "status",
  "study_code"}``: a participant's submission appears or changes status (as their
  actions on Prolific would); a change is sent to every hook subscription of the study's
  event type, signed with the hook secret as Prolific signs hooks.
* ``POST /_control/fail`` ``{"path": prefix, "method", "mode", "count"}``: the next
  ``count`` matching requests fail: ``429`` (with ``Retry-After: 0``), ``503`` (before
  anything is done) or ``midway`` (the request takes effect, then the connection is closed
  without an answer: a call that failed mid-request).
* ``GET /_control/state``: everything, including ``paid`` (each bonus payment made, one
  line per participant and payment) and ``log`` (method and path of every API request).
"""

import argparse
import base64
import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

CATEGORIES = {
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
}
LOCK = threading.RLock()
IDS = itertools.count(1)
STATE: dict = {
    "studies": {},
    "submissions": {},
    "bulk": {},
    "paid": [],
    "groups": {},
    "hooks": [],
    "faults": [],
    "log": [],
    "hook_log": [],
}


def new_id(prefix: str) -> str:
    return f"{prefix}{next(IDS):022x}"


def send_hooks(study_id: str, submission: dict, secret: str) -> None:
    """Prolific's ``submission.status.change`` hook to every subscribed target."""
    targets = [
        h["target_url"] for h in STATE["hooks"] if h["event_type"] == "submission.status.change"
    ]
    body = json.dumps(
        {
            "event_type": "submission.status.change",
            "resource_id": submission["id"],
            "participant_id": submission["participant_id"],
            "study_id": study_id,
            "status": submission["status"],
        }
    ).encode()
    for url in targets:
        stamp = str(int(time.time()))
        mac = hmac.new(secret.encode(), stamp.encode() + body, hashlib.sha256).digest()
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "X-Prolific-Request-Timestamp": stamp,
                "X-Prolific-Request-Signature": base64.b64encode(mac).decode(),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
                STATE["hook_log"].append({"url": url, "status": answer.status})
        except Exception as exc:  # noqa: BLE001 - record and go on, as a hook sender would
            STATE["hook_log"].append({"url": url, "error": str(exc)})


def make_handler(token: str, hook_secret: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else {}

        def _send(self, status: int, payload=None, headers=None) -> None:
            data = json.dumps(payload if payload is not None else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _fault(self, method: str, path: str):
            for fault in STATE["faults"]:
                if fault["count"] > 0 and path.startswith(fault["path"]):
                    if fault.get("method") and fault["method"] != method:
                        continue
                    fault["count"] -= 1
                    return fault["mode"]
            return None

        def _handle(self, method: str) -> None:
            url = urlparse(self.path)
            path, query = url.path, parse_qs(url.query)
            body = self._body()
            if path.startswith("/_control/"):
                return self._control(method, path, body)
            if self.headers.get("Authorization") != f"Token {token}":
                return self._send(401, {"error": {"detail": "Invalid token"}})
            with LOCK:
                STATE["log"].append({"method": method, "path": path})
                mode = self._fault(method, path)
                if mode == "429":
                    return self._send(429, {"error": "throttled"}, {"Retry-After": "0"})
                if mode == "503":
                    return self._send(503, {"error": "unavailable"})
                status, payload = self._api(method, path, query, body)
            if mode == "midway":  # it took effect; the answer is lost
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return None
            return self._send(status, payload)

        def _api(self, method, path, query, body):  # noqa: C901 - one route table
            parts = [p for p in path.split("/") if p][2:]  # after api/v1
            studies, subs = STATE["studies"], STATE["submissions"]
            if parts == ["studies"] and method == "POST":
                missing = [
                    f
                    for f in (
                        "name",
                        "description",
                        "external_study_url",
                        "prolific_id_option",
                        "completion_codes",
                        "estimated_completion_time",
                        "reward",
                        "total_available_places",
                    )
                    if f not in body
                ]
                if missing:
                    return 400, {
                        "error": {"detail": {f: ["This field is required."] for f in missing}}
                    }
                for placeholder in ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}"):
                    if placeholder not in body["external_study_url"]:
                        return 400, {"error": {"detail": f"external_study_url lacks {placeholder}"}}
                study = {**body, "id": new_id("s"), "status": "UNPUBLISHED"}
                studies[study["id"]] = study
                return 201, study
            if parts == ["studies"] and method == "GET":
                return 200, {"results": list(studies.values())}
            if len(parts) >= 2 and parts[0] == "studies":
                study = studies.get(parts[1])
                if study is None:
                    return 404, {"error": {"detail": "Not found."}}
                if len(parts) == 2 and method == "GET":
                    return 200, study
                if len(parts) == 2 and method == "PATCH":
                    if body.get("total_available_places", 0) < study["total_available_places"]:
                        return 400, {"error": {"detail": "Places cannot be decreased."}}
                    study.update(body)
                    return 200, study
                if parts[2:] == ["transition"] and method == "POST":
                    to = {
                        "PUBLISH": "ACTIVE",
                        "PAUSE": "PAUSED",
                        "START": "ACTIVE",
                        "STOP": "COMPLETED",
                    }
                    if body.get("action") not in to:
                        return 400, {"error": {"detail": "Unknown action"}}
                    study["status"] = to[body["action"]]
                    return 200, study
            if parts == ["submissions"] and method == "GET":
                study = query.get("study", [""])[0]
                rows = [s for s in subs.values() if s["study_id"] == study]
                return 200, {"results": rows, "_links": {"next": {"href": None}}}
            if parts == ["submissions", "bonus-payments"] and method == "POST":
                study = studies.get(body.get("study_id", ""))
                if study is None:
                    return 400, {"error": {"detail": "Unknown study"}}
                members = {
                    s["participant_id"] for s in subs.values() if s["study_id"] == study["id"]
                }
                lines, total = [], 0.0
                for line in body.get("csv_bonuses", "").strip().splitlines():
                    pid, amount = line.split(",")
                    if pid not in members:
                        return 400, {"error": {"detail": f"{pid} did not take part"}}
                    lines.append((pid, float(amount)))
                    total += float(amount)
                bulk = {
                    "id": new_id("b"),
                    "study": study["id"],
                    "amount": round(total * 100),
                    "fees": round(total * 100 / 3),
                    "total_amount": round(total * 100) + round(total * 100 / 3),
                    "lines": lines,
                }
                STATE["bulk"][bulk["id"]] = bulk
                return 201, {k: v for k, v in bulk.items() if k != "lines"}
            if len(parts) == 3 and parts[0] == "bulk-bonus-payments" and parts[2] == "pay":
                bulk = STATE["bulk"].get(parts[1])
                if bulk is None:
                    return 404, {"error": {"detail": "Not found."}}
                for pid, amount in bulk["lines"]:  # not idempotent, as Prolific warns
                    STATE["paid"].append(
                        {"bulk": bulk["id"], "participant_id": pid, "amount": amount}
                    )
                return 202, {}
            if len(parts) == 2 and parts[0] == "submissions" and method == "GET":
                sub = subs.get(parts[1])
                return (200, sub) if sub else (404, {"error": {"detail": "Not found."}})
            if len(parts) == 3 and parts[0] == "submissions":
                sub = subs.get(parts[1])
                if sub is None:
                    return 404, {"error": {"detail": "Not found."}}
                if parts[2] == "transition" and method == "POST":
                    action = body.get("action")
                    if action == "APPROVE":
                        if sub["status"] not in ("AWAITING REVIEW", "APPROVED"):
                            return 400, {"error": {"detail": f"Cannot approve {sub['status']}"}}
                        sub["status"] = "APPROVED"
                    elif action == "REJECT":
                        if body.get("rejection_category") not in CATEGORIES:
                            return 400, {"error": {"detail": "rejection_category invalid"}}
                        if len(body.get("message", "")) < 100:
                            return 400, {"error": {"detail": "message must be 100+ chars"}}
                        if sub["status"] not in ("AWAITING REVIEW", "REJECTED"):
                            return 400, {"error": {"detail": f"Cannot reject {sub['status']}"}}
                        sub["status"] = "REJECTED"
                        sub["rejection_category"] = body["rejection_category"]
                    else:
                        return 400, {"error": {"detail": "Unknown action"}}
                    return 200, sub
                if parts[2] == "request-return" and method == "POST":
                    if not body.get("request_return_reasons"):
                        return 400, {"error": {"detail": "request_return_reasons required"}}
                    sub["return_requested"] = time.strftime("%Y-%m-%dT%H:%M:%SZ")
                    return 200, {
                        "id": sub["id"],
                        "status": sub["status"],
                        "participant": sub["participant_id"],
                        "return_requested": sub["return_requested"],
                    }
            if parts == ["participant-groups"] and method == "POST":
                group = {"id": new_id("g"), "name": body.get("name", ""), "participants": []}
                STATE["groups"][group["id"]] = group
                return 201, {"id": group["id"], "name": group["name"]}
            if len(parts) == 3 and parts[0] == "participant-groups" and parts[2] == "participants":
                group = STATE["groups"].get(parts[1])
                if group is None:
                    return 404, {"error": {"detail": "Not found."}}
                for pid in body.get("participant_ids", []):
                    if pid not in group["participants"]:
                        group["participants"].append(pid)
                return 200, {"results": [{"participant_id": p} for p in group["participants"]]}
            if parts == ["hooks", "secrets"] and method == "POST":
                return 201, {
                    "id": new_id("k"),
                    "value": hook_secret,
                    "workspace_id": body.get("workspace_id"),
                }
            if parts == ["hooks", "subscriptions"] and method == "POST":
                hook = {"id": new_id("h"), **body, "is_enabled": True}
                STATE["hooks"].append(hook)
                return 201, hook
            return 404, {"error": {"detail": "Not found."}}

        def _control(self, method, path, body):
            if path == "/_control/state":
                with LOCK:
                    return self._send(200, STATE)
            if path == "/_control/fail":
                with LOCK:
                    STATE["faults"].append(body)
                return self._send(200, {})
            if path == "/_control/submission":
                with LOCK:
                    sub = STATE["submissions"].setdefault(
                        body["id"],
                        {
                            "id": body["id"],
                            "study_id": body["study"],
                            "participant_id": body["participant_id"],
                            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        },
                    )
                    sub["status"] = body["status"]
                    sub["study_code"] = body.get("study_code", sub.get("study_code", ""))
                    snapshot = dict(sub)
                send_hooks(body["study"], snapshot, hook_secret)
                return self._send(200, snapshot)
            return self._send(404, {})

        def do_GET(self):  # noqa: N802
            self._handle("GET")

        def do_POST(self):  # noqa: N802
            self._handle("POST")

        def do_PATCH(self):  # noqa: N802
            self._handle("PATCH")

    return Handler


class StandIn:
    """The stand-in as a process, for tests: ``url`` (the API base), ``state()``,
    ``fail(path, mode, count, method)``, ``submission(...)``; ``stop()`` ends it."""

    def __init__(self, token: str, hook_secret: str = "") -> None:
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--token", token, "--hook-secret", hook_secret],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def _control(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method="POST" if data else "GET"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            return json.loads(answer.read())

    def state(self) -> dict:
        return self._control("/_control/state")

    def fail(self, path: str, mode: str, count: int = 1, method: str = "") -> None:
        self._control(
            "/_control/fail", {"path": path, "mode": mode, "count": count, "method": method}
        )

    def submission(
        self, study: str, sub_id: str, participant: str, status: str, code: str = ""
    ) -> dict:
        return self._control(
            "/_control/submission",
            {
                "study": study,
                "id": sub_id,
                "participant_id": participant,
                "status": status,
                "study_code": code,
            },
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--token", required=True)
    parser.add_argument("--hook-secret", default="")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.token, args.hook_secret))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
