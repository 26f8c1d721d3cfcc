"""A deterministic OpenAI-compatible chat-completions server, the stand-in for an LLM judge.

Run as a process: ``python tests/judge_server.py LOG --key KEY [--fail N]``; it prints its
port on the first line of stdout and serves ``POST /v1/chat/completions`` on 127.0.0.1.

* Answers derive from the prompt (the default templates of ``annotator/prompts``):
  pairwise, the longer of responses A and B (``tie`` when equally long); Likert, the
  choice at index ``len(response) % len(choices)``.
* An input whose text contains ``MALFORMED`` gets a chatty, unparseable answer.
* The first ``--fail`` requests fail in turn with 503, then 429 with ``Retry-After: 1``.
* A prompt containing ``BADREQUEST`` gets 400.
* A request without ``Authorization: Bearer KEY`` gets 401.
* Every request is appended to LOG as one JSON line: its headers and body.
"""

import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"requests": 0}


def section(prompt: str, start: str, end: str | None) -> str:
    tail = prompt.split(start, 1)[1]
    return (tail.split(end, 1)[0] if end else tail).strip()


def answer(prompt: str) -> str:
    if "MALFORMED" in prompt:
        return "Well, both have merits, but I lean towards the first one."
    if "Response A:" in prompt:
        a = section(prompt, "Response A:", "Response B:")
        b = section(prompt, "Response B:", "Which response is better?")
        return "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    choices = re.search(r"Answer with exactly one of: (.*)\. Do not explain", prompt).group(1)
    options = choices.split(", ")
    response = section(prompt, "Response:", "\n\n")
    return options[len(response) % len(options)]


def make_handler(log_path: str, key: str, fail: int):
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
            if n <= fail:
                if n % 2:
                    return self.reply(503, {"error": {"message": "overloaded"}})
                return self.reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
            prompt = body["messages"][-1]["content"]
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
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.log, args.key, args.fail))
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
