"""Worker pages: entry from a link or a crowd platform, instructions, qualification test,
one item at a time, and the way back with a completion code. No logic beyond HTTP."""

from __future__ import annotations

import math
import re
from functools import wraps
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone, translation
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django.views.i18n import JavaScriptCatalog

from . import entry, selectors, services, throttle
from .collection import Outlook
from .errors import (
    AssignmentExpired,
    InvalidAnswer,
    OpenInAnotherBrowser,
    ServiceError,
    WorkerBlocked,
)
from .invites import invite_worker
from .languages import in_language, study_instructions, study_language_view
from .models import Participation, Study
from .resilience import retry_on_lost_database

COOKIE_SALT = "humeval.participation"
#: The waiting page looks again after ``FIRST_WAIT_SECONDS``, and so for its first
#: ``WAIT_SECONDS`` looks while a round is being decided; otherwise each later look a second
#: later than the last, at most ``WAIT_SECONDS`` apart. One second is as soon as a page
#: without a script can look again (``<meta http-equiv="refresh">`` counts whole seconds): a
#: round's last answers come in and its decision is made within about a second.
FIRST_WAIT_SECONDS = 1
WAIT_SECONDS = 5
#: How long the end page shows a Prolific worker their code before taking them back.
PROLIFIC_RETURN_SECONDS = 3
ALREADY_ANSWERED = gettext_lazy(
    "You had already answered that task (on another page or tab); the answer sent "
    "again was not stored. Here is your next task."
)
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
PLATFORM_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,100}")


def _study(study_id) -> Study:
    return get_object_or_404(Study, public_id=study_id)


def _message(request: HttpRequest, title: str, text: str, status: int = 200) -> HttpResponse:
    return render(request, "annotator/message.html", {"title": title, "text": text}, status=status)


def _cookie_name(study_id) -> str:
    return f"humeval-{UUID(str(study_id)).hex}"


def _remembered(request: HttpRequest, study_id) -> tuple[int, str] | None:
    """The participation id and browser secret the study's signed cookie holds, if any."""
    value = request.get_signed_cookie(_cookie_name(study_id), default=None, salt=COOKIE_SALT)
    pk, _, secret = (value or "").partition(":")
    return (int(pk), secret) if pk.isdigit() and secret else None


def _participation(request: HttpRequest, study_id) -> tuple[Participation | None, bool]:
    """The participation this browser's cookie names (with the study and the worker
    loaded; no session is read), and whether this browser still holds it."""
    remembered = _remembered(request, study_id)
    if remembered is None:
        return None, False
    participation = selectors.worker_participation(remembered[0], UUID(str(study_id)))
    if participation is None:
        return None, False
    return participation, participation.held_by(remembered[1])


def _remember(response: HttpResponse, participation: Participation, secret: str) -> HttpResponse:
    """Set the study's worker cookie: signed, HTTP-only, sent only to that study's pages.
    It carries the browser's secret, which binds the participation to this browser (in
    MTurk's frame the middleware makes it a cross-site, partitioned cookie)."""
    study_id = participation.study.public_id
    response.set_signed_cookie(
        _cookie_name(study_id),
        f"{participation.pk}:{secret}",
        salt=COOKIE_SALT,
        max_age=settings.SESSION_COOKIE_AGE,
        path=f"/w/{study_id}/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
    return response


def _framed(response: HttpResponse, participation: Participation | None = None) -> HttpResponse:
    """Let MTurk frame the page (an MTurk participation's, or the MTurk entry's): the
    middleware then allows ``HUMEVAL_MTURK_FRAME_ANCESTORS`` instead of no framing."""
    if participation is None or participation.annotator.platform == "mturk":
        response.humeval_mturk_frame = True
        response.xframe_options_exempt = True
    return response


def _too_many(request: HttpRequest) -> HttpResponse:
    return _message(
        request, _("Too many requests"), _("Please wait a minute before trying again."), 429
    )


def _elsewhere(request: HttpRequest, study: Study, available_at=None) -> HttpResponse:
    """The page for a browser that does not hold the participation: another browser
    started it (``available_at``: when this one may take over), or took it over."""
    minutes = None
    if available_at is not None:
        minutes = max(1, math.ceil((available_at - timezone.now()).total_seconds() / 60))
    context = {"study": study, "available_at": available_at, "minutes": minutes}
    return render(request, "annotator/elsewhere.html", context, status=409)


def participant_view(view):
    """Load the study and this browser's participation in it; a stranger gets a 403, a
    browser whose participation was taken over by another browser a 409. A request that
    meets a dropped database connection is run again on a fresh one (``resilience``)."""

    @wraps(view)
    @retry_on_lost_database
    def wrapped(request: HttpRequest, study_id) -> HttpResponse:
        participation, held = _participation(request, study_id)
        if participation is None:
            study = _study(study_id)  # an unknown study is a 404
            return in_language(
                request,
                study,
                lambda: _message(
                    request,
                    _("Who are you?"),
                    _("Open this study through the link you were given."),
                    403,
                ),
            )
        study = participation.study
        if not held:
            return in_language(
                request, study, lambda: _framed(_elsewhere(request, study), participation)
            )
        return in_language(
            request, study, lambda: _framed(view(request, study, participation), participation)
        )

    return wrapped


def _start(request: HttpRequest, study: Study, **entry) -> HttpResponse:
    """Remember the participation in a cookie, then go to the instructions (first
    visit) or straight back to work (a returning worker resumes)."""
    returning = selectors.is_participant(
        study, platform=entry["platform"], external_id=entry["external_id"]
    )
    if not throttle.allow_entry(request, study.pk, returning=returning):
        return _too_many(request)
    if not study.is_active:
        return _message(request, _("Study closed"), _("This study is not accepting workers."), 410)
    try:
        participation = services.participation_enter(study=study, **entry)
        # the participation is bound to this browser; another one that may still be in
        # use gets the "open in another browser" page (docs/crowd.md)
        remembered = _remembered(request, study.public_id)
        presented = remembered[1] if remembered and remembered[0] == participation.pk else ""
        secret = services.participation_claim(
            participation, secret=presented, session=entry.get("session", "")
        )
    except OpenInAnotherBrowser as exc:
        return _elsewhere(request, study, exc.available_at)
    except ServiceError as exc:
        return _message(request, _("Incomplete link"), _(exc.message), 400)
    target = "annotator:task" if secret == presented else "annotator:instructions"
    if target == "annotator:instructions" and not selectors.work_left(participation):
        target = "annotator:end"  # nothing to do here: say so before any instructions
    return _remember(redirect(target, study_id=study.public_id), participation, secret)


@require_http_methods(["GET"])
@retry_on_lost_database
@study_language_view(lambda study_id: _study(study_id))
def enter(request: HttpRequest, study_id) -> HttpResponse:
    """``/w/<study>/?worker=<id>``: an open link, for demos and studies that allow it."""
    study = _study(study_id)
    worker = request.GET.get("worker", "")
    if not study.open_links:
        return _message(
            request,
            _("Use your own link"),
            _(
                "This study is entered through a personal invitation or a crowd "
                "platform. Open the link you were given."
            ),
            403,
        )
    if not worker:
        if _participation(request, study.public_id)[1]:
            return redirect("annotator:task", study_id=study.public_id)
        return _message(
            request,
            _("Incomplete link"),
            _("This link does not say who you are. Open the link you were given."),
            400,
        )
    return _start(request, study, platform="link", external_id=worker)


@require_http_methods(["GET"])
@retry_on_lost_database
@study_language_view(lambda study_id: _study(study_id))
def invite(request: HttpRequest, study_id, token: str) -> HttpResponse:
    study = _study(study_id)
    worker = invite_worker(study, token)
    if worker is None:
        return _message(
            request,
            _("Invalid invitation"),
            _("This invitation link is not valid. Ask for a new one."),
            403,
        )
    return _start(request, study, platform="invite", external_id=worker)


@require_http_methods(["GET"])
@retry_on_lost_database
@study_language_view(lambda study_id: _study(study_id))
def prolific(request: HttpRequest, study_id) -> HttpResponse:
    study = _study(study_id)
    pid = request.GET.get("PROLIFIC_PID", "")
    if not PLATFORM_ID.fullmatch(pid):
        return _message(
            request,
            _("Incomplete link"),
            _("The link from Prolific lacks your Prolific ID. Open the study from Prolific again."),
            400,
        )
    session = request.GET.get("SESSION_ID", "")
    if not entry.vouched(study, "prolific", pid, session):  # the platform does not know it
        return _message(
            request,
            "Unknown submission",
            "Prolific has no such submission of yours in this study. Open the study from "
            "Prolific again.",
            403,
        )
    return _start(request, study, platform="prolific", external_id=pid, session=session)


@require_http_methods(["GET"])
@retry_on_lost_database
@study_language_view(lambda study_id: _study(study_id))
def mturk(request: HttpRequest, study_id) -> HttpResponse:
    """MTurk's ExternalQuestion, shown in a frame on MTurk's site (so every answer here
    may be framed by MTurk)."""
    study = _study(study_id)
    assignment_id = request.GET.get("assignmentId", "")
    if assignment_id == MTURK_PREVIEW:
        example = selectors.example_item(study)
        context: dict = {"study": study, "example": example}
        if example is not None:
            shown = list(range(len(example.output_list())))  # system order
            context |= selectors.task_page(study, example, shown)
        return _framed(render(request, "annotator/preview.html", context))
    worker = request.GET.get("workerId", "")
    submit_to = request.GET.get("turkSubmitTo", "").rstrip("/")
    if not PLATFORM_ID.fullmatch(worker) or not PLATFORM_ID.fullmatch(assignment_id):
        return _framed(
            _message(request, _("Incomplete link"), _("The HIT link lacks your worker id."), 400)
        )
    if submit_to not in settings.HUMEVAL_MTURK_SUBMIT_HOSTS:
        return _framed(
            _message(
                request, _("Incomplete link"), _("The HIT link has no valid turkSubmitTo."), 400
            )
        )
    return _framed(
        _start(
            request,
            study,
            platform="mturk",
            external_id=worker,
            session=assignment_id,
            return_url=submit_to,
        )
    )


@require_http_methods(["GET"])
@participant_view
def instructions(request: HttpRequest, study: Study, participation: Participation) -> HttpResponse:
    context = {
        "study": study,
        "participation": participation,
        "instructions": study_instructions(study, get_language()),
    }
    return render(request, "annotator/instructions.html", context)


@require_http_methods(["GET", "POST"])
@participant_view
def qualify(request: HttpRequest, study: Study, participation: Participation) -> HttpResponse:
    """The test's next question, shown as a task of the test's kind (the kind's own
    template); a POST records the answer and redirects to the next one. An answer the kind
    refuses is shown over the same question with status 400 and nothing is stored."""
    status = 200
    if request.method == "POST":
        try:
            question_id = int(request.POST.get("question", ""))
        except ValueError:
            question_id = -1
        try:
            services.qualification_answer(
                participation, question_id=question_id, data=_posted(request.POST)
            )
            return redirect("annotator:qualify", study_id=study.public_id)
        except InvalidAnswer as exc:
            messages.error(request, _(exc.message))
            status = exc.status
        except ServiceError as exc:
            messages.error(request, _(exc.message))
            return redirect("annotator:qualify", study_id=study.public_id)
    step = services.qualification_next(participation)
    if step is None:
        return redirect("annotator:task", study_id=study.public_id)
    question = step["question"]
    page = selectors.qualification_page(question.test, question, step["display_order"])
    context = {"study": study, "step": step, "question": question, "preview": False, **page}
    return render(request, "annotator/qualify.html", context, status=status)


@require_http_methods(["GET", "POST"])
@participant_view
def task(request: HttpRequest, study: Study, participation: Participation) -> HttpResponse:
    """The current task; a POST stores the answer and answers with the next task, so one
    request makes one annotation cycle (a repeated POST stores nothing twice)."""
    if participation.status == Participation.Status.QUALIFYING:
        return redirect("annotator:qualify", study_id=study.public_id)
    posted = request.method == "POST"
    if posted and not throttle.allow(
        "submit", str(participation.pk), settings.HUMEVAL_THROTTLE_SUBMIT
    ):
        return _too_many(request)
    looks = 0 if posted else _looks(request.GET.get("look"))
    seconds = 0
    # the waiting page's look first asks whether a round is being decided: until the
    # decision opens the next round there is nothing to lease, so it tries no lease
    outlook = selectors.work_outlook(study) if looks else None
    try:
        if outlook is Outlook.IMMINENT:
            services.check_may_work(participation)  # a blocked worker still gets the end page
            task, status = None, 200
        elif posted:
            task, status = _answer_or_next(request, participation)
        else:
            task, status = _next(participation), 200
        if task is None:
            if outlook is not Outlook.IMMINENT:  # the lease tried may have closed the round
                outlook = selectors.work_outlook(study)
            if outlook is not Outlook.NONE and selectors.quota_reached(participation):
                outlook = Outlook.NONE  # their items are done: the end page gives the code
            seconds = _wait_seconds(outlook, looks)
            if posted and outlook is not Outlook.NONE and settings.CELERY_TASK_ALWAYS_EAGER:
                # one more look: the embedded mode decides the round this answer completed
                # as it committed, and that round's work is this worker's next task (a
                # Celery worker decides it later: the waiting page looks again)
                task = _next(participation)
    except WorkerBlocked:  # blocked, failed or not qualified: the end page says which
        return redirect("annotator:end", study_id=study.public_id)
    if task is None:
        if seconds:
            context = {"study": study, "seconds": seconds, "look": looks + 1}
            return render(request, "annotator/wait.html", context)
        return redirect("annotator:end", study_id=study.public_id)
    assignment = task.assignment
    item = assignment.item
    context = {
        "study": study,
        "assignment": assignment,
        "input": item.input,
        "progress": selectors.worker_progress(study, task.done),
        "heartbeat_seconds": settings.HUMEVAL_LEASE_HEARTBEAT_SECONDS,
        "preview": False,
        **selectors.task_page(study, item, assignment.display_order),
    }
    return render(request, "annotator/task.html", context, status=status)


def _wait_seconds(outlook: Outlook, looks: int) -> int:
    """For a worker with no task whose waiting page has looked ``looks`` times: after how
    many seconds it looks again, or 0 when no more work is coming (the end page). The page
    waits, no web process does: soon at first and while a complete round is being decided
    (its next round opens within a moment), otherwise less often each time, so waiting for
    other workers' last answers, or a decision that is late (no Celery worker), costs no
    more looks than one every ``WAIT_SECONDS``."""
    if outlook is Outlook.NONE:
        return 0
    if outlook is Outlook.IMMINENT and looks < WAIT_SECONDS:
        return FIRST_WAIT_SECONDS
    return min(WAIT_SECONDS, FIRST_WAIT_SECONDS + looks)


def _looks(value: str | None) -> int:
    """The waiting page's count of looks from its refresh URL: one to three ASCII digits
    (anything else: 0)."""
    if not value or len(value) > 3 or not (value.isascii() and value.isdigit()):
        return 0
    return min(int(value), WAIT_SECONDS)


def _next(participation: Participation) -> services.Task | None:
    return services.task_next(participation=participation)


def _answer_or_next(
    request: HttpRequest, participation: Participation
) -> tuple[services.Task | None, int]:
    """Store the posted answer and lease the next task; a refused answer is shown as a
    message over the task the worker still has (or their next one), with status 400 when
    the study's kind refused the answer itself (nothing is stored)."""
    try:
        task = _answer(request.POST, participation)
        if task is not None and task.answered_before:
            messages.info(request, ALREADY_ANSWERED)
        return task, 200
    except WorkerBlocked:
        raise
    except InvalidAnswer as exc:
        messages.error(request, _(exc.message))
        return _next(participation), exc.status
    except ServiceError as exc:
        messages.error(request, _(exc.message))
        return _next(participation), 200


def _posted(post) -> dict:
    """The posted form as the kind reads it: every field (a list where a name repeats, which
    the kind refuses as one answer: ``kinds.base.once``), with the ``score-<criterion>``
    fields gathered as ``scores``."""
    data: dict = {
        key: values if len(values) > 1 else values[0]
        for key, values in post.lists()
        if key not in ("csrfmiddlewaretoken", "token", "time_ms", "question")
    }
    data["scores"] = {
        key.removeprefix("score-"): value for key, value in data.items() if key.startswith("score-")
    }
    return data


def _answer(post, participation: Participation) -> services.Task | None:
    """Store the posted answer (:func:`_posted`) and lease the next task."""
    data = _posted(post)
    try:
        time_ms = int(post.get("time_ms", "")) if post.get("time_ms") else None
    except ValueError:
        time_ms = None
    return services.task_answer(
        participation=participation,
        token=post.get("token", ""),
        data=data,
        time_spent_ms=time_ms,
    )


@require_POST
@participant_view
def renew(request: HttpRequest, study: Study, participation: Participation) -> JsonResponse:
    """The open task page's heartbeat: keeps the worker's own lease from being handed to
    another worker as idle (``services.assignment_renew``); throttled per worker."""
    if not throttle.allow("renew", str(participation.pk), settings.HUMEVAL_THROTTLE_RENEW):
        return JsonResponse({"error": "too_many_requests"}, status=429)
    try:
        services.assignment_renew(participation=participation, token=request.POST.get("token", ""))
    except AssignmentExpired as exc:
        # a page left open after its task was answered (a second tab, Back): an expected
        # answer, not an error; the page tells the worker where their task is now
        return JsonResponse({"renewed": False, "error": exc.code, "detail": _(exc.message)})
    except ServiceError as exc:
        return JsonResponse({"error": exc.code, "detail": _(exc.message)}, status=exc.status)
    return JsonResponse({"renewed": True})


@require_http_methods(["GET", "POST"])
@participant_view
def end(request: HttpRequest, study: Study, participation: Participation) -> HttpResponse:
    """The way back: the completion, fail or no-work code (Prolific's redirect, MTurk's
    submit form) once it is due; before that, what is left and a way back to work or to
    stop without a code (a POST)."""
    if request.method == "POST":
        services.participation_stop(participation)
        return redirect("annotator:end", study_id=study.public_id)
    outcome = services.participation_finish(participation)
    code, platform = outcome["code"], participation.annotator.platform
    context = {"study": study, "outcome": outcome, "code": code, "platform": platform}
    if outcome["code_due"] and platform == "prolific" and code:
        # the page shows the code and a link back, and takes the worker back by itself in
        # a moment: the code stays readable if the way back fails
        context["prolific_return"] = (
            f"{settings.HUMEVAL_PROLIFIC_COMPLETE_URL}?{urlencode({'cc': code})}"
        )
        context["return_seconds"] = PROLIFIC_RETURN_SECONDS
    if (
        outcome["code_due"]
        and platform == "mturk"
        and participation.return_url in settings.HUMEVAL_MTURK_SUBMIT_HOSTS
    ):
        context["mturk_action"] = participation.return_url + "/mturk/externalSubmit"
        context["mturk_assignment"] = participation.platform_session
    return render(request, "annotator/end.html", context)


_JS_CATALOG = JavaScriptCatalog.as_view(packages=["annotator", "kinds"])


@require_safe
@cache_control(max_age=3600, public=True)
def js_catalog(request: HttpRequest, language: str) -> HttpResponse:
    """The worker pages' script strings in ``language`` (Django's JavaScript catalog, the
    ``djangojs`` domain of ``locale/``): ``gettext``/``interpolate`` for the kinds' scripts."""
    if language not in dict(settings.LANGUAGES):
        raise Http404("no such language")
    with translation.override(language):
        return _JS_CATALOG(request)
