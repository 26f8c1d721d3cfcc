import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    """The group-sequential boundary constant gives way to the calibrated predictive level
    (a different quantity: nothing to carry over; it is calibrated again at the next
    decision)."""

    dependencies = [
        ("protocol", "0003_futility_default"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="protocolconfig",
            name="boundary_constant",
        ),
        migrations.AddField(
            model_name="protocolconfig",
            name="decision_level",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="protocolconfig",
            name="futility",
            field=models.FloatField(
                default=0.2,
                help_text="Retire a pair as undecided when the predicted chance that all its "
                "inputs (within the budget) decide it falls below this.",
                validators=[
                    django.core.validators.MinValueValidator(0),
                    django.core.validators.MaxValueValidator(1),
                ],
            ),
        ),
    ]
