"""The worker pages' language (docs/languages.md): a study's own language, the others a
worker may switch to, and the one a request is served in. Reads nothing from the database:
the study is already loaded with the participation."""

from __future__ import annotations

from collections.abc import Iterable
from functools import wraps
from uuid import UUID

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation
from django.utils.translation import gettext_noop

#: Worker-facing texts that come from the kinds (pure modules without Django) or from
#: services as data, translated where they are shown (``{% translate label %}``,
#: ``gettext(exc.message)``); listed here so that the catalogs hold them
#: (``tests/unit/test_languages.py`` checks the kinds' own texts against this list).
WORKER_TEXTS = (
    # kinds.pairwise / kinds.criteria answer captions
    gettext_noop("Left is better"),
    gettext_noop("Right is better"),
    gettext_noop("Tie"),
    gettext_noop("Both good"),
    gettext_noop("Both bad"),
    gettext_noop("Left is much better"),
    gettext_noop("About the same"),
    gettext_noop("Right is much better"),
    gettext_noop("Response 1 is much better"),
    gettext_noop("Response 1 is better"),
    gettext_noop("Response 2 is better"),
    gettext_noop("Response 2 is much better"),
    gettext_noop("Which response is better?"),
    # kinds.likert's default criterion
    gettext_noop("Overall quality"),
    gettext_noop("very poor"),
    gettext_noop("excellent"),
    # answers the kinds or the services refuse, shown over the task
    gettext_noop("Please write a short reason for your answer."),
    gettext_noop("Order the responses before submitting."),
    gettext_noop("This study does not allow ties: give every response its own place."),
    gettext_noop("give the response a score from 0 to 100"),
    gettext_noop("the score must be a whole number from 0 to 100"),
    gettext_noop("This task does not exist or is not yours."),
    gettext_noop("This task is no longer yours: it was answered or its time ran out."),
    gettext_noop(
        "The time for this task ran out and it was given to someone else; "
        "your answer was not stored. Continue with the next task."
    ),
)

#: The query parameter that switches a worker's language (kept in a cookie per study).
PARAM = "lang"


class LanguageError(ValueError):
    """A language code the platform has no catalog for."""


def supported(code: str) -> str:
    """The platform's code for the BCP 47 tag ``code`` (``zh-Hans`` → ``zh-hans``, ``de-AT``
    → ``de``); :class:`LanguageError` when no shipped catalog fits."""
    if not isinstance(code, str) or not code.strip():
        raise LanguageError("a language is a BCP 47 code such as 'ar'")
    try:
        return translation.get_supported_language_variant(code.strip().lower())
    except LookupError:
        names = ", ".join(c for c, _ in settings.LANGUAGES)
        raise LanguageError(f"no worker pages in '{code}' (available: {names})") from None


def language_list(language: str, others: Iterable[str] | None) -> list[str]:
    """The study's language first, then the other allowed ones, each once; raises
    :class:`LanguageError` on a code without a catalog or a list that is not one."""
    if others is not None and (isinstance(others, str) or not isinstance(others, list | tuple)):
        raise LanguageError('\'languages\' is a list of codes, e.g. ["en", "fr"]')
    return list(dict.fromkeys(supported(c) for c in [language or "en", *(others or [])]))


def study_languages(study) -> list[str]:
    """The study's allowed worker languages (its own first); an invalid stored code falls
    back to English rather than failing a worker's page."""
    try:
        return language_list(study.language, study.languages)
    except LanguageError:
        return [settings.LANGUAGE_CODE]


def choices(study) -> list[dict]:
    """The language switch's entries: code, own name, direction."""
    names = dict(settings.LANGUAGES)
    return [
        {"code": c, "name": names[c], "bidi": translation.get_language_info(c)["bidi"]}
        for c in study_languages(study)
    ]


def study_instructions(study, language: str) -> str:
    """The researcher's instructions for a worker reading ``language``: that language's own
    version when the study has one (``instructions_by_language``), else the instructions as
    written."""
    own = study.instructions_by_language or {}
    return own.get(language) or study.instructions


def cookie_name(study_id) -> str:
    return f"humeval-lang-{UUID(str(study_id)).hex}"


def chosen(request: HttpRequest, study) -> tuple[str, bool]:
    """The language to serve ``request`` in and whether the worker has just chosen it
    (``?lang=``): a chosen or remembered allowed language, else the study's."""
    allowed = study_languages(study)
    asked = request.GET.get(PARAM)
    for value, fresh in ((asked, True), (request.COOKIES.get(cookie_name(study.public_id)), False)):
        if value:
            try:
                code = supported(value)
            except LanguageError:
                continue
            if code in allowed:
                return code, fresh
    return allowed[0], False


def in_language(request: HttpRequest, study, render) -> HttpResponse:
    """Call ``render()`` with the worker's language active; remember a fresh choice in a
    cookie sent only to the study's pages."""
    code, fresh = chosen(request, study)
    request.humeval_languages = choices(study)
    with translation.override(code):
        response = render()
    response.headers.setdefault("Content-Language", code)
    if fresh:
        response.set_cookie(
            cookie_name(study.public_id),
            code,
            max_age=settings.SESSION_COOKIE_AGE,
            path=f"/w/{study.public_id}/",
            secure=settings.SESSION_COOKIE_SECURE,
            httponly=True,
            samesite="Lax",
        )
    return response


def study_language_view(load_study):
    """Decorate an entry view ``view(request, study_id, …)`` so that it answers in the
    study's (or the worker's chosen) language; ``load_study(study_id)`` gives the study."""

    def decorate(view):
        @wraps(view)
        def wrapped(request: HttpRequest, study_id, *args, **kwargs) -> HttpResponse:
            study = load_study(study_id)
            return in_language(request, study, lambda: view(request, study_id, *args, **kwargs))

        return wrapped

    return decorate
