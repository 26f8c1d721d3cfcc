"""``ProtocolConfig.likert_criterion``/``likert_dead_zone`` serve every scored kind (Likert,
error spans): renamed ``scored_criterion``/``scored_dead_zone``, values kept."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("protocol", "0006_protocolconfig_calibrated_levels"),
    ]

    operations = [
        migrations.RenameField("protocolconfig", "likert_criterion", "scored_criterion"),
        migrations.RenameField("protocolconfig", "likert_dead_zone", "scored_dead_zone"),
        migrations.AlterField(
            model_name="protocolconfig",
            name="scored_criterion",
            field=models.CharField(
                blank=True,
                help_text="Scored studies (Likert, error spans): the criterion rated on a scale "
                "whose mean ratings give each input's preference (Definition 5); empty: every "
                "such criterion, averaged.",
                max_length=60,
            ),
        ),
        migrations.AlterField(
            model_name="protocolconfig",
            name="scored_dead_zone",
            field=models.FloatField(
                default=0.0,
                help_text="Scored studies (Likert, error spans): mean-rating differences within "
                "± this many scale points count as a draw (Definition 5).",
                validators=[django.core.validators.MinValueValidator(0)],
            ),
        ),
    ]
