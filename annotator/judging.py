"""Rate a study with an LLM judge through any OpenAI-compatible chat-completions endpoint.

``judge_run`` builds one prompt per call from a template (:class:`PromptTemplate`), sends it
to ``POST {base_url}/chat/completions`` (:class:`ChatClient`: 429 and 5xx retried with
exponential backoff, honouring ``Retry-After``), parses the answer strictly
(:func:`parse_answer`) and stores each rating through ``services.judge_rating_record``.
Pairwise studies: one call per input and unordered pair of systems with outputs on it, the
two outputs shown in an order drawn per call; Likert studies: one call per output and
criterion. Calls already stored (same judge, prompt hash, input, systems, criterion, sample)
are skipped. The API key is sent as a Bearer header and never stored. See docs/analysis.md.
"""

from __future__ import annotations

import email.utils
import hashlib
import itertools
import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from django.template import Context, Engine, TemplateDoesNotExist, TemplateSyntaxError

from kinds.likert import choices as likert_choices

from . import services
from .errors import ServiceError
from .models import Criterion, JudgeRating, Output, Study

PROMPTS = Path(__file__).resolve().parent / "prompts"
API_KEY_ENV = "HUMEVAL_JUDGE_API_KEY"
#: Answers a pairwise judge may give: the first shown output, the second, a tie.
LABEL_FIRST, LABEL_SECOND, LABEL_TIE = "A", "B", "tie"
#: Statuses that mean every further call would fail too: the run stops.
FATAL = {401, 403, 404}
RAW_ANSWER_MAX = 20_000

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
        """The template at ``path``, or the default one of the study kind."""
        path = path or PROMPTS / f"{kind}.txt"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise JudgeRefused(f"cannot read the prompt {path}: {exc}") from None
        try:
            _ENGINE.from_string(text)
        except TemplateSyntaxError as exc:
            raise JudgeRefused(f"the prompt {path} is not a valid template: {exc}") from None
        return cls(text, hashlib.sha256(text.encode()).hexdigest())

    def render(self, context: Mapping[str, object]) -> str:
        try:
            return _ENGINE.from_string(self.text).render(Context(dict(context))).strip()
        except (TemplateSyntaxError, TemplateDoesNotExist) as exc:
            raise JudgeRefused(f"the prompt cannot be rendered: {exc}") from None


@dataclass(frozen=True)
class Call:
    """One prompt to send and how to store its answer.

    ``allowed`` maps each accepted answer (case-folded) to the stored value: a label in
    system order (pairwise), a scale point (Likert, stored as ``score``) or a label.
    """

    input_id: int
    system_id: int
    other_system_id: int | None
    criterion: str
    sample: int
    shown_first_id: int | None
    prompt: str
    allowed: Mapping[str, str | int]

    @property
    def key(self) -> tuple:
        return self.input_id, self.system_id, self.other_system_id, self.criterion, self.sample


@dataclass
class RunResult:
    """What a run did: ``total`` calls of the study, ``skipped`` already stored, ``stored``
    now (of which ``unparseable``), ``failed`` with their messages."""

    total: int = 0
    skipped: int = 0
    stored: int = 0
    unparseable: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.stored} ratings stored ({self.unparseable} unparseable), "
            f"{self.skipped} already stored, {self.failed} failed, of {self.total}"
        )


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
    labels = [LABEL_FIRST, LABEL_SECOND] + ([LABEL_TIE] if study.allow_tie else [])
    outputs: dict[int, list[Output]] = {}
    for output in (
        Output.objects.filter(input__study=study).select_related("input").order_by("system_id")
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
                        "label_tie": LABEL_TIE if study.allow_tie else "",
                        "labels": labels,
                    }
                )
                allowed: dict[str, str | int] = {
                    LABEL_FIRST.casefold(): "A" if x_first else "B",
                    LABEL_SECOND.casefold(): "B" if x_first else "A",
                }
                if study.allow_tie:
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
                    )
                )
    return calls


def _likert_calls(
    study: Study, template: PromptTemplate, criteria: list[Criterion], samples: int
) -> list[Call]:
    calls = []
    outputs = Output.objects.filter(input__study=study).select_related("input")
    for output in outputs.order_by("input_id", "system_id"):
        for criterion in criteria:
            choices = likert_choices(criterion.as_option())
            values: list[str | int] = (
                [str(v) for v in criterion.labels]
                if criterion.labels
                else list(range(criterion.scale_min, criterion.scale_max + 1))
            )
            prompt = template.render(
                {
                    "input": output.input.text,
                    "reference": output.input.reference,
                    "output": output.text,
                    "question": criterion.label,
                    "criterion": criterion.name,
                    "choices": choices,
                    "labels": [str(v) for v in values],
                    "scale_min": criterion.scale_min,
                    "scale_max": criterion.scale_max,
                }
            )
            allowed = {str(v).casefold(): v for v in values}
            for sample in range(samples):
                calls.append(
                    Call(
                        output.input_id,
                        output.system_id,
                        None,
                        criterion.name,
                        sample,
                        None,
                        prompt,
                        allowed,
                    )
                )
    return calls


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
    calls = STUDY_CALLS.get(study.kind_impl.shape)
    if calls is None:
        raise JudgeRefused(f"LLM judges do not rate {study.kind} studies yet")
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
    criteria = list(study.criteria.all())
    if criterion:
        criteria = [c for c in criteria if c.name == criterion]
        if not criteria:
            names = ", ".join(c.name for c in study.criteria.all()) or "none"
            raise JudgeRefused(f"the study has no criterion '{criterion}' (it has: {names})")
    return _likert_calls(study, template, criteria, samples)


#: The calls of a judge run, by the shape of the study's items (``Kind.shape``; a kind of
#: another shape is refused).
STUDY_CALLS = {"pair": _pairwise_study_calls, "rating": _likert_study_calls}


class ChatClient:
    """``POST {base_url}/chat/completions`` with one user message; returns the answer text.

    429 and 5xx answers and transport errors are retried up to ``max_tries`` calls in all,
    waiting ``Retry-After`` when the server gives it (at most ``max_wait`` seconds), else
    ``retry_base * 2**n``. Other 4xx fail the call (401, 403, 404 stop the run: every call
    would fail). Safe to share between threads.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_tries: int = 6,
        retry_base: float = 1.0,
        max_wait: float = 60.0,
        temperature: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.temperature = model, temperature
        self.max_tries, self.retry_base, self.max_wait = max(1, max_tries), retry_base, max_wait
        self.sleep = sleep
        self._http = httpx.Client(headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, prompt: str) -> str:
        body: dict[str, object] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        for attempt in range(self.max_tries):
            last = attempt == self.max_tries - 1
            try:
                response = self._http.post(self.url, json=body)
            except httpx.TransportError as exc:
                if last:
                    raise CallFailed(f"{self.url}: {type(exc).__name__} ({exc})") from None
                self.sleep(self._wait(attempt, None))
                continue
            status = response.status_code
            if status == 429 or status >= 500:
                if last:
                    raise CallFailed(f"{self.url}: HTTP {status} after {self.max_tries} tries")
                self.sleep(self._wait(attempt, response.headers.get("Retry-After")))
                continue
            if status >= 400:
                message = f"{self.url}: HTTP {status}: {response.text[:300]}"
                raise JudgeRefused(message) if status in FATAL else CallFailed(message)
            return self._content(response)
        raise AssertionError("unreachable")

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                seconds = float(retry_after)
            except ValueError:
                when = email.utils.parsedate_to_datetime(retry_after)
                seconds = when.timestamp() - time.time() if when else 0.0
            return min(max(seconds, 0.0), self.max_wait)
        return min(self.retry_base * 2**attempt, self.max_wait)

    def _content(self, response: httpx.Response) -> str:
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise CallFailed(f"{self.url}: not a chat completion: {response.text[:300]}") from None
        return content if isinstance(content, str) else ""


def _check_judge(study: Study, judge: str, prompt_hash: str) -> None:
    other = (
        JudgeRating.objects.filter(study=study, judge=judge)
        .exclude(prompt_hash=prompt_hash)
        .exists()
    )
    if other:
        raise JudgeRefused(
            f"judge '{judge}' already has ratings in this study from another prompt or an "
            "import; name this run differently (--judge)"
        )


def judge_run(
    study: Study,
    *,
    base_url: str,
    model: str,
    api_key: str | None = None,
    judge: str = "",
    prompt: Path | None = None,
    criterion: str = "",
    samples: int = 1,
    concurrency: int = 4,
    seed: int = 0,
    max_tries: int = 6,
    retry_base: float = 1.0,
    temperature: float | None = None,
    progress: Callable[[RunResult], None] | None = None,
) -> RunResult:
    """Rate everything of the study not yet stored for this judge and prompt.

    The judge is named after the model unless ``judge`` is given. Each answer is stored as
    it arrives (an interrupted run keeps them); calls that failed are not stored, so a rerun
    tries them again. Raises :class:`JudgeRefused` before any call (bad criterion, prompt,
    a judge name already used with another prompt) or when the endpoint refuses access.
    """
    if samples < 1 or concurrency < 1:
        raise JudgeRefused("samples and concurrency must be at least 1")
    judge = (judge or model).strip()
    if not judge or len(judge) > JudgeRating._meta.get_field("judge").max_length:
        raise JudgeRefused("the judge name must have 1 to 100 characters")
    template = PromptTemplate.load(study.kind, prompt)
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
    client = ChatClient(
        base_url,
        model,
        api_key,
        max_tries=max_tries,
        retry_base=retry_base,
        temperature=temperature,
    )
    # Threads only talk HTTP; every write happens here, on the caller's database connection.
    with client, ThreadPoolExecutor(max_workers=concurrency) as pool:
        queue = iter(todo)
        running: dict[Future, Call] = {}

        def top_up() -> None:
            for call in itertools.islice(queue, concurrency * 2 - len(running)):
                running[pool.submit(client.complete, call.prompt)] = call

        top_up()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                call = running.pop(future)
                try:
                    answer = future.result()
                except CallFailed as exc:
                    result.failed += 1
                    result.errors.append(str(exc))
                    continue
                except JudgeRefused:
                    for other in running:
                        other.cancel()
                    raise
                _store(study, judge, template.hash, call, answer, result)
            if progress:
                progress(result)
            top_up()
    return result


def _store(
    study: Study, judge: str, prompt_hash: str, call: Call, answer: str, result: RunResult
) -> None:
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
    )
    if created:
        result.stored += 1
        result.unparseable += value is None
    else:
        result.skipped += 1
