"""What the dashboard says once an adaptive study's protocol has finished (pure; reads the
dictionary ``protocol.selectors.dashboard`` returns)."""

from __future__ import annotations

from typing import Any

#: Why a pair closed undecided (``SystemPair.evidence["outcome"]``), in words.
UNDECIDED_BECAUSE = {
    "futile": "a decision was predicted to stay out of reach",
    "exhausted": "every input was used",
    "budget": "the budget was spent",
}


def protocol_outcome(data: dict[str, Any]) -> dict[str, Any] | None:
    """``None`` while the protocol runs (a pair is open or a round is not yet decided);
    otherwise the decided wins (better system first, in the partial order's layers), the
    practically equivalent pairs, the pairs closed undecided with the reason, and whether
    every pair was decided and whether the budget is spent."""
    pairs, rounds = data["pairs"], data["rounds"]
    if not pairs or not rounds:
        return None
    if any(p["state"] == "open" for p in pairs) or any(r["state"] != "decided" for r in rounds):
        return None
    layer = {s["name"]: s["layer"] for s in data["partial_order"]["systems"]}
    wins = sorted(
        (
            {
                "winner": p["winner"],
                "loser": p["system_b" if p["winner"] == p["system_a"] else "system_a"],
            }
            for p in pairs
            if p["state"] == "decided"
        ),
        key=lambda w: (
            layer.get(w["winner"], 0),
            w["winner"],
            layer.get(w["loser"], 0),
            w["loser"],
        ),
    )
    equivalent = [(p["system_a"], p["system_b"]) for p in pairs if p["state"] == "equivalent"]
    undecided = [
        {
            "pair": (p["system_a"], p["system_b"]),
            "why": UNDECIDED_BECAUSE.get(p["outcome"] or "", "it closed without a decision"),
        }
        for p in pairs
        if p["state"] == "exhausted"
    ]
    budget = data["budget"]
    return {
        "wins": wins,
        "equivalent": equivalent,
        "undecided": undecided,
        "all_decided": len(wins) == len(pairs),
        "budget_spent": bool(budget) and data["spent"] >= budget,
        "n_pairs": len(pairs),
    }
