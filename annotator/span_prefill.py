"""The database side of judge-prefilled error spans (:mod:`kinds.span_prefill`): which
suggestions an item shows. An item is in the control share (shown without suggestions) by a
draw seeded by the study and item, so a reload or the submit sees the same; otherwise it
shows sample 0 of the chosen judge's parsed proposal for the item's output. The judge's name
never reaches the page: only offsets, severities and texts."""

from __future__ import annotations

import random
from typing import Any

from kinds.span_prefill import SHOWN

from .models import Item, JudgeRating, Study


def in_control(study: Study, item: Item, share: float) -> bool:
    """Whether the item is in the control share (drawn per study and item)."""
    return share > 0 and random.Random(f"prefill:{study.pk}:{item.pk}").random() < share


def shown(study: Study, item: Item, opts: dict[str, Any]) -> dict[str, Any] | None:
    """``{"state": "shown"|"control"|"none", "spans": [...]}`` for a study with
    ``prefill_spans`` on, else None."""
    if opts.get("prefill_spans") != "on":
        return None
    if in_control(study, item, float(opts.get("prefill_control_share") or 0)):
        return {"state": "control", "spans": []}
    outputs = item.output_list()
    if len(outputs) != 1:
        return {"state": "none", "spans": []}
    proposed = judge_spans(study, item.input_id, outputs[0].system_id, opts)
    if proposed is None:
        return {"state": "none", "spans": []}
    spans = [{k: s[k] for k in ("start", "end", "severity", "text")} for s in proposed]
    return {"state": "shown", "spans": spans}


def judge_spans(
    study: Study, input_id: int, system_id: int, opts: dict[str, Any]
) -> list[dict] | None:
    """The spans the chosen judge (``prefill_judge``, else the first by name) proposed for
    the output in sample 0, or None when no parsed proposal is stored ([]: error-free)."""
    ratings = JudgeRating.objects.filter(
        study=study,
        input_id=input_id,
        system_id=system_id,
        other_system__isnull=True,
        sample=0,
        parse_ok=True,
        proposal__has_key="spans",
    )
    if opts.get("prefill_judge"):
        ratings = ratings.filter(judge=opts["prefill_judge"])
    rating = ratings.order_by("judge", "id").only("proposal").first()
    return None if rating is None else list(rating.proposal["spans"])


def answer_options(study: Study, item: Item, opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` with what the item showed, for the kind's ``parse_answer``."""
    what = shown(study, item, opts)
    return opts if what is None else {**opts, SHOWN: what}


def page_context(study: Study, item: Item, opts: dict[str, Any]) -> dict[str, Any]:
    """The task page's ``span_prefill`` (whether spans are suggested) and
    ``span_suggestions`` (a list; ``None`` without prefill)."""
    what = shown(study, item, opts)
    if what is None:
        return {"span_prefill": False, "span_suggestions": None}
    return {"span_prefill": True, "span_suggestions": what["spans"]}
