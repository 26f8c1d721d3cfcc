"""Skipping the items a judge found error-free (ESA^AI: Zouhar, Kocmi & Sachan 2025, arXiv
2406.12419, about a quarter of the budget saved), with a control share humans still see.

The study options (validated by :mod:`kinds.span_prefill`): ``prefill_skip_clean`` true (with
``prefill_spans: on``) and ``prefill_skip_control_share`` (0-1, default 0.1).

The decision is taken once per item, when the worker cycle first takes it
(``services._lease_locked`` calls :func:`skipped` on the item it took): an item no worker was
ever given whose chosen judge's proposal (the one the page would show,
:func:`annotator.span_prefill.judge_spans`) parsed with no span is

- in the control share (a draw seeded by the study and item, so the same in every process and
  round): marked ``control`` and served as usual;
- otherwise marked ``skipped``, made inactive and its slot given back, so no worker ever gets
  it: no lease, no label, no budget spent (an adaptive study's round closes without it:
  ``signals.items_skipped`` lets the protocol close a round whose last open item it was).

An item without a parsed proposal (none yet, or an unparseable answer), with an error span, or
already given to a worker is served as usual and never skipped later. Turning the option off
does not bring skipped items back. The report counts skipped items as judge-clean, not as
human labels (:func:`analysis.prefill_report.skip_block`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Sum

from kinds.span_prefill import skip_control

from .models import Assignment, Item, ItemOutput, Study
from .signals import items_skipped
from .span_prefill import judge_spans

SKIPPED, CONTROL = "skipped", "control"


def in_control(study_pk: int, item_pk: int, share: float) -> bool:
    """Whether a judge-clean item is in the control share (drawn per study and item,
    :func:`kinds.span_prefill.skip_control`)."""
    return skip_control(study_pk, item_pk, share)


def skip_on(study: Study) -> bool:
    """Whether the study skips judge-clean items (read from its validated options)."""
    opts = study.options or {}
    return opts.get("prefill_spans") == "on" and opts.get("prefill_skip_clean") is True


def skipped(study: Study, item: Item) -> bool:
    """Decide the item the worker cycle just took (its ``n_taken`` raised, the row locked);
    True when it was skipped (made inactive, its slot given back: take another). A control
    item is marked so in the database and on ``item``."""
    if not skip_on(study):
        return False
    item_pk = item.pk
    given = Assignment.objects.filter(item=OuterRef("item_id"))
    link = (
        ItemOutput.objects.filter(item_id=item_pk, item__prefill_skip="", item__n_done=0)
        .exclude(Exists(given))
        .values_list("item__input_id", "output__system_id", "item__round_number")
    )
    links = list(link[:2])
    if len(links) != 1:  # decided, given before, or not one output
        return False
    input_id, system_id, round_number = links[0]
    opts: dict[str, Any] = study.options
    spans = judge_spans(study, input_id, system_id, opts)
    if spans is None or spans:
        return False
    share = float(opts.get("prefill_skip_control_share", 0.1))
    if in_control(study.pk, item_pk, share):
        Item.objects.filter(pk=item_pk).update(prefill_skip=CONTROL)
        item.prefill_skip = CONTROL
        return False
    Item.objects.filter(pk=item_pk).update(
        prefill_skip=SKIPPED, is_active=False, n_taken=F("n_taken") - 1
    )
    if round_number is not None:  # it may have been the round's last open item
        study_id = study.pk
        transaction.on_commit(
            lambda: items_skipped.send(Item, study_id=study_id, round_number=round_number)
        )
    return True


def skip_counts(study: Study) -> dict[str, Any] | None:
    """What the skip did: ``skipped`` items, ``saved`` annotations (their redundancy),
    ``planned`` annotations of the work items (active or skipped), the ``controls`` (item
    ids); None when no item was decided."""
    items = Item.objects.filter(study=study, is_gold=False)
    found = items.aggregate(
        skipped=Count("pk", filter=Q(prefill_skip=SKIPPED)),
        saved=Sum("redundancy", filter=Q(prefill_skip=SKIPPED)),
        planned=Sum("redundancy", filter=Q(is_active=True) | Q(prefill_skip=SKIPPED)),
    )
    controls = list(items.filter(prefill_skip=CONTROL).values_list("pk", flat=True))
    if not found["skipped"] and not controls:
        return None
    return {
        "skipped": found["skipped"] or 0,
        "saved": found["saved"] or 0,
        "planned": found["planned"] or 0,
        "controls": controls,
        "control_share": float((study.options or {}).get("prefill_skip_control_share", 0.1)),
    }
