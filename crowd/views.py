"""The hook endpoint Prolific calls, and the admin's Crowd panel."""

from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from annotator.selectors import studies_visible_to

from . import hooks, platforms, services
from .client import CrowdError
from .models import CrowdStudy, LedgerEntry

#: Largest hook body accepted.
MAX_HOOK_BYTES = 64 * 1024


@csrf_exempt
@require_POST
def prolific_hook(request: HttpRequest, study_id) -> HttpResponse:
    crowd = get_object_or_404(CrowdStudy, study__public_id=study_id, platform="prolific")
    body = request.body
    if len(body) > MAX_HOOK_BYTES:
        return JsonResponse({"error": "too large"}, status=413)
    try:
        outcome = hooks.receive(
            crowd,
            request.headers.get("X-Prolific-Request-Timestamp", ""),
            request.headers.get("X-Prolific-Request-Signature", ""),
            body,
        )
    except hooks.Refused as exc:
        return JsonResponse({"error": str(exc)}, status=exc.status)
    return JsonResponse({"ok": outcome})


ACTIONS = (
    "publish",
    "pause",
    "resume",
    "sync",
    "add_places",
    "review",
    "confirm",
    "bonus",
    "settle",
)


@staff_member_required
@require_http_methods(["GET", "POST"])
def panel(request: HttpRequest, pk: int) -> HttpResponse:
    """One study's Crowd panel: the remote study, places, spend against the budget,
    submissions awaiting review with their proposals, the bonus preview, the ledger."""
    visible = studies_visible_to(request.user)  # being staff grants no study
    crowd = get_object_or_404(
        CrowdStudy.objects.select_related("study"), pk=pk, study__in=visible.values("pk")
    )
    if request.method == "POST":
        if not request.user.has_perm("crowd.change_crowdstudy"):
            return HttpResponse("You may not act on this study's crowd platform.", status=403)
        action = request.POST.get("action", "")
        if action not in ACTIONS:
            return HttpResponse("Unknown action", status=400)
        try:
            _act(request, crowd, action)
        except CrowdError as exc:  # refused (bad input, budget, the platform): said, 400
            messages.error(request, f"{action}: {exc}")
            crowd.refresh_from_db()
            return _panel(request, crowd, status=400)
        return redirect("crowd:panel", pk=crowd.pk)
    return _panel(request, crowd)


def _panel(request: HttpRequest, crowd: CrowdStudy, status: int = 200) -> HttpResponse:
    platform = platforms.of(crowd)
    awaiting = list(crowd.submissions.filter(status=services.AWAITING))
    for sub in awaiting:  # a proposal the platform cannot carry out starts unchecked
        sub.preselected = sub.proposal in platform.decisions
    return render(
        request,
        "crowd/panel.html",
        {
            **admin.site.each_context(request),
            "crowd": crowd,
            "status": services.status(crowd),
            "awaiting": awaiting,
            "submissions": crowd.submissions.exclude(status=services.AWAITING),
            "preview": services.bonus_preview(crowd),
            "ledger": crowd.ledger.order_by("-id")[:50],
            "title": f"Crowd: {crowd.study}",
            "lacks": platform.lacks,
        },
        status=status,
    )


def _act(request: HttpRequest, crowd: CrowdStudy, action: str) -> None:
    platform = platforms.of(crowd)
    platform.refuse(action)
    if action == "publish":
        platform.publish(crowd, request.build_absolute_uri("/"))
        messages.success(request, f"Published with {crowd.places} places.")
    elif action in ("pause", "resume"):
        getattr(platform, action)(crowd)
        messages.success(request, f"Study {crowd.remote_status.lower()}.")
    elif action == "sync":
        result = platform.sync(crowd)
        messages.success(request, f"Places {result['places']}.")
    elif action == "add_places":
        try:
            extra = int(request.POST.get("extra", ""))
        except ValueError:
            raise CrowdError("Give the number of places to add") from None
        messages.success(request, f"Places {platform.add_places(crowd, extra)}.")
    elif action == "review":
        n = platform.poll(crowd)
        messages.success(request, f"{n} submissions read; proposals updated.")
    elif action == "confirm":
        chosen = request.POST.getlist("submission")
        subs = crowd.submissions.filter(status=services.AWAITING, pk__in=chosen)
        done = platform.decide(crowd, list(subs))
        messages.success(request, ", ".join(f"{v} {k}" for k, v in done.items()))
    elif action == "bonus":
        entry = platform.bonus_pay(crowd)
        messages.success(
            request,
            "No bonuses due." if entry is None else f"Bonuses: {entry.get_state_display()}.",
        )
    elif action == "settle":
        entry = get_object_or_404(LedgerEntry, crowd=crowd, pk=request.POST.get("entry"))
        services.settle(entry, paid=request.POST.get("paid") == "1")
        messages.success(request, "Settled.")
