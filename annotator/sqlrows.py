"""Hand-written SQL for the worker cycle, with the ORM's own column lists and converters.

The worker cycle (answer, next task) runs a handful of simple statements on every request;
building them through the QuerySet API costs several times more CPU than running them.
The statements are written out in ``services`` and ``selectors``; this module supplies
what they share with the ORM so the two cannot drift apart: the column list of a model
(from its ``_meta``), the conversion of a row back into a model instance (the database
backend's and the fields' converters, exactly as a QuerySet applies them), and the
preparation of an instance's values for an INSERT (``Field.get_db_prep_save``).
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model


class Columns:
    """The concrete columns of ``model`` under a table alias, in ``_meta`` order."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [f.attname for f in self.fields]
        self._sql: dict[str, str] = {}
        self._converters: dict[str, list[tuple[int, list, Any]]] = {}

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def table(self) -> str:
        """``"table" alias`` for a FROM or JOIN clause."""
        q = connection.ops.quote_name
        return f"{q(self.model._meta.db_table)} {q(self.alias)}"

    @property
    def sql(self) -> str:
        """``"alias"."column", …`` for a SELECT list."""
        vendor = connection.vendor
        if vendor not in self._sql:
            q = connection.ops.quote_name
            self._sql[vendor] = ", ".join(f"{q(self.alias)}.{q(f.column)}" for f in self.fields)
        return self._sql[vendor]

    def _converters_for(self, conn) -> list[tuple[int, list, Any]]:
        vendor = conn.vendor
        if vendor not in self._converters:
            found = []
            for i, field in enumerate(self.fields):
                col = field.get_col(self.alias)
                convs = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
                if convs:
                    found.append((i, convs, col))
            self._converters[vendor] = found
        return self._converters[vendor]

    def load(self, row: tuple | list, start: int = 0) -> Model:
        """The instance whose columns are ``row[start:start + len(self)]``."""
        conn = connections[DEFAULT_DB_ALIAS]
        values = list(row[start : start + len(self.fields)])
        for i, convs, col in self._converters_for(conn):
            value = values[i]
            for conv in convs:
                value = conv(value, col, conn)
            values[i] = value
        return self.model.from_db(DEFAULT_DB_ALIAS, self.attnames, values)


def db_value(model: type[Model], name: str, value: Any) -> Any:
    """``value`` of field ``name`` prepared as a query parameter (e.g. a UUID on SQLite)."""
    return model._meta.get_field(name).get_db_prep_value(value, connection)


def insert_sql(instance: Model) -> tuple[str, list]:
    """The INSERT of one instance (every concrete field but an automatic primary key) and
    its parameters, without ``RETURNING``."""
    meta = instance._meta
    q = connection.ops.quote_name
    fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
    values = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    sql = (
        f"INSERT INTO {q(meta.db_table)} ({', '.join(q(f.column) for f in fields)}) "  # noqa: S608
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    return sql, values


def inserted(instance: Model, pk: Any) -> Model:
    """Mark ``instance`` as stored with primary key ``pk``, as ``save()`` does."""
    setattr(instance, instance._meta.pk.attname, pk)
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


def insert(instance: Model) -> Model:
    """INSERT one instance (:func:`insert_sql`) and set its primary key: what ``save()``
    does for a new row, without the QuerySet machinery. No ``pre_save``/``post_save``
    signals are sent (nothing in the project listens to them)."""
    meta = instance._meta
    sql, values = insert_sql(instance)
    returning = meta.auto_field is not None and connection.features.can_return_columns_from_insert
    if returning:
        sql += f" RETURNING {connection.ops.quote_name(meta.auto_field.column)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        pk = instance.pk
        if meta.auto_field is not None:
            pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    return inserted(instance, pk)
