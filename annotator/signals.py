"""Hooks other apps register at start-up (``annotator`` imports none of them).

``annotation_submitted`` is sent after the submitting transaction has committed, with
``annotation`` (the stored :class:`~annotator.models.Annotation`).
"""

from django.dispatch import Signal

annotation_submitted = Signal()
