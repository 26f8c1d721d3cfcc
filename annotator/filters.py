"""Filters on exported labels, shared by the API and ``export_labels``.

Every filter rejects (400) a value its OpenAPI schema does not allow, so the schema is an
exact description of what the endpoint accepts: an empty text filter means no filter, an
empty number, date-time, choice or boolean is an error."""

import re
from datetime import UTC, datetime, timedelta

import django_filters
from django import forms
from django.db.models import Count, QuerySet
from rest_framework.exceptions import ValidationError

from .choices import AnnotationSource
from .models import Annotation, Item

#: A text filter takes any text without NUL characters (which PostgreSQL cannot store).
TEXT_PATTERN = "^[^\\u0000]*$"
#: Two system names with one comma between them; an empty value means no filter.
PAIR_PATTERN = "^([^,\\u0000]+,[^,\\u0000]+)?$"
_PAIR = re.compile(r"[^,\x00]+,[^,\x00]+")


class StrictBooleanField(forms.NullBooleanField):
    """``true`` or ``false`` (the JSON spelling) or nothing; anything else is an error, not
    the absence of a filter."""

    def to_python(self, value):
        if value in (None, ""):
            return None
        if value in (True, "true"):
            return True
        if value in (False, "false"):
            return False
        raise forms.ValidationError("Give true or false.", code="invalid")

    def validate(self, value):
        pass


class StrictIntegerField(forms.IntegerField):
    """An integer as JSON writes it (``-12``, not ``1.0`` or `` 1``)."""

    def to_python(self, value):
        if value not in self.empty_values and not re.fullmatch(r"-?[0-9]+", str(value)):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?(?:[Zz]|([+-])(\d\d):(\d\d))",
    re.ASCII,
)


class DateTimeField(forms.DateTimeField):
    """An RFC 3339 date-time (OpenAPI's ``date-time``: ``2025-01-31T12:00:00Z``, any offset,
    a leap second read as the next second), as UTC: PostgreSQL takes offsets only up to
    ±15:59, RFC 3339 up to ±23:59. A moment beyond Python's years 1–9999 once in UTC is
    clamped to them (as a filter bound it means the same)."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        match = _RFC3339.fullmatch(str(value))
        try:
            if not match:
                raise ValueError
            year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
            fraction, sign, off_hours, off_minutes = match.groups()[6:]
            leap = second == 60
            moment = datetime(year, month, day, hour, minute, 59 if leap else second, tzinfo=UTC)
            shift = timedelta(seconds=float(fraction or 0) + leap)
            if sign:
                if int(off_hours) > 23 or int(off_minutes) > 59:
                    raise ValueError
                offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
                shift += -offset if sign == "+" else offset
        except ValueError:
            raise forms.ValidationError(
                "Give an RFC 3339 date-time, e.g. 2025-01-31T12:00:00Z.", code="invalid"
            ) from None
        try:
            return moment + shift
        except OverflowError:
            return (datetime.max if shift > timedelta(0) else datetime.min).replace(tzinfo=UTC)


class DateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = DateTimeField


class BooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args, **kwargs):
        # The default select widget reads "null", "2", "unknown"… as values; take the text.
        kwargs.setdefault("widget", forms.TextInput)
        super().__init__(*args, **kwargs)


class IntegerFilter(django_filters.NumberFilter):
    field_class = StrictIntegerField


class LabelFilterForm(forms.Form):
    """An empty value of a typed filter (a number, a date-time, a choice) is an error, as
    the schema says; leave the parameter out for no filter. Text filters take any text."""

    typed = ("round", "submitted_after", "submitted_before", "source", "flagged")

    def clean(self):
        cleaned = super().clean()
        for name in self.typed:
            if self.data.get(name) == "":
                self.add_error(name, "Give a value, or leave the parameter out.")
        return cleaned


class LabelFilter(django_filters.FilterSet):
    system = django_filters.CharFilter(
        method="filter_system", help_text="Labels on items that show this system.", strip=False
    )
    pair = django_filters.CharFilter(
        method="filter_pair",
        help_text="Two system names, comma-separated: 'sys1,sys2'.",
        strip=False,
    )
    annotator = django_filters.CharFilter(
        field_name="annotator__pseudonym", help_text="Pseudonymous annotator id.", strip=False
    )
    round = IntegerFilter(field_name="item__round_number")
    submitted_after = DateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = DateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    source = django_filters.ChoiceFilter(choices=AnnotationSource.choices)
    flagged = BooleanFilter(field_name="is_flagged")

    class Meta:
        model = Annotation
        form = LabelFilterForm
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
            item__in=Item.objects.filter(item_outputs__output__system__name=value)
        )

    def filter_pair(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if not _PAIR.fullmatch(value):
            raise ValidationError({"pair": ["Give two system names separated by a comma: 'a,b'."]})
        first, second = (part.strip() for part in value.split(","))
        # items showing exactly these two systems' outputs, in either order
        shows = Item.objects.filter(item_outputs__output__system__name=first).filter(
            item_outputs__output__system__name=second
        )
        two = Item.objects.annotate(n=Count("item_outputs")).filter(n=2)
        return queryset.filter(item__in=shows).filter(item__in=two)
