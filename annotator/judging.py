"""Rate a study with an LLM judge through any OpenAI-compatible chat-completions endpoint.

``judge_run`` builds one prompt per call from a template (:class:`PromptTemplate`), sends it
to ``POST {base_url}/chat/completions`` (:class:`ChatClient`: connect, read and total
timeouts, a cap on the answer's size, 429 and 5xx retried a bounded number of times with
exponential backoff, honouring ``Retry-After``), parses the answer strictly
(:func:`parse_answer`) and stores each rating through ``services.judge_rating_record``.
Pairwise studies: one call per input and unordered pair of systems with outputs on it, the
two outputs shown in an order drawn per call; Likert studies: one call per output and
criterion; error-span studies: one call per output, whose proposed spans are parsed strictly
(:mod:`annotator.judge_spans`) and kept in ``JudgeRating.proposal``. Calls already stored
(same judge, prompt hash, input, systems, criterion, sample) are skipped. A call that fails
is recorded with its item and the run goes on; a run stops at its deadline or when cancelled.
The API key is sent as a Bearer header and never stored; which key may go to which URL is
decided by :func:`endpoint_key`. See docs/analysis.md.
"""

from __future__ import annotations

import email.utils
import hashlib
import itertools
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.template import Context, Engine, TemplateDoesNotExist, TemplateSyntaxError
from django.utils import timezone

from formats import vocab
from kinds.likert import choices as likert_choices

from . import services
from .errors import ServiceError
from .judge_spans import parse_judge_spans
from .models import JudgeRating, JudgeRun, Output, Study

PROMPTS = Path(__file__).resolve().parent / "prompts"
API_KEY_ENV = "HUMEVAL_JUDGE_API_KEY"
#: Answers a pairwise judge may give: the first shown output, the second, a tie.
LABEL_FIRST, LABEL_SECOND, LABEL_TIE = vocab.A, vocab.B, vocab.TIE
#: Statuses that mean every further call would fail too: the run stops.
FATAL = {401, 403, 404}
RAW_ANSWER_MAX = 20_000
#: Calls per item at most, whatever is asked (retries are bounded).
MAX_TRIES = 10
#: The default prompt of each item shape a judge can rate (``Kind.shape``).
PROMPT_FILES = {"pair": "pairwise.txt", "rating": "likert.txt", "spans": "error_spans.txt"}
#: The stored label of a parsed error-span answer: spans proposed, or none.
LABEL_ERRORS, LABEL_ERROR_FREE = "errors", "error_free"

# No loaders (so no {% include %} or {% extends %} of files), no autoescaping (a prompt is
# not HTML): a template only reads the plain strings and lists it is given.
_ENGINE = Engine(dirs=[], app_dirs=False, loaders=[], autoescape=False)


class JudgeRefused(ServiceError):
    """A judge run that cannot start or must stop; stored ratings stay."""

    code = "judge_refused"


class CallFailed(Exception):
    """One call that got no usable answer (a 4xx, or retries used up)."""


@dataclass(frozen=True)
class PromptTemplate:
    """A Django template; ``hash`` is the SHA-256 of its text."""

    text: str
    hash: str

    @classmethod
    def load(cls, kind: str, path: Path | None = None) -> PromptTemplate:
        """The template at ``path``, or the default one of the study kind (by name)."""
        return cls._read(path or PROMPTS / f"{kind}.txt")

    @classmethod
    def default(cls, study: Study) -> PromptTemplate:
        """The built-in prompt of the study's kind; refused for a kind no judge rates."""
        return cls._read(PROMPTS / PROMPT_FILES[judge_shape(study)])

    @classmethod
    def _read(cls, path: Path) -> PromptTemplate:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise JudgeRefused(f"cannot read the prompt {path}: {exc}") from None
        return cls.from_text(text, str(path))

    @classmethod
    def from_text(cls, text: str, where: str = "") -> PromptTemplate:
        """A template from its text (``where`` names it in errors)."""
        if not text.strip():
            raise JudgeRefused("the prompt is empty")
        try:
            _ENGINE.from_string(text)
        except TemplateSyntaxError as exc:
            name = f"the prompt {where}" if where else "the prompt"
            raise JudgeRefused(f"{name} is not a valid template: {exc}") from None
        return cls(text, hashlib.sha256(text.encode()).hexdigest())

    def render(self, context: Mapping[str, object]) -> str:
        try:
            # autoescape off: the model reads the texts as written, not HTML-escaped
            context = Context(dict(context), autoescape=False)
            return _ENGINE.from_string(self.text).render(context).strip()
        except (TemplateSyntaxError, TemplateDoesNotExist) as exc:
            raise JudgeRefused(f"the prompt cannot be rendered: {exc}") from None


@dataclass(frozen=True)
class Call:
    """One prompt to send and how to store its answer.

    ``allowed`` maps each accepted answer (case-folded) to the stored value: a label in
    system order (pairwise), a scale point (Likert, stored as ``score``) or a label.
    ``where`` names the item in failure messages (input id, systems, criterion, sample).
    """

    input_id: int
    system_id: int
    other_system_id: int | None
    criterion: str
    sample: int
    shown_first_id: int | None
    prompt: str
    allowed: Mapping[str, str | int]
    where: str = ""
    #: Error-span calls: the output text the answer's spans point into (parsed strictly by
    #: :func:`annotator.judge_spans.parse_judge_spans` instead of ``allowed``).
    span_text: str | None = None

    @property
    def key(self) -> tuple:
        return self.input_id, self.system_id, self.other_system_id, self.criterion, self.sample


@dataclass
class RunResult:
    """What a run did: ``total`` calls of the study, ``skipped`` already stored, ``stored``
    now (of which ``unparseable``), ``failed`` with their messages (one per item, naming it),
    and ``not_run`` calls never made because the run ``stopped`` (``"cancelled"`` or
    ``"deadline"``)."""

    total: int = 0
    skipped: int = 0
    stored: int = 0
    unparseable: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    stopped: str = ""
    not_run: int = 0

    def summary(self) -> str:
        text = (
            f"{self.stored} ratings stored ({self.unparseable} unparseable), "
            f"{self.skipped} already stored, {self.failed} failed, of {self.total}"
        )
        if self.stopped:
            reason = {"cancelled": "cancelled", "deadline": "stopped at its deadline"}
            text += f"; {reason.get(self.stopped, self.stopped)}, {self.not_run} not run"
        return text


def parse_answer(answer: str, allowed: Mapping[str, str | int]) -> str | int | None:
    """The stored value of an answer that is exactly one allowed word (surrounding white
    space and letter case aside), else ``None``: nothing is guessed."""
    return allowed.get(answer.strip().casefold())


def draw_first(seed: int, judge: str, input_id: int, pair: tuple[int, int], sample: int) -> bool:
    """Whether the pair's first system is shown first in this call: a coin seeded by the
    call itself, so the order does not depend on which calls ran before."""
    rng = random.Random(f"{seed}:{judge}:{input_id}:{pair[0]}:{pair[1]}:{sample}")
    return rng.random() < 0.5


def _pairwise_calls(
    study: Study, template: PromptTemplate, judge: str, samples: int, seed: int
) -> list[Call]:
    allow_tie = study.kind_settings.get("allow_tie", False)
    labels = [LABEL_FIRST, LABEL_SECOND] + ([LABEL_TIE] if allow_tie else [])
    outputs: dict[int, list[Output]] = {}
    for output in (
        Output.objects.filter(input__study=study)
        .select_related("input", "system")
        .order_by("system_id")
    ):
        outputs.setdefault(output.input_id, []).append(output)
    calls = []
    for input_id in sorted(outputs):
        for x, y in itertools.combinations(outputs[input_id], 2):
            inp = x.input
            for sample in range(samples):
                x_first = draw_first(seed, judge, input_id, (x.system_id, y.system_id), sample)
                first, second = (x, y) if x_first else (y, x)
                prompt = template.render(
                    {
                        "question": study.question,
                        "input": inp.text,
                        "reference": inp.reference,
                        "first": first.text,
                        "second": second.text,
                        "label_first": LABEL_FIRST,
                        "label_second": LABEL_SECOND,
                        "label_tie": LABEL_TIE if allow_tie else "",
                        "labels": labels,
                    }
                )
                allowed: dict[str, str | int] = {
                    LABEL_FIRST.casefold(): "A" if x_first else "B",
                    LABEL_SECOND.casefold(): "B" if x_first else "A",
                }
                if allow_tie:
                    allowed[LABEL_TIE.casefold()] = "tie"
                calls.append(
                    Call(
                        input_id,
                        x.system_id,
                        y.system_id,
                        "",
                        sample,
                        first.system_id,
                        prompt,
                        allowed,
                        f"input {inp.external_id}, {x.system.name} vs {y.system.name}, "
                        f"sample {sample}",
                    )
                )
    return calls


def _likert_calls(
    study: Study, template: PromptTemplate, criteria: list[dict[str, Any]], samples: int
) -> list[Call]:
    calls = []
    outputs = Output.objects.filter(input__study=study).select_related("input", "system")
    for output in outputs.order_by("input_id", "system_id"):
        for criterion in criteria:
            choices = likert_choices(criterion)
            values: list[str | int] = (
                [str(v) for v in criterion["labels"]]
                if criterion["labels"]
                else list(range(criterion["scale_min"], criterion["scale_max"] + 1))
            )
            prompt = template.render(
                {
                    "input": output.input.text,
                    "reference": output.input.reference,
                    "output": output.text,
                    "question": criterion["label"],
                    "criterion": criterion["name"],
                    "choices": choices,
                    "labels": [str(v) for v in values],
                    "scale_min": criterion["scale_min"],
                    "scale_max": criterion["scale_max"],
                }
            )
            allowed = {str(v).casefold(): v for v in values}
            for sample in range(samples):
                calls.append(
                    Call(
                        output.input_id,
                        output.system_id,
                        None,
                        criterion["name"],
                        sample,
                        None,
                        prompt,
                        allowed,
                        f"input {output.input.external_id}, {output.system.name}, "
                        f"{criterion['name']}, sample {sample}",
                    )
                )
    return calls


def _spans_calls(
    study: Study, template: PromptTemplate, *, judge: str, criterion: str, samples: int, seed: int
) -> list[Call]:
    """One call per output: the judge proposes its error spans (ESA^AI)."""
    if criterion:
        raise JudgeRefused("an error-span study has no criteria: leave out the criterion")
    calls = []
    outputs = Output.objects.filter(input__study=study).select_related("input", "system")
    for output in outputs.order_by("input_id", "system_id"):
        if not isinstance(output.text, str):
            continue  # conversations are refused for error spans at import
        prompt = template.render(
            {"input": output.input.text, "reference": output.input.reference, "output": output.text}
        )
        for sample in range(samples):
            calls.append(
                Call(
                    output.input_id,
                    output.system_id,
                    None,
                    "",
                    sample,
                    None,
                    prompt,
                    {},
                    f"input {output.input.external_id}, {output.system.name}, sample {sample}",
                    span_text=output.text,
                )
            )
    return calls


def judge_shape(study: Study) -> str:
    """The shape of the study's items as a judge rates them (``Kind.shape``: ``"pair"`` or
    ``"rating"``; ``"spans"`` for a kind whose judge proposes error spans,
    ``Kind.judge_proposes_spans``); :class:`JudgeRefused` with the reason for a kind no judge
    can rate."""
    kind = study.kind_impl
    if kind.judge_proposes_spans:
        return "spans"
    if kind.shape not in STUDY_CALLS:
        raise JudgeRefused(
            f"an LLM judge cannot rate a {kind.noun} study: a judge compares two outputs "
            "(pairwise), rates one output on a scale (Likert) or marks error spans in one "
            "output (error spans), and this kind's items are none of these"
        )
    return kind.shape


def study_calls(
    study: Study,
    template: PromptTemplate,
    *,
    judge: str,
    criterion: str = "",
    samples: int = 1,
    seed: int = 0,
) -> list[Call]:
    """Every call of a run over the study, stored or not, in a stable order."""
    calls = STUDY_CALLS[judge_shape(study)]
    return calls(study, template, judge=judge, criterion=criterion, samples=samples, seed=seed)


def _pairwise_study_calls(
    study: Study, template: PromptTemplate, *, judge: str, criterion: str, samples: int, seed: int
) -> list[Call]:
    if criterion:
        raise JudgeRefused("a pairwise study has one question: leave out the criterion")
    return _pairwise_calls(study, template, judge, samples, seed)


def _likert_study_calls(
    study: Study, template: PromptTemplate, *, judge: str, criterion: str, samples: int, seed: int
) -> list[Call]:
    criteria = study.kind_settings["criteria"]
    if criterion:
        criteria = [c for c in criteria if c["name"] == criterion]
        if not criteria:
            names = ", ".join(c["name"] for c in study.kind_settings["criteria"]) or "none"
            raise JudgeRefused(f"the study has no criterion '{criterion}' (it has: {names})")
    return _likert_calls(study, template, criteria, samples)


#: The calls of a judge run, by the shape of the study's items (``Kind.shape``; a kind of
#: another shape is refused).
STUDY_CALLS = {
    "pair": _pairwise_study_calls,
    "rating": _likert_study_calls,
    "spans": _spans_calls,
}


class ChatClient:
    """``POST {base_url}/chat/completions`` with one user message; returns the answer text.

    Bounded on every side: ``connect_timeout`` and ``read_timeout`` (seconds of silence per
    read), ``call_seconds`` for a whole call however slowly the server trickles (the
    socket is shut down when it is up), and ``max_bytes`` of answer (the body is streamed
    and the connection dropped past the cap). 429 and 5xx answers and transport errors
    (timeouts included) are retried up to ``max_tries`` calls in all (at most
    :data:`MAX_TRIES`), waiting ``Retry-After`` when the server gives a valid one (at most
    ``max_wait`` seconds), else ``retry_base * 2**n``. Any answer that is not a chat
    completion (bad JSON, too deeply nested, the wrong fields) fails that call alone
    (:class:`CallFailed`); 401, 403, 404 stop the run (every call would fail). :meth:`stop`
    ends every call under way at once. Safe to share between threads; one connection per
    call (no keep-alive), so each call's socket can be shut down on its own.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        call_seconds: float | None = None,
        max_bytes: int | None = None,
        max_tries: int = 6,
        retry_base: float = 1.0,
        max_wait: float = 60.0,
        temperature: float | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        headers["Accept-Encoding"] = "identity"  # the cap counts the bytes as sent
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.temperature = model, temperature
        self.max_tries = min(max(1, max_tries), MAX_TRIES)
        self.retry_base, self.max_wait = retry_base, max_wait
        self.call_seconds = _setting(call_seconds, "HUMEVAL_JUDGE_CALL_SECONDS")
        self.max_bytes = int(_setting(max_bytes, "HUMEVAL_JUDGE_MAX_ANSWER_BYTES"))
        timeout = httpx.Timeout(
            _setting(read_timeout, "HUMEVAL_JUDGE_READ_SECONDS"),
            connect=_setting(connect_timeout, "HUMEVAL_JUDGE_CONNECT_SECONDS"),
        )
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=0),
            follow_redirects=False,  # the key goes to the URL given, nowhere else
        )
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set = set()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self) -> None:
        """End every call under way (their sockets are shut down) and refuse new ones."""
        self._stopped.set()
        with self._lock:
            for sock in self._sockets:
                _shutdown(sock)

    def complete(self, prompt: str, deadline: float | None = None) -> str:
        """The answer to one prompt; ``deadline`` (``time.monotonic()``) bounds the call
        and its retries."""
        body: dict[str, object] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        for attempt in range(self.max_tries):
            last = attempt == self.max_tries - 1
            if self._stopped.is_set():
                raise CallFailed("not sent: the run stopped")
            try:
                status, retry_after, data = self._post(body, deadline)
            except httpx.TransportError as exc:
                if self._stopped.is_set():
                    raise CallFailed("stopped with the run") from None
                if last:
                    raise CallFailed(f"{self.url}: {type(exc).__name__} ({exc})") from None
                self._pause(self._wait(attempt, None), deadline)
                continue
            if status == 429 or status >= 500:
                if last:
                    raise CallFailed(f"{self.url}: HTTP {status} after {self.max_tries} tries")
                self._pause(self._wait(attempt, retry_after), deadline)
                continue
            if status >= 400:
                text = data[:300].decode("utf-8", "replace")
                message = f"{self.url}: HTTP {status}: {text}"
                raise JudgeRefused(message) if status in FATAL else CallFailed(message)
            return self._content(data)
        raise AssertionError("unreachable")

    def _post(self, body: dict, deadline: float | None) -> tuple[int, str | None, bytes]:
        """Status, ``Retry-After`` and body (at most ``max_bytes``) of one request that
        ends within ``call_seconds`` (and ``deadline``) whatever the server does."""
        seconds = self.call_seconds
        if deadline is not None:
            seconds = min(seconds, deadline - time.monotonic())
        if seconds <= 0:
            raise CallFailed("not sent: the run's deadline has passed")
        sockets: list = []

        def trace(event: str, info: dict) -> None:
            if event == "connection.connect_tcp.complete" and info.get("return_value"):
                sock = info["return_value"].get_extra_info("socket")
                if sock is not None:
                    with self._lock:
                        self._sockets.add(sock)
                    sockets.append(sock)
                    if self._stopped.is_set():
                        _shutdown(sock)

        expired = threading.Event()

        def expire() -> None:
            expired.set()
            for sock in sockets:
                _shutdown(sock)

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            request = self._http.build_request(
                "POST", self.url, json=body, extensions={"trace": trace}
            )
            response = self._http.send(request, stream=True)
            try:
                status = response.status_code
                retry_after = response.headers.get("Retry-After")
                if status == 429 or status >= 500:
                    return status, retry_after, b""  # the body is not read
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > self.max_bytes:
                    raise CallFailed(
                        f"{self.url}: an answer of {int(length):,} bytes, above the "
                        f"{self.max_bytes:,}-byte cap (not read)"
                    )
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > self.max_bytes:
                        raise CallFailed(
                            f"{self.url}: the answer passed the {self.max_bytes:,}-byte cap "
                            "(the rest was not read)"
                        )
                return status, retry_after, bytes(data)
            finally:
                response.close()
        except httpx.TransportError:
            if expired.is_set():
                raise CallFailed(f"{self.url}: no complete answer within {seconds:.3g} s") from None
            raise
        finally:
            timer.cancel()
            with self._lock:
                self._sockets.difference_update(sockets)

    def _pause(self, seconds: float, deadline: float | None) -> None:
        if deadline is not None and time.monotonic() + seconds >= deadline:
            raise CallFailed("not retried: the run's deadline comes first")
        if self._stopped.wait(seconds):
            raise CallFailed("not retried: the run stopped")

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        """``Retry-After`` (seconds or an HTTP date) when valid, else the backoff."""
        backoff = min(self.retry_base * 2**attempt, self.max_wait)
        if not retry_after:
            return backoff
        try:
            seconds = float(retry_after)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(retry_after)
                seconds = when.timestamp() - time.time()
            except (TypeError, ValueError, OverflowError, IndexError):
                return backoff  # not a number nor a date: ignored
        if not math.isfinite(seconds):
            return backoff
        return min(max(seconds, 0.0), self.max_wait)

    def _content(self, data: bytes) -> str:
        try:
            content = json.loads(data)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            text = data[:300].decode("utf-8", "replace")
            raise CallFailed(f"{self.url}: not a chat completion: {text}") from None
        return content if isinstance(content, str) else ""


def _setting(value: float | None, name: str) -> float:
    return float(getattr(settings, name)) if value is None else float(value)


def _shutdown(sock) -> None:
    """Wake any thread blocked on the socket (``close`` alone does not)."""
    try:
        sock.shutdown(2)  # socket.SHUT_RDWR
    except OSError:
        pass


def endpoint_key(base_url: str) -> str:
    """The environment variable of the operator's key bound to ``base_url`` in
    ``HUMEVAL_JUDGE_ENDPOINTS``, ``""`` when the URL is listed without a key, ``None`` when
    it is not listed: no operator key is ever sent to an unlisted URL."""
    wanted = normalise_url(base_url)
    for url, key_env in settings.HUMEVAL_JUDGE_ENDPOINTS:
        if normalise_url(url) == wanted:
            return key_env
    return None


def normalise_url(url: str) -> str:
    """A base URL as compared with the listed ones: no trailing ``/``, scheme and host in
    lower case."""
    return str(httpx.URL(url.strip().rstrip("/")))


def _check_judge(study: Study, judge: str, prompt_hash: str) -> None:
    other = (
        JudgeRating.objects.filter(study=study, judge=judge)
        .exclude(prompt_hash=prompt_hash)
        .exists()
    )
    if other:
        raise JudgeRefused(
            f"judge '{judge}' already has ratings in this study from another prompt or an "
            "import; name this run differently (--judge, or the admin's Judge name)"
        )


def judge_run(
    study: Study,
    *,
    base_url: str,
    model: str,
    api_key: str | None = None,
    judge: str = "",
    prompt: Path | None = None,
    prompt_text: str | None = None,
    criterion: str = "",
    samples: int = 1,
    concurrency: int = 4,
    seed: int = 0,
    max_tries: int = 6,
    retry_base: float = 1.0,
    temperature: float | None = None,
    run_seconds: float | None = None,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[RunResult], None] | None = None,
    client_options: Mapping[str, object] | None = None,
) -> RunResult:
    """Rate everything of the study not yet stored for this judge and prompt.

    The judge is named after the model unless ``judge`` is given; the prompt is the file
    ``prompt``, the text ``prompt_text`` or the kind's default. Each answer is stored as it
    arrives (an interrupted run keeps them); a call that fails, whatever the endpoint sent,
    is counted and named in ``errors`` and the run goes on (a rerun tries it again). The
    run stops at ``run_seconds`` (default ``HUMEVAL_JUDGE_RUN_SECONDS``) or when
    ``should_stop()`` (asked about once a second) says so: calls under way are ended and
    the rest counted as ``not_run``. Raises :class:`JudgeRefused` before any call (a kind
    no judge rates, bad criterion or prompt, a judge name already used with another prompt)
    or when the endpoint refuses access.
    """
    if samples < 1 or concurrency < 1:
        raise JudgeRefused("samples and concurrency must be at least 1")
    judge = (judge or model).strip()
    if not judge or len(judge) > JudgeRating._meta.get_field("judge").max_length:
        raise JudgeRefused("the judge name must have 1 to 100 characters")
    judge_shape(study)  # a kind no judge rates is refused with its reason, before the prompt
    if prompt_text is not None and prompt_text.strip():
        template = PromptTemplate.from_text(prompt_text)
    elif prompt is not None:
        template = PromptTemplate.load(study.kind, prompt)
    else:
        template = PromptTemplate.default(study)
    _check_judge(study, judge, template.hash)
    calls = study_calls(
        study, template, judge=judge, criterion=criterion, samples=samples, seed=seed
    )
    stored = set(
        JudgeRating.objects.filter(study=study, judge=judge, prompt_hash=template.hash).values_list(
            "input_id", "system_id", "other_system_id", "criterion", "sample"
        )
    )
    todo = [c for c in calls if c.key not in stored]
    result = RunResult(total=len(calls), skipped=len(calls) - len(todo))
    if progress:
        progress(result)
    seconds = _setting(run_seconds, "HUMEVAL_JUDGE_RUN_SECONDS")
    deadline = time.monotonic() + seconds
    client = ChatClient(
        base_url,
        model,
        api_key,
        max_tries=max_tries,
        retry_base=retry_base,
        temperature=temperature,
        **dict(client_options or {}),
    )
    # Threads only talk HTTP; every write happens here, on the caller's database connection.
    pool = ThreadPoolExecutor(max_workers=concurrency)
    queue = iter(todo)
    running: dict[Future, Call] = {}
    asked = time.monotonic()
    try:
        while True:
            for call in itertools.islice(queue, concurrency * 2 - len(running)):
                running[pool.submit(client.complete, call.prompt, deadline)] = call
            if not running:
                break
            done, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                call = running.pop(future)
                try:
                    answer = future.result()
                except JudgeRefused:
                    raise
                except Exception as exc:  # noqa: BLE001 - whatever the endpoint did: one item
                    result.failed += 1
                    message = str(exc) if isinstance(exc, CallFailed) else repr(exc)
                    result.errors.append(f"{call.where}: {message}" if call.where else message)
                    continue
                _store(study, judge, template.hash, call, answer, result)
            if progress and done:
                progress(result)
            now = time.monotonic()
            if now >= deadline:
                result.stopped = "deadline"
            elif should_stop and now - asked >= 1.0:
                asked = now
                if should_stop():
                    result.stopped = "cancelled"
            if result.stopped:
                result.not_run = len(running) + sum(1 for _ in queue)
                break
    finally:
        if running:  # stopped, or refused: end the calls under way, do not wait for them
            client.stop()
        pool.shutdown(wait=not running, cancel_futures=True)
        client.close()
    if progress:
        progress(result)
    return result


def _store(
    study: Study, judge: str, prompt_hash: str, call: Call, answer: str, result: RunResult
) -> None:
    proposal = None
    if call.span_text is not None:
        parsed = parse_judge_spans(answer, call.span_text)
        if parsed.spans is None:
            value, proposal = None, {"error": parsed.error}
        else:
            value = LABEL_ERROR_FREE if parsed.error_free else LABEL_ERRORS
            proposal = {"spans": parsed.spans, "located": parsed.located}
    else:
        value = parse_answer(answer, call.allowed)
    is_score = isinstance(value, int)
    created = services.judge_rating_record(
        study,
        judge=judge,
        input_id=call.input_id,
        system_id=call.system_id,
        other_system_id=call.other_system_id,
        criterion=call.criterion,
        sample=call.sample,
        prompt_hash=prompt_hash,
        raw_answer=answer[:RAW_ANSWER_MAX],
        shown_first_id=call.shown_first_id,
        score=float(value) if is_score else None,
        label="" if value is None or is_score else str(value),
        parse_ok=value is not None,
        proposal=proposal,
    )
    if created:
        result.stored += 1
        result.unparseable += value is None
    else:
        result.skipped += 1


# --- runs queued from the admin ------------------------------------------------------------
#: Failed calls kept on a run's row (the count is exact; the list stops here).
RUN_ERRORS_KEPT = 200


def judge_run_create(
    study: Study,
    *,
    base_url: str,
    model: str,
    judge: str = "",
    own_key: str = "",
    prompt: str = "",
    criterion: str = "",
    samples: int = 1,
    concurrency: int = 4,
    user=None,
) -> JudgeRun:
    """A queued run. A listed endpoint (``HUMEVAL_JUDGE_ENDPOINTS``) takes the operator's key
    bound to it and no other; an unlisted one only the researcher's ``own_key`` (or none).
    Refused before anything is stored for a kind no judge rates or an invalid prompt."""
    judge_shape(study)
    if prompt.strip():
        PromptTemplate.from_text(prompt)
    listed = endpoint_key(base_url) is not None
    if listed and own_key:
        raise JudgeRefused(
            "a listed endpoint takes the key the operator bound to it; leave your key empty"
        )
    if listed:
        source = JudgeRun.Key.ENDPOINT
    else:
        source = JudgeRun.Key.OWN if own_key else JudgeRun.Key.NONE
    return JudgeRun.objects.create(
        study=study,
        created_by=user,
        base_url=base_url.strip().rstrip("/"),
        model=model,
        judge=judge.strip(),
        own_key=own_key,
        key_source=source,
        prompt=prompt if prompt.strip() else "",
        criterion=criterion,
        samples=samples,
        concurrency=concurrency,
    )


def run_key(run: JudgeRun) -> tuple[str | None, str]:
    """The key a run sends and the sentence that says so, decided where the key is read
    (the worker): the operator's key only for a URL listed *here*, bound to that key."""
    if run.key_source == JudgeRun.Key.OWN:
        return run.own_key or None, "the researcher's own key"
    if run.key_source == JudgeRun.Key.NONE:
        return None, "no key"
    key_env = endpoint_key(run.base_url)
    if key_env is None:
        raise JudgeRefused(f"{run.base_url} is not a listed judge endpoint (any more)")
    if not key_env:
        return None, "no key (the endpoint is listed without one)"
    key = os.environ.get(key_env) or None
    if key is None:
        return None, f"no key ({key_env} is not set on the judge worker)"
    return key, f"the operator's key {key_env}"


#: A running judge run writes ``JudgeRun.heartbeat_at`` this often.
HEARTBEAT_SECONDS = 5.0


def judge_run_execute(run_id: int) -> str:
    """Carry out a queued run (the ``run_judge`` task): its counts, failures and state are
    kept on the row as it goes; a researcher's own key is erased however it ends."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().select_related("study").get(pk=run_id)
        if run.state != JudgeRun.State.QUEUED:
            return f"run {run_id} is {run.state} already"
        if run.cancel_requested:
            _finish(run, JudgeRun.State.CANCELLED, "cancelled before it started")
            return run.message
        run.state, run.started_at = JudgeRun.State.RUNNING, timezone.now()
        run.heartbeat_at = run.started_at
        run.save(update_fields=["state", "started_at", "heartbeat_at"])
    last, beat = [0.0], [time.monotonic()]

    def progress(result: RunResult) -> None:
        if time.monotonic() - last[0] >= 1.0:
            last[0] = time.monotonic()
            JudgeRun.objects.filter(pk=run.pk).update(**_counts(result))

    def should_stop() -> bool:
        """Asked about once a second by the run, also while a call is under way: writes
        the heartbeat every :data:`HEARTBEAT_SECONDS`."""
        if time.monotonic() - beat[0] >= HEARTBEAT_SECONDS:
            beat[0] = time.monotonic()
            JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
        return JudgeRun.objects.filter(pk=run.pk, cancel_requested=True).exists()

    try:
        api_key, run.key_sent = run_key(run)
        JudgeRun.objects.filter(pk=run.pk).update(key_sent=run.key_sent)
        result = judge_run(
            run.study,
            base_url=run.base_url,
            model=run.model,
            judge=run.judge,
            api_key=api_key,
            prompt_text=run.prompt or None,
            criterion=run.criterion,
            samples=run.samples,
            concurrency=run.concurrency,
            should_stop=should_stop,
            progress=progress,
        )
    except JudgeRefused as exc:
        _finish(run, JudgeRun.State.FAILED, exc.message)
        return exc.message
    except BaseException as exc:
        _finish(run, JudgeRun.State.FAILED, f"the run stopped: {exc!r}")
        raise
    for name, value in _counts(result).items():
        setattr(run, name, value)
    run.errors = result.errors[:RUN_ERRORS_KEPT]
    state = {"cancelled": JudgeRun.State.CANCELLED, "deadline": JudgeRun.State.DEADLINE}
    _finish(run, state.get(result.stopped, JudgeRun.State.DONE), result.summary())
    return result.summary()


def _counts(result: RunResult) -> dict[str, int]:
    return {
        "total": result.total,
        "stored": result.stored,
        "skipped": result.skipped,
        "unparseable": result.unparseable,
        "failed": result.failed,
        "not_run": result.not_run,
    }


def _finish(run: JudgeRun, state: str, message: str) -> None:
    run.state, run.message, run.own_key = state, message, ""
    run.finished_at = timezone.now()
    run.save()


def judge_runs_cancel(studies) -> int:
    """Stop every queued or running run of the studies; how many were stopped. A queued one
    is cancelled at once (its task then does nothing; a researcher's key is erased); a
    running one stops within about a second, its calls under way ended; one still running
    when asked again, or stale (no heartbeat for ``HUMEVAL_JUDGE_STALE_SECONDS``: its
    worker died), is marked cancelled at once."""
    runs = JudgeRun.objects.filter(study__in=studies)
    silent = timezone.now() - timedelta(seconds=settings.HUMEVAL_JUDGE_STALE_SECONDS)
    with transaction.atomic():
        stale = (
            runs.filter(state=JudgeRun.State.RUNNING)
            .filter(
                Q(heartbeat_at__lt=silent) | Q(heartbeat_at__isnull=True, started_at__lt=silent)
            )
            .update(
                state=JudgeRun.State.CANCELLED,
                cancel_requested=True,
                own_key="",
                message="marked cancelled: its worker had stopped (no heartbeat)",
                finished_at=timezone.now(),
            )
        )
        queued = runs.filter(state=JudgeRun.State.QUEUED).update(
            state=JudgeRun.State.CANCELLED,
            cancel_requested=True,
            own_key="",
            message="cancelled before it started",
            finished_at=timezone.now(),
        )
        # asked before and still running: its worker is gone (killed, restarted)
        gone = runs.filter(state=JudgeRun.State.RUNNING, cancel_requested=True).update(
            state=JudgeRun.State.CANCELLED,
            own_key="",
            message="marked cancelled: it had not stopped when asked before",
            finished_at=timezone.now(),
        )
        running = runs.filter(state=JudgeRun.State.RUNNING, cancel_requested=False).update(
            cancel_requested=True
        )
    return stale + queued + gone + running
