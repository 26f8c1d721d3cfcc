from functools import lru_cache

from django import template
from django.template.loader import render_to_string
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.safestring import SafeString
from django.utils.translation import get_language, gettext, override

from annotator.rendering import render_untrusted

register = template.Library()


@register.simple_tag
def untrusted(text: str, markdown: bool = True) -> SafeString:
    """``{% untrusted output.text markdown=study.render_markdown %}``"""
    return render_untrusted(text or "", markdown)


@register.simple_tag
def cached_url(name: str, *args) -> str:
    """``{% url name arg … %}`` reversed once per process for each name and arguments (the
    worker pages' links, reversed on every page otherwise)."""
    return _reverse(name, tuple(str(a) for a in args), get_script_prefix(), get_urlconf())


@lru_cache(maxsize=4096)
def _reverse(name: str, args: tuple[str, ...], prefix: str, urlconf: str | None) -> str:
    return reverse(name, args=args, urlconf=urlconf)


@register.simple_tag
def answer_buttons(answers, disabled: bool = False) -> SafeString:
    """``annotator/_answers.html`` for these answers: rendered once per process for each set
    of answers (every page of a study has the same), then reused. The fragment depends on
    nothing but the answers' values and labels, ``disabled`` and the language, which form
    the key."""
    key = tuple((str(a.value), str(a.label)) for a in answers)
    return _answer_buttons(key, bool(disabled), get_language())


@lru_cache(maxsize=64)
def _answer_buttons(
    answers: tuple[tuple[str, str], ...], disabled: bool, language: str | None
) -> SafeString:
    shown = [{"value": value, "label": label} for value, label in answers]
    with override(language):
        return render_to_string("annotator/_answers.html", {"answers": shown, "disabled": disabled})


@register.filter
def is_conversation(value) -> bool:
    """Whether a shown text is a conversation (``formats.conversation.Conversation``); a
    filter, as ``{% if text.is_conversation %}`` fails its lookup on a plain text, and a
    failed lookup costs more than the rest of the fragment."""
    return getattr(value, "is_conversation", False) is True


@register.filter
def worker_text(value):
    """A text the platform may have put into the page (a kind's default caption) in the
    worker's language when the catalog has it; anything else (a number, the researcher's
    own wording) as it is."""
    return gettext(value) if isinstance(value, str) and value else value
