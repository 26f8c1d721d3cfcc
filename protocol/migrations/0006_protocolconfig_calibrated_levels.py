from django.db import migrations, models


class Migration(migrations.Migration):
    """Calibrated when round 1 is decided, next to the study level (``decision_level``): the
    level of a pair pooling does not inform and the futility threshold calibrated over the
    looks. Null for studies calibrated before: their ``decision_level`` then applies to every
    pair and their ``futility`` as given, as before."""

    dependencies = [
        ("protocol", "0005_likert_preferences"),
    ]

    operations = [
        migrations.AddField(
            model_name="protocolconfig",
            name="lone_decision_level",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="protocolconfig",
            name="futility_threshold",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
    ]
