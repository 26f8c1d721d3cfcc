"""Qualification tests of every kind: a test has a kind and options; a question holds a
list of outputs and its known answer as the kind stores it (``expected``); an attempt
records each question's display order instead of ``left_is_a``. Existing (pairwise) rows
are converted: ``output_a``/``output_b``/``answer`` → ``outputs`` [a, b] and ``expected``
{"value": answer}; ``left_is_a`` → ``display_order`` [0, 1] or [1, 0]."""

from django.db import migrations, models

import kinds

#: A display-order pairwise answer in system order (``kinds.pairwise.normalise``, frozen).
_SIDES = {"left": ("A", "B"), "right": ("B", "A")}


def _slot(slot: dict) -> dict:
    """One ``order``/``answers`` entry with ``left_is_a`` turned into ``display_order``; an
    answer entry also gets ``answer`` (the pairwise answer in system order)."""
    if "left_is_a" not in slot:
        return slot
    left_is_a = bool(slot["left_is_a"])
    new = {k: v for k, v in slot.items() if k != "left_is_a"}
    new["display_order"] = [0, 1] if left_is_a else [1, 0]
    raw = slot.get("raw")
    if raw is not None and "answer" not in slot:
        value = _SIDES[raw][0 if left_is_a else 1] if raw in _SIDES else raw
        new["answer"] = {"raw": raw, "value": value}
    return new


def forwards(apps, schema_editor):
    Question = apps.get_model("annotator", "QualificationQuestion")
    Attempt = apps.get_model("annotator", "QualificationAttempt")
    for q in Question.objects.all().iterator():
        q.outputs = [q.output_a, q.output_b]
        q.expected = {"value": q.answer} if q.answer else {}
        q.save(update_fields=["outputs", "expected"])
    for attempt in Attempt.objects.all().iterator():
        attempt.order = [_slot(s) for s in attempt.order or []]
        attempt.answers = [_slot(s) for s in attempt.answers or []]
        attempt.save(update_fields=["order", "answers"])


def backwards(apps, schema_editor):
    Question = apps.get_model("annotator", "QualificationQuestion")
    Attempt = apps.get_model("annotator", "QualificationAttempt")
    Test = apps.get_model("annotator", "QualificationTest")
    if Test.objects.exclude(kind="pairwise").exists():
        raise RuntimeError("only pairwise qualification tests can be migrated back")
    for q in Question.objects.all().iterator():
        q.output_a, q.output_b = (list(q.outputs) + ["", ""])[:2]
        q.answer = str((q.expected or {}).get("value", ""))
        q.save(update_fields=["output_a", "output_b", "answer"])
    for attempt in Attempt.objects.all().iterator():
        for field in ("order", "answers"):
            slots = []
            for slot in getattr(attempt, field) or []:
                old = {k: v for k, v in slot.items() if k not in ("display_order", "answer")}
                old["left_is_a"] = list(slot.get("display_order") or [0])[:1] == [0]
                slots.append(old)
            setattr(attempt, field, slots)
        attempt.save(update_fields=["order", "answers"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0014_task_kinds"),
    ]

    operations = [
        migrations.AddField(
            model_name="qualificationtest",
            name="kind",
            field=models.CharField(
                choices=kinds.choices,
                default="pairwise",
                help_text="The task its questions ask; only studies of this kind may use the test.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="qualificationtest",
            name="options",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The kind's options the questions are asked with, as on a study line "
                '(pairwise: {"allow_tie": true}; Likert: {"criteria": [{"name": "overall", '
                '"scale_min": 1, "scale_max": 5}]}).',
            ),
        ),
        migrations.AddField(
            model_name="qualificationquestion",
            name="conversation",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="A conversation shown as the input instead of the prompt: a JSON list "
                'of {"role": …, "content": …} turns (empty: the prompt is shown).',
            ),
        ),
        migrations.AddField(
            model_name="qualificationquestion",
            name="outputs",
            field=models.JSONField(
                default=list,
                help_text='The outputs shown, as a JSON list of texts in system order (["first", '
                '"second"]); a pairwise question has two, a Likert question one.',
            ),
        ),
        migrations.AddField(
            model_name="qualificationquestion",
            name="expected",
            field=models.JSONField(
                default=dict,
                help_text='The known answer as the test\'s kind reads it: pairwise "A", "B" '
                '(the first or second output) or "tie"; Likert {"scores": {"overall": 4}, '
                '"tolerance": 1}. See docs/crowd.md, "Known answers".',
            ),
        ),
        migrations.RunPython(forwards, backwards),
        # defaults, so that migrating back can add the old columns to existing rows
        migrations.AlterField(
            model_name="qualificationquestion",
            name="output_a",
            field=models.TextField(default=""),
        ),
        migrations.AlterField(
            model_name="qualificationquestion",
            name="output_b",
            field=models.TextField(default=""),
        ),
        migrations.AlterField(
            model_name="qualificationquestion",
            name="answer",
            field=models.CharField(
                choices=[("A", "A"), ("B", "B"), ("tie", "tie")], default="", max_length=12
            ),
        ),
        migrations.RemoveField(model_name="qualificationquestion", name="answer"),
        migrations.RemoveField(model_name="qualificationquestion", name="output_a"),
        migrations.RemoveField(model_name="qualificationquestion", name="output_b"),
        migrations.AlterField(
            model_name="qualificationattempt",
            name="order",
            field=models.JSONField(
                default=list,
                help_text="Per question in the order shown: {question: id, display_order: the "
                "positions of its outputs as shown, first (left) first}.",
            ),
        ),
    ]
