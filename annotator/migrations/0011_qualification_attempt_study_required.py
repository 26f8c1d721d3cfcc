"""Every qualification attempt belongs to a study (filled in by the previous migration,
kept apart so PostgreSQL alters the table after the data change has committed)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0010_qualification_attempts_per_study"),
    ]

    operations = [
        migrations.AlterField(
            model_name="qualificationattempt",
            name="study",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="qualification_attempts",
                to="annotator.study",
            ),
        ),
        migrations.AlterModelOptions(
            name="qualificationattempt",
            options={"ordering": ["study", "annotator", "number"]},
        ),
        migrations.AddConstraint(
            model_name="qualificationattempt",
            constraint=models.UniqueConstraint(
                fields=("test", "study", "annotator", "number"),
                name="qualification_attempt_once",
            ),
        ),
    ]
