"""A deterministic OpenAI-compatible chat-completions server, the stand-in for an LLM judge.

Run as a process: ``python tests/judge_server.py LOG --key KEY [--fail N] [--trickle S]``;
it prints its port on the first line of stdout and serves ``POST /v1/chat/completions`` on
127.0.0.1.

* Answers derive from the prompt (the default templates of ``annotator/prompts``):
  pairwise, the longer of responses A and B (``tie`` when equally long); Likert, the
  choice at index ``len(response) % len(choices)``; error spans, every upper-case word
  (two or more letters) of the response a major error and every ``teh`` a minor one, quoted.
* An input whose text contains ``MALFORMED`` gets a chatty, unparseable answer.
* The first ``--fail`` requests fail in turn with 503, then 429 with ``Retry-After: 1``.
* A prompt containing ``BADREQUEST`` gets 400.
* A request without ``Authorization: Bearer KEY`` gets 401.
* Hostile answers, by a word in the prompt: ``HUGEANSWER``, a 300 MB body streamed without
  a length (the bytes written before the client hung up are logged as ``{"sent": n}``);
  ``NESTEDANSWER``, a JSON body nested 100,000 deep; ``BADRETRYAFTER``, the first request
  of that prompt gets 429 with ``Retry-After: not-a-date``, the next the answer.
* ``--trickle S``: every answer is one byte of the status line every S seconds, for ever
  (an endpoint that holds a connection without answering); ``{"trickle": n}`` logged when
  the client hangs up after n bytes.
* Every request is appended to LOG as one JSON line: its headers and body.
"""

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"requests": 0}
SEEN: dict[str, int] = {}
HUGE = 300 * 1000 * 1000


def section(prompt: str, start: str, end: str | None) -> str:
    tail = prompt.split(start, 1)[1]
    return (tail.split(end, 1)[0] if end else tail).strip()


def answer(prompt: str) -> str:
    if "MALFORMED" in prompt:
        return "Well, both have merits, but I lean towards the first one."
    if "List every error in the response." in prompt:
        response = section(prompt, "Response:", "\n\nList every error")
        words = re.findall(r"\b(?:[A-Z]{2,}|teh)\b", response)
        spans = [{"text": w, "severity": "minor" if w == "teh" else "major"} for w in words]
        return json.dumps({"spans": spans})
    if "Response A:" in prompt:
        a = section(prompt, "Response A:", "Response B:")
        b = section(prompt, "Response B:", "Which response is better?")
        return "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    choices = re.search(r"Answer with exactly one of: (.*)\. Do not explain", prompt).group(1)
    options = choices.split(", ")
    response = section(prompt, "Response:", "\n\n")
    return options[len(response) % len(options)]


def make_handler(log_path: str, key: str, fail: int, trickle: float = 0.0):
    def log(record: dict) -> None:
        with LOCK, open(log_path, "a") as out:
            out.write(json.dumps(record) + "\n")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def reply(self, status: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def raw(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def huge(self) -> None:
            """300 MB of a JSON string, no length given: read until the connection closes."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            block = b"x" * 65536
            sent = 0
            try:
                self.wfile.write(b'{"choices": [{"message": {"content": "')
                while sent < HUGE:
                    self.wfile.write(block)
                    sent += len(block)
                self.wfile.write(b'"}}]}')
            except OSError:
                pass
            log({"sent": sent})
            self.close_connection = True

        def trickle(self, seconds: float) -> None:
            line = b"HTTP/1.1 200 OK\r\n" * 1000
            sent = 0
            try:
                while True:
                    self.wfile.write(line[sent : sent + 1])
                    self.wfile.flush()
                    sent += 1
                    time.sleep(seconds)
            except OSError:
                pass
            log({"trickle": sent})
            self.close_connection = True

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with LOCK:
                STATE["requests"] += 1
                n = STATE["requests"]
                with open(log_path, "a") as log:
                    log.write(json.dumps({"headers": dict(self.headers), "body": body}) + "\n")
            if self.path != "/v1/chat/completions":
                return self.reply(404, {"error": {"message": "no such route"}})
            if self.headers.get("Authorization") != f"Bearer {key}":
                return self.reply(401, {"error": {"message": "bad key"}})
            if trickle:
                return self.trickle(trickle)
            if n <= fail:
                if n % 2:
                    return self.reply(503, {"error": {"message": "overloaded"}})
                return self.reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
            prompt = body["messages"][-1]["content"]
            if "HUGEANSWER" in prompt:
                return self.huge()
            if "NESTEDANSWER" in prompt:
                return self.raw(200, b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
            if "BADRETRYAFTER" in prompt:
                with LOCK:
                    SEEN[prompt] = SEEN.get(prompt, 0) + 1
                    first = SEEN[prompt] == 1
                if first:
                    return self.reply(
                        429, {"error": {"message": "later"}}, {"Retry-After": "not-a-date"}
                    )
            if "BADREQUEST" in prompt:
                return self.reply(400, {"error": {"message": "prompt rejected"}})
            content = answer(prompt)
            return self.reply(
                200,
                {
                    "id": f"cmpl-{n}",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--key", required=True)
    parser.add_argument("--fail", type=int, default=0)
    parser.add_argument("--trickle", type=float, default=0.0)
    args = parser.parse_args()
    handler = make_handler(args.log, args.key, args.fail, args.trickle)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
