"""What the dashboard says once an adaptive study's protocol has finished (pure; reads the
dictionary ``protocol.selectors.dashboard`` returns)."""

from __future__ import annotations

from typing import Any

#: Why a pair closed undecided (``SystemPair.evidence["outcome"]``), in words: what happened.
#: A futile pair is stopped early, whatever budget is left: the labels it could still get
#: (its unused inputs, at most twice its share of the budget left) were predicted unlikely
#: to decide it (docs/protocol.md, "futile").
UNDECIDED_BECAUSE = {
    "futile": "stopped early: even the labels still available to it were unlikely to decide it",
    "exhausted": "every input was labelled and it stayed undecided",
    "budget": "the budget ran out before it was decided",
}

#: A closed-undecided pair's status by why it closed.
_CLOSED_UNDECIDED = {
    "futile": "stopped early: a decision was unlikely even with more labels",
    "exhausted": "closed undecided: every input was labelled",
    "budget": "closed undecided: the budget ran out",
}


def pair_status(
    state: str, outcome: str | None, winner: str | None = None, chain: list[str] | None = None
) -> str:
    """A pair's state in words with why it closed, as the dashboard, its JSON and the admin
    show it: ``state`` is ``SystemPair.state``, ``outcome`` the reason the protocol stored
    (``SystemPair.evidence["outcome"]``), ``winner`` the decided winner's name, ``chain`` the
    systems of the decided pairs that imply the order (``evidence["implied_by"]``)."""
    if state == "open":
        return "open: collecting labels"
    if state == "decided" and outcome == "implied" and winner and chain:
        return f"decided by implication: {winner} is better ({' > '.join(chain)})"
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
                **({"implied_by": p["implied_by"]} if p.get("implied_by") else {}),
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
            "why": UNDECIDED_BECAUSE.get(p["outcome"] or "", "it closed without a decision")
            + _decision_chance(p),
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


def _decision_chance(pair: dict[str, Any]) -> str:
    """`` (predicted chance of a decision: 8%)`` for a pair stopped as futile."""
    if pair.get("outcome") != "futile":
        return ""
    undecided = [
        p["probability"] for p in pair.get("predicted") or [] if p["outcome"] == "undecided"
    ]
    if not undecided:
        return ""
    return f" (predicted chance of a decision: {1 - undecided[0]:.0%})"


def views_compared(data: dict[str, Any], ranking: dict[str, Any]) -> dict[str, Any]:
    """Where the partial order (the protocol's decisions) and the Bradley–Terry ranking beside
    it say different things, with what each pair's own labels were.

    They answer different questions. The protocol decides a pair from that pair's own
    labels (θ past the decision level); a rank separates two systems only when their 95 %
    intervals, estimated from all comparisons, do not overlap, a stricter test. So a
    decided pair may share a rank (``same_rank``), and the ranking may separate a pair the
    protocol has not decided (``ranked_not_decided``); a decided pair whose loser has the
    higher score (``reversed``) means the other systems' comparisons outweigh the pair's
    own. ``agree``: none of the three."""
    rows = {r["system"]: r for r in ranking.get("rows", []) if r.get("score") is not None}
    by_pair = {frozenset((p["system_a"], p["system_b"])): p for p in data["pairs"]}

    def labels(pair: dict[str, Any], first: str) -> dict[str, Any]:
        a_wins, ties, b_wins = pair.get("human_counts") or (0, 0, 0)
        if pair["system_a"] != first:
            a_wins, b_wins = b_wins, a_wins
        return {"first": a_wins, "ties": ties, "second": b_wins}

    same_rank, reversed_, ranked_not_decided = [], [], []
    decided = set()
    for edge in data["partial_order"]["edges"]:
        winner, loser = edge["winner"], edge["loser"]
        decided.add(frozenset((winner, loser)))
        if winner not in rows or loser not in rows:
            continue
        pair = by_pair.get(frozenset((winner, loser)))
        entry = {
            "winner": winner,
            "loser": loser,
            "rank": rows[winner]["rank"],
            "loser_rank": rows[loser]["rank"],
            **({"labels": labels(pair, winner)} if pair else {}),
        }
        if rows[winner]["score"] < rows[loser]["score"]:
            reversed_.append(entry)
        elif rows[winner]["rank"] >= rows[loser]["rank"]:
            same_rank.append(entry)
    for key, pair in by_pair.items():
        a, b = pair["system_a"], pair["system_b"]
        if key in decided or a not in rows or b not in rows:
            continue
        if rows[a]["rank"] != rows[b]["rank"]:
            better, worse = (a, b) if rows[a]["rank"] < rows[b]["rank"] else (b, a)
            ranked_not_decided.append(
                {
                    "better": better,
                    "worse": worse,
                    "status": pair["status"],
                    "labels": labels(pair, better),
                }
            )
    ranked_not_decided.sort(key=lambda e: (e["better"], e["worse"]))
    return {
        "agree": not (same_rank or reversed_ or ranked_not_decided),
        "same_rank": same_rank,
        "reversed": reversed_,
        "ranked_not_decided": ranked_not_decided,
    }
