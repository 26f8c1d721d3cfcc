import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    """Likert studies collected adaptively: which criterion's mean ratings give a pair's
    preference per input, and the dead zone of Definition 5 (defaults keep every existing
    study as it was: blank = all numeric criteria, no dead zone)."""

    dependencies = [
        ("protocol", "0004_predictive_decision_level"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocolconfig",
            name="likert_criterion",
            field=models.CharField(
                blank=True,
                help_text="Likert studies: the numeric criterion whose mean ratings give each input's preference (Definition 5); empty: every numeric criterion, averaged.",
                max_length=60,
            ),
        ),
        migrations.AddField(
            model_name="protocolconfig",
            name="likert_dead_zone",
            field=models.FloatField(
                default=0.0,
                help_text="Likert studies: mean-rating differences within ± this many scale points count as a draw (Definition 5).",
                validators=[django.core.validators.MinValueValidator(0)],
            ),
        ),
    ]
