"""Events other apps observe, connected at start-up (``annotator`` imports none of them; the
questions about work still to come are asked of :mod:`annotator.collection`, whether a
platform vouches for an entry of :mod:`annotator.entry`).

- ``annotation_submitted`` (after commit; ``annotation``, whose ``item.n_done`` includes it);
- ``study_created`` (inside the creating transaction; ``study``; raising rolls it back);
- ``collection_changed`` (after commit; ``study_id``): the work released changed, e.g. the
  protocol decided a round and opened the next or found no more work (the crowd app grows
  or stops the study's places);
- ``items_skipped`` (after commit; ``study_id``, ``round_number``): the worker cycle skipped
  an item the judge found error-free (:mod:`annotator.prefill_skip`), which may complete its
  round as a last annotation would;
"""

from django.dispatch import Signal

annotation_submitted = Signal()
study_created = Signal()
collection_changed = Signal()
items_skipped = Signal()
