"""Worker pages across a database restart: a request that meets a dropped connection is
run again, once, on a fresh connection.

A PostgreSQL restart (or a failover) drops every open connection, and for a moment
refuses new ones. A worker page that meets it would answer 500 although nothing was lost.
:func:`retry_on_lost_database` catches the connection error, waits for the database to
accept a fresh connection (at most ``HUMEVAL_DB_RETRY_SECONDS``), and runs the view once
more. Running it again is safe: every write of a worker page is one transaction (rolled
back with the dropped connection) and a submit is keyed by its assignment token, so an
answer whose commit went through before the connection dropped is found and returned, not
stored twice. If the database is still gone the worker gets a 503 page asking to try again.
"""

from __future__ import annotations

import logging
import time
from functools import wraps

from django.conf import settings
from django.db import Error, InterfaceError, OperationalError, connection
from django.shortcuts import render

log = logging.getLogger(__name__)

#: How often the database is tried while waiting for it (seconds).
POLL = 0.1


def _lost(exc: Exception) -> bool:
    """Whether ``exc`` means the connection is gone (not a failed statement)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    return connection.connection is None or not connection.is_usable()


def _reconnected(deadline: float) -> bool:
    """Drop the dead connection and wait until a fresh one is made (or ``deadline``)."""
    while True:
        try:
            connection.close()
        except Error:
            pass
        try:
            connection.ensure_connection()
            return True
        except Error:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)


def retry_on_lost_database(view):
    """Run ``view`` again, once, when the database connection was lost under it."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Error as exc:
            if connection.in_atomic_block or not _lost(exc):
                raise
            log.warning("database connection lost (%s); running %s again", exc, request.path)
        if _reconnected(time.monotonic() + settings.HUMEVAL_DB_RETRY_SECONDS):
            try:
                return view(request, *args, **kwargs)
            except Error as exc:
                if connection.in_atomic_block or not _lost(exc):
                    raise
        response = render(
            request,
            "annotator/message.html",
            {
                "title": "Please try again",
                "text": "The server could not reach its database. Nothing was lost: "
                "reload this page in a moment.",
            },
            status=503,
        )
        response["Retry-After"] = "5"
        return response

    return wrapped
