"""Strict parsing of an LLM judge's error-span answer (ESA^AI: Zouhar, Kocmi & Sachan 2025,
arXiv 2406.12419: a judge proposes error spans that humans then accept, edit or delete).

Pure (no Django). The answer is untrusted model text. It must hold one JSON value (bare or
in a fenced code block): a list of spans, or an object with a ``spans`` or ``errors`` list.
A span is an object with ``severity`` (``minor`` or ``major``) and either offsets
``start``/``end`` into the output (checked: ``0 <= start < end <= len(text)``, and a
``text``/``quote`` given with them must equal ``text[start:end]``) or only a quoted
substring (``text`` or ``quote``), located in the output (the first occurrence not yet
taken by an earlier span). Spans may not overlap. An empty list means the judge found no
error. Anything else is *unparseable*: :func:`parse_judge_spans` then returns no spans, the
reason and the raw answer, which the caller keeps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_ANSWER", "ParsedSpans", "parse_judge_spans"]

SEVERITIES = ("minor", "major")
#: Longest answer read (characters); a longer one is unparseable.
MAX_ANSWER = 200_000
MAX_SPANS = 100
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


@dataclass(frozen=True)
class ParsedSpans:
    """``spans``: validated spans (``start``, ``end``, ``severity``, ``text``) sorted by
    start, or ``None`` when the answer is unparseable; ``error``: why; ``raw``: the answer."""

    spans: list[dict[str, Any]] | None
    error: str = ""
    raw: str = ""
    located: int = 0  # spans placed by their quote (no offsets given)
    notes: list[str] = field(default_factory=list)

    @property
    def error_free(self) -> bool:
        return self.spans == []


def _fail(raw: str, why: str) -> ParsedSpans:
    return ParsedSpans(None, why, raw)


def _load(answer: str) -> Any:
    text = answer.strip()
    fenced = _FENCE.findall(text)
    if len(fenced) > 1:
        raise ValueError("several code blocks")
    if fenced:
        text = fenced[0].strip()
    return json.loads(text)


def parse_judge_spans(answer: str, text: str) -> ParsedSpans:
    """Parse ``answer`` (the judge's reply) against the output ``text`` it annotated."""
    raw = answer if isinstance(answer, str) else ""
    if not isinstance(answer, str) or not answer.strip():
        return _fail(raw, "empty answer")
    if len(answer) > MAX_ANSWER:
        return _fail(raw, f"answer longer than {MAX_ANSWER} characters")
    try:
        doc = _load(answer)
    except (ValueError, RecursionError) as exc:
        return _fail(raw, f"not one JSON value: {str(exc)[:80]}")
    if isinstance(doc, dict):
        keys = [k for k in ("spans", "errors") if k in doc]
        if len(keys) != 1:
            return _fail(raw, "an object needs exactly one of 'spans' or 'errors'")
        doc = doc[keys[0]]
    if not isinstance(doc, list):
        return _fail(raw, "spans must be a list")
    if len(doc) > MAX_SPANS:
        return _fail(raw, f"more than {MAX_SPANS} spans")
    spans: list[dict[str, Any]] = []
    taken: list[tuple[int, int]] = []
    located = 0
    for n, span in enumerate(doc, 1):
        if not isinstance(span, dict):
            return _fail(raw, f"span {n} is not an object")
        sev = span.get("severity")
        sev = sev.strip().lower() if isinstance(sev, str) else sev
        if sev not in SEVERITIES:
            return _fail(raw, f"span {n}: severity must be minor or major")
        quote = span.get("text", span.get("quote"))
        if quote is not None and not isinstance(quote, str):
            return _fail(raw, f"span {n}: the quote must be a string")
        start, end = span.get("start"), span.get("end")
        has_offsets = start is not None or end is not None
        if has_offsets:
            if not (type(start) is int and type(end) is int):
                return _fail(raw, f"span {n}: start and end must be integers")
            if not 0 <= start < end <= len(text):
                return _fail(raw, f"span {n}: offsets {start}-{end} outside the text")
            if quote is not None and text[start:end] != quote:
                return _fail(raw, f"span {n}: the quote does not match the text at {start}-{end}")
        else:
            if not quote:
                return _fail(raw, f"span {n}: neither offsets nor a quote")
            start = _locate(text, quote, taken)
            if start is None:
                return _fail(raw, f"span {n}: the quote is not in the text")
            end = start + len(quote)
            located += 1
        taken.append((start, end))
        spans.append({"start": start, "end": end, "severity": sev, "text": text[start:end]})
    spans.sort(key=lambda s: s["start"])
    for a, b in zip(spans, spans[1:], strict=False):
        if b["start"] < a["end"]:
            return _fail(raw, f"spans {a['start']}-{a['end']} and {b['start']}-{b['end']} overlap")
    return ParsedSpans(spans, "", raw, located)


def _locate(text: str, quote: str, taken: list[tuple[int, int]]) -> int | None:
    """The first occurrence of ``quote`` that overlaps no span already placed."""
    pos = text.find(quote)
    while pos >= 0:
        end = pos + len(quote)
        if all(end <= s or pos >= e for s, e in taken):
            return pos
        pos = text.find(quote, pos + 1)
    return None
