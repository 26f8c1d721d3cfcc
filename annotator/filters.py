"""Filters on exported labels, shared by the API and ``export_labels``."""

import django_filters
from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError

from .choices import AnnotationSource
from .models import Annotation


class LabelFilter(django_filters.FilterSet):
    system = django_filters.CharFilter(
        method="filter_system", help_text="Labels on items that show this system."
    )
    pair = django_filters.CharFilter(
        method="filter_pair", help_text="Two system names, comma-separated: 'sys1,sys2'."
    )
    annotator = django_filters.CharFilter(
        field_name="annotator__pseudonym", help_text="Pseudonymous annotator id."
    )
    round = django_filters.NumberFilter(field_name="item__round_number")
    submitted_after = django_filters.IsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = django_filters.IsoDateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    source = django_filters.ChoiceFilter(choices=AnnotationSource.choices)
    flagged = django_filters.BooleanFilter(field_name="is_flagged")

    class Meta:
        model = Annotation
        fields = [
            "system",
            "pair",
            "annotator",
            "round",
            "submitted_after",
            "submitted_before",
            "source",
            "flagged",
        ]

    def filter_system(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(item__output_a__system__name=value) | Q(item__output_b__system__name=value)
        )

    def filter_pair(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        names = [part.strip() for part in value.split(",")]
        if len(names) != 2 or not all(names):
            raise ValidationError({"pair": "Give two system names separated by a comma: 'a,b'."})
        first, second = names
        return queryset.filter(
            Q(item__output_a__system__name=first, item__output_b__system__name=second)
            | Q(item__output_a__system__name=second, item__output_b__system__name=first)
        )
