"""Every kind setting in ``Study.options``: the answer switches (columns ``allow_tie``,
``allow_both_good``, ``allow_both_bad``) of the kinds that take them, and a Likert study's
``Criterion`` rows as ``options["criteria"]``; then the columns and the table go."""

from django.db import migrations, models

#: The answer switches each kind takes (``Kind.answer_switches`` when this was written).
SWITCHES = {
    "pairwise": ("allow_tie", "allow_both_good", "allow_both_bad"),
    "ranking": ("allow_tie",),
}


def _criterion(c) -> dict:
    return {
        "name": c.name,
        "label": c.label,
        "scale_min": c.scale_min,
        "scale_max": c.scale_max,
        "anchors": dict(c.anchors or {}),
        "labels": list(c.labels or []),
    }


def forward(apps, schema_editor):
    Study = apps.get_model("annotator", "Study")
    Criterion = apps.get_model("annotator", "Criterion")
    for study in Study.objects.all().iterator():
        options = dict(study.options or {})
        for name in SWITCHES.get(study.kind, ()):
            options[name] = getattr(study, name)
        rows = Criterion.objects.filter(study=study).order_by("order", "id")
        if rows.exists():
            options["criteria"] = [_criterion(c) for c in rows]
        if options != (study.options or {}):
            study.options = options
            study.save(update_fields=["options"])


def backward(apps, schema_editor):
    Study = apps.get_model("annotator", "Study")
    Criterion = apps.get_model("annotator", "Criterion")
    for study in Study.objects.all().iterator():
        options = dict(study.options or {})
        for name in SWITCHES.get(study.kind, ()):
            setattr(study, name, bool(options.pop(name, name == "allow_tie")))
        if study.kind == "likert":
            for order, c in enumerate(options.pop("criteria", [])):
                Criterion.objects.create(
                    study=study,
                    order=order,
                    **{k: c[k] for k in ("name", "label", "scale_min", "scale_max")},
                    anchors=c.get("anchors") or {},
                    labels=c.get("labels") or [],
                )
        study.options = options
        study.save()


class Migration(migrations.Migration):
    dependencies = [("annotator", "0025_item_prefill_skip")]

    operations = [
        migrations.RunPython(forward, backward),
        migrations.RemoveField(model_name="study", name="allow_tie"),
        migrations.RemoveField(model_name="study", name="allow_both_good"),
        migrations.RemoveField(model_name="study", name="allow_both_bad"),
        migrations.DeleteModel(name="Criterion"),
        migrations.AlterField(
            model_name="study",
            name="options",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Every setting of the kind (answer switches such as allow_tie, "
                "criteria, strength …), as the study line gave them and the kind checked "
                "them (docs/import-formats.md).",
            ),
        ),
    ]
