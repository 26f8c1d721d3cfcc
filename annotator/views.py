"""Worker pages: enter through a link, then one item at a time. No logic beyond HTTP."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from . import selectors, services
from .errors import ServiceError, WorkerBlocked
from .models import Annotator, Study

SESSION_KEY = "humeval_workers"


def _study(study_id) -> Study:
    return get_object_or_404(Study, public_id=study_id)


def _session_annotator(request: HttpRequest, study: Study) -> Annotator | None:
    pk = request.session.get(SESSION_KEY, {}).get(str(study.public_id))
    return Annotator.objects.filter(pk=pk).first() if pk else None


@require_http_methods(["GET"])
def enter(request: HttpRequest, study_id) -> HttpResponse:
    """``/w/<study>/?worker=<id>``: remember who this is, then go to the task page."""
    study = _study(study_id)
    worker = request.GET.get("worker", "")
    if not worker:
        if _session_annotator(request, study):
            return redirect("annotator:task", study_id=study.public_id)
        return render(
            request,
            "annotator/message.html",
            {
                "title": "Incomplete link",
                "text": "This link does not say who you are. Open the link you were given.",
            },
            status=400,
        )
    try:
        annotator = services.annotator_enter(platform="link", external_id=worker)
    except ServiceError as exc:
        return render(
            request,
            "annotator/message.html",
            {"title": "Incomplete link", "text": exc.message},
            status=400,
        )
    request.session.cycle_key()
    workers = request.session.get(SESSION_KEY, {})
    workers[str(study.public_id)] = annotator.pk
    request.session[SESSION_KEY] = workers
    return redirect("annotator:task", study_id=study.public_id)


@require_http_methods(["GET", "POST"])
def task(request: HttpRequest, study_id) -> HttpResponse:
    study = _study(study_id)
    annotator = _session_annotator(request, study)
    if annotator is None:
        return render(
            request,
            "annotator/message.html",
            {"title": "Who are you?", "text": "Open this study through the link you were given."},
            status=403,
        )
    if request.method == "POST":
        return _submit(request, study, annotator)
    try:
        assignment = services.assignment_next(study=study, annotator=annotator)
    except WorkerBlocked as exc:
        return render(
            request,
            "annotator/message.html",
            {"title": "Access withdrawn", "text": exc.message},
            status=403,
        )
    if assignment is None:
        return render(
            request,
            "annotator/message.html",
            {
                "title": "All done",
                "text": "There is no more work for you in this study. Thank you!",
            },
        )
    item = assignment.item
    outputs = [item.output_a, item.output_b] if item.output_b_id else [item.output_a]
    if item.output_b_id and not assignment.left_is_a:
        outputs.reverse()
    context = {
        "study": study,
        "assignment": assignment,
        "input": item.input,
        "outputs": [o.text for o in outputs],
        "answers": study.pairwise_answers(),
        "criteria": list(study.criteria.all()),
        "progress": selectors.worker_progress(study, annotator),
    }
    return render(request, "annotator/task.html", context)


def _submit(request: HttpRequest, study: Study, annotator: Annotator) -> HttpResponse:
    post = request.POST
    scores = {
        key.removeprefix("score-"): value for key, value in post.items() if key.startswith("score-")
    }
    try:
        time_ms = int(post.get("time_ms", "")) if post.get("time_ms") else None
    except ValueError:
        time_ms = None
    try:
        services.annotation_submit(
            annotator=annotator,
            token=post.get("token", ""),
            answer=post.get("answer"),
            scores=scores,
            time_spent_ms=time_ms,
        )
    except WorkerBlocked as exc:
        return render(
            request,
            "annotator/message.html",
            {"title": "Access withdrawn", "text": exc.message},
            status=403,
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("annotator:task", study_id=study.public_id)
