"""Judge-prefilled error spans (ESA^AI: Zouhar, Kocmi & Sachan 2025, arXiv 2406.12419): the
study option ``prefill_spans`` (``"off"``, default, or ``"on"``) shows the spans a judge
proposed (``run_judge``, kept in ``JudgeRating.proposal``) as pre-marked spans the worker
accepts (leaves), edits (changes the severity, its boundaries or both) or deletes;
``prefill_control_share`` (0-1,
default 0) is the share of items shown without suggestions, drawn per item, so the report can
compare; ``prefill_judge`` names the judge whose spans are shown (default: the first by name).
``prefill_skip_clean`` (bool, default false) skips the items whose judge proposal parsed with
no span, except a control share ``prefill_skip_control_share`` (0-1, default 0.1) that workers
still see (:mod:`annotator.prefill_skip`).

Pure: the server passes what the item showed as ``opts[SHOWN]`` (``{"state": ..., "spans":
[...]}``; :mod:`annotator.span_prefill` reads it from the database). The form sends every
span with ``origin`` (``judge`` or ``worker``) and ``action`` (``accepted``, ``edited``,
``deleted`` or ``new``) and, for a suggestion, its index ``suggestion``; an ``edited`` one
also says ``resized`` (true when its start or end differ from the suggestion's; absent means
false). A boundary edit is an edit: ``action`` stays ``edited`` (the severity may have changed
too) and the stored span keeps ``resized: true`` with the suggestion's own offsets in
``suggested_start``/``suggested_end`` (from what the server showed, never from the form), so
the analysis tells re-grades from boundary edits and compares the judge's spans as proposed.
Accepted and deleted suggestions must be left exactly as shown. Stored answer::

    {"spans": [{..., "origin": "judge", "action": "accepted", "suggestion": 0},
               {..., "origin": "judge", "action": "edited", "suggestion": 1,
                "resized": true, "suggested_start": 19, "suggested_end": 22}, ...],
     "deleted": [{"start", "end", "severity", "category", "text", "suggestion"}],
     "prefill": "shown" | "control" | "none", "score": 70}

``prefill``: ``shown`` (suggestions shown, possibly none: the judge found no error),
``control`` (in the control share: none shown), ``none`` (the judge gave nothing usable).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from kinds.base import AnswerError

OPTION_KEYS = (
    "prefill_spans",
    "prefill_control_share",
    "prefill_judge",
    "prefill_skip_clean",
    "prefill_skip_control_share",
)
#: The skip options (:func:`validate_skip_options`).
SKIP_KEYS = ("prefill_skip_clean", "prefill_skip_control_share")
SKIP_CONTROL_SHARE = 0.1
#: The key of ``opts`` under which the server passes what the item showed.
SHOWN: Final = "_prefill_shown"
ORIGINS = ("judge", "worker")
JUDGE_ACTIONS = ("accepted", "edited", "deleted")
STATES = ("shown", "control", "none")
META = ("origin", "action", "suggestion", "resized")


class PrefillOptions(TypedDict, total=False):
    """The prefill settings of an error-span study (the module docstring)."""

    prefill_spans: str
    prefill_control_share: float
    prefill_judge: str
    prefill_skip_clean: bool
    prefill_skip_control_share: float
    #: what the item showed, passed by the server (:data:`SHOWN`)
    _prefill_shown: dict[str, Any]


def validate_options(opts: Mapping[str, Any], errors: list[str]) -> PrefillOptions:
    """The prefill options normalised (``{}`` when prefill is off); problems appended."""
    mode = opts.get("prefill_spans", "off")
    if mode not in ("off", "on"):
        errors.append("prefill_spans must be off or on")
        return {}
    share = opts.get("prefill_control_share", 0)
    ok_share = isinstance(share, int | float) and not isinstance(share, bool)
    if not ok_share or not 0 <= share <= 1:
        errors.append("prefill_control_share must be a number from 0 to 1")
    judge = opts.get("prefill_judge", "")
    if not isinstance(judge, str) or len(judge) > 100:
        errors.append("prefill_judge must be a judge name (at most 100 characters)")
    skip = validate_skip_options(opts, errors)
    if mode == "off":
        if "prefill_control_share" in opts or judge:
            errors.append("prefill_control_share and prefill_judge need prefill_spans: on")
        if any(k in opts for k in SKIP_KEYS):
            errors.append(
                "prefill_skip_clean and prefill_skip_control_share need prefill_spans: on"
            )
        return {}
    out: PrefillOptions = {
        "prefill_spans": "on",
        "prefill_control_share": float(share) if ok_share else 0.0,
        "prefill_judge": judge.strip() if isinstance(judge, str) else "",
    }
    out.update(skip)
    return out


def validate_skip_options(opts: Mapping[str, Any], errors: list[str]) -> PrefillOptions:
    """``prefill_skip_clean`` (bool) and ``prefill_skip_control_share`` (0-1) normalised;
    ``{}`` when the skip is off. The share without the skip on is refused."""
    on = opts.get("prefill_skip_clean", False)
    if not isinstance(on, bool):
        errors.append("prefill_skip_clean must be true or false")
        return {}
    share = opts.get("prefill_skip_control_share", SKIP_CONTROL_SHARE)
    ok = isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1
    if not ok:
        errors.append("prefill_skip_control_share must be a number from 0 to 1")
    if not on:
        if "prefill_skip_control_share" in opts:
            errors.append("prefill_skip_control_share needs prefill_skip_clean: true")
        return {}
    return {
        "prefill_skip_clean": True,
        "prefill_skip_control_share": float(share) if ok else SKIP_CONTROL_SHARE,
    }


def split(
    raw: list[Any], shown: Mapping[str, Any]
) -> tuple[list[Any], list[dict[str, Any]], list[Any], list[int]]:
    """The submitted spans without their prefill fields: ``(kept, meta, deleted, index)``:
    ``meta`` per kept span and ``index`` (the suggestion) per deleted one, in order.
    Checked: origins and actions, each suggestion accounted for exactly once, an accepted or
    deleted one unchanged, ``resized`` true exactly when an edited one's boundaries moved
    (the new offsets are checked against the text by the caller), none claimed when none was
    shown."""
    suggested = list(shown.get("spans") or [])
    kept, deleted, meta, index = [], [], [], []
    used: set[int] = set()
    for n, span in enumerate(raw, 1):
        if not isinstance(span, Mapping):
            raise AnswerError(f"span {n} must be an object")
        origin = span.get("origin", "worker")
        action = span.get("action", "new")
        if origin not in ORIGINS:
            raise AnswerError(f"span {n}: origin must be judge or worker")
        plain = {k: v for k, v in span.items() if k not in META}
        if origin == "worker":
            if action != "new" or "suggestion" in span or "resized" in span:
                raise AnswerError(f"span {n}: a span the worker marked has action new")
            kept.append(plain)
            meta.append({"origin": "worker", "action": "new"})
            continue
        k = span.get("suggestion")
        if not (isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(suggested)):
            raise AnswerError(f"span {n}: no such suggestion")
        if k in used:
            raise AnswerError(f"span {n}: suggestion {k} is given twice")
        used.add(k)
        if action not in JUDGE_ACTIONS:
            raise AnswerError(f"span {n}: a suggestion is accepted, edited or deleted")
        s = suggested[k]
        moved = any(plain.get(f) != s[f] for f in ("start", "end"))
        resized = span.get("resized", False)
        if not isinstance(resized, bool) or (resized and action != "edited"):
            raise AnswerError(f"span {n}: resized is true or false, on an edited suggestion")
        if action in ("accepted", "deleted") and (moved or plain.get("severity") != s["severity"]):
            raise AnswerError(f"span {n}: an {action} suggestion must be left as it was")
        if resized != moved:
            raise AnswerError(f"span {n}: resized must say whether the start or end changed")
        if action == "deleted":
            deleted.append(plain)
            index.append(k)
            continue
        kept.append(plain)
        one: dict[str, Any] = {"origin": "judge", "action": action, "suggestion": k}
        if action == "edited":
            one["resized"] = moved
            if moved:
                one |= {"suggested_start": s["start"], "suggested_end": s["end"]}
        meta.append(one)
    if len(used) != len(suggested):
        raise AnswerError("every suggested error must be kept, edited or deleted")
    return kept, meta, deleted, index


def skip_control(study_key: object, item_key: object, share: float) -> bool:
    """Whether a judge-clean item is in the skip's control share: a draw seeded by the study
    and item (a string seed: the same in every process and round)."""
    return share > 0 and random.Random(f"prefill-skip:{study_key}:{item_key}").random() < share
