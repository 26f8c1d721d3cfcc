"""Simulated crowdworkers for protocol tests, through the same services the worker pages
call: in a pairwise study they prefer the truly better system with a fixed accuracy; in a
Likert study they rate an output around its system's true mean rating, with noise; in a
ranking study they order the outputs by their systems' true quality, with noise."""

import json
import random
from datetime import timedelta

from annotator import services
from tests.leasing import next_lease

QUALITY = {"s1": 4, "s2": 3, "s3": 1, "s4": 1}
#: Likert: the true mean rating of each system's outputs on a 1–5 scale (s3 = s4: a null pair).
MEAN_RATING = {"s1": 4.5, "s2": 3.5, "s3": 2.0, "s4": 2.0}


def adaptive_bundle(n_inputs: int = 40, systems=tuple(QUALITY), **options) -> bytes:
    study = {
        "kind": "pairwise",
        "collection": "adaptive",
        "redundancy": 1,
        "batch_size": 5,
        "allow_tie": True,
        "open_links": True,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
        **options,
    }
    lines = [json.dumps({"study": study})]
    lines += [
        json.dumps(
            {
                "id": f"in{i}",
                "input": f"input {i}",
                "outputs": {s: f"{s} says {i}" for s in systems},
            }
        )
        for i in range(n_inputs)
    ]
    return ("\n".join(lines) + "\n").encode()


def likert_bundle(n_inputs: int = 40, systems=tuple(QUALITY), **options) -> bytes:
    """An adaptive Likert study of the simulated systems (one 1–5 criterion unless
    ``criteria`` are given)."""
    return adaptive_bundle(n_inputs, systems, **{"kind": "likert", **options})


def ranking_bundle(n_inputs: int = 40, systems=tuple(QUALITY), **options) -> bytes:
    """An adaptive ranking study of the simulated systems (three outputs per item unless
    ``per_item`` is given)."""
    return adaptive_bundle(
        n_inputs, systems, **{"kind": "ranking", "per_item": 3, "allow_tie": False, **options}
    )


def rank(assignment, rng: random.Random, noise: float = 1.0) -> dict[str, str]:
    """A simulated worker's ranking of the outputs of ``assignment``, best first: by each
    system's true quality plus Gaussian noise, as tiers of display positions."""
    outputs = assignment.item.output_list()
    noisy = [QUALITY[o.system.name] + rng.gauss(0, noise) for o in outputs]
    best_first = sorted(range(len(outputs)), key=lambda p: -noisy[p])
    shown_at = {p: d for d, p in enumerate(assignment.display_order)}
    return {"ranking": json.dumps([[shown_at[p]] for p in best_first])}


def rate(
    assignment, criteria: list[dict], rng: random.Random, noise: float = 1.0
) -> dict[str, int | str]:
    """A simulated worker's Likert scores of the one output of ``assignment``: on every
    scale, its system's true mean mapped onto the scale plus Gaussian noise, rounded and
    clipped; a random label on categorical criteria."""
    system = assignment.item.output_list()[0].system.name
    scores: dict[str, int | str] = {}
    for c in criteria:
        if c["labels"]:
            scores[c["name"]] = rng.choice([str(label) for label in c["labels"]])
            continue
        low, high = c["scale_min"], c["scale_max"]
        mean = low + (MEAN_RATING[system] - 1) * (high - low) / 4
        value = round(mean + rng.gauss(0, noise))
        scores[c["name"]] = min(max(value, low), high)
    return scores


def answer(assignment, rng: random.Random, accuracy: float = 0.85) -> str:
    """A simulated worker's pairwise answer, drawn in system terms (a tie, or system *a* or
    *b* preferred) from ``rng`` alone and then placed on the side where that output is shown,
    so the labels do not depend on the display order the server draws at random."""
    item = assignment.item
    qa, qb = (QUALITY[o.system.name] for o in item.output_list())
    if qa == qb:
        pick = rng.choice(["tie", "a", "b"])
        if pick == "tie":
            return "tie"
        better_is_a = pick == "a"
    else:
        better_is_a = qa > qb
        if rng.random() > accuracy:
            better_is_a = not better_is_a
    return "left" if better_is_a == (assignment.display_order == [0, 1]) else "right"


def run_workers(
    study, n_workers: int = 200, seed: int = 0, per_worker: int = 25, answer_with=None
) -> int:
    """Workers arrive one after another, each doing up to ``per_worker`` items, until one
    finds nothing to do at once (no work is left that they may take: with redundancy above
    1 a worker who ran out of items they have not seen hands over to the next) or
    ``n_workers`` came; returns the number of submitted labels. ``answer_with(assignment,
    rng)``: the submitted form as ``annotation_submit``'s ``data`` (default: by the kind)."""
    rng = random.Random(seed)
    criteria = study.kind_settings["criteria"] if study.kind == "likert" else None
    ranking = study.kind == "ranking"
    submitted = 0
    for w in range(n_workers):
        part = services.participation_enter(study=study, platform="link", external_id=f"sim{w}")
        for done in range(per_worker):
            a = next_lease(participation=part)
            if a is None:
                if done == 0:
                    return submitted
                break
            if answer_with is not None:
                given = {"data": answer_with(a, rng)}
            elif ranking:
                given = {"data": rank(a, rng)}
            elif criteria is None:
                given = {"data": {"answer": answer(a, rng)}}
            else:
                given = {"data": {"scores": rate(a, criteria, rng)}}
            services.annotation_submit(annotator=part.annotator, token=a.token, **given)
            submitted += 1
    return submitted


def lease_to_new_workers(study, n: int) -> list:
    """``n`` workers enter and each leases one item (``(participation, assignment)`` pairs;
    the assignment is ``None`` for a worker who found nothing)."""
    parts = [
        services.participation_enter(study=study, platform="link", external_id=f"o{i}")
        for i in range(n)
    ]
    return [(p, next_lease(participation=p)) for p in parts]


def crowd_visit(
    study, platform: str, worker: str, session: str, items: int, ms: int, finish: bool = True
):
    """A crowd participant through the services: ``items`` answers, each submitted ``ms``
    after its item was shown, then the study's end unless ``finish`` is false."""
    part = services.participation_enter(
        study=study, platform=platform, external_id=worker, session=session
    )
    rng = random.Random(worker)
    for _ in range(items):
        a = next_lease(participation=part)
        services.annotation_submit(
            annotator=part.annotator,
            token=a.token,
            data={"answer": answer(a, rng)},
            time_spent_ms=ms,
            now=a.issued_at + timedelta(milliseconds=ms),
        )
    if finish:
        services.participation_finish(part)
    return part
