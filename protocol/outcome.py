"""What the dashboard says once an adaptive study's protocol has finished (pure; reads the
dictionary ``protocol.selectors.dashboard`` returns)."""

from __future__ import annotations

from typing import Any

#: Why a pair closed undecided (``SystemPair.evidence["outcome"]``), in words.
UNDECIDED_BECAUSE = {
    "futile": "it cannot be decided within the budget",
    "exhausted": "every input was used",
    "budget": "the budget was spent",
}

#: A closed-undecided pair's status by why it closed (a study without a budget has its
#: whole pool as the budget, so "within the budget" holds for it too).
_CLOSED_UNDECIDED = {
    "futile": "retired: cannot be decided within the budget",
    "exhausted": "closed undecided: every input was used",
    "budget": "closed undecided: the budget was spent",
}


def pair_status(state: str, outcome: str | None, winner: str | None = None) -> str:
    """A pair's state in words with why it closed, as the dashboard, its JSON and the admin
    show it: ``state`` is ``SystemPair.state``, ``outcome`` the reason the protocol stored
    (``SystemPair.evidence["outcome"]``), ``winner`` the decided winner's name."""
    if state == "open":
        return "open: collecting labels"
    if state == "decided":
        return f"decided: {winner} is better" if winner else "decided"
    if state == "equivalent":
        return "closed: practically equivalent"
    return _CLOSED_UNDECIDED.get(outcome or "", "closed undecided")


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
