"""The error-span section's ``prefill`` block (issue 28, judge-prefilled spans): built from
the stored answers of a study with ``prefill_spans`` on (each span's ``origin``/``action``,
the deleted suggestions, the label's ``prefill`` state) with :mod:`analysis.prefill`.
``None`` when no answer was prefilled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.prefill import prefill_effect, suggestion_f1, suggestion_rates

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
