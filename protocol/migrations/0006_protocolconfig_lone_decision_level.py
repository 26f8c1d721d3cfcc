from django.db import migrations, models


class Migration(migrations.Migration):
    """The level of a pair pooling does not inform, stored next to the study level
    (``decision_level``) when round 1 is decided; null for studies calibrated before (their
    ``decision_level`` then applies to every pair, as it did)."""

    dependencies = [
        ("protocol", "0005_likert_preferences"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocolconfig",
            name="lone_decision_level",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
    ]
