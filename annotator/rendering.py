"""Model outputs are untrusted: escaped plain text, or Markdown sanitised by nh3."""

from functools import lru_cache

import nh3
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    # Raw HTML in the source is not passed through; nh3 then cleans what Markdown made.
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


#: Rendered texts kept per process. A task page shows an input and two outputs, and the
#: same input comes with every pair of systems and every worker who gets it (fill-first:
#: an item's workers come one after another), so most renders are repeats; a pure function
#: of the text, so a cached result is exactly what rendering again would give.
RENDER_CACHE_SIZE = 2048


def render_untrusted(text: str, markdown: bool = True) -> SafeString:
    """HTML for a model output or any other text that workers or researchers did not write."""
    if not markdown:
        return render_to_string("annotator/_plain.html", {"text": text})
    return _render_markdown(text)


@lru_cache(maxsize=RENDER_CACHE_SIZE)
def _render_markdown(text: str) -> SafeString:
    html = _markdown().render(text)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
