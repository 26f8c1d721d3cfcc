"""Hooks other apps register at start-up (``annotator`` imports none of them).

``annotation_submitted`` is sent after the submitting transaction has committed, with
``annotation`` (the stored :class:`~annotator.models.Annotation`).

``study_created`` is sent inside the creating transaction, with ``study``; a receiver that
raises rolls the whole import back.
"""

from django.dispatch import Signal

annotation_submitted = Signal()
study_created = Signal()
