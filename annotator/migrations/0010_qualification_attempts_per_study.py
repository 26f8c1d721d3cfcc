"""Qualification attempts per study, up to ``QualificationTest.max_attempts`` each.

An attempt taken before this migration had no study: it is given the study in which the
worker took it (their earliest participation in a study using the test, else their
earliest participation); an attempt of a worker with no participation left is deleted, as
deleting that study would have done.
"""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


def attach_to_studies(apps, schema_editor):
    Attempt = apps.get_model("annotator", "QualificationAttempt")
    Participation = apps.get_model("annotator", "Participation")
    for attempt in Attempt.objects.all():
        mine = Participation.objects.filter(annotator_id=attempt.annotator_id).order_by(
            "started_at", "pk"
        )
        participation = mine.filter(study__qualification_id=attempt.test_id).first() or mine.first()
        if participation is None:
            attempt.delete()
        else:
            attempt.study_id = participation.study_id
            attempt.save(update_fields=["study"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0009_study_items_per_worker_min"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="qualificationattempt",
            name="qualification_once",
        ),
        migrations.AddField(
            model_name="qualificationtest",
            name="max_attempts",
            field=models.PositiveSmallIntegerField(
                default=2,
                help_text="Attempts a worker gets in each study (Prolific asks for two).",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(5),
                ],
            ),
        ),
        migrations.AddField(
            model_name="qualificationattempt",
            name="number",
            field=models.PositiveSmallIntegerField(default=1, help_text="1 for the first attempt."),
        ),
        migrations.AddField(
            model_name="qualificationattempt",
            name="study",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="qualification_attempts",
                to="annotator.study",
            ),
        ),
        migrations.RunPython(attach_to_studies, migrations.RunPython.noop),
    ]
