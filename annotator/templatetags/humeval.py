from functools import lru_cache

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from annotator.rendering import render_untrusted

register = template.Library()


@register.simple_tag
def untrusted(text: str, markdown: bool = True) -> SafeString:
    """``{% untrusted output.text markdown=study.render_markdown %}``"""
    return render_untrusted(text or "", markdown)


@register.simple_tag
def answer_buttons(answers, disabled: bool = False) -> SafeString:
    """``annotator/_answers.html`` for these answers: rendered once per process for each set
    of answers (every page of a study has the same), then reused. The fragment depends on
    nothing but the answers' values and labels and ``disabled``, which form the key."""
    key = tuple((str(a.value), str(a.label)) for a in answers)
    return _answer_buttons(key, bool(disabled))


@lru_cache(maxsize=64)
def _answer_buttons(answers: tuple[tuple[str, str], ...], disabled: bool) -> SafeString:
    shown = [{"value": value, "label": label} for value, label in answers]
    return render_to_string("annotator/_answers.html", {"answers": shown, "disabled": disabled})
