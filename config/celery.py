"""The Celery application.

Apps declare their tasks with ``@shared_task``; nothing imports this module but
``config/__init__.py``. Without ``CELERY_BROKER_URL`` the settings make every task run
eagerly in process (the embedded default).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("humeval")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
