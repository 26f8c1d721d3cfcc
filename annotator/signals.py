"""Hooks other apps register at start-up (``annotator`` imports none of them).

``annotation_submitted`` is sent after the submitting transaction has committed, with
``annotation`` (the stored :class:`~annotator.models.Annotation`); ``annotation.item.n_done``
is the item's count including this annotation, so a receiver sees when an item completes.

``study_created`` is sent inside the creating transaction, with ``study``; a receiver that
raises rolls the whole import back.

``work_expected`` is sent with ``study`` when a worker finds nothing to do; a receiver
returns ``True`` when more work is coming (the next round of an adaptive study), and the
worker is asked to wait instead of being sent to the end.

``round_summary`` is sent with ``study`` by the researcher's workspace; a receiver returns a
dict describing the study's rounds (``rounds``, ``current``, ``current_state``,
``committed``, ``open_pairs``, ``settled_pairs``) or ``None`` when it has none.

``study_reconfiguring`` is sent by ``services.study_configure`` inside its transaction, with
``study`` (as saved), ``edited`` (the same study with the new values) and ``apply``; a
receiver carries the edit to what it keeps (the adaptive ledger) when ``apply`` is true,
returns notes for the researcher (a list of strings), and raises
:class:`~annotator.errors.ConfigRefused` when the edit cannot take effect (then nothing is
saved). With ``apply`` false it only checks, and writes nothing.
"""

from django.dispatch import Signal

annotation_submitted = Signal()
study_created = Signal()
work_expected = Signal()
round_summary = Signal()
study_reconfiguring = Signal()
