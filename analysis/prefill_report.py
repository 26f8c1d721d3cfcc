"""The error-span section's ``prefill`` block (issue 28, judge-prefilled spans): built from
the stored answers of a study with ``prefill_spans`` on (each span's ``origin``/``action``,
the deleted suggestions, the label's ``prefill`` state) with :mod:`analysis.prefill`.
``None`` when no answer was prefilled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.prefill import prefill_effect, skipped_control, suggestion_f1, suggestion_rates

#: The answer's names → analysis.prefill's (worker → human, new → added).
_ORIGIN = {"judge": "judge", "worker": "human"}
_ACTION = {"accepted": "accepted", "edited": "edited", "deleted": "deleted", "new": "added"}


def _as_proposed(span: dict) -> dict:
    """A kept suggestion where the judge put it (a resized one's own offsets)."""
    if not span.get("resized"):
        return span
    return span | {"start": span["suggested_start"], "end": span["suggested_end"]}


def prefill_block(
    items: Sequence[Any], answers: Sequence[dict], confidence: float = 0.95
) -> dict[str, Any] | None:
    """Acceptance/edit/deletion rates (an edit's boundary changes among them), judge-vs-final
    span F1 (over items with suggestions; each suggestion at the offsets the judge proposed,
    kept as ``suggested_start``/``suggested_end`` on a resized one) and the with/without
    effect on span counts and scores; ``states`` counts labels shown, control and none."""
    rows, annos, suggested, final = [], [], {}, {}
    states = {"shown": 0, "control": 0, "none": 0}
    for n, (item, answer) in enumerate(zip(items, answers, strict=True)):
        state = answer.get("prefill")
        if state not in states or answer.get("spans") is None:
            continue
        states[state] += 1
        spans = answer["spans"]
        for s in spans:
            o, a = s.get("origin", "worker"), s.get("action", "new")
            rows.append(
                {"annotation": n, "item": item, "origin": _ORIGIN[o], "action": _ACTION[a]}
                | {"resized": bool(s.get("resized"))}
            )
        for _ in answer.get("deleted") or []:
            rows.append(
                {"annotation": n, "item": item, "origin": "judge", "action": "deleted"}
                | {"resized": False}
            )
        if state == "shown":
            suggested[n] = [_as_proposed(s) for s in spans if s.get("origin") == "judge"] + list(
                answer.get("deleted") or []
            )
            final[n] = spans
        if state in ("shown", "control"):
            annos.append(
                {
                    "annotation": n,
                    "item": item,
                    "prefilled": state == "shown",
                    "n_spans": len(spans),
                    "score": answer.get("score"),
                }
            )
    if not any(states.values()):
        return None
    spans_df = pd.DataFrame(rows, columns=["annotation", "item", "origin", "action", "resized"])
    annos_df = pd.DataFrame(annos, columns=["annotation", "item", "prefilled", "n_spans", "score"])
    return {
        "labels": states,
        "rates": suggestion_rates(spans_df, confidence),
        "judge_final_f1": suggestion_f1(suggested, final),
        "effect": prefill_effect(annos_df, confidence),
    }


def skip_block(
    items: Sequence[Any],
    answers: Sequence[dict],
    counts: dict[str, Any],
    confidence: float = 0.95,
) -> dict[str, Any]:
    """What skipping the judge-clean items did (``counts`` from
    :func:`annotator.prefill_skip.skip_counts`: ``skipped``, ``saved``, ``planned``,
    ``controls``, ``control_share``): the items skipped, the annotations that saved and their
    share of the planned ones, and of the control items humans labelled, how many they found
    an error in (an item counts when any of its labels marks a span), with its Wilson
    interval (:func:`analysis.prefill.skipped_control`): an estimate of the share of skipped
    items that had errors."""
    controls = set(counts["controls"])
    seen: dict[Any, bool] = {}
    for item, answer in zip(items, answers, strict=True):
        if item in controls and answer.get("spans") is not None:
            seen[item] = seen.get(item, False) or bool(answer["spans"])
    planned = counts["planned"]
    return {
        "skipped": counts["skipped"],
        "controls": len(controls),
        "control_share": counts["control_share"],
        "saved_annotations": counts["saved"],
        "planned_annotations": planned,
        "budget_saved": counts["saved"] / planned if planned else None,
        "control_errors": skipped_control(len(seen), sum(seen.values()), confidence),
    }


def with_skip(
    sections: list[dict[str, Any]],
    frame: pd.DataFrame,
    counts: dict[str, Any],
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """``sections`` with the skip block in the error-span section's ``prefill`` block and a
    note saying the section's figures leave the skipped items out."""
    out = []
    for section in sections:
        if section.get("name") == "error_spans":
            items = list(frame["item"]) if len(frame) else []
            answers = list(frame["answer"]) if len(frame) else []
            block = skip_block(items, answers, counts, confidence)
            note = (
                f"{block['skipped']} item(s) the judge found error-free were skipped (not shown "
                "to workers): they count as judge-clean, not as human labels, so the scores, "
                "span F1 and error counts of this section leave them out."
            )
            section = section | {
                "notes": [*section.get("notes", []), note],
                "prefill": (section.get("prefill") or {}) | {"skip": block},
            }
        out.append(section)
    return out
