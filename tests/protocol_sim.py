"""Simulated crowdworkers for protocol tests: they prefer the truly better system with a
fixed accuracy, through the same services the worker pages call."""

import json
import random

from annotator import services
from annotator.models import Output

QUALITY = {"s1": 4, "s2": 3, "s3": 1, "s4": 1}


def adaptive_bundle(n_inputs: int = 40, **options) -> bytes:
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
                "outputs": {s: f"{s} says {i}" for s in QUALITY},
            }
        )
        for i in range(n_inputs)
    ]
    return ("\n".join(lines) + "\n").encode()


def answer(assignment, rng: random.Random, accuracy: float = 0.85) -> str:
    item = assignment.item
    qa = QUALITY[Output.objects.get(pk=item.output_a_id).system.name]
    qb = QUALITY[Output.objects.get(pk=item.output_b_id).system.name]
    if qa == qb:
        return rng.choice(["tie", "left", "right"])
    better_is_a = qa > qb
    if rng.random() > accuracy:
        better_is_a = not better_is_a
    return "left" if better_is_a == assignment.left_is_a else "right"


def run_workers(study, n_workers: int = 200, seed: int = 0, per_worker: int = 25) -> int:
    """Workers arrive one after another, each doing up to ``per_worker`` items, until no
    work is left or ``n_workers`` came; returns the number of submitted labels."""
    rng = random.Random(seed)
    submitted = 0
    for w in range(n_workers):
        part = services.participation_enter(study=study, platform="link", external_id=f"sim{w}")
        for _ in range(per_worker):
            a = services.assignment_next(participation=part)
            if a is None:
                break
            services.annotation_submit(
                annotator=part.annotator, token=a.token, answer=answer(a, rng)
            )
            submitted += 1
        else:
            continue
        if not services.assignment_next(participation=part):
            return submitted
    return submitted
