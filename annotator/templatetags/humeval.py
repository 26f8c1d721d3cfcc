from django import template
from django.utils.safestring import SafeString

from annotator.rendering import render_untrusted

register = template.Library()


@register.simple_tag
def untrusted(text: str, markdown: bool = True) -> SafeString:
    """``{% untrusted output.text markdown=study.render_markdown %}``"""
    return render_untrusted(text or "", markdown)
